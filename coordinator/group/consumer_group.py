"""A KIP-848 consumer group: its members, epochs, target assignment and who owns what.

The group epoch moves when membership, a subscription or the subscribed topics' partitions
change; the target assignment is recomputed for the new epoch (its assignment epoch); each
member then converges on its target one heartbeat at a time (:func:`reconcile`, Kafka's
CurrentAssignmentBuilder): it first gives up the partitions it must lose, and only then gets
partitions that another member still owns. ``partition_epochs`` records which member epoch owns
each partition, which is what keeps two members from ever owning one partition.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from enum import IntEnum

Assignment = dict[uuid.UUID, frozenset[int]]

# Member epochs with a meaning of their own (ConsumerGroupHeartbeatRequest).
JOIN_EPOCH = 0
LEAVE_EPOCH = -1
LEAVE_STATIC_EPOCH = -2


class MemberState(IntEnum):
    """Kafka's MemberState, with its record values."""

    STABLE = 0
    UNRELEASED_PARTITIONS = 1
    UNREVOKED_PARTITIONS = 2
    UNKNOWN = 127


class GroupState:
    """Kafka's ConsumerGroupState names (also what ListGroups and DescribeGroups show)."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(slots=True)
class ConsumerGroupMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)

    def metadata_key(self) -> tuple:
        """Everything the member metadata record stores: a change means a new record."""
        return (self.instance_id, self.rack_id, self.client_id, self.client_host, self.subscribed_topic_names,
                self.subscribed_topic_regex, self.rebalance_timeout_ms, self.server_assignor)

    def assignment_key(self) -> tuple:
        return (self.member_epoch, self.previous_member_epoch, self.state, self.assigned, self.pending_revocation)


class ConsumerGroup:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.metadata_hash = 0
        self.assignment_epoch = -1
        self.assignment_timestamp = 0  # wall-clock ms of the last target assignment
        self.members: dict[str, ConsumerGroupMember] = {}
        self.target: dict[str, Assignment] = {}
        self.partition_epochs: dict[tuple[uuid.UUID, int], int] = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id

    @property
    def state(self) -> str:
        """Kafka's maybeUpdateGroupState."""
        if not self.members:
            return GroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return GroupState.ASSIGNING
        for m in self.members.values():
            if m.state is not MemberState.STABLE or m.member_epoch != self.assignment_epoch:
                return GroupState.RECONCILING
        return GroupState.STABLE

    def is_empty(self) -> bool:
        return not self.members

    def current_partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        return self.partition_epochs.get((topic_id, partition), -1)

    def put_member(self, member: ConsumerGroupMember) -> None:
        """Add or replace a member, keeping partition ownership and the static index in step."""
        old = self.members.get(member.member_id)
        if old is not None:
            self._release(old)
            if old.instance_id is not None and self.static_members.get(old.instance_id) == old.member_id:
                del self.static_members[old.instance_id]
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        for topic_id, partitions in list(member.assigned.items()) + list(member.pending_revocation.items()):
            for p in partitions:
                self.partition_epochs[(topic_id, p)] = member.member_epoch

    def remove_member(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is None:
            return
        self._release(member)
        if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]

    def _release(self, member: ConsumerGroupMember) -> None:
        for topic_id, partitions in list(member.assigned.items()) + list(member.pending_revocation.items()):
            for p in partitions:
                if self.partition_epochs.get((topic_id, p)) == member.member_epoch:
                    del self.partition_epochs[(topic_id, p)]

    def subscribed_topic_names(self, resolve_regex) -> set[str]:
        names: set[str] = set()
        for m in self.members.values():
            names.update(m.subscribed_topic_names)
            if m.subscribed_topic_regex:
                names.update(resolve_regex(m.subscribed_topic_regex))
        return names

    def is_subscribed_to_topic(self, topic: str, resolve_regex) -> bool:
        return topic in self.subscribed_topic_names(resolve_regex)


def _owns_any(owned: Assignment | None, partitions: Assignment) -> bool:
    """Whether the client still owns one of ``partitions``; an unknown (null) owned list counts
    as owning them all (Kafka's ownsRevokedPartitions)."""
    if owned is None:
        return True
    return any(owned.get(t, frozenset()) & ps for t, ps in partitions.items())


def reconcile(member: ConsumerGroupMember, target_epoch: int, target: Assignment, group: ConsumerGroup,
              owned: Assignment | None, subscribed: frozenset | None = None) -> ConsumerGroupMember:
    """The member's next state toward ``target`` (Kafka's CurrentAssignmentBuilder.build).
    ``subscribed``: the topic ids of a subscription that changed in this heartbeat, if it did."""
    if member.state is MemberState.STABLE:
        if member.member_epoch == target_epoch:
            if subscribed is not None:
                return _drop_unsubscribed(member, subscribed, owned)
            return member
        return _next(member, target_epoch, target, group, owned)
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.pending_revocation):
            return member  # still waiting for the client to give them up
        return _next(member, target_epoch, target, group, owned)
    if member.state is MemberState.UNRELEASED_PARTITIONS:
        return _next(member, target_epoch, target, group, owned)
    return member


def _drop_unsubscribed(member: ConsumerGroupMember, subscribed: frozenset, owned: Assignment | None
                       ) -> ConsumerGroupMember:
    """Partitions of topics the member no longer subscribes to are revoked at once, before the next
    target assignment (Kafka's updateCurrentAssignment)."""
    revoking = {t: ps for t, ps in member.assigned.items() if t not in subscribed}
    if not revoking:
        return member
    kept = {t: ps for t, ps in member.assigned.items() if t in subscribed}
    if _owns_any(owned, revoking):
        return replace(member, state=MemberState.UNREVOKED_PARTITIONS, previous_member_epoch=member.member_epoch,
                       assigned=kept, pending_revocation=revoking)
    return replace(member, assigned=kept)


def _next(member: ConsumerGroupMember, target_epoch: int, target: Assignment, group: ConsumerGroup,
          owned: Assignment | None) -> ConsumerGroupMember:
    assigned: dict[uuid.UUID, frozenset[int]] = {}
    revoking: dict[uuid.UUID, frozenset[int]] = {}
    unreleased = False
    for topic_id in set(target) | set(member.assigned):
        want = target.get(topic_id, frozenset())
        have = member.assigned.get(topic_id, frozenset())
        keep = set(have & want)
        if have - want:
            revoking[topic_id] = frozenset(have - want)
        revoking_own = member.pending_revocation.get(topic_id, frozenset())
        for p in want - have:
            # A partition this member is itself revoking is not held by anyone else: it may keep it.
            if group.current_partition_epoch(topic_id, p) == -1 or p in revoking_own:
                keep.add(p)
            else:
                unreleased = True
        if keep:
            assigned[topic_id] = frozenset(keep)
    if revoking and _owns_any(owned, revoking):
        # Keep only what stays; the member must acknowledge the revocation at its current epoch.
        kept = {t: ps for t, ps in ((t, member.assigned.get(t, frozenset()) & target.get(t, frozenset()))
                                    for t in member.assigned) if ps}
        return replace(member, state=MemberState.UNREVOKED_PARTITIONS, previous_member_epoch=member.member_epoch,
                       assigned=kept, pending_revocation=revoking)
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return replace(member, state=state, previous_member_epoch=member.member_epoch, member_epoch=target_epoch,
                   assigned=assigned, pending_revocation={})
