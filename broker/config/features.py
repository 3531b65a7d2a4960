"""Finalized features (KIP-584): their levels, the epoch, and UpdateFeatures' validation.

Kafka keeps the finalized levels as FeatureLevelRecords in the metadata log; here they live in
the cluster metadata (``MetadataStore.features``, persisted in topics.json) with an epoch that
grows by one on every applied UpdateFeatures (clients ignore the features of an ApiVersions answer
whose epoch is not above the last one they saw). At the first start they are "formatted" as
Kafka 4.3.1's ``kafka-storage.sh format`` does: ``metadata.version`` 30, ``group.version`` 1,
``eligible.leader.replicas.version`` 1 and ``transaction.version`` from the broker property of
that name (later changes of the property do nothing; UpdateFeatures changes the level).

What each level drives here:

- ``transaction.version``: the TransactionLogValue version and the version the coordinator's own
  aborts run with (TransactionStateManager.transaction_version), and what ApiVersions tells
  clients (>= 2 makes them use Transactions V2).
- ``group.version`` 0: ConsumerGroupHeartbeat and ConsumerGroupDescribe answer
  UNSUPPORTED_VERSION, as Kafka's KafkaApis does when the consumer protocol is off (ApiVersions
  still lists keys 68 and 69, as Kafka's does).
- ``eligible.leader.replicas.version``: at 1, min.insync.replicas lives at the cluster level only
  (broker.config.dynamic_config); turning it on writes the same safety configs as at start-up.
- ``metadata.version``: fixed at 30. Kafka 4.3.1 refuses every downgrade from 30 (each level below
  changes the metadata format) and supports nothing above, so the only accepted update is 30.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.config.broker_config import BrokerConfig
from coordinator.group.java_hash import java_string_hash
from coordinator.txn.state_manager import MAX_TRANSACTION_VERSION, transaction_version_level
from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from broker.config.broker_config import BrokerConfig
    from broker.services import Services

METADATA_VERSION = "metadata.version"
GROUP_VERSION = "group.version"
TRANSACTION_VERSION = "transaction.version"
ELR_VERSION = "eligible.leader.replicas.version"
MIN_ISR = "min.insync.replicas"  # what enabling ELR moves to the cluster level (elr_safety)

METADATA_VERSION_MIN, METADATA_VERSION_LEVEL = 7, 30
# name -> (min, max) this broker supports, in the order ApiVersions lists them.
SUPPORTED: dict[str, tuple[int, int]] = {
    GROUP_VERSION: (0, 1),
    METADATA_VERSION: (METADATA_VERSION_MIN, METADATA_VERSION_LEVEL),
    TRANSACTION_VERSION: (0, MAX_TRANSACTION_VERSION),
    ELR_VERSION: (0, 1),
}
# Features of Kafka's Feature enum this broker does not support (a level 0 update of one is a
# no-op, as on a Kafka that has it off; any other name at level 0 is "not found").
OTHER_KAFKA_FEATURES = frozenset({"kraft.version", "share.version", "streams.version", "test.feature.version"})
# Feature.dependencies() of the levels we support (Kafka 4.3.1): ELRV_1 needs metadata.version
# 4.0-IV1 (23). With metadata.version fixed at 30 it always holds; kept for Kafka's check order.
DEPENDENCIES: dict[tuple[str, int], dict[str, int]] = {(ELR_VERSION, 1): {METADATA_VERSION: 23}}

UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3
INITIAL_EPOCH = 1


def initial_levels(config: BrokerConfig) -> dict[str, int]:
    """The levels Kafka 4.3.1 formats a new cluster with (transaction.version from the property)."""
    return {GROUP_VERSION: 1, METADATA_VERSION: METADATA_VERSION_LEVEL,
            TRANSACTION_VERSION: transaction_version_level(config), ELR_VERSION: 1}


def ensure_formatted(broker: Services) -> None:
    """At start-up: a cluster with no recorded features gets the initial ones."""
    if not broker.metadata.features:
        broker.metadata.set_features(
            {n: v for n, v in initial_levels(broker.config).items() if v > 0}, INITIAL_EPOCH)


def level(broker: Services, name: str) -> int:
    """The finalized level of ``name`` (0: not finalized)."""
    features = getattr(broker.metadata, "features", None)
    if not features:  # not started (unit tests with a stand-in broker): the initial levels
        return initial_levels(broker.config).get(name, 0)
    return features.get(name, 0)


def finalized(broker: Services) -> tuple[int, list[tuple[str, int]]]:
    """(epoch, [(name, level)]) in ApiVersions' order; features at level 0 are not listed."""
    if not getattr(broker.metadata, "features", None):
        return INITIAL_EPOCH, [(n, v) for n, v in initial_levels(broker.config).items() if v > 0]
    features = broker.metadata.features
    return broker.metadata.features_epoch, [(n, features[n]) for n in SUPPORTED if features.get(n, 0) > 0]


def java_hashmap_order(names: list[str]) -> list[str]:
    """The iteration order of a java.util.HashMap the names were put into in this order (Kafka's
    QuorumController.updateFeatures validates in it and reports the first failure)."""
    distinct = list(dict.fromkeys(names))
    capacity = 16
    while len(distinct) > capacity * 3 // 4:
        capacity *= 2

    def bucket(name: str) -> int:
        h = java_string_hash(name) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(distinct, key=bucket)  # stable: a bucket keeps insertion order


def _invalid(name: str, version: int, message: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_UPDATE_VERSION, f"Invalid update version {version} for feature {name}. {message}")


def _check(node_id: int, name: str, version: int, upgrade_type: int, current: dict[str, int],
           proposed: dict[str, int]) -> None:
    """FeatureControlManager.updateFeature (Kafka 4.3.1), for one feature."""
    if upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        raise _invalid(name, version, "The controller does not support the given upgrade type.")
    now = current.get(name, 0)
    if version < 0:
        raise _invalid(name, version, "A feature version cannot be less than 0.")
    lo, hi = SUPPORTED.get(name, (0, 0))
    if not lo <= version <= hi:
        if name not in SUPPORTED:
            raise _invalid(name, version, f"Local controller {node_id} does not support this feature.")
        raise _invalid(name, version, f"Local controller {node_id} only supports versions "
                                      f"{lo if lo == hi else f'{lo}-{hi}'}")
    if version < now and upgrade_type == UPGRADE:
        raise _invalid(name, version, "Can't downgrade the version of this feature without setting the upgrade "
                                      "type to either safe or unsafe downgrade.")
    if version > now and upgrade_type != UPGRADE:
        raise _invalid(name, version, "Can't downgrade to a newer version.")
    if name == METADATA_VERSION:
        if version < now:  # every level below 30 changes the metadata (MetadataVersion.checkIfMetadataChanged)
            why = ("Unsafe metadata downgrade is not supported in this version." if upgrade_type == UNSAFE_DOWNGRADE
                   else "Refusing to perform the requested downgrade because it might delete metadata information.")
            raise KafkaError(ErrorCode.INVALID_UPDATE_VERSION,
                             f"Unsupported metadata.version downgrade from {now} to {version}. {why}")
        return
    if name not in SUPPORTED and name not in OTHER_KAFKA_FEATURES:
        raise _invalid(name, version, f"Feature {name} not found.")  # Feature.featureFromName
    for dep, needed in DEPENDENCIES.get((name, version), {}).items():  # Feature.validateVersion
        if proposed.get(dep, 0) < needed:
            raise _invalid(name, version, f"{name} could not be set to {version} because it depends on {dep} "
                                          f"level {needed}")


def validate(node_id: int, current: dict[str, int], updates: list[tuple[str, int, int]]) -> dict[str, int]:
    """The levels after ``updates`` ((name, level, upgrade type) in request order; a name given
    twice: the last counts), or KafkaError(INVALID_UPDATE_VERSION) for the first failing feature
    in Kafka's order. Nothing is applied."""
    levels = {name: version for name, version, _ in updates}
    types = {name: upgrade_type for name, _, upgrade_type in updates}
    proposed = {**current, **levels}
    for name in java_hashmap_order([n for n, _, _ in updates]):
        _check(node_id, name, levels[name], types[name], current, proposed)
    return {n: v for n, v in proposed.items() if v > 0 and n in SUPPORTED}


def apply(broker: Services, levels: dict[str, int]) -> None:
    """Keep the new levels (epoch + 1) and carry out what turning a feature on does."""
    store = broker.metadata
    elr_before = store.features.get(ELR_VERSION, 0)
    store.set_features(levels, store.features_epoch + 1)
    if elr_before < 1 <= levels.get(ELR_VERSION, 0):
        # QuorumController: enabling ELR writes the min.insync.replicas safety configs
        elr_safety(broker)
        broker.apply_dynamic_configs()


def elr_safety(broker: Services) -> None:
    """Kafka's maybeGenerateElrSafetyRecords, at start-up: the cluster level gets the statically
    configured min.insync.replicas if it has none, and no broker level keeps one of its own."""
    stored = broker.metadata.broker_configs
    cluster = stored.get("", {})
    if MIN_ISR not in cluster:
        static = BrokerConfig(broker.config.originals, sources=broker.config.sources).get(MIN_ISR)
        broker.metadata.set_broker_configs("", {**cluster, MIN_ISR: str(static)})
    for name, configs in list(stored.items()):
        if name and MIN_ISR in configs:
            broker.metadata.set_broker_configs(name, {k: v for k, v in configs.items() if k != MIN_ISR})
