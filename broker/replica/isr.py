"""The leader's view of its followers: Kafka's Replica/ReplicaState and the rules of Partition.scala
that decide the high watermark, who is in sync, and when ``acks=all`` is satisfied.

Sans-IO: times are passed in (the broker's clock), the leader's log end offset and high watermark
are arguments, and an ISR change is returned for the caller to send to the controller
(AlterPartition) rather than applied here. What the rules guarantee (see the property test):
the high watermark only moves forward and never passes the log end offset of any replica in the
ISR (or about to join it), so a record below a high watermark a client saw is on every replica
that can become leader.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from protocol.errors import ErrorCode


@dataclass(slots=True)
class ReplicaState:
    """A follower as the leader sees it (Kafka's ReplicaState)."""

    log_end_offset: int = -1
    log_start_offset: int = -1
    last_fetch_leader_leo: int = 0
    last_fetch_time_ms: int = 0
    # the latest time at which this follower had fetched up to the leader's log end offset
    last_caught_up_time_ms: int = 0
    broker_epoch: int | None = None

    def is_caught_up(self, leader_leo: int, now_ms: int, max_lag_ms: int) -> bool:
        return leader_leo == self.log_end_offset or now_ms - self.last_caught_up_time_ms <= max_lag_ms

    def update_fetch(self, fetch_offset: int, start_offset: int, now_ms: int, leader_leo: int,
                     broker_epoch: int = -1) -> None:
        """Replica.updateFetchStateOrThrow: a fetch at ``fetch_offset`` means the follower holds
        everything below it. Fetching up to the leader's end now, or up to what the end was at the
        previous fetch, counts as caught up at that time (so a follower chasing a busy leader stays in)."""
        if fetch_offset >= leader_leo:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, now_ms)
        elif fetch_offset >= self.last_fetch_leader_leo:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, self.last_fetch_time_ms)
        self.log_start_offset = start_offset
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_leo = max(leader_leo, self.last_fetch_leader_leo)
        self.last_fetch_time_ms = now_ms
        self.broker_epoch = broker_epoch

    def reset(self, now_ms: int, leader_leo: int, new_leader: bool, in_sync: bool) -> None:
        """Replica.resetReplicaState, on becoming (or staying) leader: an ISR member counts as
        caught up now, any other as never, so it does not hold the high watermark back."""
        caught_up = now_ms if in_sync else 0
        if new_leader:
            self.log_start_offset = self.log_end_offset = -1
            self.last_fetch_leader_leo = -1
            self.last_fetch_time_ms = 0
            self.broker_epoch = None
        else:
            self.last_fetch_leader_leo = leader_leo
            self.last_fetch_time_ms = now_ms if in_sync else 0
        self.last_caught_up_time_ms = caught_up


@dataclass(slots=True)
class LeaderReplicas:
    """The followers of one partition this broker leads, and the committed ISR."""

    local_id: int
    replicas: list[int]
    isr: set[int]
    leader_epoch_start_offset: int  # the log end offset when this leader epoch began
    followers: dict[int, ReplicaState] = field(default_factory=dict)

    @classmethod
    def become_leader(cls, local_id: int, replicas: Iterable[int], isr: Iterable[int], leader_leo: int,
                      now_ms: int, previous: LeaderReplicas | None = None) -> LeaderReplicas:
        """Partition.makeLeader: followers kept (re-elected) or new, reset either way."""
        replicas, isr_set = list(replicas), set(isr)
        state = cls(local_id, replicas, isr_set, leader_leo)
        for r in replicas:
            if r == local_id:
                continue
            old = previous.followers.get(r) if previous is not None else None
            follower = old if old is not None else ReplicaState()
            follower.reset(now_ms, leader_leo, new_leader=previous is None, in_sync=r in isr_set)
            state.followers[r] = follower
        return state

    def update_assignment(self, replicas: Iterable[int], isr: Iterable[int]) -> None:
        """A new ISR or replica set from the controller while leadership stays."""
        self.replicas = list(replicas)
        self.isr = set(isr)
        for r in self.replicas:
            if r != self.local_id and r not in self.followers:
                self.followers[r] = ReplicaState()
        for r in list(self.followers):
            if r not in self.replicas:
                del self.followers[r]

    def effective_min_isr(self, min_isr: int) -> int:
        return min(min_isr, len(self.followers) + 1)

    def under_min_isr(self, min_isr: int) -> bool:
        return len(self.isr) < self.effective_min_isr(min_isr)

    def high_watermark(self, leader_leo: int, hw: int, now_ms: int, max_lag_ms: int, min_isr: int,
                       eligible: Callable[[int], bool]) -> int:
        """Partition.maybeIncrementLeaderHW: the smallest end offset among the ISR and the
        followers caught up enough to join it; it never moves back, and not at all under min ISR."""
        if self.under_min_isr(min_isr):
            return hw
        new_hw = leader_leo
        for r, f in self.followers.items():
            if f.log_end_offset < new_hw and (
                    r in self.isr or (f.is_caught_up(leader_leo, now_ms, max_lag_ms) and eligible(r))):
                new_hw = f.log_end_offset
        return max(hw, new_hw)

    def isr_to_expand(self, follower: int, hw: int, eligible: Callable[[int], bool]) -> set[int] | None:
        """Partition.maybeExpandIsr: a follower joins once it holds the high watermark and has
        reached this leader epoch (else committed records above its end could be lost were it
        elected). Returns the ISR to propose, or None."""
        f = self.followers.get(follower)
        if f is None or follower in self.isr or not eligible(follower):
            return None
        if f.log_end_offset >= hw and f.log_end_offset >= self.leader_epoch_start_offset:
            return self.isr | {follower}
        return None

    def out_of_sync(self, leader_leo: int, now_ms: int, max_lag_ms: int) -> set[int]:
        """Partition.getOutOfSyncReplicas: ISR members not caught up within replica.lag.time.max.ms
        (stuck, or slow: not at the leader's end at any time in that window)."""
        out = set()
        for r in self.isr:
            if r == self.local_id:
                continue
            f = self.followers.get(r)
            if f is None or not f.is_caught_up(leader_leo, now_ms, max_lag_ms):
                out.add(r)
        return out

    def acks_all_reached(self, required_offset: int, hw: int, min_isr: int) -> tuple[bool, ErrorCode]:
        """Partition.checkEnoughReplicasReachOffset for a produce with acks=all waiting for
        ``required_offset`` (its last offset + 1)."""
        if hw >= required_offset:
            if self.effective_min_isr(min_isr) <= len(self.isr):
                return True, ErrorCode.NONE
            return True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return False, ErrorCode.NONE

    def append_error(self, acks: int, min_isr: int) -> ErrorCode:
        """Partition.appendRecordsToLeader: acks=all is refused before the append when the ISR is
        below min.insync.replicas (acks 0 and 1 are not)."""
        if acks == -1 and len(self.isr) < self.effective_min_isr(min_isr):
            return ErrorCode.NOT_ENOUGH_REPLICAS
        return ErrorCode.NONE
