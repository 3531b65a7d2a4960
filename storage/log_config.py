"""Topic-level configuration: Kafka's names, types, defaults, validators and broker synonyms.

One table (``TOPIC_CONFIGS``) drives everything: DescribeConfigs reads value/default/synonyms
from it, CreateTopics and IncrementalAlterConfigs validate through ``validate_topic_configs``, and
``LogConfig.from_overrides`` layers Kafka defaults < broker-level values < topic overrides exactly
as Kafka's LogConfig does (the broker resolves log.retention.hours/minutes/ms and log.roll.hours/ms
itself and hands the result keyed by the topic config name).
"""

from __future__ import annotations

import dataclasses
import random
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from storage.errors import InvalidConfig

LONG_MAX = 9223372036854775807
LONG_MIN = -9223372036854775808
INT_MAX = 2147483647
INT_MIN = -2147483648

# DescribeConfigs ConfigType codes (DescribeConfigsResponse.json, KIP-569).
CONFIG_TYPE_CODES = {"boolean": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6, "list": 7}

Validator = Callable[[Any], "str | None"]  # returns an error reason, or None when the value is fine


@dataclass(frozen=True, slots=True)
class ConfigDef:
    """One topic config: Kafka name, type, typed default, broker-level synonyms, validator."""

    name: str
    type: str  # 'int' | 'long' | 'string' | 'boolean' | 'list' | 'double'
    default: Any
    broker_synonym: str | None
    validator: Validator | None = None
    # Every broker-level name DescribeConfigs lists as a synonym, most specific first
    # (e.g. log.retention.ms, log.retention.minutes, log.retention.hours).
    broker_synonyms: tuple[str, ...] = ()

    @property
    def type_code(self) -> int:
        return CONFIG_TYPE_CODES[self.type]

    @property
    def attr(self) -> str:
        return self.name.replace(".", "_")


# --- validators (Kafka's ConfigDef.Range / ValidString / ValidList) -----------------------------


def at_least(minimum: float) -> Validator:
    def check(v: Any) -> str | None:
        return None if v >= minimum else f"Value must be at least {minimum}"

    return check


def between(lo: float, hi: float) -> Validator:
    def check(v: Any) -> str | None:
        return None if lo <= v <= hi else f"Value must be no less than {lo} and no more than {hi}"

    return check


def one_of(*allowed: str) -> Validator:
    def check(v: Any) -> str | None:
        return None if v in allowed else f"String must be one of: {', '.join(allowed)}"

    return check


def list_of(*allowed: str) -> Validator:
    def check(v: Any) -> str | None:
        for item in v:
            if item not in allowed:
                return f"Invalid value {item} for configuration: String must be one of: {', '.join(allowed)}"
        return None

    return check


def _gzip_level(v: int) -> str | None:
    return None if v == -1 or 1 <= v <= 9 else "Value must be -1 or no less than 1 and no more than 9"


def _defs(*defs: ConfigDef) -> dict[str, ConfigDef]:
    return {d.name: d for d in defs}


def _d(
    name: str, type_: str, default: Any, synonyms: tuple[str, ...] = (), validator: Validator | None = None
):
    return ConfigDef(name, type_, default, synonyms[0] if synonyms else None, validator, synonyms)


# Kafka 4.x LogConfig (storage/.../LogConfig.java) and ServerTopicConfigSynonyms.
TOPIC_CONFIGS: dict[str, ConfigDef] = _defs(
    _d("cleanup.policy", "list", ("delete",), ("log.cleanup.policy",), list_of("compact", "delete")),
    _d(
        "compression.type",
        "string",
        "producer",
        ("compression.type",),
        one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
    ),
    _d("compression.gzip.level", "int", -1, ("compression.gzip.level",), _gzip_level),
    _d("compression.lz4.level", "int", 9, ("compression.lz4.level",), between(1, 17)),
    _d("compression.zstd.level", "int", 3, ("compression.zstd.level",), between(-131072, 22)),
    _d("delete.retention.ms", "long", 86400000, ("log.cleaner.delete.retention.ms",), at_least(0)),
    _d("file.delete.delay.ms", "long", 60000, ("log.segment.delete.delay.ms",), at_least(0)),
    _d("flush.messages", "long", LONG_MAX, ("log.flush.interval.messages",), at_least(1)),
    _d(
        "flush.ms",
        "long",
        LONG_MAX,
        ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
        at_least(0),
    ),
    _d("follower.replication.throttled.replicas", "list", ()),
    _d("index.interval.bytes", "int", 4096, ("log.index.interval.bytes",), at_least(0)),
    _d("leader.replication.throttled.replicas", "list", ()),
    _d("local.retention.bytes", "long", -2, ("log.local.retention.bytes",), at_least(-2)),
    _d("local.retention.ms", "long", -2, ("log.local.retention.ms",), at_least(-2)),
    _d("max.compaction.lag.ms", "long", LONG_MAX, ("log.cleaner.max.compaction.lag.ms",), at_least(1)),
    _d("max.message.bytes", "int", 1048588, ("message.max.bytes",), at_least(0)),
    _d(
        "message.timestamp.after.max.ms",
        "long",
        3600000,
        ("log.message.timestamp.after.max.ms",),
        at_least(0),
    ),
    _d(
        "message.timestamp.before.max.ms",
        "long",
        LONG_MAX,
        ("log.message.timestamp.before.max.ms",),
        at_least(0),
    ),
    _d(
        "message.timestamp.type",
        "string",
        "CreateTime",
        ("log.message.timestamp.type",),
        one_of("CreateTime", "LogAppendTime"),
    ),
    _d("min.cleanable.dirty.ratio", "double", 0.5, ("log.cleaner.min.cleanable.ratio",), between(0, 1)),
    _d("min.compaction.lag.ms", "long", 0, ("log.cleaner.min.compaction.lag.ms",), at_least(0)),
    _d("min.insync.replicas", "int", 1, ("min.insync.replicas",), at_least(1)),
    _d("preallocate", "boolean", False, ("log.preallocate",)),
    _d("remote.log.copy.disable", "boolean", False),
    _d("remote.log.delete.on.disable", "boolean", False),
    _d("remote.storage.enable", "boolean", False),
    _d("retention.bytes", "long", -1, ("log.retention.bytes",)),
    _d(
        "retention.ms",
        "long",
        604800000,
        ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
        at_least(-1),
    ),
    _d("segment.bytes", "int", 1073741824, ("log.segment.bytes",), at_least(1048576)),
    _d("segment.index.bytes", "int", 10485760, ("log.index.size.max.bytes",), at_least(4)),
    _d("segment.jitter.ms", "long", 0, ("log.roll.jitter.ms", "log.roll.jitter.hours"), at_least(0)),
    _d("segment.ms", "long", 604800000, ("log.roll.ms", "log.roll.hours"), at_least(1)),
    _d("unclean.leader.election.enable", "boolean", False, ("unclean.leader.election.enable",)),
)

_INTEGER = re.compile(r"[+-]?[0-9]+\Z")
_COMMA = re.compile(r"\s*,\s*")


def _parse(defn: ConfigDef, raw: Any) -> Any:
    """Kafka's ConfigDef.parseType: strings are trimmed, then parsed by type."""
    t = defn.type
    if isinstance(raw, str):
        s = raw.strip()
        if t in ("int", "long"):
            if not _INTEGER.match(s):
                raise ValueError(f"Not a number of type {t.upper()}")
            v = int(s)
            lo, hi = (INT_MIN, INT_MAX) if t == "int" else (LONG_MIN, LONG_MAX)
            if not lo <= v <= hi:
                raise ValueError(f"Not a number of type {t.upper()}")
            return v
        if t == "double":
            try:
                return float(s)
            except ValueError:
                raise ValueError("Not a number of type DOUBLE") from None
        if t == "boolean":
            low = s.lower()
            if low == "true":
                return True
            if low == "false":
                return False
            raise ValueError("Expected value to be either true or false")
        if t == "list":
            return tuple(_COMMA.split(s)) if s else ()
        return s
    # Already typed (e.g. programmatic broker defaults): check the type only.
    if t in ("int", "long") and isinstance(raw, int) and not isinstance(raw, bool):
        return _parse(defn, str(raw))
    if t == "double" and isinstance(raw, int | float) and not isinstance(raw, bool):
        return float(raw)
    if t == "boolean" and isinstance(raw, bool):
        return raw
    if t == "list" and isinstance(raw, list | tuple):
        return tuple(str(x).strip() for x in raw)
    raise ValueError(f"Expected a value of type {t.upper()}")


# Kafka 4's internal topic configs (ConfigDef.defineInternal): accepted by CreateTopics and
# AlterConfigs, never listed by DescribeConfigs. internal.segment.bytes overrides segment.bytes
# without its 1 MiB minimum ("for testing only", LogConfig.segmentSize()).
INTERNAL_TOPIC_CONFIGS: dict[str, ConfigDef] = _defs(
    _d("internal.segment.bytes", "int", None, (), at_least(14)),
)


def parse_config(name: str, raw: Any) -> Any:
    """Parse and validate one topic config value; InvalidConfig for an unknown name or bad value."""
    defn = TOPIC_CONFIGS.get(name) or INTERNAL_TOPIC_CONFIGS.get(name)
    if defn is None:
        raise InvalidConfig(f"Unknown topic config name: {name}")
    if raw is None:
        raise InvalidConfig(f"Invalid value null for configuration {name}: Value must be non-null")
    try:
        value = _parse(defn, raw)
    except ValueError as e:
        raise InvalidConfig(f"Invalid value {raw} for configuration {name}: {e}") from None
    if defn.validator is not None:
        reason = defn.validator(value)
        if reason is not None:
            raise InvalidConfig(f"Invalid value {raw} for configuration {name}: {reason}")
    return value


def validate_topic_configs(configs: Mapping[str, Any]) -> dict[str, Any]:
    """Validate a set of topic overrides (CreateTopics, AlterConfigs); returns the typed values."""
    parsed = {name: parse_config(name, raw) for name, raw in configs.items()}
    min_lag = parsed.get("min.compaction.lag.ms")
    max_lag = parsed.get("max.compaction.lag.ms")
    if min_lag is not None and max_lag is not None and min_lag > max_lag:
        raise InvalidConfig(
            f"conflict topic config setting min.compaction.lag.ms ({min_lag}) > max.compaction.lag.ms ({max_lag})"
        )
    return parsed


def format_config_value(name: str, value: Any) -> str:
    """A typed value as Kafka renders it in DescribeConfigs (lists comma-joined, lower-case booleans)."""
    t = TOPIC_CONFIGS[name].type
    if t == "boolean":
        return "true" if value else "false"
    if t == "list":
        return ",".join(value)
    return str(value)


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Resolved topic configuration of one log; attribute = Kafka name with dots as underscores."""

    cleanup_policy: tuple[str, ...] = ("delete",)
    compression_type: str = "producer"
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    delete_retention_ms: int = 86400000
    file_delete_delay_ms: int = 60000
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    follower_replication_throttled_replicas: tuple[str, ...] = ()
    index_interval_bytes: int = 4096
    leader_replication_throttled_replicas: tuple[str, ...] = ()
    local_retention_bytes: int = -2
    local_retention_ms: int = -2
    max_compaction_lag_ms: int = LONG_MAX
    max_message_bytes: int = 1048588
    message_timestamp_after_max_ms: int = 3600000
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_type: str = "CreateTime"
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    min_insync_replicas: int = 1
    preallocate: bool = False
    remote_log_copy_disable: bool = False
    remote_log_delete_on_disable: bool = False
    remote_storage_enable: bool = False
    retention_bytes: int = -1
    retention_ms: int = 604800000
    segment_bytes: int = 1073741824
    internal_segment_bytes: int | None = None
    segment_index_bytes: int = 10485760
    segment_jitter_ms: int = 0
    segment_ms: int = 604800000
    unclean_leader_election_enable: bool = False

    @classmethod
    def from_overrides(
        cls,
        broker_defaults: Mapping[str, Any] | None = None,
        topic_overrides: Mapping[str, Any] | None = None,
    ) -> LogConfig:
        """Kafka defaults, then broker-level values, then topic overrides (all keyed by topic name)."""
        values: dict[str, Any] = {}
        for source in (broker_defaults or {}, topic_overrides or {}):
            values.update(validate_topic_configs(source))
        return cls(**{(TOPIC_CONFIGS.get(name) or INTERNAL_TOPIC_CONFIGS[name]).attr: v
                      for name, v in values.items()})

    def get(self, name: str) -> Any:
        """Value by Kafka config name (DescribeConfigs)."""
        if name not in TOPIC_CONFIGS:
            raise InvalidConfig(f"Unknown topic config name: {name}")
        return getattr(self, TOPIC_CONFIGS[name].attr)

    def as_dict(self) -> dict[str, Any]:
        """Every config by Kafka name."""
        return {name: getattr(self, d.attr) for name, d in TOPIC_CONFIGS.items()}

    def replace(self, **changes: Any) -> LogConfig:
        return dataclasses.replace(self, **changes)

    @property
    def segment_size(self) -> int:
        """The size segments roll at (Kafka's segmentSize(): internal.segment.bytes when set)."""
        return self.internal_segment_bytes if self.internal_segment_bytes is not None else self.segment_bytes

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def max_segment_ms(self) -> int:
        """Kafka's LogConfig.maxSegmentMs: a compacted topic also rolls by max.compaction.lag.ms."""
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    def random_segment_jitter(self) -> int:
        """Kafka's randomSegmentJitter: drawn per segment so segments of many logs do not roll at once."""
        if self.segment_jitter_ms == 0:
            return 0
        return random.randrange(0, min(self.segment_jitter_ms, self.segment_ms))


DEFAULT_CONFIG = LogConfig()


def segment_bytes_config(size: int) -> dict[str, str]:
    """The topic config for an internal topic's ``offsets.topic.segment.bytes`` /
    ``transaction.state.log.segment.bytes``: those allow any size, ``segment.bytes`` not below
    1 MiB, so a smaller one (tests) goes in as ``internal.segment.bytes``."""
    if size >= 1048576:
        return {"segment.bytes": str(size)}
    return {"internal.segment.bytes": str(size)}
