"""Java's ``String.hashCode`` and Kafka's ``Utils.abs``, for mapping ids to internal partitions.

Kafka places a group (or transactional id) on ``abs(id.hashCode()) % numPartitions`` of its
internal topic; clients and other brokers compute the same, so this must be bit-exact Java.
"""

from __future__ import annotations

INT_MIN = -(1 << 31)


def java_string_hash(s: str) -> int:
    """``String.hashCode``: s[0]*31^(n-1) + ... over UTF-16 code units, as a signed int32."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    """``Utils.abs``: like Math.abs, except Integer.MIN_VALUE maps to 0 (not to itself)."""
    return 0 if n == INT_MIN else abs(n)


def partition_for(key: str, num_partitions: int) -> int:
    """The internal-topic partition that owns ``key`` (a group id or a transactional id)."""
    return kafka_abs(java_string_hash(key)) % num_partitions
