"""GroupMetadataManager driven with a fake clock: Kafka's classic-group rules, error by error."""

from __future__ import annotations

import pytest

from coordinator.group import records as rec
from coordinator.group.group import ClassicGroup
from coordinator.group.manager import CommitPartition, GroupMetadataManager
from coordinator.group.state import (
    COMPLETING_REBALANCE,
    DEAD,
    EMPTY,
    PREPARING_REBALANCE,
    STABLE,
    IllegalStateTransition,
)
from protocol.errors import ErrorCode
from tests.unit.coordinator.helpers import join, join_result, make_manager, subscription, sync, sync_result

E = ErrorCode


def stable_group(mgr, timer, n: int = 1, group: str = "g", version: int = 5, **kw) -> list[str]:
    """Join ``n`` dynamic members (v<4: no MEMBER_ID_REQUIRED round trip) and sync them."""
    boxes = [join(mgr, group, version=version, client_id=f"c{i}", **kw) for i in range(n)]
    timer.advance(0)
    results = [join_result(b) for b in boxes]
    if version >= 4:  # the MEMBER_ID_REQUIRED round
        assert all(r.error == E.MEMBER_ID_REQUIRED for r in results)
        boxes = [join(mgr, group, r.member_id, version=version, **kw) for r in results]
        timer.advance(0)
        results = [join_result(b) for b in boxes]
    assert all(r.error == E.NONE for r in results), results
    gen = results[0].generation_id
    leader = results[0].leader
    ids = [r.member_id for r in results]
    followers = [sync(mgr, group, gen, m) for m in ids if m != leader]
    lead = sync(mgr, group, gen, leader, [(m, f"assign-{m}".encode()) for m in ids])
    for box in [*followers, lead]:
        assert sync_result(box).error == E.NONE
    assert mgr.groups[group].state is STABLE
    return ids


# --- JoinGroup ------------------------------------------------------------------------------


def test_member_id_required_then_join_and_sync():
    mgr, timer, writer = make_manager()
    first = join_result(join(mgr, version=4))
    assert first.error == E.MEMBER_ID_REQUIRED and first.member_id.startswith("client-")
    box = join(mgr, "g", first.member_id, version=4)
    assert not box.done  # parked for the initial rebalance delay
    timer.advance(0)
    r = join_result(box)
    assert (r.error, r.generation_id, r.leader, r.member_id) == (E.NONE, 1, first.member_id, first.member_id)
    assert r.protocol_name == "range" and r.protocol_type == "consumer"
    assert [m[0] for m in r.members] == [first.member_id]
    s = sync(mgr, "g", 1, first.member_id, [(first.member_id, b"A")])
    assert sync_result(s).assignment == b"A" and sync_result(s).protocol_name == "range"
    assert mgr.groups["g"].state is STABLE
    # The group record: the empty one at creation, then the assignment.
    values = [rec.decode_group_metadata_value(v) for _, g, _, v in writer.log if g == "g"]
    assert values[0].members == [] and values[0].generation == 0
    assert values[-1].generation == 1 and values[-1].members[0].assignment == b"A"
    assert values[-1].members[0].client_host == "/127.0.0.1"


def test_three_members_leader_sees_all_followers_see_none():
    mgr, timer, _ = make_manager()
    boxes = [join(mgr, version=3, client_id=f"c{i}") for i in range(3)]
    timer.advance(0)
    results = [join_result(b) for b in boxes]
    leader = results[0].leader
    for r in results:
        assert r.generation_id == 1 and r.leader == leader
        assert len(r.members) == (3 if r.member_id == leader else 0)


def test_protocol_selection_by_votes():
    mgr, timer, _ = make_manager()
    # Two prefer roundrobin, one prefers range; all support both.
    a = join(mgr, version=3, protocols=[("range", b"a"), ("roundrobin", b"a")])
    b = join(mgr, version=3, protocols=[("roundrobin", b"b"), ("range", b"b")])
    c = join(mgr, version=3, protocols=[("roundrobin", b"c"), ("range", b"c")])
    timer.advance(0)
    assert {join_result(x).protocol_name for x in (a, b, c)} == {"roundrobin"}
    leader_view = next(join_result(x) for x in (a, b, c) if join_result(x).members)
    assert sorted(m[2] for m in leader_view.members) == [b"a", b"b", b"c"]


def test_inconsistent_group_protocol():
    mgr, timer, _ = make_manager()
    stable_group(mgr, timer, version=3)
    assert join_result(join(mgr, protocols=[("other", b"")], version=3)).error == E.INCONSISTENT_GROUP_PROTOCOL
    assert join_result(join(mgr, protocol_type="connect", version=3)).error == E.INCONSISTENT_GROUP_PROTOCOL
    # An empty group accepts anything with a non-empty type and protocol list.
    assert join_result(join(mgr, "new", protocols=[], version=3)).error == E.INCONSISTENT_GROUP_PROTOCOL


def test_invalid_session_timeout_and_group_id():
    mgr, _, _ = make_manager(min_session_timeout_ms=6000, max_session_timeout_ms=30000)
    assert join_result(join(mgr, session=5999)).error == E.INVALID_SESSION_TIMEOUT
    assert join_result(join(mgr, session=30001)).error == E.INVALID_SESSION_TIMEOUT
    assert join_result(join(mgr, "")).error == E.INVALID_GROUP_ID


def test_unknown_member_of_unknown_group():
    mgr, _, _ = make_manager()
    r = join_result(join(mgr, "nope", "someone"))
    assert (r.error, r.member_id) == (E.UNKNOWN_MEMBER_ID, "someone")


def test_initial_rebalance_delay_waits_for_more_members():
    mgr, timer, _ = make_manager(initial_rebalance_delay_ms=3000)
    a = join(mgr, version=3, rebalance=10_000)
    timer.advance(2000)
    b = join(mgr, version=3, rebalance=10_000)  # extends the delay
    timer.advance(1000)
    assert not a.done and not b.done
    timer.advance(3000)
    assert join_result(a).generation_id == 1 and join_result(b).generation_id == 1
    assert mgr.groups["g"].num_members == 2


def test_rejoin_in_stable_by_follower_with_same_metadata_returns_current_generation():
    mgr, timer, _ = make_manager()
    ids = stable_group(mgr, timer, n=2, version=3)
    follower = next(m for m in ids if not mgr.groups["g"].is_leader(m))
    r = join_result(join(mgr, "g", follower, version=3))
    assert (r.error, r.generation_id, r.members) == (E.NONE, 1, [])
    assert mgr.groups["g"].state is STABLE


def test_leader_rejoin_triggers_rebalance():
    mgr, timer, _ = make_manager()
    ids = stable_group(mgr, timer, n=2, version=3)
    leader = mgr.groups["g"].leader_id
    box = join(mgr, "g", leader, version=3)
    assert mgr.groups["g"].state is PREPARING_REBALANCE and not box.done
    follower = next(m for m in ids if m != leader)
    assert mgr.heartbeat("g", follower, None, 1) == E.REBALANCE_IN_PROGRESS
    fbox = join(mgr, "g", follower, version=3)
    assert join_result(box).generation_id == 2 and join_result(fbox).generation_id == 2


def test_group_max_size():
    mgr, timer, _ = make_manager(max_size=1)
    stable_group(mgr, timer, version=3)
    r = join_result(join(mgr, version=3))
    assert (r.error, r.member_id) == (E.GROUP_MAX_SIZE_REACHED, "")


# --- Heartbeat, session timeout, LeaveGroup ----------------------------------------------------


def test_heartbeat_errors():
    mgr, timer, _ = make_manager()
    [m] = stable_group(mgr, timer, version=3)
    assert mgr.heartbeat("g", m, None, 1) == E.NONE
    assert mgr.heartbeat("g", m, None, 7) == E.ILLEGAL_GENERATION
    assert mgr.heartbeat("g", "ghost", None, 1) == E.UNKNOWN_MEMBER_ID
    assert mgr.heartbeat("nope", m, None, 1) == E.UNKNOWN_MEMBER_ID
    assert mgr.heartbeat("", m, None, 1) == E.INVALID_GROUP_ID
    assert mgr.heartbeat("g", m, "inst", 1) == E.UNKNOWN_MEMBER_ID


def test_session_timeout_removes_member_and_rebalances():
    mgr, timer, writer = make_manager()
    ids = stable_group(mgr, timer, n=2, version=3, session=6000)
    survivor, dead = ids
    for _ in range(3):
        timer.advance(2000)
        mgr.heartbeat("g", survivor, None, 1)
    # The dead member missed its session; the survivor is told to rejoin.
    assert mgr.heartbeat("g", survivor, None, 1) == E.REBALANCE_IN_PROGRESS
    box = join(mgr, "g", survivor, version=3)
    r = join_result(box)
    assert r.generation_id == 2 and r.leader == survivor and [m[0] for m in r.members] == [survivor]
    assert dead not in mgr.groups["g"].members


def test_pending_member_expires():
    mgr, timer, _ = make_manager()
    r = join_result(join(mgr, version=4, session=6000))
    assert mgr.groups["g"].is_pending_member(r.member_id)
    timer.advance(6000)
    assert not mgr.groups["g"].is_pending_member(r.member_id)


def test_leave_group_last_member_makes_group_empty_and_writes_it():
    mgr, timer, writer = make_manager()
    [m] = stable_group(mgr, timer, version=3)
    top, results = mgr.leave_group("g", [(m, None, "bye")])
    assert top == E.NONE and results == [(m, None, E.NONE)]
    group = mgr.groups["g"]
    assert group.state is EMPTY and group.generation_id == 2
    last = rec.decode_group_metadata_value(writer.log[-1][3])
    assert (last.generation, last.members, last.protocol, last.protocol_type) == (2, [], None, "consumer")


def test_leave_group_errors():
    mgr, timer, _ = make_manager()
    stable_group(mgr, timer, version=3)
    assert mgr.leave_group("nope", [("x", None, None)]) == (E.NONE, [("x", None, E.UNKNOWN_MEMBER_ID)])
    assert mgr.leave_group("g", [("x", None, None)])[1] == [("x", None, E.UNKNOWN_MEMBER_ID)]
    assert mgr.leave_group("g", [("", "inst", None)])[1] == [("", "inst", E.UNKNOWN_MEMBER_ID)]
    assert mgr.leave_group("", [])[0] == E.INVALID_GROUP_ID


def test_member_leaving_during_join_phase_completes_it():
    mgr, timer, _ = make_manager()
    a, b = stable_group(mgr, timer, n=2, version=3)
    leader = mgr.groups["g"].leader_id
    other = b if leader == a else a
    box = join(mgr, "g", leader, version=3)  # rebalance; ``other`` has not rejoined yet
    mgr.leave_group("g", [(other, None, None)])
    r = join_result(box)
    assert r.generation_id == 2 and [m[0] for m in r.members] == [leader]


# --- SyncGroup -------------------------------------------------------------------------------------


def test_sync_errors():
    mgr, timer, _ = make_manager()
    [m] = stable_group(mgr, timer, version=3)
    assert sync_result(sync(mgr, "g", 9, m)).error == E.ILLEGAL_GENERATION
    assert sync_result(sync(mgr, "g", 1, "ghost")).error == E.UNKNOWN_MEMBER_ID
    assert sync_result(sync(mgr, "nope", 1, m)).error == E.UNKNOWN_MEMBER_ID
    box = __import__("tests.unit.coordinator.helpers", fromlist=["Box"]).Box()
    mgr.sync_group("g", 1, m, None, "connect", "range", [], box)
    assert box.value.error == E.INCONSISTENT_GROUP_PROTOCOL
    # Stable: the current assignment comes straight back.
    assert sync_result(sync(mgr, "g", 1, m)).assignment == f"assign-{m}".encode()


def test_follower_sync_waits_for_leader_and_missing_assignment_is_empty():
    mgr, timer, _ = make_manager()
    boxes = [join(mgr, version=3, client_id=f"c{i}") for i in range(2)]
    timer.advance(0)
    rs = [join_result(b) for b in boxes]
    leader = rs[0].leader
    follower = next(r.member_id for r in rs if r.member_id != leader)
    fbox = sync(mgr, "g", 1, follower)
    assert not fbox.done
    sync(mgr, "g", 1, leader, [(leader, b"L")])
    assert sync_result(fbox).error == E.NONE and sync_result(fbox).assignment == b""


def test_sync_during_preparing_rebalance():
    mgr, timer, _ = make_manager()
    a, b = stable_group(mgr, timer, n=2, version=3)
    join(mgr, "g", mgr.groups["g"].leader_id, version=3)
    assert sync_result(sync(mgr, "g", 1, a)).error == E.REBALANCE_IN_PROGRESS


def test_failed_assignment_write_propagates_error():
    mgr, timer, writer = make_manager()
    box = join(mgr, version=3)
    timer.advance(0)
    m = join_result(box).member_id
    writer.fail_with = E.NOT_LEADER_OR_FOLLOWER
    s = sync(mgr, "g", 1, m, [(m, b"x")])
    assert sync_result(s).error == E.NOT_COORDINATOR
    assert mgr.groups["g"].state is PREPARING_REBALANCE


def test_pending_sync_expiry_removes_laggards():
    mgr, timer, _ = make_manager()
    boxes = [join(mgr, version=3, client_id=f"c{i}", rebalance=5000) for i in range(2)]
    timer.advance(0)
    rs = [join_result(b) for b in boxes]
    leader = rs[0].leader
    sync(mgr, "g", 1, leader, [(r.member_id, b"x") for r in rs])
    # The follower never syncs: after the rebalance timeout it is dropped.
    timer.advance(5000)
    assert list(mgr.groups["g"].members) == [leader]


# --- static membership -----------------------------------------------------------------------


def test_static_member_rejoin_without_rebalance_fences_old_id():
    mgr, timer, writer = make_manager()
    box = join(mgr, instance_id="i-1", version=5)
    timer.advance(0)
    old = join_result(box).member_id
    assert old.startswith("i-1-")
    sync(mgr, "g", 1, old, [(old, b"A")], instance_id="i-1")
    r = join_result(join(mgr, instance_id="i-1", version=5))  # restarted: unknown member id
    assert r.error == E.NONE and r.member_id != old and r.generation_id == 1
    assert r.leader == old  # the old leader id, so the client does not reassign (< v9)
    group = mgr.groups["g"]
    assert group.state is STABLE and group.static_members["i-1"] == r.member_id
    assert mgr.heartbeat("g", old, "i-1", 1) == E.FENCED_INSTANCE_ID
    assert mgr.heartbeat("g", r.member_id, "i-1", 1) == E.NONE
    assert sync_result(sync(mgr, "g", 1, r.member_id, instance_id="i-1")).assignment == b"A"
    stored = rec.decode_group_metadata_value(writer.log[-1][3])
    assert stored.members[0].member_id == r.member_id and stored.members[0].group_instance_id == "i-1"


def test_static_leader_rejoin_v9_skips_assignment():
    mgr, timer, _ = make_manager()
    box = join(mgr, instance_id="i-1", version=9)
    timer.advance(0)
    old = join_result(box).member_id
    sync(mgr, "g", 1, old, [(old, b"A")], instance_id="i-1")
    r = join_result(join(mgr, instance_id="i-1", version=9))
    assert r.skip_assignment and r.leader == r.member_id and [m[0] for m in r.members] == [r.member_id]


def test_static_member_fenced_join():
    mgr, timer, _ = make_manager()
    box = join(mgr, instance_id="i-1", version=5)
    timer.advance(0)
    m = join_result(box).member_id
    assert join_result(join(mgr, "g", "wrong", instance_id="i-1", version=5)).error == E.FENCED_INSTANCE_ID
    assert join_result(join(mgr, "g", m, instance_id="other", version=5)).error == E.UNKNOWN_MEMBER_ID


def test_static_member_removed_administratively_by_instance_id():
    mgr, timer, _ = make_manager()
    box = join(mgr, instance_id="i-1", version=5)
    timer.advance(0)
    m = join_result(box).member_id
    sync(mgr, "g", 1, m, [(m, b"A")], instance_id="i-1")
    assert mgr.leave_group("g", [("", "i-1", None)])[1] == [("", "i-1", E.NONE)]
    assert mgr.groups["g"].state is EMPTY


# --- offsets -------------------------------------------------------------------------------------


def commit(mgr, group="g", gen=-1, member="", parts=(("t", 0, 5),), version=8, retention=-1, instance=None,
           metadata=None):
    topics: dict[str, list[CommitPartition]] = {}
    for t, p, o in parts:
        topics.setdefault(t, []).append(CommitPartition(p, o, -1, metadata))
    return mgr.commit_offsets(group, gen, member, instance, retention, list(topics.items()), version)


def fetched(mgr, group="g", topics=None, stable=False):
    err, res = mgr.fetch_offsets(group, topics, stable)
    assert err == E.NONE
    return {(t, p.partition): (p.offset, p.error) for t, parts in res for p in parts}


def test_simple_commit_creates_empty_group_and_fetch():
    mgr, _, writer = make_manager()
    assert commit(mgr, parts=[("t", 0, 5), ("t", 1, 7)]) == {("t", 0): E.NONE, ("t", 1): E.NONE}
    assert mgr.groups["g"].state is EMPTY
    assert fetched(mgr, topics=[("t", [0, 1, 2])]) == {("t", 0): (5, E.NONE), ("t", 1): (7, E.NONE),
                                                       ("t", 2): (-1, E.NONE)}
    assert fetched(mgr) == {("t", 0): (5, E.NONE), ("t", 1): (7, E.NONE)}
    assert fetched(mgr, "unknown", [("t", [0])]) == {("t", 0): (-1, E.NONE)}
    assert len(writer.log) == 2 and all(g == "g" for _, g, _, _ in writer.log)


def test_commit_generation_checks():
    mgr, timer, _ = make_manager()
    [m] = stable_group(mgr, timer, version=3)
    assert commit(mgr, gen=1, member=m) == {("t", 0): E.NONE}
    assert commit(mgr, gen=2, member=m) == {("t", 0): E.ILLEGAL_GENERATION}
    assert commit(mgr, gen=1, member="ghost") == {("t", 0): E.UNKNOWN_MEMBER_ID}
    assert commit(mgr, gen=-1, member="") == {("t", 0): E.UNKNOWN_MEMBER_ID}  # group has members
    assert commit(mgr, "missing", gen=3, member="x", version=8) == {("t", 0): E.ILLEGAL_GENERATION}
    assert commit(mgr, "missing", gen=3, member="x", version=9) == {("t", 0): E.GROUP_ID_NOT_FOUND}


def test_commit_during_completing_rebalance():
    mgr, timer, _ = make_manager()
    box = join(mgr, version=3)
    timer.advance(0)
    m = join_result(box).member_id
    assert mgr.groups["g"].state is COMPLETING_REBALANCE
    assert commit(mgr, gen=1, member=m) == {("t", 0): E.REBALANCE_IN_PROGRESS}


def test_commit_metadata_too_large_and_retention():
    mgr, timer, writer = make_manager(offset_metadata_max_bytes=4)
    r = commit(mgr, parts=[("t", 0, 1)], metadata="x" * 5)
    assert r == {("t", 0): E.OFFSET_METADATA_TOO_LARGE} and not writer.log
    commit(mgr, parts=[("t", 0, 1)], metadata="ok", retention=60_000, version=2)
    value = rec.decode_offset_commit_value(writer.log[-1][3])
    assert value.expire_timestamp == timer.now + 60_000  # written as v1
    assert writer.log[-1][3][:2] == b"\x00\x01"


def test_commit_write_failure_maps_errors():
    mgr, _, writer = make_manager()
    writer.fail_with = E.UNKNOWN_TOPIC_OR_PARTITION
    assert commit(mgr) == {("t", 0): E.COORDINATOR_NOT_AVAILABLE}
    assert "g" not in mgr.groups  # the simple group was never created


def test_require_stable_reports_pending_transactional_offsets():
    mgr, _, _ = make_manager()
    commit(mgr, parts=[("t", 0, 5)])
    value = rec.offset_commit_value(rec.OffsetCommitValue(9, -1, "", 1, -1))
    mgr.replay(100, 4242, rec.offset_commit_key("g", "t", 0), value)  # a TxnOffsetCommit record
    assert fetched(mgr, topics=[("t", [0])], stable=True) == {("t", 0): (-1, E.UNSTABLE_OFFSET_COMMIT)}
    assert fetched(mgr, topics=[("t", [0])]) == {("t", 0): (5, E.NONE)}
    mgr.replay_end_transaction(4242, commit=True)
    assert fetched(mgr, topics=[("t", [0])], stable=True) == {("t", 0): (9, E.NONE)}


def test_markers_resolve_only_their_partitions_groups():
    mgr, _, _ = make_manager()
    mgr.partition_for = lambda group: {"a": 1, "b": 2}[group]
    value = rec.offset_commit_value(rec.OffsetCommitValue(9, -1, "", 1, -1))
    mgr.replay(10, 7, rec.offset_commit_key("a", "t", 0), value)
    mgr.replay(11, 7, rec.offset_commit_key("b", "t", 0), value)
    mgr.replay_end_transaction(7, True, partition=1)  # the marker in group a's partition
    assert fetched(mgr, "a", [("t", [0])], stable=True) == {("t", 0): (9, E.NONE)}
    assert fetched(mgr, "b", [("t", [0])], stable=True) == {("t", 0): (-1, E.UNSTABLE_OFFSET_COMMIT)}
    mgr.replay_end_transaction(7, False, partition=2)
    assert fetched(mgr, "b", [("t", [0])], stable=True) == {("t", 0): (-1, E.NONE)}
    assert not mgr.offsets.pending and not mgr.offsets.open_transactions


def test_aborted_transactional_offsets_are_dropped():
    mgr, _, _ = make_manager()
    value = rec.offset_commit_value(rec.OffsetCommitValue(9, -1, "", 1, -1))
    mgr.replay(10, 7, rec.offset_commit_key("g", "t", 0), value)
    mgr.replay_end_transaction(7, commit=False)
    assert fetched(mgr, topics=[("t", [0])], stable=True) == {("t", 0): (-1, E.NONE)}


def test_delete_offsets():
    mgr, timer, writer = make_manager()
    commit(mgr, parts=[("t", 0, 5), ("u", 0, 1)])
    top, res = mgr.delete_offsets("g", [("t", [0, 3])])
    assert top == E.NONE and res == [("t", [(0, E.NONE), (3, E.NONE)])]
    assert writer.log[-1][3] is None  # one tombstone, for the committed partition only
    assert fetched(mgr) == {("u", 0): (1, E.NONE)}
    assert mgr.delete_offsets("nope", [("t", [0])])[0] == E.GROUP_ID_NOT_FOUND
    stable_group(mgr, timer, group="c", version=3, protocols=[("range", subscription("sub"))])
    commit(mgr, "c", gen=1, member=next(iter(mgr.groups["c"].members)), parts=[("sub", 0, 1), ("other", 0, 1)])
    top, res = mgr.delete_offsets("c", [("sub", [0]), ("other", [0])])
    assert res == [("sub", [(0, E.GROUP_SUBSCRIBED_TO_TOPIC)]), ("other", [(0, E.NONE)])]
    stable_group(mgr, timer, group="x", version=3, protocol_type="connect")
    assert mgr.delete_offsets("x", [("t", [0])])[0] == E.NON_EMPTY_GROUP


# --- admin ---------------------------------------------------------------------------------------


def test_describe_and_list_groups():
    mgr, timer, _ = make_manager()
    [m] = stable_group(mgr, timer, version=3)
    commit(mgr, "simple", parts=[("t", 0, 1)])
    [d] = mgr.describe_groups(["g"], 5)
    assert (d.state, d.protocol_type, d.protocol_data) == ("Stable", "consumer", "range")
    assert d.members[0].member_id == m and d.members[0].assignment == f"assign-{m}".encode()
    assert d.members[0].metadata == subscription("t")
    [missing] = mgr.describe_groups(["zz"], 5)
    assert (missing.state, missing.error) == ("Dead", E.NONE)
    [missing6] = mgr.describe_groups(["zz"], 6)
    assert missing6.error == E.GROUP_ID_NOT_FOUND and missing6.error_message
    assert sorted(mgr.list_groups([], [])) == [("g", "consumer", "Stable", "classic"),
                                               ("simple", "", "Empty", "classic")]
    assert mgr.list_groups(["empty"], []) == [("simple", "", "Empty", "classic")]
    assert mgr.list_groups(["STABLE"], ["Classic"]) == [("g", "consumer", "Stable", "classic")]
    assert mgr.list_groups([], ["consumer"]) == []


def test_delete_groups():
    mgr, timer, writer = make_manager()
    stable_group(mgr, timer, version=3)
    commit(mgr, "e", parts=[("t", 0, 1), ("t", 1, 2)])
    assert mgr.delete_groups(["g", "e", "zz", None]) == [
        ("g", E.NON_EMPTY_GROUP), ("e", E.NONE), ("zz", E.GROUP_ID_NOT_FOUND), (None, E.INVALID_GROUP_ID)]
    assert "e" not in mgr.groups and fetched(mgr, "e") == {}
    tail = writer.log[-3:]
    assert [v for _, _, _, v in tail] == [None, None, None]
    assert isinstance(rec.decode_key(tail[-1][2]), rec.GroupMetadataKey)


# --- expiry --------------------------------------------------------------------------------------


def test_offset_expiry_and_group_removal():
    mgr, timer, writer = make_manager(offsets_retention_ms=60_000)
    commit(mgr, "simple", parts=[("t", 0, 1)])
    timer.advance(59_999)
    assert mgr.cleanup_expired() == 0
    timer.advance(1)
    assert mgr.cleanup_expired() == 1
    assert "simple" not in mgr.groups
    keys = [rec.decode_key(k) for _, _, k, v in writer.log[-2:]]
    assert isinstance(keys[0], rec.OffsetCommitKey) and isinstance(keys[1], rec.GroupMetadataKey)


def test_active_consumer_group_keeps_subscribed_offsets():
    mgr, timer, _ = make_manager(offsets_retention_ms=60_000)
    [m] = stable_group(mgr, timer, version=3, session=1_000_000, protocols=[("range", subscription("t"))])
    commit(mgr, gen=1, member=m, parts=[("t", 0, 1), ("gone", 0, 1)])
    timer.advance(120_000)
    assert mgr.cleanup_expired() == 1  # only the unsubscribed topic's offset
    assert fetched(mgr) == {("t", 0): (1, E.NONE)}


def test_explicit_expire_timestamp():
    mgr, timer, _ = make_manager(offsets_retention_ms=10**9)
    commit(mgr, parts=[("t", 0, 1)], retention=1000, version=2)
    timer.advance(1000)
    assert mgr.cleanup_expired() == 1


# --- loading -------------------------------------------------------------------------------------


def test_replay_rebuilds_groups_and_offsets():
    mgr, timer, writer = make_manager()
    ids = stable_group(mgr, timer, n=2, version=3)
    commit(mgr, gen=1, member=ids[0], parts=[("t", 0, 11), ("t", 1, 12)])
    commit(mgr, "simple", parts=[("t", 0, 3)])
    mgr.delete_offsets("simple", [("t", [0])])
    fresh, ftimer, _ = make_manager()
    for offset, _g, key, value in writer.log:
        fresh.replay(offset, -1, key, value)
    fresh.on_loaded()
    group = fresh.groups["g"]
    assert group.state is STABLE and set(group.members) == set(ids) and group.generation_id == 1
    assert group.leader_id == mgr.groups["g"].leader_id
    assert fresh.groups["g"].member(ids[1]).assignment == f"assign-{ids[1]}".encode()
    assert fetched(fresh) == {("t", 0): (11, E.NONE), ("t", 1): (12, E.NONE)}
    assert fetched(fresh, "simple") == {}
    # Loaded members must heartbeat within their session or be removed.
    ftimer.advance(10_000)
    assert fresh.groups["g"].state is EMPTY


def test_group_tombstone_on_replay():
    mgr, _, _ = make_manager()
    value = rec.group_metadata_value(rec.GroupMetadataValue("consumer", 3, None, None, 5, []))
    mgr.replay(0, -1, rec.group_metadata_key("g"), value)
    assert mgr.groups["g"].generation_id == 3 and mgr.groups["g"].state is EMPTY
    mgr.replay(1, -1, rec.group_metadata_key("g"), None)
    assert "g" not in mgr.groups


def test_unload_answers_parked_requests():
    mgr, _, _ = make_manager(initial_rebalance_delay_ms=5000)
    box = join(mgr, version=3)
    mgr.unload()
    assert join_result(box).error == E.NOT_COORDINATOR


# --- the state table -----------------------------------------------------------------------------


def test_state_table():
    g = ClassicGroup("g", EMPTY, 0)
    with pytest.raises(IllegalStateTransition):
        g.transition_to(STABLE, 1)
    with pytest.raises(IllegalStateTransition):
        g.transition_to(COMPLETING_REBALANCE, 1)
    g.transition_to(PREPARING_REBALANCE, 1)
    assert g.previous_state is EMPTY and g.current_state_timestamp == 1
    g.transition_to(COMPLETING_REBALANCE, 2)
    with pytest.raises(IllegalStateTransition):
        g.transition_to(EMPTY, 3)
    g.transition_to(STABLE, 3)
    g.transition_to(DEAD, 4)
    g.transition_to(DEAD, 5)


def test_manager_is_sans_io():
    import inspect

    import coordinator.group.group as group_mod
    import coordinator.group.manager as manager_mod
    for mod in (group_mod, manager_mod):
        assert "asyncio" not in inspect.getsource(mod).split('"""', 2)[2]
    assert GroupMetadataManager.__module__ == "coordinator.group.manager"
