"""ApiVersions (key 18), v0-5.

Lists every registered API with the versions it is registered for, so what we advertise is
what we implement (narrowed by the control endpoint to an emulated Kafka release's ranges, or per
API: ``broker.control.controls``). Any ApiVersions version is accepted: one we do not know is answered by the
dispatcher with a v0 body and UNSUPPORTED_VERSION (KIP-511). v3+ checks the client software
name and version against Kafka's pattern (INVALID_REQUEST otherwise).

v5 (KIP-1242, Apache Kafka 4.4; the Java 4.4 client sends it first) carries the cluster id and
node id the client believes it is talking to, both or neither (INVALID_REQUEST otherwise). A
client whose metadata names another cluster or node gets REBOOTSTRAP_REQUIRED, so it re-reads
its bootstrap servers instead of trusting stale metadata (Kafka 4.4's KafkaApis
``clusterIdOrNodeIdIsInvalid``).

Features (v3+), as Kafka's ApiVersionsResponse.createApiVersionsResponse builds them:

- SupportedFeatures: ``metadata.version`` 7-30, ``transaction.version`` 0-2 and
  ``eligible.leader.replicas.version`` 0-1 (Apache Kafka 4.3.1's ranges). For requests below v4 the features whose minimum is 0 are left out
  (KAFKA-17492), so v3 carries only ``metadata.version``.
- FinalizedFeatures: the cluster's finalized levels (broker.config.features; UpdateFeatures changes
  them): at first start ``group.version`` 1, ``metadata.version`` 30, ``transaction.version``
  from the broker property (default 2) and ``eligible.leader.replicas.version`` 1 (KIP-966: on
  one node the ELR lists stay empty; what it changes is that min.insync.replicas lives at the
  cluster level, see broker.config.dynamic_config). A feature at level 0 is not listed; each has min =
  max = level. FinalizedFeaturesEpoch starts at ``FINALIZED_FEATURES_EPOCH`` and grows with every
  UpdateFeatures (Kafka's is the metadata log offset of the features: the Java producer ignores
  the features of an answer whose epoch is not above the last one it saw, starting at -1, and
  franz-go ignores them at -1). ``transaction.version`` >= 2 is what makes the Java 4.x producer
  and franz-go use Transactions V2 (Produce v12 implicit add, TxnOffsetCommit v5, EndTxn v5).

``group.version`` is supported 0-1 and finalized at 1, as Kafka 4.3.1 formats it: the KIP-848
consumer group protocol is on (ConsumerGroupHeartbeat, ConsumerGroupDescribe; at 0 they answer
UNSUPPORTED_VERSION but stay listed, as Kafka's do).

Deliberately not listed, unlike Apache Kafka 4.3.1: ``share.version`` and ``streams.version``
(they announce the KIP-932 share and KIP-1071 streams group protocols, which this broker does
not implement) and ``kraft.version`` (a property of a controller quorum, which does not exist
here).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from broker.config import features as feature_levels
from broker.handlers.registry import HANDLERS, api
from broker.net.context import RequestContext
from coordinator.txn.state_manager import MAX_TRANSACTION_VERSION
from protocol.errors import ErrorCode
from protocol.messages import ApiMessage, lazy_response

if TYPE_CHECKING:
    from broker.services import Services

Response = lazy_response(18)
_SOFTWARE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")

# metadata.version as Apache Kafka 4.3.1 supports and finalizes it (MetadataVersion 3.3-IV3 ..
# its latest production level).
METADATA_VERSION_MIN, METADATA_VERSION = 7, 30
# eligible.leader.replicas.version, finalized at 1 as Kafka 4.3.1 formats it: on one node the ELR
# lists stay empty, and min.insync.replicas lives at the cluster level (broker.config.dynamic_config).
ELR_VERSION = 1
# group.version 1: the KIP-848 consumer group protocol (ConsumerGroupHeartbeat) is on.
GROUP_VERSION = 1
# The epoch of the features a new cluster is formatted with; every UpdateFeatures adds one.
FINALIZED_FEATURES_EPOCH = feature_levels.INITIAL_EPOCH


def advertised_versions() -> list[tuple[int, int, int]]:
    return sorted((s.key, s.advertised_min, s.max_version) for s in HANDLERS.values())


def supported_features(api_version: int) -> list[tuple[str, int, int]]:
    """(name, min, max) in Kafka's order; v<4 leaves out the ones with min 0."""
    features = [("group.version", 0, GROUP_VERSION), ("metadata.version", METADATA_VERSION_MIN, METADATA_VERSION),
                ("transaction.version", 0, MAX_TRANSACTION_VERSION),
                ("eligible.leader.replicas.version", 0, ELR_VERSION)]
    return [f for f in features if api_version >= 4 or f[1] != 0]


def finalized_features(broker: Services) -> tuple[int, list[tuple[str, int]]]:
    """(epoch, [(name, level)]); features at level 0 are not listed (createFinalizedFeatureKeys)."""
    return feature_levels.finalized(broker)


def _valid(req: ApiMessage, version: int) -> bool:
    """Kafka's ApiVersionsRequest.isValid."""
    if version >= 5 and (req.cluster_id is None) != (req.node_id == -1):
        return False
    return version < 3 or bool(
        _SOFTWARE.match(req.client_software_name or "") and _SOFTWARE.match(req.client_software_version or ""))


def _other_node(broker: Services, req: ApiMessage, version: int) -> bool:
    return version >= 5 and req.cluster_id is not None and (
        req.cluster_id != broker.cluster_id or req.node_id != broker.node_id)


@api(18, (0, 5))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage:
    version = ctx.api_version
    if not _valid(req, version):
        return Response(error_code=ErrorCode.INVALID_REQUEST, api_keys=[], throttle_time_ms=0)
    if _other_node(ctx.broker, req, version):
        return Response(error_code=ErrorCode.REBOOTSTRAP_REQUIRED, api_keys=[], throttle_time_ms=0)
    controls = ctx.broker.controls
    ranges = controls.advertised(advertised_versions()) if controls.restricted else advertised_versions()
    keys = [Response.ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, lo, hi in ranges]
    if version < 3:
        return Response(error_code=0, api_keys=keys, throttle_time_ms=0)
    epoch, finalized = finalized_features(ctx.broker)
    supported = supported_features(version)
    if controls.release is not None:  # an emulated release lists only the features it knows
        supported = controls.release.supported_features(supported)
        finalized = controls.release.finalized_features(finalized)
    return Response(
        error_code=0, api_keys=keys, throttle_time_ms=0,
        supported_features=[Response.SupportedFeatureKey(name=n, min_version=lo, max_version=hi)
                            for n, lo, hi in supported],
        finalized_features_epoch=epoch,
        finalized_features=[Response.FinalizedFeatureKey(name=n, max_version_level=level, min_version_level=level)
                            for n, level in finalized],
        zk_migration_ready=False,
    )
