"""A KIP-848 consumer group survives kill -9: the coordinator rebuilds it from its records in
``__consumer_offsets`` (group epoch, target assignment, each member's epoch and partitions), so
members carry on at their epochs and a partition is still never given to two members."""

from __future__ import annotations

import time

from kafka.protocol.admin import CreateTopicsRequest

from protocol.messages import request_class
from tests.differential.harness import build
from tests.support.raw_client import RawClient

HEARTBEAT, DESCRIBE = 68, 69


def _heartbeat(c: RawClient, group: str, member: str, epoch: int, owned: dict | None = None, **fields):
    req = build(request_class(HEARTBEAT), 1,
        group_id=group, member_id=member, member_epoch=epoch, instance_id=None, rack_id=None,
        rebalance_timeout_ms=fields.get("rebalance_timeout_ms", -1),
        subscribed_topic_names=fields.get("topics"), subscribed_topic_regex=None, server_assignor=None,
        topic_partitions=None if owned is None else [dict(topic_id=t, partitions=sorted(ps)) for t, ps in owned.items()])
    r = c.send(req, 1)
    assert r.error_code == 0, r
    assigned = None if r.assignment is None else {tp.topic_id: set(tp.partitions) for tp in r.assignment.topic_partitions}
    return r.member_epoch, assigned


def _join(c: RawClient, group: str, member: str, topic: str):
    return _heartbeat(c, group, member, 0, {}, rebalance_timeout_ms=30000, topics=[topic])


def _describe(c: RawClient, group: str):
    r = c.send(request_class(DESCRIBE)(group_ids=[group], include_authorized_operations=False), 1)
    (g,) = r.groups
    assert g.error_code == 0, g
    return g.group_state, g.group_epoch, g.assignment_epoch, {
        m.member_id: (m.member_epoch, sorted(p for tp in m.assignment.topic_partitions for p in tp.partitions))
        for m in g.members}


def test_consumer_group_survives_kill_minus_9(fresh_broker, topic_name):
    b = fresh_broker.start()
    group = f"g-{topic_name}"
    with RawClient(b.bootstrap) as c:
        r = c.send(build(CreateTopicsRequest, 7, topics=[dict(name=topic_name, num_partitions=4, replication_factor=1,
                                                             assignments=[], configs=[])],
                         timeout_ms=10000, validate_only=False), 7)
        assert r.topics[0].error_code == 0
        epoch_a, assigned_a = _join(c, group, "member-a", topic_name)
        assert sum(len(p) for p in assigned_a.values()) == 4
        before = _describe(c, group)
        assert before == ("Stable", epoch_a, epoch_a, {"member-a": (epoch_a, [0, 1, 2, 3])})

    b.kill()
    b.start()
    with RawClient(b.bootstrap) as c:
        assert _describe(c, group) == before
        # A carries on at its epoch (not fenced): the coordinator knows it.
        assert _heartbeat(c, group, "member-a", epoch_a, assigned_a) == (epoch_a, None)
        # B joins (after group.consumer.assignment.interval.ms, so the assignment is recomputed at
        # once): it gets nothing until A has revoked; A is asked to give up half.
        time.sleep(1.1)
        epoch_b, assigned_b = _join(c, group, "member-b", topic_name)
        assert epoch_b == epoch_a + 1 and assigned_b == {}
        epoch, kept = _heartbeat(c, group, "member-a", epoch_a, assigned_a)
        assert epoch == epoch_a and sum(len(p) for p in kept.values()) == 2

    # The revocation in progress survives a second crash too.
    b.kill()
    b.start()
    with RawClient(b.bootstrap) as c:
        state, group_epoch, _, members = _describe(c, group)
        assert state == "Reconciling" and group_epoch == epoch_b
        assert members["member-a"] == (epoch_a, [0, 1, 2, 3])  # still owns the partitions it is revoking
        # A acknowledges; B then gets the freed partitions, and no partition is owned twice.
        assert _heartbeat(c, group, "member-a", epoch_a, kept) == (epoch_b, None)
        epoch, got = _heartbeat(c, group, "member-b", epoch_b, {})
        assert epoch == epoch_b and sum(len(p) for p in got.values()) == 2
        state, _, _, members = _describe(c, group)
        assert state == "Stable"
        assert sorted(members["member-a"][1] + members["member-b"][1]) == [0, 1, 2, 3]
