"""KIP-848 consumer groups, sans-IO: the assignors, reconciliation driven through the manager,
reload equivalence, the record codecs, heartbeat answers and the session/rebalance timeouts."""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator.group import consumer_records as crec
from coordinator.group.assignors import range_, uniform
from coordinator.group.consumer_group import ConsumerGroup, MemberState
from coordinator.group.consumer_manager import (
    ConsumerGroupConfig,
    ConsumerGroupManager,
    HeartbeatRequest,
    HeartbeatResult,
    rebalance_key,
    session_key,
)
from coordinator.group.manager import GroupConfig, GroupMetadataManager
from coordinator.group.records import RecordFormatError
from protocol.errors import ErrorCode
from tests.unit.coordinator.helpers import FakeTimer, FakeWriter

E = ErrorCode
G = "g"
SESSION_MS = 45_000
REBALANCE_MS = 30_000
HB_MS = 5_000
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ==========================================================================================
# Fakes
# ==========================================================================================


@dataclass
class FakeTopic:
    name: str
    topic_id: uuid.UUID
    partitions: int


class FakeTopics:
    def __init__(self, counts: dict[str, int]) -> None:
        self.topics = {n: FakeTopic(n, uuid.uuid5(uuid.NAMESPACE_DNS, n), p) for n, p in counts.items()}

    def get(self, name: str) -> FakeTopic | None:
        return self.topics.get(name)

    def name_of(self, topic_id: uuid.UUID) -> str | None:
        return next((t.name for t in self.topics.values() if t.topic_id == topic_id), None)

    def tid(self, name: str) -> uuid.UUID:
        return self.topics[name].topic_id


def make(counts: dict[str, int], interval_ms: int = 0, session_ms: int = SESSION_MS):
    timer = FakeTimer()
    writer = FakeWriter()
    topics = FakeTopics(counts)
    mgr = GroupMetadataManager(
        GroupConfig(initial_rebalance_delay_ms=0), timer, writer, timer.time_ms,
        consumer_config=ConsumerGroupConfig(session_timeout_ms=session_ms, heartbeat_interval_ms=HB_MS,
                                            assignment_interval_ms=interval_ms),
        topics=topics)
    return mgr, mgr.consumer, timer, writer, topics


def join(cm: ConsumerGroupManager, member_id: str, topics: list[str], *, instance_id: str | None = None,
         assignor: str | None = None) -> HeartbeatResult:
    return cm.heartbeat(HeartbeatRequest(G, member_id, 0, instance_id=instance_id, rebalance_timeout_ms=REBALANCE_MS,
                                         subscribed_topic_names=list(topics), server_assignor=assignor, owned={}))


def hb(cm: ConsumerGroupManager, member_id: str, epoch: int, owned, **kw) -> HeartbeatResult:
    return cm.heartbeat(HeartbeatRequest(G, member_id, epoch, owned=owned, **kw))


def pairs(assignment) -> set[tuple[uuid.UUID, int]]:
    return {(t, p) for t, ps in assignment.items() for p in ps}


def fire(timer: FakeTimer, key: str) -> bool:
    """Run a scheduled timer now, as if it expired."""
    task = timer.tasks.pop(key, None)
    if task is None:
        return False
    task[2]()
    return True


# ==========================================================================================
# 1. Assignors
# ==========================================================================================

TOPIC_IDS = [uuid.UUID(int=i + 1) for i in range(5)]


@st.composite
def assignor_inputs(draw, homogeneous: bool = False):
    n_topics = draw(st.integers(1, 5))
    topic_ids = TOPIC_IDS[:n_topics]
    partitions = {t: draw(st.integers(0, 20)) for t in topic_ids}
    ghost = uuid.UUID(int=99)  # subscribed but not (or no longer) in the metadata
    members = [f"m{i}" for i in range(draw(st.integers(1, 8)))]
    universe = [*topic_ids, ghost]
    if homogeneous:
        subs = frozenset(draw(st.sets(st.sampled_from(universe), min_size=1)))
        subscriptions = dict.fromkeys(members, subs)
    else:
        subscriptions = {m: frozenset(draw(st.sets(st.sampled_from(universe)))) for m in members}
    # A previous (target) assignment: disjoint, possibly stale (unsubscribed, gone, out of range).
    previous: dict[str, dict[uuid.UUID, set[int]]] = {}
    for t in universe:
        for p in range(draw(st.integers(0, 22))):
            owner = draw(st.sampled_from([None, *members, "departed"]))
            if owner is not None:
                previous.setdefault(owner, {}).setdefault(t, set()).add(p)
    current = {m: {t: frozenset(ps) for t, ps in a.items()} for m, a in previous.items()}
    return subscriptions, partitions, current


def check_complete_and_valid(subscriptions, partitions, out) -> None:
    assert set(out) == set(subscriptions)
    owners: dict[tuple[uuid.UUID, int], str] = {}
    for m, a in out.items():
        for t, ps in a.items():
            assert ps, "no empty partition sets"
            assert t in subscriptions[m], f"{m} got unsubscribed topic {t}"
            assert t in partitions
            for p in ps:
                assert 0 <= p < partitions[t]
                assert (t, p) not in owners, f"{(t, p)} assigned to {owners[(t, p)]} and {m}"
                owners[(t, p)] = m
    subscribed = {t for s in subscriptions.values() for t in s if t in partitions}
    assert set(owners) == {(t, p) for t in subscribed for p in range(partitions[t])}


def loads(out) -> dict[str, int]:
    return {m: sum(len(ps) for ps in a.values()) for m, a in out.items()}


@FAST
@given(assignor_inputs())
def test_assignors_assign_every_subscribed_partition_once(inputs):
    subscriptions, partitions, current = inputs
    for assignor in (uniform, range_):
        check_complete_and_valid(subscriptions, partitions, assignor(subscriptions, partitions, current))


@FAST
@given(assignor_inputs(homogeneous=True))
def test_uniform_homogeneous_is_balanced_and_keeps_up_to_its_quota(inputs):
    subscriptions, partitions, current = inputs
    out = uniform(subscriptions, partitions, current)
    check_complete_and_valid(subscriptions, partitions, out)
    load = loads(out)
    assert max(load.values()) - min(load.values()) <= 1, load
    # Stickiness: every member keeps at least min(floor quota, what it validly had).
    subs = next(iter(subscriptions.values()))
    total = sum(partitions[t] for t in subs if t in partitions)
    floor = total // len(subscriptions)
    for m in subscriptions:
        had = {(t, p) for t, ps in current.get(m, {}).items() for p in ps if t in subs and t in partitions
               and p < partitions[t]}
        kept = had & pairs(out[m])
        assert len(kept) >= min(floor, len(had)), (m, had, out[m])


@FAST
@given(assignor_inputs(homogeneous=True))
def test_uniform_is_a_fixed_point_of_its_own_output(inputs):
    subscriptions, partitions, current = inputs
    first = uniform(subscriptions, partitions, current)
    assert uniform(subscriptions, partitions, first) == first


@FAST
@given(assignor_inputs())
def test_uniform_is_a_fixed_point_when_computed_from_scratch(inputs):
    subscriptions, partitions, _ = inputs
    first = uniform(subscriptions, partitions, {})
    assert uniform(subscriptions, partitions, first) == first


HETERO_BUG = ("uniform with heterogeneous subscriptions caps what a member keeps at ceil(its eligible partitions "
              "/ member count), counting partitions only it can take; with m0={T2}, m1={T1,T2}, 6+6 partitions "
              "and m1 previously owning T2, m1 keeps all of T2, gets all of T1 too and m0 gets nothing "
              "(Kafka's heterogeneous builder balances to 6/6); feeding the output back then moves partitions")


def test_uniform_heterogeneous_balances_where_subscriptions_allow():
    t1, t2 = TOPIC_IDS[0], TOPIC_IDS[1]
    subscriptions = {"m0": frozenset({t2}), "m1": frozenset({t1, t2})}
    partitions = {t1: 6, t2: 6}
    out = uniform(subscriptions, partitions, {"m1": {t2: frozenset(range(6))}})
    check_complete_and_valid(subscriptions, partitions, out)
    assert loads(out) == {"m0": 6, "m1": 6}, out


def test_uniform_heterogeneous_is_a_fixed_point_of_its_own_output():
    t1, t2 = TOPIC_IDS[0], TOPIC_IDS[1]
    subscriptions = {"m0": frozenset({t2}), "m1": frozenset({t1, t2})}
    partitions = {t1: 1, t2: 1}
    first = uniform(subscriptions, partitions, {"m1": {t2: frozenset({0})}})
    assert uniform(subscriptions, partitions, first) == first


@FAST
@given(assignor_inputs())
def test_range_gives_consecutive_ranges_in_member_order(inputs):
    subscriptions, partitions, current = inputs
    out = range_(subscriptions, partitions, current)
    for t, count in partitions.items():
        subscribers = sorted(m for m in subscriptions if t in subscriptions[m])
        if not subscribers:
            continue
        size, extra = divmod(count, len(subscribers))
        start = 0
        for i, m in enumerate(subscribers):
            n = size + (1 if i < extra else 0)
            assert out[m].get(t, frozenset()) == frozenset(range(start, start + n)), (t, m, out[m])
            start += n
        assert start == count
    assert range_(subscriptions, partitions, current) == range_(subscriptions, partitions, {})  # not sticky


# ==========================================================================================
# 2. Reconciliation driven through the manager: random membership changes
# ==========================================================================================


@dataclass
class Client:
    """What a KIP-848 consumer knows: its id, epoch and the partitions it was last told to own."""

    member_id: str
    instance_id: str | None
    subs: list[str]
    assignor: str | None
    epoch: int = 0
    told: dict = field(default_factory=dict)
    full_next: bool = False
    status: str = "active"  # active | static_left | gone


OK_ERRORS = {E.NONE, E.FENCED_MEMBER_EPOCH, E.UNKNOWN_MEMBER_ID}

TOPIC_NAMES = ["a", "b", "c", "nope"]
join_op = st.tuples(st.just("join"), st.sets(st.sampled_from(TOPIC_NAMES), min_size=1), st.booleans())
hb_op = st.tuples(st.just("hb"), st.integers(0, 50), st.sampled_from(["owned"] * 4 + ["null", "full", "lost"]))
op_strategy = st.one_of(
    join_op, join_op,
    hb_op, hb_op, hb_op, hb_op, hb_op, hb_op,
    st.tuples(st.just("resub"), st.integers(0, 50), st.sets(st.sampled_from(TOPIC_NAMES))),
    st.tuples(st.just("leave"), st.integers(0, 50)),
    st.tuples(st.just("static_leave"), st.integers(0, 50)),
    st.tuples(st.just("static_rejoin"), st.integers(0, 50)),
    st.tuples(st.just("session_expire"), st.integers(0, 50)),
    st.tuples(st.just("rebalance_expire"), st.integers(0, 50)),
    st.tuples(st.just("advance"), st.sampled_from([0, 40, 300, 1200, 31_000])),
)


class Sim:
    def __init__(self, counts: dict[str, int], interval_ms: int, assignor: str | None) -> None:
        self.mgr, self.cm, self.timer, self.writer, self.topics = make(counts, interval_ms)
        self.interval_ms = interval_ms
        self.assignor = assignor
        self.clients: list[Client] = []
        self.seq = 0

    # --- client actions ---------------------------------------------------------------------

    def new_id(self) -> str:
        self.seq += 1
        return f"member-{self.seq:03d}"

    def heartbeat(self, c: Client, mode: str = "owned", subs_changed: bool = False) -> HeartbeatResult:
        full = c.epoch == 0 or c.full_next or mode == "full"
        owned = {} if c.epoch == 0 else (None if mode == "null" and not full else dict(c.told))
        req = HeartbeatRequest(
            G, c.member_id, c.epoch, instance_id=c.instance_id,
            rebalance_timeout_ms=REBALANCE_MS if full else -1,
            subscribed_topic_names=list(c.subs) if full or subs_changed else None,
            server_assignor=self.assignor if full else None, owned=owned)
        r = self.cm.heartbeat(req)
        if mode == "lost":  # processed, but the answer never arrives: the client will send a full request
            c.full_next = True
            return r
        assert r.error in OK_ERRORS | ({E.UNRELEASED_INSTANCE_ID} if c.epoch == 0 else set()), r
        if r.error is E.NONE:
            assert r.member_id == c.member_id
            assert r.member_epoch >= 0
            c.epoch = r.member_epoch
            if r.assignment is not None:
                c.told = dict(r.assignment)
            c.full_next = False
        elif r.error is E.UNRELEASED_INSTANCE_ID:
            c.status = "gone"
        else:  # fenced: give everything up and rejoin (same member id, epoch 0)
            c.epoch, c.told, c.full_next = 0, {}, True
        return r

    def active(self) -> list[Client]:
        return [c for c in self.clients if c.status == "active"]

    def pick(self, i: int, statuses=("active",)) -> Client | None:
        cs = [c for c in self.clients if c.status in statuses]
        return cs[i % len(cs)] if cs else None

    def apply(self, op) -> None:
        kind = op[0]
        if kind == "join":
            _, subs, static = op
            c = Client(self.new_id(), f"inst-{self.seq}" if static else None, sorted(subs), self.assignor)
            self.clients.append(c)
            self.heartbeat(c)
        elif kind == "hb":
            c = self.pick(op[1])
            if c is not None:
                self.heartbeat(c, op[2])
        elif kind == "resub":
            c = self.pick(op[1])
            if c is not None:
                c.subs = sorted(op[2])
                self.heartbeat(c, "owned", subs_changed=True)
        elif kind in ("leave", "static_leave"):
            c = self.pick(op[1])
            if c is None or (kind == "static_leave" and c.instance_id is None):
                return
            r = self.cm.heartbeat(HeartbeatRequest(G, c.member_id, -1 if kind == "leave" else -2,
                                                   instance_id=c.instance_id))
            assert r.error in (E.NONE, E.UNKNOWN_MEMBER_ID), r
            c.status = "static_left" if kind == "static_leave" and r.error is E.NONE else "gone"
            c.told = {}
        elif kind == "static_rejoin":
            old = self.pick(op[1], ("static_left",))
            if old is None:
                return
            old.status = "gone"
            c = Client(self.new_id(), old.instance_id, old.subs, self.assignor)
            self.clients.append(c)
            self.heartbeat(c)
        elif kind == "session_expire":
            c = self.pick(op[1], ("active", "static_left"))
            if c is not None:
                fire(self.timer, session_key(G, c.member_id))
        elif kind == "rebalance_expire":
            c = self.pick(op[1])
            if c is not None:
                fire(self.timer, rebalance_key(G, c.member_id))
        elif kind == "advance":
            self.timer.advance(op[1])

    # --- invariants ---------------------------------------------------------------------------

    @property
    def group(self) -> ConsumerGroup | None:
        return self.cm.groups.get(G)

    def check_invariants(self) -> None:
        group = self.group
        if group is None:
            return
        owners: dict[tuple[uuid.UUID, int], str] = {}
        expected_epochs: dict[tuple[uuid.UUID, int], int] = {}
        for mid, m in group.members.items():
            assert m.member_id == mid
            assigned, pending = pairs(m.assigned), pairs(m.pending_revocation)
            assert not assigned & pending, (mid, assigned & pending)
            if m.state is not MemberState.UNREVOKED_PARTITIONS:
                assert not pending, (mid, m.state, pending)
            for tp in assigned | pending:
                assert tp not in owners, f"{tp} owned by both {owners[tp]} and {mid}"
                owners[tp] = mid
                expected_epochs[tp] = m.member_epoch
        assert group.partition_epochs == expected_epochs
        assert group.static_members == {m.instance_id: mid for mid, m in group.members.items()
                                         if m.instance_id is not None}
        # Client side: live members were never told to own a partition another live member owns,
        # and what each was told is still accounted to it by the coordinator.
        told: dict[tuple[uuid.UUID, int], str] = {}
        for c in self.active():
            m = group.members.get(c.member_id)
            if m is None:
                continue  # fenced without knowing yet (a zombie, as in Kafka)
            mine = pairs(c.told)
            assert mine <= pairs(m.assigned) | pairs(m.pending_revocation), (c.member_id, mine, m)
            for tp in mine:
                assert tp not in told, f"{tp} told to both {told[tp]} and {c.member_id}"
                told[tp] = c.member_id

    def settle(self) -> None:
        """Static members that left come back; then everyone heartbeats until nothing moves."""
        for c in [c for c in self.clients if c.status == "static_left"]:
            c.status = "gone"
            n = Client(self.new_id(), c.instance_id, c.subs, self.assignor)
            self.clients.append(n)
            self.heartbeat(n)
            self.check_invariants()
        for _ in range(12):
            self.timer.advance(self.interval_ms)
            for c in self.active():
                self.heartbeat(c)
                self.check_invariants()

    def check_converged(self) -> None:
        group = self.group
        if group is None:
            return
        assert {c.member_id for c in self.active()} == set(group.members)
        if not group.members:
            assert group.state == "Empty"
            return
        assert group.assignment_epoch == group.group_epoch
        union: set[tuple[uuid.UUID, int]] = set()
        for c in self.active():
            m = group.members[c.member_id]
            assert m.state is MemberState.STABLE and m.member_epoch == group.assignment_epoch, m
            assert not m.pending_revocation
            assert m.assigned == group.target.get(m.member_id, {})
            assert c.epoch == m.member_epoch and c.told == m.assigned
            subscribed_ids = {self.topics.tid(n) for n in c.subs if n in self.topics.topics}
            assert {t for t, _ in pairs(m.assigned)} <= subscribed_ids
            union |= pairs(m.assigned)
        subscribed = {n for c in self.active() for n in c.subs if n in self.topics.topics}
        assert union == {(self.topics.tid(n), p) for n in subscribed for p in range(self.topics.topics[n].partitions)}
        assert group.state == "Stable"


scenario = st.tuples(
    st.fixed_dictionaries({"a": st.integers(1, 9), "b": st.integers(0, 9), "c": st.integers(0, 4)}),
    st.sampled_from([0, 0, 0, 1000]),
    st.sampled_from([None, "uniform", "range"]),
    st.builds(lambda first, rest: first + rest, st.lists(join_op, min_size=1, max_size=4),
              st.lists(op_strategy, max_size=50)),
)


def run_scenario(counts, interval_ms, assignor, ops) -> Sim:
    sim = Sim(counts, interval_ms, assignor)
    for op in ops:
        sim.apply(op)
        sim.check_invariants()
    return sim


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario)
def test_random_membership_never_double_assigns_and_converges(args):
    sim = run_scenario(*args)
    sim.settle()
    sim.check_converged()


def test_two_members_split_and_converge_with_assignment_interval():
    sim = Sim({"a": 6}, 1000, None)
    for op in [("join", {"a"}, False), ("join", {"a"}, False), ("hb", 0, "owned"), ("hb", 1, "owned")]:
        sim.apply(op)
        sim.check_invariants()
    # The second join came within the interval: no new target yet.
    assert sim.group.assignment_epoch < sim.group.group_epoch
    assert sim.group.state == "Assigning"
    sim.settle()
    sim.check_converged()
    assert sorted(len(pairs(c.told)) for c in sim.active()) == [3, 3]


# ==========================================================================================
# 3. Reload equivalence
# ==========================================================================================


def assert_groups_equal(live: dict[str, ConsumerGroup], loaded: dict[str, ConsumerGroup]) -> None:
    assert set(live) == set(loaded)
    for gid, a in live.items():
        b = loaded[gid]
        assert (a.group_epoch, a.metadata_hash, a.assignment_epoch, a.assignment_timestamp) == \
               (b.group_epoch, b.metadata_hash, b.assignment_epoch, b.assignment_timestamp)
        assert a.members == b.members  # every field of every member (dataclass equality)
        assert a.target == b.target
        assert a.partition_epochs == b.partition_epochs
        assert a.static_members == b.static_members
        assert a.state == b.state


def reload(sim: Sim) -> GroupMetadataManager:
    timer = FakeTimer()
    fresh = GroupMetadataManager(GroupConfig(initial_rebalance_delay_ms=0), timer, FakeWriter(), timer.time_ms,
                                 consumer_config=ConsumerGroupConfig(), topics=sim.topics)
    for offset, _gid, key, value in sim.writer.log:
        assert isinstance(key, bytes) and (value is None or isinstance(value, bytes))
        fresh.replay(offset, -1, key, value)
    fresh.on_loaded()
    return fresh


@FAST
@given(scenario)
def test_replaying_the_log_rebuilds_the_same_groups(args):
    sim = run_scenario(*args)
    assert_groups_equal(sim.cm.groups, reload(sim).consumer.groups)
    sim.settle()
    fresh = reload(sim)
    assert_groups_equal(sim.cm.groups, fresh.consumer.groups)
    # Every loaded member has a session timer again.
    for mid in sim.cm.groups.get(G, ConsumerGroup(G)).members:
        assert session_key(G, mid) in fresh.timer.tasks


# ==========================================================================================
# 4. Record codecs
# ==========================================================================================

names = st.text(max_size=30)
opt_names = st.none() | st.text(min_size=1, max_size=20)
i32 = st.integers(-(2**31), 2**31 - 1)
topic_partitions = st.lists(
    st.fixed_dictionaries({"topic_id": st.uuids(), "partitions": st.lists(i32, max_size=6)}), max_size=4)


@st.composite
def record_values(draw):
    t = draw(st.sampled_from(sorted(crec.RECORD_TYPES)))
    if t == crec.GROUP_METADATA:
        fields = {"epoch": draw(i32), "metadata_hash": draw(st.integers(-(2**63), 2**63 - 1))}
    elif t == crec.MEMBER_METADATA:
        fields = {"instance_id": draw(opt_names), "rack_id": draw(opt_names), "client_id": draw(names),
                  "client_host": draw(names), "subscribed_topic_names": draw(st.lists(names, max_size=4)),
                  "subscribed_topic_regex": draw(opt_names), "rebalance_timeout_ms": draw(i32),
                  "server_assignor": draw(opt_names), "classic_member_metadata": None}
    elif t == crec.TARGET_ASSIGNMENT_METADATA:
        fields = {"assignment_epoch": draw(i32), "assignment_timestamp": draw(st.integers(-(2**63), 2**63 - 1))}
    elif t == crec.TARGET_ASSIGNMENT_MEMBER:
        fields = {"topic_partitions": draw(topic_partitions)}
    else:
        fields = {"member_epoch": draw(i32), "previous_member_epoch": draw(i32), "state": draw(st.integers(-128, 127)),
                  "assigned_partitions": draw(topic_partitions),
                  "partitions_pending_revocation": draw(topic_partitions)}
    return t, fields


def plain(v):
    """A decoded value as plain data (lists of TopicPartitions as dicts)."""
    if isinstance(v, list):
        return [plain(x) for x in v]
    if hasattr(v, "topic_id") and hasattr(v, "partitions"):
        return {"topic_id": v.topic_id, "partitions": list(v.partitions)}
    return v


@FAST
@given(record_values(), names, names)
def test_record_round_trip(tv, group_id, member_id):
    t, fields = tv
    with_member = t != crec.GROUP_METADATA and t != crec.TARGET_ASSIGNMENT_METADATA
    k = crec.key(t, group_id, member_id if with_member else None)
    assert struct.unpack(">h", k[:2])[0] == t
    dk = crec.decode_key(t, k[2:])
    assert (dk.record_type, dk.group_id, dk.member_id) == (t, group_id, member_id if with_member else None)
    v = crec.value(t, **fields)
    assert v[:2] == b"\x00\x00"
    dv = crec.decode_value(t, v)
    for name, expected in fields.items():
        assert plain(getattr(dv, name)) == expected, name
    # The classic coordinator leaves these keys alone.
    from coordinator.group import records as rec
    assert rec.decode_key(k) is None


@pytest.mark.parametrize("t", sorted(crec.MEMBER_KEYED))
def test_member_keyed_record_with_null_member_id_is_malformed(t):
    """The codec reads a -1 string length as None; a member-keyed key must not decode to no member."""
    body = struct.pack(">h", 1) + b"g" + struct.pack(">h", -1)
    with pytest.raises(RecordFormatError, match="null member id"):
        crec.decode_key(t, body)
    assert crec.decode_key(crec.GROUP_METADATA, body[:3]).member_id is None


def test_assignment_helpers_round_trip():
    a, b = uuid.uuid4(), uuid.uuid4()
    assignment = {a: frozenset({3, 1}), b: frozenset({0})}
    tps = crec.topic_partitions({**assignment, uuid.uuid4(): frozenset()})
    assert [tp["partitions"] for tp in tps if tp["topic_id"] == a] == [[1, 3]]
    assert len(tps) == 2  # empty topics are left out
    v = crec.decode_value(crec.TARGET_ASSIGNMENT_MEMBER, crec.value(crec.TARGET_ASSIGNMENT_MEMBER, topic_partitions=tps))
    assert crec.from_topic_partitions(v.topic_partitions) == assignment


# ==========================================================================================
# 5. Heartbeat answers
# ==========================================================================================


def test_first_member_of_a_new_group_gets_epoch_2():
    """As Apache Kafka 4.3.1 answers (tests/differential/test_consumer_groups.py): a new group's first
    subscribed member moves the group epoch twice, once for the new group and once for the
    subscription; a member with an empty subscription gets 1."""
    _, cm, _, _, _ = make({"a": 4})
    r = join(cm, "A", ["a"])
    assert (r.error, r.member_epoch, cm.groups[G].group_epoch) == (E.NONE, 2, 2)
    r = cm.heartbeat(HeartbeatRequest("other", "B", 0, rebalance_timeout_ms=REBALANCE_MS, subscribed_topic_names=[],
                                      owned={}))
    assert (r.error, r.member_epoch) == (E.NONE, 1)


def test_next_member_bumps_the_group_epoch_by_one():
    _, cm, _, _, _ = make({"a": 4})
    e1 = join(cm, "A", ["a"]).member_epoch
    assert join(cm, "B", ["a"]).member_epoch == e1 + 1 == cm.groups[G].group_epoch
    assert cm.groups[G].assignment_epoch == e1 + 1


def test_assignment_sent_only_on_full_requests_or_changes():
    _, cm, _, _, topics = make({"a": 4})
    r = join(cm, "A", ["a"])
    a = topics.tid("a")
    e1 = r.member_epoch
    assert r.error is E.NONE and e1 >= 1 and r.assignment == {a: frozenset(range(4))}
    assert r.heartbeat_interval_ms == HB_MS
    owned = dict(r.assignment)
    # Nothing changed: no assignment.
    assert hb(cm, "A", e1, owned).assignment is None
    assert hb(cm, "A", e1, None).assignment is None
    # Full: rebalance timeout + names + owned.
    full = hb(cm, "A", e1, owned, rebalance_timeout_ms=REBALANCE_MS, subscribed_topic_names=["a"])
    assert full.assignment == owned and full.member_epoch == e1
    # Any of the three missing: not full.
    assert hb(cm, "A", e1, owned, subscribed_topic_names=["a"]).assignment is None
    assert hb(cm, "A", e1, None, rebalance_timeout_ms=REBALANCE_MS, subscribed_topic_names=["a"]).assignment is None
    assert hb(cm, "A", e1, owned, rebalance_timeout_ms=REBALANCE_MS).assignment is None
    # A known member sending epoch 0 again is sent its assignment.
    assert join(cm, "A", ["a"]).assignment == owned


def test_revocation_keeps_the_epoch_until_acknowledged():
    _, cm, _, _, topics = make({"a": 4})
    a = topics.tid("a")
    ra = join(cm, "A", ["a"])
    e1 = ra.member_epoch
    owned = dict(ra.assignment)
    rb = join(cm, "B", ["a"])
    e2 = e1 + 1
    assert (rb.member_epoch, rb.assignment) == (e2, {})  # A still owns everything
    group = cm.groups[G]
    assert group.members["B"].state is MemberState.UNRELEASED_PARTITIONS
    assert group.state == "Reconciling"
    # A is asked to give up two partitions: same epoch, smaller assignment.
    r = hb(cm, "A", e1, owned)
    assert r.error is E.NONE and r.member_epoch == e1
    kept = r.assignment
    assert kept is not None and len(pairs(kept)) == 2 and pairs(kept) < pairs(owned)
    revoked = pairs(owned) - pairs(kept)
    assert pairs(group.members["A"].pending_revocation) == revoked
    assert group.members["A"].state is MemberState.UNREVOKED_PARTITIONS
    # Still owning them (or not saying): nothing moves, no assignment re-sent.
    for still in (owned, None):
        r = hb(cm, "A", e1, still)
        assert (r.error, r.member_epoch, r.assignment) == (E.NONE, e1, None)
    assert hb(cm, "B", e2, {}).assignment is None  # B cannot get them yet
    # Acknowledged: A moves to the group epoch (no new partitions: no assignment in the answer).
    r = hb(cm, "A", e1, kept)
    assert (r.error, r.member_epoch, r.assignment) == (E.NONE, e2, None)
    assert group.members["A"].state is MemberState.STABLE
    rb = hb(cm, "B", e2, {})
    assert rb.assignment is not None and pairs(rb.assignment) == revoked
    assert set(group.partition_epochs) == {(a, p) for p in range(4)}
    assert set(group.partition_epochs.values()) == {e2}
    assert group.state == "Stable"


def test_member_one_epoch_behind_with_a_subset_is_accepted():
    _, cm, _, _, _ = make({"a": 4})
    ra = join(cm, "A", ["a"])
    e1, owned = ra.member_epoch, dict(ra.assignment)
    join(cm, "B", ["a"])
    kept = hb(cm, "A", e1, owned).assignment
    assert hb(cm, "A", e1, kept).member_epoch == e1 + 1
    member = cm.groups[G].members["A"]
    assert (member.member_epoch, member.previous_member_epoch) == (e1 + 1, e1)
    # The answer that moved A on was lost: A comes back with its previous epoch.
    r = hb(cm, "A", e1, kept)
    assert (r.error, r.member_epoch) == (E.NONE, e1 + 1)
    r = hb(cm, "A", e1, {})
    assert (r.error, r.member_epoch) == (E.NONE, e1 + 1)
    # Not a subset, unknown owned, ahead: fenced.
    assert hb(cm, "A", e1, owned).error is E.FENCED_MEMBER_EPOCH
    assert hb(cm, "A", e1, None).error is E.FENCED_MEMBER_EPOCH
    assert hb(cm, "A", e1 + 2, kept).error is E.FENCED_MEMBER_EPOCH
    # Two epochs behind: fenced even with a subset.
    join(cm, "C", ["a"])
    r = hb(cm, "A", e1 + 1, kept)
    assert r.error is E.NONE
    if r.member_epoch == e1 + 2:
        assert hb(cm, "A", e1, {}).error is E.FENCED_MEMBER_EPOCH
    else:  # A must revoke first: still at e1 + 1
        assert cm.groups[G].members["A"].state is MemberState.UNREVOKED_PARTITIONS
        assert hb(cm, "A", e1 - 1, {}).error is E.FENCED_MEMBER_EPOCH
    assert hb(cm, "nobody", 1, {}).error is E.UNKNOWN_MEMBER_ID


# ==========================================================================================
# 6. Session and rebalance timeouts
# ==========================================================================================


def test_session_timeout_fences_and_frees_partitions():
    _, cm, timer, _, topics = make({"a": 4})
    a = topics.tid("a")
    ra = join(cm, "A", ["a"])
    e1, owned = ra.member_epoch, {"A": dict(ra.assignment)}
    e2 = join(cm, "B", ["a"]).member_epoch
    owned["A"] = dict(hb(cm, "A", e1, owned["A"]).assignment)
    assert hb(cm, "A", e1, owned["A"]).member_epoch == e2
    owned["B"] = dict(hb(cm, "B", e2, {}).assignment)
    group = cm.groups[G]
    assert group.state == "Stable" and group.group_epoch == e2
    b_parts = pairs(owned["B"])
    # A keeps heartbeating; B goes silent past its session timeout.
    steps = (SESSION_MS - 1) // HB_MS
    for _ in range(steps):
        timer.advance(HB_MS)
        assert hb(cm, "A", e2, owned["A"]).error is E.NONE
    timer.advance(SESSION_MS - steps * HB_MS - 1)
    assert "B" in group.members  # not a millisecond early
    timer.advance(1)
    assert "B" not in group.members and "B" not in group.target
    assert group.group_epoch == e2 + 1
    assert not b_parts & set(group.partition_epochs)
    assert session_key(G, "B") not in timer.tasks
    r = hb(cm, "A", e2, owned["A"])
    assert r.member_epoch == e2 + 1 and pairs(r.assignment) == {(a, p) for p in range(4)}
    assert hb(cm, "B", e2, owned["B"]).error is E.UNKNOWN_MEMBER_ID


@pytest.mark.parametrize("revokes", [False, True])
def test_rebalance_timeout_fences_only_a_member_that_does_not_revoke(revokes):
    _, cm, timer, _, _ = make({"a": 4})
    ra = join(cm, "A", ["a"])
    e1, owned = ra.member_epoch, dict(ra.assignment)
    e2 = join(cm, "B", ["a"]).member_epoch
    kept = hb(cm, "A", e1, owned).assignment
    assert cm.groups[G].members["A"].state is MemberState.UNREVOKED_PARTITIONS
    assert rebalance_key(G, "A") in timer.tasks
    timer.advance(REBALANCE_MS // 2)
    if revokes:
        assert hb(cm, "A", e1, kept).member_epoch == e2
        assert rebalance_key(G, "A") not in timer.tasks
    else:
        assert hb(cm, "A", e1, owned).member_epoch == e1  # alive, but still owns what it must give up
    assert hb(cm, "B", e2, {}).error is E.NONE
    epoch = cm.groups[G].group_epoch
    timer.advance(REBALANCE_MS // 2 + 1)
    group = cm.groups[G]
    if revokes:
        assert "A" in group.members and group.group_epoch == epoch
        assert hb(cm, "A", e2, kept).error is E.NONE
    else:
        assert "A" not in group.members and group.group_epoch == epoch + 1
        assert all(mid == "B" for mid in group.members)
        assert hb(cm, "A", e1, owned).error is E.UNKNOWN_MEMBER_ID
        r = hb(cm, "B", e2, {})
        assert r.member_epoch == epoch + 1 and len(pairs(r.assignment)) == 4


# ==========================================================================================
# Reconciliation corner cases against Kafka's CurrentAssignmentBuilder
# ==========================================================================================

OWN_PENDING_BUG = ("reconcile() treats a partition the member itself has pending revocation as unreleased (its "
                   "partition_epochs entry is the member's own): Kafka's computeNextAssignment skips those "
                   "(\"Don't consider a partition unreleased if it is owned by the current member because it is "
                   "pending revocation\"), so a member whose revoked partitions come back to it in a new target "
                   "gets them on the acknowledging heartbeat, STABLE; here it goes UNRELEASED_PARTITIONS without "
                   "them and needs one more heartbeat")


def test_revoked_partitions_coming_back_to_the_same_member_are_not_unreleased():
    _, cm, _, _, topics = make({"a": 4})
    ra = join(cm, "A", ["a"])
    e1, owned = ra.member_epoch, dict(ra.assignment)
    e2 = join(cm, "B", ["a"]).member_epoch
    kept = hb(cm, "A", e1, owned).assignment
    assert cm.groups[G].members["A"].state is MemberState.UNREVOKED_PARTITIONS
    assert cm.heartbeat(HeartbeatRequest(G, "B", -1)).error is E.NONE  # B leaves: the target gives A everything
    r = hb(cm, "A", e1, kept)  # A acknowledges the revocation
    member = cm.groups[G].members["A"]
    assert r.member_epoch == e2 + 1
    assert (member.state, pairs(member.assigned)) == (MemberState.STABLE, pairs(owned))
    assert r.assignment is not None and pairs(r.assignment) == pairs(owned)


def test_revoked_partitions_coming_back_to_the_same_member_converge():
    """Whatever the extra step, the member ends up with everything and stable."""
    _, cm, _, _, _ = make({"a": 4})
    ra = join(cm, "A", ["a"])
    e1, owned = ra.member_epoch, dict(ra.assignment)
    join(cm, "B", ["a"])
    kept = hb(cm, "A", e1, owned).assignment
    cm.heartbeat(HeartbeatRequest(G, "B", -1))
    r = hb(cm, "A", e1, kept)
    told = r.assignment if r.assignment is not None else kept
    r = hb(cm, "A", r.member_epoch, told)
    group = cm.groups[G]
    assert pairs(group.members["A"].assigned) == pairs(owned) and group.state == "Stable"
    assert pairs(told) == pairs(owned)


UNSUBSCRIBE_BUG = ("a member that drops a topic from its subscription keeps that topic's partitions until the "
                   "next target assignment (delayed by group.consumer.assignment.interval.ms): Kafka 4.x's "
                   "CurrentAssignmentBuilder (hasSubscriptionChanged -> updateCurrentAssignment, and "
                   "computeNextAssignment treating unsubscribed topics' targets as empty) asks for their "
                   "revocation on that very heartbeat")


def test_unsubscribed_topic_is_revoked_at_once_even_before_the_next_assignment():
    _, cm, timer, _, topics = make({"a": 2, "b": 2}, interval_ms=60_000)
    ra = join(cm, "A", ["a", "b"])
    e1, owned = ra.member_epoch, dict(ra.assignment)
    assert set(owned) == {topics.tid("a"), topics.tid("b")}
    timer.advance(1000)
    r = hb(cm, "A", e1, owned, subscribed_topic_names=["a"])
    assert r.error is E.NONE
    member = cm.groups[G].members["A"]
    assert set(member.assigned) == {topics.tid("a")}
    assert set(member.pending_revocation) == {topics.tid("b")}
    assert r.assignment is not None and set(r.assignment) == {topics.tid("a")}


def test_offset_expiry_keeps_subscribed_topics_and_deletes_an_emptied_group():
    """Kafka's ConsumerGroup.offsetExpirationCondition: an unsubscribed topic's offset expires from its
    commit time; once the group is Empty and has no offsets left, the group goes too."""
    from coordinator.group.manager import CommitPartition

    mgr, cm, timer, _, _ = make({"a": 2, "b": 1})
    r = join(cm, "A", ["a"])
    commits = [("a", [CommitPartition(0, 5, -1, "")]), ("b", [CommitPartition(0, 7, -1, "")])]
    assert set(mgr.commit_offsets(G, r.member_epoch, "A", None, -1, commits, 9).values()) == {E.NONE}
    timer.now += mgr.config.offsets_retention_ms
    assert mgr.cleanup_expired() == 1  # b's offset; a is subscribed
    assert set(mgr.offsets.group_offsets(G)) == {"a"} and G in cm.groups
    assert cm.heartbeat(HeartbeatRequest(G, "A", -1)).error is E.NONE
    timer.now += mgr.config.offsets_retention_ms
    assert mgr.cleanup_expired() == 1 and G not in cm.groups and not mgr.offsets.group_offsets(G)
