"""Dynamic group configs (ConfigResource type GROUP = 32, KIP-848): Kafka 4.3.1's GroupConfig.

A group's overrides live in the cluster metadata (MetadataStore.group_configs, Kafka's GROUP
ConfigRecords); a config a group does not override takes the broker's group.<kind>.* value
(DescribeConfigs lists that as the synonym, with its source). IncrementalAlterConfigs and
AlterConfigs check the whole new set the way Kafka's GroupConfig.validate does: known names only,
each value parsed as its type (ConfigDef's messages), then the broker's min/max bounds and
session timeout > heartbeat interval. The consumer group coordinator reads
consumer.session.timeout.ms, consumer.heartbeat.interval.ms and consumer.assignment.interval.ms
(ConsumerGroupManager's ``group_config`` hook); the share.* and streams.* ones are kept and
described only (this broker has no share or streams groups).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from broker.config.broker_config import BrokerConfig
    from broker.services import Services
    from protocol.messages import ApiMessage

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OPS = {APPEND: "APPEND", SUBTRACT: "SUBTRACT"}
_INT = re.compile(r"[+-]?\d+")
_RESET = re.compile(r"by_duration:(.*)", re.S)
# java.time.Duration.parse: [-+]P[nD][T[nH][nM][n[.n]S]], case-insensitive, at least one part
_DURATION = re.compile(r"([-+]?)P(?:([-+]?\d+)D)?(T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+)(?:[.,](\d{0,9}))?S)?)?",
                       re.I)


@dataclass(frozen=True, slots=True)
class GroupConfigDef:
    type: str  # "int", "string" or "boolean"
    default: str  # Kafka's default, when the broker has no value of its own for ``broker_synonym``
    at_least: int | None
    broker_synonym: str | None  # GroupConfig.ALL_GROUP_CONFIG_SYNONYMS
    doc: str


def _int(default: int, at_least: int, synonym: str, doc: str) -> GroupConfigDef:
    return GroupConfigDef("int", str(default), at_least, synonym, doc)


_RESET_DOC = (
    "The strategy to initialize the share-partition start offset. <ul><li>earliest: automatically reset the "
    "offset to the earliest offset</li><li>latest: automatically reset the offset to the latest offset</li>"
    "<li>by_duration:&lt;duration&gt;: automatically reset the offset to a configured duration from the current "
    "timestamp. &lt;duration&gt; must be specified in ISO8601 format (PnDTnHnMn.nS). Negative duration is not "
    "allowed.</li><li>anything else: throw exception to the share consumer.</li></ul>")
_ISOLATION_DOC = (
    "Controls how to read records written transactionally. If set to \"read_committed\", the share group will only "
    "deliver transactional records which have been committed. If set to \"read_uncommitted\", the share group will "
    "return all messages, even transactional messages which have been aborted. Non-transactional records will be "
    "returned unconditionally in either mode.")

# In GroupConfig's define order (ConfigDef.parse checks the values in this order).
GROUP_CONFIGS: dict[str, GroupConfigDef] = {
    "consumer.session.timeout.ms": _int(45000, 1, "group.consumer.session.timeout.ms",
                                        "The timeout to detect client failures when using the consumer group protocol."),
    "consumer.heartbeat.interval.ms": _int(5000, 1, "group.consumer.heartbeat.interval.ms",
                                           "The heartbeat interval given to the members of a consumer group."),
    "consumer.assignment.interval.ms": _int(1000, 0, "group.consumer.assignment.interval.ms",
                                            "The interval between assignment updates for a consumer group."),
    "share.session.timeout.ms": _int(45000, 1, "group.share.session.timeout.ms",
                                     "The timeout to detect client failures when using the share group protocol."),
    "share.heartbeat.interval.ms": _int(5000, 1, "group.share.heartbeat.interval.ms",
                                        "The heartbeat interval given to the members of a share group."),
    "share.record.lock.duration.ms": _int(30000, 1000, "group.share.record.lock.duration.ms",
                                          "The record acquisition lock duration in milliseconds for share groups."),
    "share.delivery.count.limit": _int(5, 2, "group.share.delivery.count.limit",
                                       "The maximum number of delivery attempts for a record delivered to a share "
                                       "group."),
    "share.partition.max.record.locks": _int(2000, 100, "group.share.partition.max.record.locks",
                                             "Share-group record lock limit per share-partition."),
    "share.auto.offset.reset": GroupConfigDef("string", "latest", None, None, _RESET_DOC),
    "share.isolation.level": GroupConfigDef("string", "read_uncommitted", None, None, _ISOLATION_DOC),
    "share.renew.acknowledge.enable": GroupConfigDef("boolean", "true", None, None,
                                                     "Whether the renew acknowledge type is enabled for the share "
                                                     "group."),
    "share.assignment.interval.ms": _int(1000, 0, "group.share.assignment.interval.ms",
                                         "The interval between assignment updates for a share group."),
    "streams.session.timeout.ms": _int(45000, 1, "group.streams.session.timeout.ms",
                                       "The timeout to detect client failures when using the streams group protocol."),
    "streams.heartbeat.interval.ms": _int(5000, 1, "group.streams.heartbeat.interval.ms",
                                          "The heartbeat interval given to the members."),
    "streams.num.standby.replicas": _int(0, 0, "group.streams.num.standby.replicas",
                                         "The number of standby replicas for each task."),
    "streams.initial.rebalance.delay.ms": _int(3000, 0, "group.streams.initial.rebalance.delay.ms",
                                               "The amount of time the group coordinator will wait for more streams "
                                               "clients to join a new group before performing the first rebalance. A "
                                               "longer delay means potentially fewer rebalances."),
    "streams.assignment.interval.ms": _int(1000, 0, "group.streams.assignment.interval.ms",
                                           "The interval between assignment updates for a streams group."),
}
# The order Kafka 4.3.1's DescribeConfigs lists them in (its HashMap's iteration order).
DESCRIBE_ORDER = (
    "consumer.session.timeout.ms", "consumer.assignment.interval.ms", "share.auto.offset.reset",
    "share.renew.acknowledge.enable", "streams.initial.rebalance.delay.ms", "share.session.timeout.ms",
    "streams.assignment.interval.ms", "share.heartbeat.interval.ms", "streams.heartbeat.interval.ms",
    "share.delivery.count.limit", "consumer.heartbeat.interval.ms", "share.record.lock.duration.ms",
    "share.assignment.interval.ms", "share.isolation.level", "streams.session.timeout.ms",
    "share.partition.max.record.locks", "streams.num.standby.replicas",
)
# Kafka's defaults of the broker properties group configs derive from or are bounded by (this
# broker's BrokerConfig knows only some of them; a value set in its properties wins).
BROKER_DEFAULTS = {d.broker_synonym: int(d.default) for d in GROUP_CONFIGS.values() if d.broker_synonym}
BROKER_DEFAULTS.update({
    "group.consumer.min.heartbeat.interval.ms": 5000, "group.consumer.max.heartbeat.interval.ms": 15000,
    "group.consumer.min.session.timeout.ms": 45000, "group.consumer.max.session.timeout.ms": 60000,
    "group.consumer.min.assignment.interval.ms": 0, "group.consumer.max.assignment.interval.ms": 15000,
    "group.share.min.heartbeat.interval.ms": 5000, "group.share.max.heartbeat.interval.ms": 15000,
    "group.share.min.session.timeout.ms": 45000, "group.share.max.session.timeout.ms": 60000,
    "group.share.min.record.lock.duration.ms": 15000, "group.share.max.record.lock.duration.ms": 60000,
    "group.share.min.delivery.count.limit": 2, "group.share.max.delivery.count.limit": 10,
    "group.share.min.partition.max.record.locks": 100, "group.share.max.partition.max.record.locks": 4000,
    "group.share.min.assignment.interval.ms": 0, "group.share.max.assignment.interval.ms": 15000,
    "group.streams.min.heartbeat.interval.ms": 5000, "group.streams.max.heartbeat.interval.ms": 15000,
    "group.streams.min.session.timeout.ms": 45000, "group.streams.max.session.timeout.ms": 60000,
    "group.streams.max.standby.replicas": 2,
    "group.streams.min.assignment.interval.ms": 0, "group.streams.max.assignment.interval.ms": 15000,
})
# GroupConfig.validateValues, in its order: (group config, broker bound, kind); "min"/"max" check
# the bound, then the session timeouts must exceed the heartbeat intervals.
_BOUNDS = (
    ("consumer.heartbeat.interval.ms", "group.consumer.min.heartbeat.interval.ms", "min"),
    ("consumer.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms", "max"),
    ("consumer.session.timeout.ms", "group.consumer.min.session.timeout.ms", "min"),
    ("consumer.session.timeout.ms", "group.consumer.max.session.timeout.ms", "max"),
    ("consumer.assignment.interval.ms", "group.consumer.min.assignment.interval.ms", "min"),
    ("consumer.assignment.interval.ms", "group.consumer.max.assignment.interval.ms", "max"),
    ("share.heartbeat.interval.ms", "group.share.min.heartbeat.interval.ms", "min"),
    ("share.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms", "max"),
    ("share.session.timeout.ms", "group.share.min.session.timeout.ms", "min"),
    ("share.session.timeout.ms", "group.share.max.session.timeout.ms", "max"),
    ("share.record.lock.duration.ms", "group.share.min.record.lock.duration.ms", "min"),
    ("share.record.lock.duration.ms", "group.share.max.record.lock.duration.ms", "max"),
    ("share.delivery.count.limit", "group.share.min.delivery.count.limit", "min"),
    ("share.delivery.count.limit", "group.share.max.delivery.count.limit", "max"),
    ("share.partition.max.record.locks", "group.share.min.partition.max.record.locks", "min"),
    ("share.partition.max.record.locks", "group.share.max.partition.max.record.locks", "max"),
    ("share.assignment.interval.ms", "group.share.min.assignment.interval.ms", "min"),
    ("share.assignment.interval.ms", "group.share.max.assignment.interval.ms", "max"),
    ("streams.heartbeat.interval.ms", "group.streams.min.heartbeat.interval.ms", "min"),
    ("streams.heartbeat.interval.ms", "group.streams.max.heartbeat.interval.ms", "max"),
    ("streams.session.timeout.ms", "group.streams.min.session.timeout.ms", "min"),
    ("streams.session.timeout.ms", "group.streams.max.session.timeout.ms", "max"),
    ("streams.num.standby.replicas", "group.streams.max.standby.replicas", "max"),
    ("streams.assignment.interval.ms", "group.streams.min.assignment.interval.ms", "min"),
    ("streams.assignment.interval.ms", "group.streams.max.assignment.interval.ms", "max"),
)
_SESSIONS = ("consumer", "share", "streams")


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_CONFIG, message)


def broker_value(config: BrokerConfig | None, name: str) -> int:
    """A broker group.* property: its value on this broker, else Kafka's default (also with no
    broker config at all)."""
    value = config.get(name) if config is not None else None
    return BROKER_DEFAULTS[name] if value is None else int(str(value).strip())


def _valid_reset(value: str) -> bool:
    """ShareGroupAutoOffsetResetStrategy's validator: earliest, latest or by_duration:<ISO8601>, not negative."""
    if value in ("earliest", "latest"):
        return True
    m = _RESET.fullmatch(value)
    d = _DURATION.fullmatch(m.group(1)) if m else None
    if d is None or not any(d.group(i) for i in (2, 4, 5, 6)) or (d.group(3) and not any(d.group(i) for i in (4, 5, 6))):
        return False
    sign = -1 if d.group(1) == "-" else 1
    secs = sum(int(d.group(i) or 0) * k for i, k in ((2, 86400), (4, 3600), (5, 60), (6, 1)))
    frac = d.group(7) or ""
    nanos = int(frac.ljust(9, "0")) if frac else 0
    if d.group(6) and d.group(6).startswith("-"):
        nanos = -nanos
    return sign * (secs * 10**9 + nanos) >= 0


def parse(name: str, value: str) -> int | bool | str:
    """ConfigDef.parseValue for one group config: the typed value, or Kafka's ConfigException message."""
    d = GROUP_CONFIGS[name]
    v = value.strip()
    if d.type == "int":
        if not _INT.fullmatch(v) or not -(2**31) <= int(v) < 2**31:
            raise _invalid(f"Invalid value {value} for configuration {name}: Not a number of type INT")
        n = int(v)
        if d.at_least is not None and n < d.at_least:
            raise _invalid(f"Invalid value {n} for configuration {name}: Value must be at least {d.at_least}")
        return n
    if d.type == "boolean":
        if v.lower() not in ("true", "false"):
            raise _invalid(f"Invalid value {value} for configuration {name}: Expected value to be either true or false")
        return v.lower() == "true"
    if name == "share.isolation.level" and v not in ("read_committed", "read_uncommitted"):
        raise _invalid(f"Invalid value {v} for configuration {name}: String must be one of: read_committed, "
                       "read_uncommitted")
    if name == "share.auto.offset.reset" and not _valid_reset(v):
        raise _invalid(f"Invalid value {v} for configuration {name}: Invalid value `{v}` for configuration {name}. "
                       "The value must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.")
    return v


def to_string(name: str, value: str) -> str:
    """ConfigDef.convertToString of the parsed value (what DescribeConfigs shows)."""
    parsed = parse(name, value)
    return ("true" if parsed else "false") if isinstance(parsed, bool) else str(parsed)


def defaults(config: BrokerConfig | None) -> dict[str, str]:
    """GroupCoordinatorConfig.extractGroupConfigMap: every group config's broker-level value."""
    out = {}
    for name, d in GROUP_CONFIGS.items():
        out[name] = str(broker_value(config, d.broker_synonym)) if d.broker_synonym else d.default
    return out


def validate(configs: Mapping[str, str], config: BrokerConfig | None) -> None:
    """GroupConfig.validate on a group's whole new set of overrides; raises KafkaError (INVALID_CONFIG)."""
    for name in configs:
        if name not in GROUP_CONFIGS:
            raise _invalid(f"Unknown group config name: {name}")
    merged = {**defaults(config), **configs}
    values = {name: parse(name, merged[name]) for name in GROUP_CONFIGS}  # each one checked, in order
    numbers = {name: v for name, v in values.items() if isinstance(v, int)}  # what the bounds apply to
    for name, bound, kind in _BOUNDS:
        limit = broker_value(config, bound)
        if kind == "min" and numbers[name] < limit:
            raise _invalid(f"{name} must be greater than or equal to {bound}")
        if kind == "max" and numbers[name] > limit:
            raise _invalid(f"{name} must be less than or equal to {bound}")
    for kind in _SESSIONS:
        if numbers[f"{kind}.session.timeout.ms"] <= numbers[f"{kind}.heartbeat.interval.ms"]:
            raise _invalid(f"{kind}.session.timeout.ms must be greater than {kind}.heartbeat.interval.ms")


def check_name(group_id: str) -> None:
    if group_id == "":
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Default group resources are not allowed.")


def apply_ops(current: Mapping[str, str], ops: Iterable[ApiMessage]) -> dict[str, str]:
    """The controller's incremental apply: SET and DELETE; no group config is a list, so APPEND and
    SUBTRACT are refused (any name); an unknown operation fails as Kafka's does (UNKNOWN_SERVER_ERROR)."""
    configs = dict(current)
    for op in ops:
        if op.config_operation == SET:
            configs[op.name] = op.value
        elif op.config_operation == DELETE:
            configs.pop(op.name, None)
        elif op.config_operation in _OPS:
            raise _invalid(f"Can't {_OPS[op.config_operation]} to key {op.name} because its type is not LIST.")
        else:
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, None)
    return configs


def alter(broker: Services, group_id: str, configs: Mapping[str, str], validate_only: bool) -> None:
    """Validate ``configs`` as the group's whole new set of overrides; keep it unless ``validate_only``."""
    check_name(group_id)
    validate(configs, broker.config)
    if not validate_only:
        broker.metadata.set_group_configs(group_id, dict(configs))

