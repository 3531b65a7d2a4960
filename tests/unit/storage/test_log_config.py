"""Topic config table, validation and layering."""

from __future__ import annotations

import dataclasses

import pytest

from storage.errors import InvalidConfig
from storage.log_config import (
    INTERNAL_TOPIC_CONFIGS,
    LONG_MAX,
    TOPIC_CONFIGS,
    LogConfig,
    format_config_value,
    parse_config,
    validate_topic_configs,
)


def test_table_matches_dataclass_defaults():
    fields = {f.name: f.default for f in dataclasses.fields(LogConfig)}
    assert set(fields) == {d.attr for d in (*TOPIC_CONFIGS.values(), *INTERNAL_TOPIC_CONFIGS.values())}
    for d in (*TOPIC_CONFIGS.values(), *INTERNAL_TOPIC_CONFIGS.values()):
        assert fields[d.attr] == d.default, d.name


def test_kafka_defaults():
    c = LogConfig()
    assert c.segment_bytes == 1073741824 and c.segment_ms == 604800000
    assert c.retention_ms == 604800000 and c.retention_bytes == -1
    assert c.index_interval_bytes == 4096 and c.segment_index_bytes == 10485760
    assert c.flush_messages == LONG_MAX and c.flush_ms == LONG_MAX
    assert c.cleanup_policy == ("delete",) and c.max_message_bytes == 1048588
    assert c.message_timestamp_type == "CreateTime" and c.min_insync_replicas == 1
    assert c.message_timestamp_after_max_ms == 3600000 and c.message_timestamp_before_max_ms == LONG_MAX
    assert c.delete_retention_ms == 86400000 and c.file_delete_delay_ms == 60000
    assert TOPIC_CONFIGS["segment.bytes"].broker_synonym == "log.segment.bytes"
    assert TOPIC_CONFIGS["segment.ms"].broker_synonym == "log.roll.ms"
    assert TOPIC_CONFIGS["retention.ms"].broker_synonyms == (
        "log.retention.ms",
        "log.retention.minutes",
        "log.retention.hours",
    )
    assert TOPIC_CONFIGS["max.message.bytes"].broker_synonym == "message.max.bytes"
    assert TOPIC_CONFIGS["segment.index.bytes"].broker_synonym == "log.index.size.max.bytes"
    assert TOPIC_CONFIGS["flush.messages"].broker_synonym == "log.flush.interval.messages"
    assert TOPIC_CONFIGS["retention.ms"].type_code == 5


def test_layering_and_parsing():
    c = LogConfig.from_overrides(
        {"retention.ms": "3600000", "segment.bytes": 1048576},
        {"retention.ms": " 1000 ", "cleanup.policy": "compact, delete", "preallocate": "TRUE"},
    )
    assert c.retention_ms == 1000 and c.segment_bytes == 1048576
    assert c.cleanup_policy == ("compact", "delete") and c.compact and c.delete
    assert c.preallocate is True
    assert c.get("retention.ms") == 1000
    assert format_config_value("cleanup.policy", c.cleanup_policy) == "compact,delete"
    assert format_config_value("preallocate", True) == "true"


@pytest.mark.parametrize(
    "name,value",
    [
        ("no.such.config", "1"),
        ("retention.ms", "-2"),
        ("retention.ms", "abc"),
        ("segment.bytes", "3000000000"),
        ("segment.bytes", "1048575"),  # Kafka 4's minimum is 1 MiB
        ("internal.segment.bytes", "13"),
        ("cleanup.policy", "compact,forever"),
        ("compression.type", "brotli"),
        ("message.timestamp.type", "createtime"),
        ("min.insync.replicas", "0"),
        ("preallocate", "yes"),
        ("min.cleanable.dirty.ratio", "1.5"),
        ("compression.gzip.level", "0"),
    ],
)
def test_invalid(name, value):
    with pytest.raises(InvalidConfig) as e:
        parse_config(name, value)
    assert e.value.code == 40


def test_cross_config_validation():
    with pytest.raises(InvalidConfig):
        validate_topic_configs({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})
    assert validate_topic_configs({"retention.bytes": "-1"}) == {"retention.bytes": -1}


def test_max_segment_ms_for_compacted_topics():
    c = LogConfig(cleanup_policy=("compact",), max_compaction_lag_ms=1000, segment_ms=5000)
    assert c.max_segment_ms == 1000
    assert LogConfig(segment_ms=5000).max_segment_ms == 5000
    assert LogConfig(segment_jitter_ms=0).random_segment_jitter() == 0
    assert 0 <= LogConfig(segment_jitter_ms=100).random_segment_jitter() < 100


def test_internal_segment_bytes_overrides_segment_bytes_without_its_minimum():
    """Kafka 4's LogConfig.segmentSize(): internal.segment.bytes (testing only) when set."""
    c = LogConfig.from_overrides({"segment.bytes": "1048576"}, {"internal.segment.bytes": "2048"})
    assert c.segment_bytes == 1048576 and c.segment_size == 2048
    assert LogConfig().segment_size == 1073741824
