"""DescribeTopicPartitions v0 (KIP-966, Admin.describeTopics and kafka-topics.sh --describe in Kafka 4)
compared with Apache Kafka: sorting and deduplication, unknown and illegal names, internal topics,
the partition limit and the next cursor at every boundary, cursors into, past and outside the named
topics, and the request-level errors.

Normalised: topic ids (per cluster; present-or-absent is compared) and node ids.
"""

from __future__ import annotations

import pytest
from kafka.protocol.admin import DescribeTopicPartitionsRequest

from tests.differential.harness import build, normalise, unique


def describe(t, topics: list[str], limit: int = 2000, cursor: dict | None = None) -> dict:
    with t.client() as c:
        r = c.send(build(DescribeTopicPartitionsRequest, 0, topics=[dict(name=n) for n in topics],
                         response_partition_limit=limit, cursor=cursor), 0)
    out = normalise(r, replace={"topic_id": "<id>"})
    for topic in out["topics"]:
        for p in topic["partitions"]:
            p["leader_id"] = "<node>" if p["leader_id"] == t.node_id else p["leader_id"]
            p["replica_nodes"] = ["<node>" if n == t.node_id else n for n in p["replica_nodes"]]
            p["isr_nodes"] = ["<node>" if n == t.node_id else n for n in p["isr_nodes"]]
    return out


@pytest.fixture(scope="module")
def topics(pair) -> tuple[str, str, str]:
    """Three topics of 3, 2 and 1 partitions whose names sort in that order."""
    prefix = unique("dtp")
    names = (f"{prefix}-a", f"{prefix}-b", f"{prefix}-c")
    for name, partitions in zip(names, (3, 2, 1), strict=True):
        pair.create_topic(name, partitions)
    return names


def _cases(a: str, b: str, c: str) -> dict[str, tuple]:
    return {
        "named-sorted-deduplicated": ([b, a, unique("missing"), "bad name!", b, "x" * 250, ".", c],),
        "limit-inside-topic": ([a, b, c], 2),
        "limit-at-topic-end": ([a, b, c], 3),
        "limit-across-topics": ([c, b, a], 5),
        "limit-zero-is-one": ([a, b], 0),
        "limit-negative-is-one": ([a, b], -5),
        "cursor-inside": ([a, b], 2, dict(topic_name=a, partition_index=1)),
        "cursor-drops-earlier-names": ([a, b, c], 2000, dict(topic_name=b, partition_index=1)),
        "cursor-past-last-partition": ([a, b], 2000, dict(topic_name=a, partition_index=7)),
        "cursor-on-duplicate": ([b, b, a], 1, dict(topic_name=b, partition_index=0)),
        "cursor-not-named": ([a, c], 2000, dict(topic_name=b, partition_index=0)),
        "cursor-negative-index": ([a], 2000, dict(topic_name=a, partition_index=-1)),
        "cursor-empty-name": ([a], 5, dict(topic_name="", partition_index=0)),
        "unknown-names-take-no-limit": ([f"{a}-0-missing", f"{a}-1-missing", a], 1),
        "unknown-after-exhausted-limit": ([c, f"{c}-missing"], 1),
        "empty-name": ([a, ""],),
        "all-topics-from-cursor": ([], 2, dict(topic_name=a, partition_index=0)),
        "all-topics-cursor-at-missing-name": ([], 3, dict(topic_name=f"{a}-missing", partition_index=0)),
    }


CASE_IDS = list(_cases("a", "b", "c"))


@pytest.mark.parametrize("case", CASE_IDS)
def test_describe_topic_partitions(pair, topics, case):
    args = _cases(*topics)[case]
    k, o = pair.run(lambda t: describe(t, *args))
    assert o == k


def test_describe_topic_partitions_internal_topic(pair):
    """__consumer_offsets once it exists: is_internal, paged like any topic (50 partitions by default)."""
    for t in pair:
        t.find_coordinator(unique("g"), key_type=0)
    k, o = pair.run(lambda t: describe(t, ["__consumer_offsets"], 2))
    assert k["topics"][0]["is_internal"] is True
    assert o == k
