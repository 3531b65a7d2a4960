"""A partition's registration in the cluster metadata and the one way it changes: Kafka's
PartitionRegistration, PartitionChangeRecord and PartitionChangeBuilder (metadata/.../controller).

Every change of leader, ISR, ELR or replicas — a broker fenced or back, an AlterPartition from a
leader, an election, a reassignment — is computed here as a ``PartitionChange`` from the current
``PartitionRegistration`` and the targets the caller sets, then merged: the leader epoch grows
when the leader field is set (even to the same leader), the partition epoch with every change.
Pure functions of their inputs, so the controller's rules are tested without a cluster.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

NO_LEADER = -1
NO_LEADER_CHANGE = -2


class LeaderRecoveryState(enum.IntEnum):
    """KIP-704: a leader elected uncleanly is RECOVERING until it tells the controller it is done."""

    RECOVERED = 0
    RECOVERING = 1
    NO_CHANGE = -1

    def change_to(self, other: LeaderRecoveryState) -> LeaderRecoveryState:
        return self if other is LeaderRecoveryState.NO_CHANGE else other


class Election(enum.Enum):
    """PREFERRED: the first replica if it may lead; ONLINE: any ISR (or ELR) member; UNCLEAN: any
    live replica when no clean leader is left (unclean.leader.election.enable)."""

    PREFERRED = "preferred"
    ONLINE = "online"
    UNCLEAN = "unclean"


@dataclass(frozen=True, slots=True)
class PartitionRegistration:
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    removing: tuple[int, ...] = ()
    adding: tuple[int, ...] = ()
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()
    leader_recovery: LeaderRecoveryState = LeaderRecoveryState.RECOVERED

    @classmethod
    def new(cls, replicas: Sequence[int], alive: Callable[[int], bool]) -> PartitionRegistration:
        """A created partition (ReplicationControlManager.createTopic): the live replicas form
        the ISR and the first of them leads, epoch 0. A fenced broker may hold a replica (the
        placer takes one when too few are live) but it joins the ISR only once it has caught up."""
        isr = tuple(r for r in replicas if alive(r))
        return cls(replicas=tuple(replicas), isr=isr, leader=isr[0] if isr else NO_LEADER)

    @property
    def has_leader(self) -> bool:
        return self.leader != NO_LEADER

    @property
    def reassigning(self) -> bool:
        return bool(self.removing or self.adding)

    def merge(self, change: PartitionChange) -> PartitionRegistration:
        leader, epoch = self.leader, self.leader_epoch
        if change.leader != NO_LEADER_CHANGE:
            leader, epoch = change.leader, self.leader_epoch + 1
        return PartitionRegistration(
            replicas=self.replicas if change.replicas is None else tuple(change.replicas),
            isr=self.isr if change.isr is None else tuple(change.isr),
            leader=leader, leader_epoch=epoch, partition_epoch=self.partition_epoch + 1,
            removing=self.removing if change.removing is None else tuple(change.removing),
            adding=self.adding if change.adding is None else tuple(change.adding),
            elr=self.elr if change.elr is None else tuple(change.elr),
            last_known_elr=self.last_known_elr if change.last_known_elr is None else tuple(change.last_known_elr),
            leader_recovery=self.leader_recovery.change_to(change.leader_recovery))

    def to_json(self) -> dict[str, object]:
        return {"replicas": list(self.replicas), "isr": list(self.isr), "leader": self.leader,
                "leader_epoch": self.leader_epoch, "partition_epoch": self.partition_epoch,
                "removing": list(self.removing), "adding": list(self.adding), "elr": list(self.elr),
                "last_known_elr": list(self.last_known_elr), "leader_recovery": int(self.leader_recovery)}

    @classmethod
    def from_json(cls, d: dict) -> PartitionRegistration:
        return cls(replicas=tuple(d["replicas"]), isr=tuple(d["isr"]), leader=d["leader"],
                   leader_epoch=d["leader_epoch"], partition_epoch=d["partition_epoch"],
                   removing=tuple(d.get("removing", ())), adding=tuple(d.get("adding", ())),
                   elr=tuple(d.get("elr", ())), last_known_elr=tuple(d.get("last_known_elr", ())),
                   leader_recovery=LeaderRecoveryState(d.get("leader_recovery", 0)))


@dataclass(slots=True)
class PartitionChange:
    """Kafka's PartitionChangeRecord: None (NO_LEADER_CHANGE for the leader) leaves a field as is."""

    leader: int = NO_LEADER_CHANGE
    isr: list[int] | None = None
    replicas: list[int] | None = None
    removing: list[int] | None = None
    adding: list[int] | None = None
    elr: list[int] | None = None
    last_known_elr: list[int] | None = None
    leader_recovery: LeaderRecoveryState = LeaderRecoveryState.NO_CHANGE

    def is_noop(self) -> bool:
        return (self.leader == NO_LEADER_CHANGE and self.isr is None and self.replicas is None
                and self.removing is None and self.adding is None and self.elr is None
                and self.last_known_elr is None and self.leader_recovery is LeaderRecoveryState.NO_CHANGE)


@dataclass(slots=True)
class PartitionChangeBuilder:
    """Set the targets, then ``build()``: None when nothing changes. ``acceptable_leader`` says
    whether a broker may lead (registered, unfenced, not shutting down)."""

    partition: PartitionRegistration
    acceptable_leader: Callable[[int], bool]
    min_isr: int
    elr_enabled: bool = False
    election: Election = Election.ONLINE
    # Kafka's default: with ELR on, a partition that lost every ISR member remembers its last leader
    use_last_known_leader: bool = True
    target_isr: list[int] = field(default_factory=list)
    target_replicas: list[int] = field(default_factory=list)
    target_removing: list[int] = field(default_factory=list)
    target_adding: list[int] = field(default_factory=list)
    target_elr: list[int] = field(default_factory=list)
    target_last_known_elr: list[int] = field(default_factory=list)
    unclean_shutdown_replicas: list[int] | None = None
    target_leader_recovery: LeaderRecoveryState | None = None

    def __post_init__(self) -> None:
        p = self.partition
        self.target_isr = list(p.isr)
        self.target_replicas = list(p.replicas)
        self.target_removing = list(p.removing)
        self.target_adding = list(p.adding)
        self.target_elr = list(p.elr)
        self.target_last_known_elr = list(p.last_known_elr)
        self.target_leader_recovery = p.leader_recovery

    # --- election ---------------------------------------------------------------------------

    def _valid_new_leader(self, replica: int) -> bool:
        """In the ISR, or in the ELR when the ISR is empty; and acceptable."""
        in_isr = replica in self.target_isr or (not self.target_isr and replica in self.target_elr)
        return in_isr and self.acceptable_leader(replica)

    def _can_elect_last_known_leader(self) -> bool:
        if not self.elr_enabled or not self.use_last_known_leader:
            return False
        if self.target_elr or self.target_isr:
            return False
        # Kafka elects the last known leader even when it is not acceptable (it logs and goes on)
        return len(self.partition.last_known_elr) == 1

    def elect_leader(self) -> tuple[int, bool]:
        """(leader, unclean)."""
        current = self.partition.leader
        if self.election is Election.PREFERRED:
            preferred = self.target_replicas[0]
            if self._valid_new_leader(preferred):
                return preferred, False
            if self._valid_new_leader(current):
                return current, False
            for r in self.target_replicas[1:]:
                if self._valid_new_leader(r):
                    return r, False
            if self._can_elect_last_known_leader():
                return self.partition.last_known_elr[0], True
            return NO_LEADER, False
        if self._valid_new_leader(current):
            return current, False
        for r in self.target_replicas:
            if self._valid_new_leader(r):
                return r, False
        if self._can_elect_last_known_leader():
            return self.partition.last_known_elr[0], True
        if self.election is Election.UNCLEAN:
            for r in self.target_replicas:
                if self.acceptable_leader(r):
                    return r, True
        return NO_LEADER, False

    def _try_election(self, change: PartitionChange) -> None:
        leader, unclean = self.elect_leader()
        if leader == self.partition.leader:
            return
        if leader in self.target_elr:
            self.target_isr = [leader]
            self.target_elr = [r for r in self.target_elr if r != leader]
        change.leader = leader
        if unclean:  # the ISR is forced to the new leader: records may be lost
            change.isr = [leader]
            if self.partition.leader_recovery is not LeaderRecoveryState.RECOVERING:
                change.leader_recovery = LeaderRecoveryState.RECOVERING

    # --- the rest of build() ----------------------------------------------------------------

    def _complete_reassignment(self) -> None:
        """PartitionReassignmentReplicas.maybeCompleteReassignment: done once the ISR holds every
        target replica; the removed ones leave the ISR and the replicas."""
        if not (self.target_removing or self.target_adding):
            return
        isr, replicas = list(self.target_isr), list(self.target_replicas)
        if self.target_removing:
            isr = [r for r in isr if r not in self.target_removing]
            replicas = [r for r in replicas if r not in self.target_removing]
            if not isr or not replicas:
                return
        if not set(replicas) <= set(isr):
            return
        self.target_isr, self.target_replicas = isr, replicas
        self.target_removing, self.target_adding = [], []

    def _populate_target_elr(self) -> None:
        if not self.elr_enabled:
            return
        if len(self.target_isr) >= self.min_isr:
            self.target_elr, self.target_last_known_elr = [], []
            return
        isr = set(self.target_isr)
        unclean = set(self.unclean_shutdown_replicas or ())
        candidates = list(dict.fromkeys([*self.target_elr, *self.partition.isr]))
        self.target_elr = [r for r in candidates if r not in isr and r not in unclean]
        candidates = list(dict.fromkeys([*candidates, *self.target_last_known_elr]))
        self.target_last_known_elr = [r for r in candidates if r not in isr and r not in self.target_elr]

    def _update_change_elr(self, change: PartitionChange) -> None:
        clean = change.isr is None
        if not clean or not self.elr_enabled:
            self.target_elr, self.target_last_known_elr = [], []
        if self.target_elr != list(self.partition.elr):
            change.elr = list(self.target_elr)
        if (self.use_last_known_leader and len(self.partition.last_known_elr) == 1
                and (change.leader == NO_LEADER
                     or (change.leader == NO_LEADER_CHANGE and self.partition.leader == NO_LEADER))):
            self.target_last_known_elr = list(self.partition.last_known_elr)
        if self.use_last_known_leader:
            return
        if self.target_last_known_elr != list(self.partition.last_known_elr):
            change.last_known_elr = list(self.target_last_known_elr)

    def _update_last_known_leader(self, change: PartitionChange) -> None:
        if not self.use_last_known_leader or not self.elr_enabled:
            return
        p = self.partition
        if change.isr is not None and not change.isr and (len(p.last_known_elr) != 1 or p.last_known_elr[0] != p.leader):
            change.last_known_elr = [p.leader]  # the first time the partition becomes leaderless
        elif ((change.leader >= 0 or (p.leader != NO_LEADER and change.leader != NO_LEADER))
              and p.last_known_elr):
            change.last_known_elr = []

    def build(self) -> PartitionChange | None:
        change = PartitionChange()
        p = self.partition
        self._complete_reassignment()
        self._populate_target_elr()
        self._try_election(change)
        # a replica leaving the assignment bumps the leader epoch (its fetches must be fenced)
        if change.leader == NO_LEADER_CHANGE and not set(p.replicas) <= set(self.target_replicas):
            change.leader = p.leader
        self._update_change_elr(change)
        # with ELR on the ISR may become empty; without it the last ISR member stays
        if (change.isr is None and (self.target_isr or self.elr_enabled)
                and self.target_isr != list(p.isr)):
            change.isr = list(self.target_isr)
        # an ISR shrink no longer bumps the leader epoch (not from metadata.version 3.6-IV0)
        self._update_last_known_leader(change)
        if self.target_replicas and self.target_replicas != list(p.replicas):
            change.replicas = list(self.target_replicas)
        if self.target_removing != list(p.removing):
            change.removing = list(self.target_removing)
        if self.target_adding != list(p.adding):
            change.adding = list(self.target_adding)
        if self.target_leader_recovery is not None and self.target_leader_recovery is not p.leader_recovery:
            change.leader_recovery = self.target_leader_recovery
        return None if change.is_noop() else change


def with_change(partition: PartitionRegistration, change: PartitionChange | None) -> PartitionRegistration:
    return partition if change is None else partition.merge(change)

