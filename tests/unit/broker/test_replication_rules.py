"""The replication rules without a cluster: the controller's partition changes (Kafka's
PartitionChangeBuilder), replica placement (StripedReplicaPlacer) and the leader's ISR and high
watermark rules (Partition/Replica), then all of them together in a property test: over random
appends, fetches, clock ticks, broker failures and returns, the high watermark never passes what
an ISR member holds and no record below a high watermark a client saw is ever lost."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.cluster.partition_change import (
    NO_LEADER,
    Election,
    LeaderRecoveryState,
    PartitionChangeBuilder,
    PartitionRegistration,
    with_change,
)
from broker.cluster.placement import UsableBroker, place
from broker.replica.isr import LeaderReplicas, ReplicaState
from protocol.errors import ErrorCode, KafkaError


def _reg(replicas: tuple[int, ...] = (1, 2, 3), isr: tuple[int, ...] | None = None, leader: int = 1,
         **kw: object) -> PartitionRegistration:
    return PartitionRegistration(replicas=replicas, isr=replicas if isr is None else isr, leader=leader, **kw)  # type: ignore[arg-type]


def _fence(reg: PartitionRegistration, broker: int, alive: set[int], *, min_isr: int = 2, elr: bool = True,
           unclean: bool = False) -> PartitionRegistration:
    """ReplicationControlManager.handleBrokerFenced for one partition."""
    b = PartitionChangeBuilder(reg, lambda r: r != broker and r in alive, min_isr, elr_enabled=elr,
                               election=Election.UNCLEAN if unclean else Election.ONLINE)
    b.target_isr = [r for r in reg.isr if r != broker]
    return with_change(reg, b.build())


# --- the controller's partition changes -------------------------------------------------------------

def test_a_new_partition_is_led_by_its_first_live_replica_at_epoch_zero() -> None:
    reg = PartitionRegistration.new([2, 3, 1], alive=lambda r: r != 2)
    assert (reg.leader, reg.isr, reg.leader_epoch, reg.partition_epoch) == (3, (3, 1), 0, 0)


def test_losing_a_follower_shrinks_the_isr_without_a_leader_epoch_bump() -> None:
    reg = _fence(_reg(), 3, alive={1, 2})
    assert (reg.leader, reg.isr, reg.leader_epoch, reg.partition_epoch) == (1, (1, 2), 0, 1)
    assert reg.elr == ()  # the ISR still meets min.insync.replicas


def test_losing_the_leader_elects_the_next_isr_member_and_bumps_the_leader_epoch() -> None:
    reg = _fence(_reg(), 1, alive={2, 3})
    assert (reg.leader, reg.isr, reg.leader_epoch, reg.partition_epoch) == (2, (2, 3), 1, 1)


def test_without_elr_the_last_isr_member_stays_in_the_isr_and_the_partition_goes_offline() -> None:
    reg = _fence(_reg(isr=(1,)), 1, alive={2, 3}, elr=False)
    assert (reg.leader, reg.isr) == (NO_LEADER, (1,))
    back = PartitionChangeBuilder(reg, lambda r: r in {1, 2, 3}, 2).build()
    assert back is not None and with_change(reg, back).leader == 1  # handleBrokerUnfenced


def test_with_elr_the_isr_below_min_isr_moves_its_members_to_the_elr_and_they_may_lead() -> None:
    reg = _fence(_reg(), 3, alive={1, 2})          # ISR 1,2 (= min ISR 2)
    reg = _fence(reg, 2, alive={1})                # ISR 1: below min ISR, 2 is eligible
    assert (reg.isr, reg.elr, reg.leader) == ((1,), (2,), 1)
    reg = _fence(reg, 1, alive=set())              # the last one: leaderless, ISR empty
    assert (reg.isr, reg.leader) == ((), NO_LEADER) and set(reg.elr) == {1, 2}
    assert reg.last_known_elr == (1,)
    reg = with_change(reg, PartitionChangeBuilder(reg, lambda r: r == 2, 2, elr_enabled=True).build())
    assert (reg.leader, reg.isr) == (2, (2,))      # 2 comes back first and leads from the ELR
    assert reg.elr == (1,)


def test_unclean_election_picks_any_live_replica_and_marks_the_leader_recovering() -> None:
    reg = _fence(_reg(isr=(1,)), 1, alive={3}, elr=False, unclean=True)
    assert (reg.leader, reg.isr, reg.leader_recovery) == (3, (3,), LeaderRecoveryState.RECOVERING)
    clean = _fence(_reg(isr=(1,)), 1, alive={3}, elr=False)
    assert clean.leader == NO_LEADER


def test_preferred_election_moves_leadership_back_to_the_first_replica() -> None:
    reg = _fence(_reg(), 1, alive={2, 3})
    isr_back = PartitionChangeBuilder(reg, lambda r: True, 2)
    isr_back.target_isr = [2, 3, 1]
    reg = with_change(reg, isr_back.build())
    assert reg.leader == 2
    preferred = PartitionChangeBuilder(reg, lambda r: True, 2, election=Election.PREFERRED).build()
    assert preferred is not None
    reg = with_change(reg, preferred)
    assert (reg.leader, reg.leader_epoch) == (1, 2)


def test_a_reassignment_completes_once_the_isr_holds_every_target_replica() -> None:
    reg = _reg(replicas=(1, 2, 3, 4), isr=(1, 2, 3), removing=(3,), adding=(4,))
    b = PartitionChangeBuilder(reg, lambda r: True, 2)
    b.target_isr = [1, 2, 3, 4]
    reg = with_change(reg, b.build())
    assert (reg.replicas, reg.isr, reg.removing, reg.adding) == ((1, 2, 4), (1, 2, 4), (), ())
    assert reg.leader_epoch == 1  # a replica left: its fetches must be fenced


def test_nothing_to_change_builds_nothing() -> None:
    assert PartitionChangeBuilder(_reg(), lambda r: True, 2).build() is None


def test_a_registration_survives_its_json_form() -> None:
    reg = _fence(_fence(_reg(), 3, alive={1, 2}), 2, alive={1})
    assert PartitionRegistration.from_json(reg.to_json()) == reg


# --- placement ----------------------------------------------------------------------------------------

def test_placement_spreads_leaders_and_replicas_evenly() -> None:
    brokers = [UsableBroker(i) for i in (1, 2, 3)]
    assignment = place(brokers, 30, 3, random.Random(7))
    assert all(sorted(a) == [1, 2, 3] for a in assignment)
    assert Counter(a[0] for a in assignment) == {1: 10, 2: 10, 3: 10}


def test_placement_puts_replicas_on_different_racks_first() -> None:
    brokers = [UsableBroker(1, "a"), UsableBroker(2, "a"), UsableBroker(3, "b"), UsableBroker(4, "b")]
    for a in place(brokers, 8, 2, random.Random(1)):
        assert {1, 2} & set(a) and {3, 4} & set(a)


def test_placement_leads_with_unfenced_brokers_only() -> None:
    brokers = [UsableBroker(1), UsableBroker(2, fenced=True), UsableBroker(3)]
    assert {a[0] for a in place(brokers, 12, 3, random.Random(3))} == {1, 3}


@pytest.mark.parametrize(("rf", "brokers", "message"), [
    (0, 3, "Invalid replication factor 0: the replication factor must be positive."),
    (4, 3, "The target replication factor of 4 cannot be reached because only 3 broker(s) are registered."),
])
def test_placement_refuses_what_kafka_refuses(rf: int, brokers: int, message: str) -> None:
    with pytest.raises(KafkaError) as e:
        place([UsableBroker(i) for i in range(1, brokers + 1)], 1, rf)
    assert e.value.code == ErrorCode.INVALID_REPLICATION_FACTOR and str(e.value) == message


# --- the leader's rules ------------------------------------------------------------------------------

def _leader(isr: set[int] | None = None, leo: int = 0) -> LeaderReplicas:
    return LeaderReplicas.become_leader(1, [1, 2, 3], isr or {1, 2, 3}, leo, now_ms=0)


def test_the_high_watermark_is_the_smallest_end_offset_in_the_isr() -> None:
    lead = _leader()
    lead.followers[2].update_fetch(10, 0, 5, leader_leo=10)
    lead.followers[3].update_fetch(7, 0, 5, leader_leo=10)
    assert lead.high_watermark(10, 0, 5, 30_000, 2, lambda r: True) == 7
    assert lead.high_watermark(10, 8, 5, 30_000, 2, lambda r: True) == 8  # never moves back


def test_the_high_watermark_waits_for_a_caught_up_follower_about_to_join() -> None:
    lead = _leader(isr={1, 2})
    lead.followers[2].update_fetch(10, 0, 5, leader_leo=10)
    lead.followers[3].update_fetch(4, 0, 5, leader_leo=4)  # caught up at 5, then the leader grew
    assert lead.high_watermark(10, 0, 6, 30_000, 1, lambda r: True) == 4
    assert lead.high_watermark(10, 0, 6, 30_000, 1, lambda r: r != 3) == 10  # fenced: not waited for


def test_the_high_watermark_stands_still_under_min_isr() -> None:
    lead = _leader(isr={1})
    assert lead.high_watermark(10, 3, 0, 30_000, 2, lambda r: True) == 3
    assert lead.append_error(-1, 2) == ErrorCode.NOT_ENOUGH_REPLICAS
    assert lead.append_error(1, 2) == ErrorCode.NONE
    assert lead.acks_all_reached(3, 3, 2) == (True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
    assert lead.acks_all_reached(4, 3, 2) == (False, ErrorCode.NONE)


def test_a_follower_joins_the_isr_at_the_high_watermark_and_in_this_leader_epoch() -> None:
    lead = LeaderReplicas.become_leader(1, [1, 2, 3], {1, 2}, leader_leo=20, now_ms=0)
    lead.followers[3].update_fetch(15, 0, 1, leader_leo=25)
    assert lead.isr_to_expand(3, hw=10, eligible=lambda r: True) is None  # below the epoch start 20
    lead.followers[3].update_fetch(22, 0, 2, leader_leo=25)
    assert lead.isr_to_expand(3, hw=23, eligible=lambda r: True) is None  # below the high watermark
    assert lead.isr_to_expand(3, hw=22, eligible=lambda r: True) == {1, 2, 3}
    assert lead.isr_to_expand(3, hw=22, eligible=lambda r: False) is None


def test_a_stuck_or_slow_follower_falls_out_of_sync_after_the_max_lag() -> None:
    lead = _leader()
    lead.followers[2].update_fetch(10, 0, 1_000, leader_leo=10)   # caught up at 1 s
    lead.followers[3].update_fetch(10, 0, 1_000, leader_leo=10)
    lead.followers[3].update_fetch(10, 0, 20_000, leader_leo=12)   # fetches, never reaches the end
    assert lead.out_of_sync(12, 30_000, 30_000) == set()
    assert lead.out_of_sync(12, 31_001, 30_000) == {2, 3}
    lead.followers[2].update_fetch(12, 0, 31_002, leader_leo=12)
    assert lead.out_of_sync(12, 31_002, 30_000) == {3}


def test_a_follower_chasing_a_busy_leader_stays_caught_up() -> None:
    """Reaching the end the leader had at the previous fetch counts as caught up at that time."""
    f = ReplicaState()
    f.update_fetch(0, 0, 100, leader_leo=5)
    f.update_fetch(5, 0, 200, leader_leo=9)
    assert f.last_caught_up_time_ms == 100
    f.update_fetch(9, 0, 300, leader_leo=14)
    assert f.last_caught_up_time_ms == 200


# --- all of it together --------------------------------------------------------------------------

MAX_LAG_MS = 1_000


@dataclass
class _Cluster:
    """One partition on brokers 1..3: a controller (the registration), a leader (LeaderReplicas and
    its high watermark), followers that fetch, truncate to the leader on a new epoch, and crash."""

    min_isr: int
    elr: bool
    logs: dict[int, list[int]] = field(default_factory=lambda: {1: [], 2: [], 3: []})  # epoch per record
    alive: set[int] = field(default_factory=lambda: {1, 2, 3})
    now: int = 0
    reg: PartitionRegistration = field(default_factory=lambda: PartitionRegistration.new([1, 2, 3], lambda r: True))
    hw: dict[int, int] = field(default_factory=lambda: {1: 0, 2: 0, 3: 0})
    committed: list[int] = field(default_factory=list)  # records below the highest hw a client saw
    lead: LeaderReplicas | None = None

    def __post_init__(self) -> None:
        self._became_leader(previous=None)

    # the controller
    def _apply(self, b: PartitionChangeBuilder) -> None:
        change = b.build()
        if change is None:
            return
        old = self.reg
        self.reg = with_change(old, change)
        if self.reg.leader != old.leader or self.reg.leader_epoch != old.leader_epoch:
            same = self.reg.leader == old.leader
            self._became_leader(previous=self.lead if same else None)
        elif self.lead is not None:
            self.lead.update_assignment(self.reg.replicas, self.reg.isr)
            self._advance_hw()

    def _builder(self, **kw: object) -> PartitionChangeBuilder:
        return PartitionChangeBuilder(self.reg, lambda r: r in self.alive, self.min_isr,
                                      elr_enabled=self.elr, **kw)  # type: ignore[arg-type]

    def _became_leader(self, previous: LeaderReplicas | None) -> None:
        leader = self.reg.leader
        if leader == NO_LEADER:
            self.lead = None
            return
        self.lead = LeaderReplicas.become_leader(leader, self.reg.replicas, self.reg.isr,
                                                 len(self.logs[leader]), self.now, previous)
        self._advance_hw()

    def _advance_hw(self) -> None:
        assert self.lead is not None
        leader = self.reg.leader
        log = self.logs[leader]
        self.hw[leader] = self.lead.high_watermark(len(log), self.hw[leader], self.now, MAX_LAG_MS,
                                                   self.min_isr, lambda r: r in self.alive)
        if self.hw[leader] > len(self.committed):  # a consumer may now read up to it
            self.committed = list(log[:self.hw[leader]])

    # what happens
    def append(self, n: int) -> None:
        if self.lead is None or self.lead.append_error(-1, self.min_isr) != ErrorCode.NONE:
            return
        self.logs[self.reg.leader].extend([self.reg.leader_epoch] * n)
        self._advance_hw()

    def fetch(self, follower: int, max_records: int) -> None:
        leader = self.reg.leader
        if self.lead is None or follower == leader or follower not in self.alive:
            return
        log, mine = self.logs[leader], self.logs[follower]
        common = 0  # OffsetsForLeaderEpoch / diverging epoch: truncate to where the logs agree
        while common < min(len(log), len(mine)) and log[common] == mine[common]:
            common += 1
        del mine[common:]
        self.lead.followers[follower].update_fetch(len(mine), 0, self.now, len(log))
        isr = self.lead.isr_to_expand(follower, self.hw[leader], lambda r: r in self.alive)
        if isr is not None:  # AlterPartition
            b = self._builder()
            b.target_isr = sorted(isr)
            self._apply(b)
        self._advance_hw()
        mine.extend(log[len(mine):len(mine) + max_records])
        self.hw[follower] = min(self.hw[leader], len(mine))

    def tick(self, ms: int) -> None:
        self.now += ms
        if self.lead is None:
            return
        out = self.lead.out_of_sync(len(self.logs[self.reg.leader]), self.now, MAX_LAG_MS)
        if out:  # AlterPartition: shrink
            b = self._builder()
            b.target_isr = [r for r in self.reg.isr if r not in out]
            self._apply(b)

    def crash(self, broker: int) -> None:
        if broker not in self.alive:
            return
        self.alive.discard(broker)
        b = PartitionChangeBuilder(self.reg, lambda r: r != broker and r in self.alive, self.min_isr,
                                   elr_enabled=self.elr)
        b.target_isr = [r for r in self.reg.isr if r != broker]
        self._apply(b)

    def restart(self, broker: int) -> None:
        if broker in self.alive:
            return
        self.alive.add(broker)
        self.hw[broker] = min(self.hw[broker], len(self.logs[broker]))
        if self.reg.leader == NO_LEADER:  # handleBrokerUnfenced: elect where there is no leader
            self._apply(self._builder())

    def check(self) -> None:
        if self.lead is None:
            return
        leader = self.reg.leader
        hw = self.hw[leader]
        for r in self.reg.isr:
            assert hw <= len(self.logs[r]), f"high watermark {hw} above ISR member {r}: {self}"
        assert self.logs[leader][:len(self.committed)] == self.committed, f"committed records lost: {self}"


_ACTIONS = st.one_of(
    st.tuples(st.just("append"), st.integers(1, 3)),
    st.tuples(st.just("fetch"), st.integers(1, 3), st.integers(1, 4)),
    st.tuples(st.just("tick"), st.sampled_from([100, 600, 1_200])),
    st.tuples(st.just("crash"), st.integers(1, 3)),
    st.tuples(st.just("restart"), st.integers(1, 3)),
)


@settings(max_examples=300, deadline=None)
@given(min_isr=st.integers(1, 3), elr=st.booleans(), actions=st.lists(_ACTIONS, max_size=60))
def test_no_record_below_a_seen_high_watermark_is_ever_lost(min_isr: int, elr: bool, actions: list[tuple]) -> None:
    cluster = _Cluster(min_isr, elr)
    for name, *args in actions:
        getattr(cluster, name)(*args)
        cluster.check()
