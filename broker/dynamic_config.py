"""Dynamic broker configs: what AlterConfigs / IncrementalAlterConfigs may change on a BROKER
resource, checked the way Kafka's DynamicBrokerConfig.validateConfigs and the controller check it.

Two resources: this broker (its node id as the name) and the cluster-wide default (the empty
name). Kafka's own catalogue (broker.kafka_broker_configs) says which names are dynamic; a name
Kafka knows as static is refused, one it does not know at all is kept (Kafka accepts those too).
Sans-IO: the broker persists the result in the cluster metadata and applies it
(Broker.apply_dynamic_configs).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from broker.kafka_broker_configs import KAFKA_BROKER_CONFIGS
from protocol.errors import ErrorCode, KafkaError
from storage.errors import InvalidConfig
from storage.log_config import TOPIC_CONFIGS, parse_config

# SslConfigs.RECONFIGURABLE_CONFIGS: only per listener (listener.name.<l>.<config>).
SSL_RECONFIGURABLE = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password", "ssl.keystore.key",
    "ssl.keystore.certificate.chain", "ssl.truststore.certificates",
})
CLUSTER_LEVEL_LISTENER_CONFIGS = frozenset({"max.connections", "max.connection.creation.rate", "num.network.threads"})
DYNAMIC = frozenset(name for name, (_type, dynamic) in KAFKA_BROKER_CONFIGS.items() if dynamic)
# (DynamicSecurityConfigs ++ DynamicListenerConfig.ReconfigurableConfigs) -- ClusterLevelListenerConfigs
PER_BROKER = SSL_RECONFIGURABLE | frozenset(
    n for n in DYNAMIC
    if n.startswith(("ssl.", "sasl.")) or n in ("listeners", "advertised.listeners", "listener.security.protocol.map",
                                               "principal.builder.class")
)
LISTENER_CONFIG = re.compile(r"listener\.name\.[^.]*\.(.*)")
# broker name -> topic config name, for the values a topic config's validator also checks
TOPIC_SYNONYM = {b: t for t, d in TOPIC_CONFIGS.items() for b in d.broker_synonyms}


def resource_is_this_broker(resource_name: str, node_id: int) -> bool:
    """True for this broker's resource, False for the cluster default (""); else Kafka's error."""
    if resource_name == "":
        return False
    try:
        requested = int(resource_name)
    except ValueError:
        raise KafkaError(ErrorCode.INVALID_REQUEST,
                         f"Node id must be an integer, but it is: {resource_name}") from None
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
    try:
        if kind in ("int", "short", "long"):
            int(v)
        elif kind == "double":
            float(v)
    except ValueError:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Invalid value {value} for configuration {name}: "
                                                    f"Not a number of type {kind.upper()}") from None
    if kind == "boolean" and v.lower() not in ("true", "false"):
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Invalid value {value} for configuration {name}: "
                                                    "Expected value to be either true or false")
    topic_name = TOPIC_SYNONYM.get(name)
    if topic_name is not None:
        try:
            parse_config(topic_name, value)
        except InvalidConfig as e:
            reason = str(e).split(": ", 1)[-1]
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"Invalid value {value} for configuration {name}: {reason}") from None


def validate(configs: Mapping[str, str], per_broker: bool) -> None:
    """The whole new set for one resource; raises KafkaError (INVALID_REQUEST) as Kafka does."""
    names = set(configs)
    static = {n for n in names if n in KAFKA_BROKER_CONFIGS and n not in DYNAMIC}
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
    known = KAFKA_BROKER_CONFIGS.get(_base(name))
    return known is not None and known[0] == "password"


def alter(broker, resource_name: str, configs: Mapping[str, str], validate_only: bool) -> None:
    """Validate ``configs`` as the resource's whole new dynamic set, then (unless ``validate_only``)
    keep it durably in the cluster metadata and apply it; raises KafkaError."""
    per_broker = resource_is_this_broker(resource_name, broker.node_id)
    validate(configs, per_broker)
    _check_together(broker, resource_name, configs)
    if not validate_only:
        broker.metadata.set_broker_configs(resource_name, dict(configs))
        broker.apply_dynamic_configs()


def _check_together(broker, resource_name: str, configs: Mapping[str, str]) -> None:
    """The topic defaults the change would give must hold together (e.g. min.compaction.lag.ms <=
    max.compaction.lag.ms), checked on a trial copy before anything is kept."""
    from broker.config import BrokerConfig
    from storage.log_config import validate_topic_configs

    stored = {**broker.metadata.broker_configs, resource_name: dict(configs)}
    trial = BrokerConfig(broker.config.originals, sources=broker.config.sources)
    try:
        trial.set_dynamic(stored.get("", {}), stored.get(str(broker.node_id), {}))
        validate_topic_configs(trial.topic_defaults())
    except (InvalidConfig, ValueError) as e:
        raise KafkaError(ErrorCode.INVALID_REQUEST, str(e)) from None


def is_list(name: str) -> bool:
    known = KAFKA_BROKER_CONFIGS.get(_base(name))
    return known is not None and known[0] == "list"
