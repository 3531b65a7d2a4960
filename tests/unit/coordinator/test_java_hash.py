"""Java String.hashCode and Kafka's partitionFor, against values Java computes."""

from __future__ import annotations

from coordinator.group.java_hash import INT_MIN, java_string_hash, kafka_abs, partition_for


def test_known_java_hash_codes():
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("Hello World") == -862545276
    assert java_string_hash("polygenelubricants") == INT_MIN  # the famous Integer.MIN_VALUE string
    # Non-BMP characters hash as their two UTF-16 surrogates: 0xD83D * 31 + 0xDE00.
    assert java_string_hash("\U0001F600") == 0xD83D * 31 + 0xDE00


def test_utils_abs_maps_min_value_to_zero():
    assert kafka_abs(INT_MIN) == 0
    assert kafka_abs(-5) == 5
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("Hello World", 50) == 862545276 % 50
