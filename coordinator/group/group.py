"""ClassicGroup and ClassicGroupMember: the membership state of one classic group (sans-IO).

Mirrors Kafka's ``ClassicGroup``/``ClassicGroupMember``. Parked JoinGroup/SyncGroup requests
are plain callbacks (``JoinCallback``/``SyncCallback``) so this module never touches asyncio;
the coordinator turns them into futures. Counters (members awaiting a join response, protocol
votes) are kept incrementally, as Kafka does, because "has everyone joined" is asked on
every request during a rebalance.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from coordinator.group.state import (
    COMPLETING_REBALANCE,
    DEAD,
    EMPTY,
    PREPARING_REBALANCE,
    STABLE,
    GroupState,
    IllegalStateTransition,
)
from protocol.errors import ErrorCode, KafkaError

CONSUMER_PROTOCOL_TYPE = "consumer"
NO_LEADER = ""
EMPTY_ASSIGNMENT = b""

Protocols = list[tuple[str, bytes]]  # (name, metadata) in the member's preference order


@dataclass(slots=True)
class JoinResult:
    """What a JoinGroup answers; the handler maps it onto the versioned response."""

    error: ErrorCode = ErrorCode.NONE
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str | None = NO_LEADER
    skip_assignment: bool = False
    # (member_id, group_instance_id, metadata): filled for the leader only
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)


@dataclass(slots=True)
class SyncResult:
    error: ErrorCode = ErrorCode.NONE
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = EMPTY_ASSIGNMENT


JoinCallback = Callable[[JoinResult], None]
SyncCallback = Callable[[SyncResult], None]


class ClassicGroupMember:
    """One member: its protocols, timeouts, assignment and the requests it has parked."""

    __slots__ = (
        "member_id", "group_instance_id", "client_id", "client_host", "rebalance_timeout_ms",
        "session_timeout_ms", "protocol_type", "supported_protocols", "assignment",
        "awaiting_join", "awaiting_sync", "is_new",
    )

    def __init__(
        self,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        supported_protocols: Protocols,
        assignment: bytes = EMPTY_ASSIGNMENT,
    ) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.supported_protocols: Protocols = list(supported_protocols)
        self.assignment = assignment
        self.awaiting_join: JoinCallback | None = None
        self.awaiting_sync: SyncCallback | None = None
        self.is_new = False

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync is not None

    def protocol_names(self) -> set[str]:
        return {name for name, _ in self.supported_protocols}

    def metadata(self, protocol_name: str | None) -> bytes:
        for name, meta in self.supported_protocols:
            if name == protocol_name:
                return meta
        raise IllegalStateTransition(f"Member {self.member_id} does not support protocol {protocol_name}")

    def matches(self, protocols: Protocols) -> bool:
        """Same protocols, same metadata, same order: a rejoin that changes nothing."""
        return self.supported_protocols == list(protocols)

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among those every member supports."""
        for name, _ in self.supported_protocols:
            if name in candidates:
                return name
        raise IllegalStateTransition(f"Member {self.member_id} does not support any of the candidates {candidates}")

    def has_satisfied_heartbeat(self) -> bool:
        """A parked join/sync counts as a heartbeat, except for a member that has never joined."""
        if self.is_new:
            return False
        return self.is_awaiting_join or self.is_awaiting_sync

    def __repr__(self) -> str:
        return f"ClassicGroupMember({self.member_id!r}, instance={self.group_instance_id!r})"


class ClassicGroup:
    """The membership and generation of one group, with Kafka's state table enforced."""

    def __init__(
        self,
        group_id: str,
        state: GroupState,
        now_ms: int,
        *,
        generation_id: int = 0,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
        leader_id: str | None = None,
        current_state_timestamp: int | None = None,
    ) -> None:
        self.group_id = group_id
        self.state = state
        self.previous_state = DEAD
        self.current_state_timestamp: int | None = now_ms if current_state_timestamp is None else current_state_timestamp
        self.generation_id = generation_id
        self.protocol_type = protocol_type
        self.protocol_name = protocol_name
        self.leader_id = leader_id
        self.members: dict[str, ClassicGroupMember] = {}
        self.static_members: dict[str, str] = {}  # group_instance_id -> member_id
        self.pending_join_members: set[str] = set()
        self.pending_sync_members: set[str] = set()
        self.num_members_awaiting_join = 0
        self.supported_protocols: dict[str, int] = {}  # protocol name -> members supporting it
        self.new_member_added = False
        self.subscribed_topics: set[str] | None = None

    # --- queries -------------------------------------------------------------------------

    def is_in_state(self, state: GroupState) -> bool:
        return self.state is state

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def member(self, member_id: str) -> ClassicGroupMember:
        return self.members[member_id]

    @property
    def num_members(self) -> int:
        return len(self.members)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id is not None and self.leader_id == member_id

    def uses_consumer_protocol(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def is_empty(self) -> bool:
        return self.state is EMPTY

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_members_awaiting_join and not self.pending_join_members

    def not_yet_rejoined_members(self) -> list[ClassicGroupMember]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_join_members

    def has_static_member(self, group_instance_id: str | None) -> bool:
        return group_instance_id is not None and group_instance_id in self.static_members

    def static_member_id(self, group_instance_id: str) -> str | None:
        return self.static_members.get(group_instance_id)

    def has_received_sync_from_all_members(self) -> bool:
        return not self.pending_sync_members

    def can_rebalance(self) -> bool:
        return self.state in PREPARING_REBALANCE.valid_previous_states

    def group_assignment(self) -> dict[str, bytes]:
        return {m.member_id: m.assignment for m in self.members.values()}

    # --- membership ----------------------------------------------------------------------

    @staticmethod
    def generate_member_id(client_id: str, group_instance_id: str | None) -> str:
        prefix = group_instance_id if group_instance_id is not None else client_id
        return f"{prefix}-{uuid.uuid4()}"

    def add(self, member: ClassicGroupMember, join_callback: JoinCallback | None = None) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise IllegalStateTransition(
                    f"Static member with groupInstanceId={member.group_instance_id} cannot be added to group "
                    f"{self.group_id} since it is already a member."
                )
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.protocol_type != member.protocol_type:
            raise IllegalStateTransition("The group and member's protocol type must be the same.")
        if not self.supports_protocols(member.protocol_type, member.protocol_names()):
            raise IllegalStateTransition("None of the member's protocols can be supported.")
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self._count_protocols(member, 1)
        member.awaiting_join = join_callback
        if member.is_awaiting_join:
            self.num_members_awaiting_join += 1
        self.pending_join_members.discard(member.member_id)

    def remove(self, member_id: str) -> None:
        removed = self.members.pop(member_id, None)
        if removed is not None:
            self._count_protocols(removed, -1)
            if removed.is_awaiting_join:
                self.num_members_awaiting_join -= 1
            if removed.group_instance_id is not None:
                self.static_members.pop(removed.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_join_members.discard(member_id)
        self.pending_sync_members.discard(member_id)

    def add_pending_member(self, member_id: str) -> None:
        if member_id in self.members:
            raise IllegalStateTransition(f"Attempt to add pending member {member_id} which is already a member")
        self.pending_join_members.add(member_id)

    def add_pending_sync_member(self, member_id: str) -> None:
        if member_id not in self.members:
            raise IllegalStateTransition(f"Attempt to add pending sync member {member_id} which is not a member")
        self.pending_sync_members.add(member_id)

    def remove_pending_sync_member(self, member_id: str) -> None:
        self.pending_sync_members.discard(member_id)

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick any member that did; False if none did."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.is_awaiting_join:
            return True
        for member in self.members.values():
            if member.is_awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    def replace_static_member(self, group_instance_id: str, old_member_id: str, new_member_id: str) -> ClassicGroupMember:
        """A static member rejoined with an unknown member id: same member, new id; the old
        id's parked requests are fenced."""
        old = self.members.pop(old_member_id, None)
        if old is None:
            raise IllegalStateTransition(f"Cannot replace non-existing member id {old_member_id}")
        self.complete_join(old, JoinResult(error=ErrorCode.FENCED_INSTANCE_ID, member_id=old_member_id,
                                           protocol_type=None, protocol_name=None, leader=NO_LEADER))
        self.complete_sync(old, SyncResult(error=ErrorCode.FENCED_INSTANCE_ID))
        new = ClassicGroupMember(
            new_member_id, old.group_instance_id, old.client_id, old.client_host, old.rebalance_timeout_ms,
            old.session_timeout_ms, old.protocol_type, old.supported_protocols, old.assignment,
        )
        self.members[new_member_id] = new
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self.static_members[group_instance_id] = new_member_id
        return new

    def update_member(
        self,
        member: ClassicGroupMember,
        protocols: Protocols,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        join_callback: JoinCallback | None,
    ) -> None:
        self._count_protocols(member, -1)
        member.supported_protocols = list(protocols)
        self._count_protocols(member, 1)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if join_callback is not None and not member.is_awaiting_join:
            self.num_members_awaiting_join += 1
        elif join_callback is None and member.is_awaiting_join:
            self.num_members_awaiting_join -= 1
        member.awaiting_join = join_callback

    def complete_join(self, member: ClassicGroupMember, result: JoinResult) -> bool:
        callback = member.awaiting_join
        if callback is None:
            return False
        member.awaiting_join = None
        self.num_members_awaiting_join -= 1
        callback(result)
        return True

    def complete_sync(self, member: ClassicGroupMember, result: SyncResult) -> bool:
        callback = member.awaiting_sync
        if callback is None:
            return False
        member.awaiting_sync = None
        callback(result)
        return True

    def complete_all_join(self, error: ErrorCode) -> None:
        for member in list(self.members.values()):
            self.complete_join(member, JoinResult(error=error, member_id=member.member_id))

    def complete_all_sync(self, error: ErrorCode) -> None:
        for member in list(self.members.values()):
            self.complete_sync(member, SyncResult(error=error))

    # --- protocols -----------------------------------------------------------------------

    def _count_protocols(self, member: ClassicGroupMember, delta: int) -> None:
        for name, _ in member.supported_protocols:
            self.supported_protocols[name] = self.supported_protocols.get(name, 0) + delta

    def candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {name for name, count in self.supported_protocols.items() if count == n}

    def supports_protocols(self, protocol_type: str, protocol_names: Iterable[str]) -> bool:
        """Empty group: any non-empty type and protocol list. Otherwise the type must match and
        at least one protocol must be supported by every current member."""
        names = set(protocol_names)
        if self.state is EMPTY:
            return bool(protocol_type) and bool(names)
        n = len(self.members)
        return self.protocol_type == protocol_type and any(self.supported_protocols.get(p, 0) == n for p in names)

    def select_protocol(self) -> str:
        """Each member votes for its preferred candidate; the most votes wins (first on ties)."""
        if not self.members:
            raise IllegalStateTransition("Cannot select protocol for empty group")
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        best, best_votes = None, -1
        for name, count in votes.items():
            if count > best_votes:
                best, best_votes = name, count
        return best  # type: ignore[return-value]

    # --- validation ----------------------------------------------------------------------

    def validate_member(self, member_id: str, group_instance_id: str | None) -> None:
        """UNKNOWN_MEMBER_ID for strangers; FENCED_INSTANCE_ID when the instance id now belongs
        to another member id (a zombie of a restarted static member)."""
        if group_instance_id is not None:
            existing = self.static_members.get(group_instance_id)
            if existing is None:
                raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID)
            if existing != member_id:
                raise KafkaError(ErrorCode.FENCED_INSTANCE_ID)
        if member_id not in self.members:
            raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID)

    def validate_offset_commit(
        self, member_id: str, group_instance_id: str | None, generation_id: int, is_transactional: bool
    ) -> None:
        if self.state is DEAD:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if generation_id < 0 and self.state is EMPTY:
            return  # admin client or a consumer without group management: a "simple" commit
        if generation_id >= 0 or member_id or group_instance_id is not None:
            self.validate_member(member_id, group_instance_id)
            if generation_id != self.generation_id:
                raise KafkaError(ErrorCode.ILLEGAL_GENERATION)
        elif not is_transactional and self.state is not EMPTY:
            raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID)
        if not is_transactional and self.state is COMPLETING_REBALANCE:
            raise KafkaError(ErrorCode.REBALANCE_IN_PROGRESS)

    def validate_delete_group(self) -> None:
        if self.state is DEAD:
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {self.group_id} is in dead state.")
        if self.state in (STABLE, PREPARING_REBALANCE, COMPLETING_REBALANCE):
            raise KafkaError(ErrorCode.NON_EMPTY_GROUP)

    def validate_offset_delete(self) -> None:
        if self.state is DEAD:
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {self.group_id} is in dead state.")
        if self.state in (STABLE, PREPARING_REBALANCE, COMPLETING_REBALANCE) and not self.uses_consumer_protocol():
            raise KafkaError(ErrorCode.NON_EMPTY_GROUP)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        """Unknown subscriptions count as subscribed only for consumer-protocol groups."""
        if self.subscribed_topics is None:
            return self.uses_consumer_protocol()
        return topic in self.subscribed_topics

    # --- transitions ---------------------------------------------------------------------

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        if self.state not in target.valid_previous_states:
            raise IllegalStateTransition(
                f"Group {self.group_id} should be in one of {sorted(str(s) for s in target.valid_previous_states)} "
                f"states before moving to {target} state. Instead it is in {self.state} state."
            )
        self.previous_state = self.state
        self.state = target
        self.current_state_timestamp = now_ms

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(EMPTY, now_ms)
        self.pending_sync_members.clear()

    def current_members(self) -> list[tuple[str, str | None, bytes]]:
        """The members as the leader sees them in its JoinGroup response."""
        if self.state in (DEAD, PREPARING_REBALANCE):
            raise IllegalStateTransition(f"Cannot obtain member metadata for group {self.group_id} in state {self.state}")
        return [(m.member_id, m.group_instance_id, m.metadata(self.protocol_name)) for m in self.members.values()]

    def compute_subscribed_topics(self) -> set[str] | None:
        """Topics of the consumer protocol subscriptions (v0 prefix of every version), or None
        when unknown (not the consumer protocol, no protocol yet, unparsable metadata)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for member in self.members.values():
                topics.update(parse_subscription_topics(member.metadata(self.protocol_name)))
        except (struct.error, UnicodeDecodeError, IllegalStateTransition, ValueError):
            return None
        return topics

    def __repr__(self) -> str:
        return (f"ClassicGroup({self.group_id!r}, state={self.state}, generation={self.generation_id}, "
                f"members={list(self.members)})")


def parse_subscription_topics(metadata: bytes) -> list[str]:
    """ConsumerProtocolSubscription topics: int16 version, then int32 count of int16 strings."""
    mv = memoryview(metadata)
    (_version, count) = struct.unpack_from(">hi", mv, 0)
    pos = 6
    topics = []
    if count < 0:
        raise ValueError("negative topic count")
    for _ in range(count):
        (n,) = struct.unpack_from(">h", mv, pos)
        pos += 2
        if n < 0 or pos + n > len(mv):
            raise ValueError("bad topic string")
        topics.append(bytes(mv[pos:pos + n]).decode())
        pos += n
    return topics
