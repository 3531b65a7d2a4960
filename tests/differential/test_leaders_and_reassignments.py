"""ElectLeaders, AlterPartitionReassignments and ListPartitionReassignments compared with Apache Kafka
on one node: elections are never needed, the only valid reassignment target is the node itself (done
at once, so nothing is ever listed as in progress), and every error with Kafka's code and message.

Normalised: node ids (each cluster's own id stands in as "<node>" in the requests), and the order of
topics in the answer to an election over all partitions (Kafka's follows its metadata image's map).
"""

from __future__ import annotations

import pytest
from kafka.protocol.admin import (
    AlterPartitionReassignmentsRequest,
    ElectLeadersRequest,
    ListPartitionReassignmentsRequest,
)

from tests.differential.harness import build, to_plain, unique

NODE = "<node>"


def send(t, cls, version: int, **data) -> dict:
    def sub(x):
        if x == NODE:
            return t.node_id
        if isinstance(x, list):
            return [sub(v) for v in x]
        if isinstance(x, dict):
            return {k: sub(v) for k, v in x.items()}
        return x

    with t.client() as c:
        r = to_plain(c.send(build(cls, version, **sub(data)), version))
    r.pop("throttle_time_ms", None)
    return r


@pytest.fixture(scope="module")
def topic(pair) -> str:
    name = unique("elect")
    pair.create_topic(name, 2)
    return name


def _elections(t: str) -> dict[str, tuple]:
    missing = unique("missing")
    return {
        "preferred": (2, dict(election_type=0, timeout_ms=10000, topic_partitions=[
            dict(topic=t, partitions=[0, 1, 5, -1]), dict(topic=missing, partitions=[0])])),
        "unclean": (2, dict(election_type=1, timeout_ms=10000, topic_partitions=[dict(topic=t, partitions=[0])])),
        "v0": (0, dict(timeout_ms=10000, topic_partitions=[dict(topic=t, partitions=[0])])),
        "v1": (1, dict(election_type=0, timeout_ms=10000, topic_partitions=[dict(topic=t, partitions=[1])])),
        "empty-list": (2, dict(election_type=0, timeout_ms=10000, topic_partitions=[])),
        "repeated": (2, dict(election_type=0, timeout_ms=10000, topic_partitions=[
            dict(topic=t, partitions=[0, 0]), dict(topic=t, partitions=[1])])),
        "unknown-type": (2, dict(election_type=5, timeout_ms=10000, topic_partitions=[
            dict(topic=t, partitions=[0]), dict(topic=missing, partitions=[0])])),
    }


@pytest.mark.parametrize("case", list(_elections("t")))
def test_elect_leaders(pair, topic, case):
    version, data = _elections(topic)[case]
    k, o = pair.run(lambda t: send(t, ElectLeadersRequest, version, **data))
    assert o == k


def test_elect_leaders_all_partitions(pair, topic):
    """A null list: every topic, each without results (no election was needed anywhere)."""
    def scenario(t):
        r = send(t, ElectLeadersRequest, 2, election_type=0, timeout_ms=10000, topic_partitions=None)
        results = {x["topic"]: x["partition_result"] for x in r["replica_election_results"]}
        return r["error_code"], results.get(topic), set(map(len, results.values()))

    k, o = pair.run(scenario)
    assert k == (0, [], {0})
    assert o == k


def _reassignments(t: str) -> dict[str, tuple]:
    missing = unique("missing")
    return {
        "to-itself": (0, dict(timeout_ms=10000, topics=[dict(name=t, partitions=[dict(partition_index=0, replicas=[NODE])])])),
        "to-itself-v1": (1, dict(timeout_ms=10000, allow_replication_factor_change=False, topics=[
            dict(name=t, partitions=[dict(partition_index=1, replicas=[NODE])])])),
        "unregistered-broker": (0, dict(timeout_ms=10000, topics=[dict(name=t, partitions=[dict(partition_index=0, replicas=[4242])])])),
        "more-replicas-v1": (1, dict(timeout_ms=10000, allow_replication_factor_change=False, topics=[
            dict(name=t, partitions=[dict(partition_index=0, replicas=[NODE, 4242])])])),
        "empty-replicas": (0, dict(timeout_ms=10000, topics=[dict(name=t, partitions=[dict(partition_index=0, replicas=[])])])),
        "repeated-replica": (0, dict(timeout_ms=10000, topics=[dict(name=t, partitions=[dict(partition_index=0, replicas=[NODE, NODE])])])),
        "cancel-none-in-progress": (0, dict(timeout_ms=10000, topics=[dict(name=t, partitions=[dict(partition_index=1, replicas=None)])])),
        "unknown-topic-and-partitions": (0, dict(timeout_ms=10000, topics=[
            dict(name=missing, partitions=[dict(partition_index=0, replicas=[NODE])]),
            dict(name=t, partitions=[dict(partition_index=9, replicas=[NODE]), dict(partition_index=-1, replicas=[NODE])])])),
        "same-partition-twice": (0, dict(timeout_ms=10000, topics=[dict(name=t, partitions=[
            dict(partition_index=0, replicas=[NODE]), dict(partition_index=0, replicas=None)])])),
    }


@pytest.mark.parametrize("case", list(_reassignments("t")))
def test_alter_partition_reassignments(pair, topic, case):
    version, data = _reassignments(topic)[case]
    k, o = pair.run(lambda t: send(t, AlterPartitionReassignmentsRequest, version, **data))
    assert o == k


@pytest.mark.parametrize("topics", ["all", "named"])
def test_list_partition_reassignments_after_reassigning(pair, topic, topics):
    def scenario(t):
        send(t, AlterPartitionReassignmentsRequest, 0, timeout_ms=10000, topics=[
            dict(name=topic, partitions=[dict(partition_index=0, replicas=[NODE])])])
        wanted = None if topics == "all" else [dict(name=topic, partition_indexes=[0, 7]),
                                               dict(name=unique("missing"), partition_indexes=[0])]
        return send(t, ListPartitionReassignmentsRequest, 0, timeout_ms=10000, topics=wanted)

    k, o = pair.run(scenario)
    assert k == {"error_code": 0, "error_message": None, "topics": []}
    assert o == k
