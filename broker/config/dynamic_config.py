"""Dynamic broker configs: what AlterConfigs / IncrementalAlterConfigs may change on a BROKER
resource, checked the way Kafka's DynamicBrokerConfig.validateConfigs and the controller check it.

Two resources: this broker (its node id as the name) and the cluster-wide default (the empty
name). Kafka's own catalogue (broker.config.kafka_defaults) says which names are dynamic; a name
Kafka knows as static is refused, one it does not know at all is kept (Kafka accepts those too).
Sans-IO: the broker persists the result in the cluster metadata and applies it
(Broker.apply_dynamic_configs).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from broker.config.broker_config import BrokerConfig
from broker.config.features import ELR_VERSION, MIN_ISR, level
from broker.config.kafka_defaults import DYNAMIC, KAFKA_BROKER_CONFIGS
from protocol.errors import ErrorCode, KafkaError
from storage.cleaner.cleaner import Cleaner
from storage.cleaner.config import CleanerConfig
from storage.errors import InvalidConfig
from storage.log_config import TOPIC_CONFIGS, parse_config, validate_topic_configs

if TYPE_CHECKING:
    from broker.config.broker_config import BrokerConfig
    from broker.services import Services

# SslConfigs.RECONFIGURABLE_CONFIGS: only per listener (listener.name.<l>.<config>).
SSL_RECONFIGURABLE = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password", "ssl.keystore.key",
    "ssl.keystore.certificate.chain", "ssl.truststore.certificates",
})
CLUSTER_LEVEL_LISTENER_CONFIGS = frozenset({"max.connections", "max.connection.creation.rate", "num.network.threads"})
# (DynamicSecurityConfigs ++ DynamicListenerConfig.ReconfigurableConfigs) -- ClusterLevelListenerConfigs
PER_BROKER = SSL_RECONFIGURABLE | frozenset(
    n for n in DYNAMIC
    if n.startswith(("ssl.", "sasl.")) or n in ("listeners", "advertised.listeners", "listener.security.protocol.map",
                                               "principal.builder.class")
)
LISTENER_CONFIG = re.compile(r"listener\.name\.[^.]*\.(.*)")
INTEGER = re.compile(r"[+-]?\d+")
_DOUBLE = re.compile(r"[+-]?(NaN|Infinity|(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?[fFdD]?)")
_BOUNDS = {"short": (-(2**15), 2**15 - 1), "int": (-(2**31), 2**31 - 1), "long": (-(2**63), 2**63 - 1)}
# Internal static configs DescribeConfigs does not list (so not in the catalogue)
STATIC_INTERNAL = frozenset({"unstable.api.versions.enable", "unstable.feature.versions.enable"})
# ConfigDef atLeast(...) of Kafka's dynamic configs that are not topic defaults
AT_LEAST = {"num.io.threads": 1, "num.network.threads": 1, "background.threads": 1, "num.replica.fetchers": 1,
            "num.recovery.threads.per.data.dir": 1, "remote.log.reader.threads": 1, "producer.id.expiration.ms": 1,
            "log.cleaner.backoff.ms": 0, "max.connections": 0, "max.connections.per.ip": 0,
            "max.connection.creation.rate": 0, "message.max.bytes": 0, "log.index.size.max.bytes": 4}
# log.* topic defaults whose broker definition has no validator (KafkaConfig checks them later)
NO_BROKER_VALIDATOR = frozenset({"log.roll.ms", "log.roll.hours", "log.roll.jitter.ms", "log.roll.jitter.hours"})
# DynamicThreadPool.ReconfigurableConfigs: at most double, at least half the current value
THREAD_POOLS = ("num.io.threads", "num.network.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir",
                "background.threads")
# broker name -> topic config name, for the values a topic config's validator also checks
TOPIC_SYNONYM = {b: t for t, d in TOPIC_CONFIGS.items() for b in d.broker_synonyms}


def resource_is_this_broker(resource_name: str, node_id: int) -> bool:
    """True for this broker's resource, False for the cluster default (""); else Kafka's error."""
    if resource_name == "":
        return False
    if not INTEGER.fullmatch(resource_name):  # Integer.parseInt: no spaces, no underscores
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Node id must be an integer, but it is: {resource_name}")
    requested = int(resource_name)
    if requested != node_id:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {node_id}, but received "
                                                    f"{resource_name}")
    return True


def _java_set(names: set[str]) -> str:
    return "[" + ", ".join(sorted(names)) + "]"


def _base(name: str) -> str:
    m = LISTENER_CONFIG.fullmatch(name)
    return m.group(1) if m else name


def _check_type(name: str, value: str) -> None:
    """ConfigDef.parseType's messages ("Not a number of type LONG" ...), then a topic config's
    validator for the log.* names that set topic defaults."""
    known = KAFKA_BROKER_CONFIGS.get(_base(name))
    if known is None:
        return
    kind, v = known[0], value.strip()

    def invalid(reason: str) -> KafkaError:
        return KafkaError(ErrorCode.INVALID_REQUEST, f"Invalid value {value} for configuration {name}: {reason}")

    if kind in _BOUNDS:
        lo, hi = _BOUNDS[kind]
        if not INTEGER.fullmatch(v) or not lo <= int(v) <= hi:
            raise invalid(f"Not a number of type {kind.upper()}")
        minimum = AT_LEAST.get(_base(name))
        if minimum is not None and int(v) < minimum:
            raise invalid(f"Value must be at least {minimum}")
    elif kind == "double" and not _DOUBLE.fullmatch(v):
        raise invalid("Not a number of type DOUBLE")
    if kind == "boolean" and v.lower() not in ("true", "false"):
        raise invalid("Expected value to be either true or false")
    topic_name = TOPIC_SYNONYM.get(name)
    if topic_name is not None and name not in NO_BROKER_VALIDATOR:
        try:
            parse_config(topic_name, value)
        except InvalidConfig as e:
            reason = str(e).split(f"for configuration {topic_name}: ", 1)[-1]
            if reason.startswith("Invalid value "):  # a list item's own message (ValidList)
                reason = reason.split("for configuration: ", 1)[-1]
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"Invalid value {value} for configuration {name}: {reason}") from None


def validate(configs: Mapping[str, str], per_broker: bool) -> None:
    """The whole new set for one resource; raises KafkaError (INVALID_REQUEST) as Kafka does."""
    names = set(configs)
    static = {n for n in names if (n in KAFKA_BROKER_CONFIGS and n not in DYNAMIC) or n in STATIC_INTERNAL}
    if static:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Cannot update these configs dynamically: {_java_set(static)}")
    unprefixed = names & SSL_RECONFIGURABLE
    if unprefixed:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "These security configs can be dynamically updated only "
                                                    f"per-listener using the listener prefix: {_java_set(unprefixed)}")
    for name, value in configs.items():
        _check_type(name, value)
    if not per_broker:
        only_per_broker = {n for n in names if n in PER_BROKER or (
            LISTENER_CONFIG.fullmatch(n) and _base(n) not in CLUSTER_LEVEL_LISTENER_CONFIGS)}
        if only_per_broker:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Cannot update these configs at default cluster level, "
                                                        f"broker id must be specified: {_java_set(only_per_broker)}")


def is_sensitive(name: str) -> bool:
    """KafkaConfig.maybeSensitive: passwords, and names of unknown type (they could be secrets)."""
    known = KAFKA_BROKER_CONFIGS.get(_base(name))
    return known is None or known[0] == "password"


def kind_of(name: str) -> str | None:
    known = KAFKA_BROKER_CONFIGS.get(_base(name))
    return known[0] if known is not None else None


def is_known(name: str) -> bool:
    return name in KAFKA_BROKER_CONFIGS


def alter(broker: Services, resource_name: str, configs: Mapping[str, str], validate_only: bool,
          touched: Iterable[str] | None = None) -> None:
    """Validate ``configs`` as the resource's whole new dynamic set, then (unless ``validate_only``)
    keep it durably in the cluster metadata and apply it; raises KafkaError. ``touched``: the names
    the request sets or deletes (IncrementalAlterConfigs); None for a legacy AlterConfigs, whose
    names are all of ``configs``."""
    per_broker = resource_is_this_broker(resource_name, broker.node_id)
    validate(configs, per_broker)
    if level(broker, ELR_VERSION) >= 1:
        _check_elr_min_isr(per_broker, configs, set(configs) if touched is None else set(touched))
    _check_together(broker, resource_name, configs)
    if not validate_only:
        broker.metadata.set_broker_configs(resource_name, dict(configs))
        broker.apply_dynamic_configs()


def _check_elr_min_isr(per_broker: bool, configs: Mapping[str, str], touched: set[str]) -> None:
    """With eligible leader replicas (KIP-966, finalized by default in Kafka 4), min.insync.replicas
    lives at the cluster level only: the controller refuses to set or delete it per broker, and to
    remove the cluster-level value (ConfigurationControlManager's min-ISR transition checks)."""
    if per_broker and MIN_ISR in touched:
        raise KafkaError(ErrorCode.INVALID_CONFIG, "Broker-level min.insync.replicas cannot be altered while ELR is enabled.")
    if not per_broker and MIN_ISR not in configs:
        raise KafkaError(ErrorCode.INVALID_CONFIG, "Cluster-level min.insync.replicas cannot be removed while ELR is enabled.")


def _check_together(broker: Services, resource_name: str, configs: Mapping[str, str]) -> None:
    """The whole configuration the change would give must hold together (topic defaults such as
    min.compaction.lag.ms <= max.compaction.lag.ms, listeners, the cleaner's buffers), and pass
    the reconfiguration checks against the running values; checked on a trial copy before
    anything is kept, so nothing accepted can stop the broker from starting."""
    stored = {**broker.metadata.broker_configs, resource_name: dict(configs)}
    _trial(broker.config, stored, broker.node_id, running=broker.config)


def check_stored(broker: Services) -> None:
    """At start-up: the stored sets (perhaps from an older version, or edited) must still apply."""
    stored = broker.metadata.broker_configs
    for name in ("", str(broker.node_id)):
        if name in stored:
            validate(stored[name], per_broker=bool(name))
    _trial(broker.config, stored, broker.node_id, running=None)


def _trial(config: BrokerConfig, stored: Mapping[str, Mapping[str, str]], node_id: int,
           running: BrokerConfig | None) -> None:
    trial = BrokerConfig(config.originals, sources=config.sources)
    try:
        trial.set_dynamic(stored.get("", {}), stored.get(str(node_id), {}))
    except ValueError as e:
        raise KafkaError(ErrorCode.INVALID_REQUEST, str(e)) from None
    if running is not None:
        _check_reconfiguration(running, trial)
    try:
        validate_topic_configs(trial.topic_defaults())
    except (InvalidConfig, ValueError) as e:
        raise KafkaError(ErrorCode.INVALID_REQUEST, str(e)) from None
    try:
        trial.validate_listeners()
    except ValueError as e:
        raise KafkaError(ErrorCode.INVALID_REQUEST,
                         f"Error creating broker listeners from '{trial.get('listeners')}': {e}") from None
    if int(trial.get("log.cleaner.threads")) <= 0:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "/ by zero")
    try:
        Cleaner(CleanerConfig.from_broker_config(trial))
    except (ValueError, ZeroDivisionError) as e:
        raise KafkaError(ErrorCode.INVALID_REQUEST, str(e)) from None


def _check_reconfiguration(current: BrokerConfig, trial: BrokerConfig) -> None:
    """The checks Kafka's reconfigurables make against the running values (validateReconfiguration)."""

    def failed(message: str) -> KafkaError:
        return KafkaError(ErrorCode.INVALID_REQUEST, "Invalid value org.apache.kafka.common.config.ConfigException: "
                                                     f"{message} for configuration Invalid dynamic configuration")

    for name in THREAD_POOLS:
        old, new = int(current.get(name)), int(trial.get(name))
        if new > 2 * old:
            raise failed(f"Dynamic thread count update validation failed for {name}={new}, value should not be "
                         f"greater than double the current value {old}")
        if new < old / 2:
            raise failed(f"Dynamic thread count update validation failed for {name}={new}, value should be at "
                         f"least half the current value {old}")
    old, new = int(current.get("log.cleaner.threads")), int(trial.get("log.cleaner.threads"))
    if new <= 0:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "/ by zero")
    if new > 2 * old:
        raise failed(f"Log cleaner threads cannot be increased to more than double the current value {old}")
    if new < old / 2:
        raise failed(f"Log cleaner threads cannot be reduced to less than half the current value {old}")
    if int(trial.get("log.cleaner.dedupe.buffer.size")) / new < 1024 * 1024:
        raise KafkaError(ErrorCode.INVALID_REQUEST,
                         "requirement failed: log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner thread.")
    if trial.log_roll_ms < 1:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "requirement failed: log.roll.ms must be greater than or equal to 1")


def is_list(name: str) -> bool:
    known = KAFKA_BROKER_CONFIGS.get(_base(name))
    return known is not None and known[0] == "list"
