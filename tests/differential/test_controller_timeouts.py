"""Requests Kafka forwards to its controller, sent with a timeout of zero or below: the controller's
deadline has passed before it starts, so every item is REQUEST_TIMED_OUT (7) and nothing changes
(kafka-go's TestClientElectLeaders sends 0). Compared with Apache Kafka for CreateTopics,
CreatePartitions, DeleteTopics, ElectLeaders and AlterPartitionReassignments, and what each leaves.

Normalised: topic ids (present-or-absent), node ids in the requests.
"""

from __future__ import annotations

import uuid

import pytest
from kafka.protocol.admin import (
    AlterPartitionReassignmentsRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    ElectLeadersRequest,
)

from tests.differential.harness import build, normalise, unique


def send(t, cls, version: int, **data) -> dict:
    with t.client() as c:
        return normalise(c.send(build(cls, version, **data), version), replace={"topic_id": "<id>"})


def partitions_of(t, name: str) -> tuple:
    (m,) = t.metadata([name]).topics
    return m.error_code, len(m.partitions)


@pytest.fixture(scope="module")
def existing(pair) -> str:
    return pair.create_topic(unique("tmo"), 1)


@pytest.mark.parametrize("timeout", [0, -1])
@pytest.mark.parametrize("validate_only", [False, True])
def test_create_topics(pair, existing, timeout, validate_only):
    fresh, other = unique("tmo-new"), unique("tmo-new")

    def scenario(t):
        r = send(t, CreateTopicsRequest, 7, timeout_ms=timeout, validate_only=validate_only, topics=[
            dict(name=n, num_partitions=1, replication_factor=1, assignments=[], configs=[])
            for n in (fresh, existing, "bad name!", other)])
        return r, partitions_of(t, fresh)

    k, o = pair.run(scenario)
    assert {x["error_code"] for x in k[0]["topics"]} == {7} and k[1] == (3, 0)
    assert o == k


def test_create_topics_duplicate_names(pair):
    """The timed-out answer covers the request as sent: a repeated name is answered each time."""
    dup, other = unique("tmo-dup"), unique("tmo-new")

    def scenario(t):
        return send(t, CreateTopicsRequest, 7, timeout_ms=0, validate_only=False, topics=[
            dict(name=n, num_partitions=1, replication_factor=1, assignments=[], configs=[])
            for n in (other, dup, dup)])

    k, o = pair.run(scenario)
    assert o == k


@pytest.mark.parametrize("validate_only", [False, True])
def test_create_partitions(pair, existing, validate_only):
    missing = unique("missing")

    def scenario(t):
        r = send(t, CreatePartitionsRequest, 3, timeout_ms=0, validate_only=validate_only, topics=[
            dict(name=existing, count=2, assignments=None), dict(name=missing, count=2, assignments=None)])
        return r, partitions_of(t, existing)

    k, o = pair.run(scenario)
    assert k[1] == (0, 1)
    assert o == k


@pytest.mark.parametrize("version", [4, 6])
def test_delete_topics(pair, version):
    name, missing, unknown_id = pair.create_topic(unique("tmo-del"), 1), unique("missing"), uuid.uuid4()

    def scenario(t):
        if version >= 6:
            kw = dict(topics=[dict(name=name, topic_id=None), dict(name=missing, topic_id=None),
                              dict(name=None, topic_id=unknown_id)])
        else:
            kw = dict(topic_names=[name, missing])
        return send(t, DeleteTopicsRequest, version, timeout_ms=0, **kw), partitions_of(t, name)

    k, o = pair.run(scenario)
    assert k[1] == (0, 1)
    assert o == k


@pytest.mark.parametrize("partitions", ["listed", "all"])
def test_elect_leaders(pair, existing, partitions):
    listed = [dict(topic=existing, partitions=[0, 9]), dict(topic=unique("missing"), partitions=[0])]

    def scenario(t):
        return send(t, ElectLeadersRequest, 2, election_type=0, timeout_ms=0,
                    topic_partitions=listed if partitions == "listed" else None)

    k, o = pair.run(scenario)
    assert k["error_code"] == 7
    assert o == k


def test_alter_partition_reassignments(pair, existing):
    missing = unique("missing")

    def scenario(t):
        return send(t, AlterPartitionReassignmentsRequest, 0, timeout_ms=0, topics=[
            dict(name=existing, partitions=[dict(partition_index=0, replicas=[t.node_id])]),
            dict(name=missing, partitions=[dict(partition_index=0, replicas=[t.node_id])])])

    k, o = pair.run(scenario)
    assert k["error_code"] == 7
    assert o == k
