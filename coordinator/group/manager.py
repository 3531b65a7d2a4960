"""The classic group protocol and offset management, sans-IO (Kafka's GroupMetadataManager and
OffsetMetadataManager for classic groups).

Everything here runs synchronously on the event loop thread. Time, timers and the log writer
are injected, so unit tests drive it with a fake clock and the asyncio shell
(``coordinator.py``) wires real ones. The writer appends a batch to the group's
``__consumer_offsets`` partition and returns its base offset, or raises KafkaError; because
nothing awaits between computing records, writing them and applying them, a request either
changes state *and* the log or neither, which is what Kafka's timeline snapshots buy it.

Responses to JoinGroup and SyncGroup are delivered through callbacks, possibly much later
(when the rebalance completes); every other request answers synchronously.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog

from coordinator.group import records as rec
from coordinator.group.consumer_manager import ConsumerGroupConfig, ConsumerGroupManager, Topics
from coordinator.group.group import (
    EMPTY_ASSIGNMENT,
    ClassicGroup,
    ClassicGroupMember,
    JoinCallback,
    JoinResult,
    Protocols,
    SyncCallback,
    SyncResult,
)
from coordinator.group.offsets import NO_PRODUCER_ID, OffsetAndMetadata, OffsetStore
from coordinator.group.state import COMPLETING_REBALANCE, DEAD, EMPTY, PREPARING_REBALANCE, STABLE, GroupState
from protocol.errors import ErrorCode, KafkaError
from storage.clock import SYSTEM_CLOCK

log = structlog.get_logger(__name__)

Record = tuple[bytes, bytes | None]  # (key, value); a None value is a tombstone
Writer = Callable[[str, list[Record]], int]  # (group_id, records) -> base offset; raises KafkaError

GROUP_TYPE_CLASSIC = "classic"
GROUP_TYPE_CONSUMER = "consumer"
INVALID_OFFSET = -1


class Timer(Protocol):
    """Keyed one-shot timers: scheduling a key again replaces its previous deadline."""

    def schedule(self, key: str, delay_ms: int, fn: Callable[[], None]) -> None: ...

    def cancel(self, key: str) -> None: ...


@dataclass(slots=True)
class GroupConfig:
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    initial_rebalance_delay_ms: int = 3000
    new_member_join_timeout_ms: int = 5 * 60 * 1000  # Kafka's classic new-member join timeout
    max_size: int = 2**31 - 1
    offset_metadata_max_bytes: int = 4096
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000

    @classmethod
    def from_broker(cls, get: Callable[[str], Any]) -> GroupConfig:
        return cls(
            min_session_timeout_ms=int(get("group.min.session.timeout.ms")),
            max_session_timeout_ms=int(get("group.max.session.timeout.ms")),
            initial_rebalance_delay_ms=int(get("group.initial.rebalance.delay.ms")),
            max_size=int(get("group.max.size")),
            offset_metadata_max_bytes=int(get("offset.metadata.max.bytes")),
            offsets_retention_ms=int(get("offsets.retention.minutes")) * 60 * 1000,
        )


@dataclass(slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    client_id: str
    client_host: str
    api_version: int
    reason: str | None = None

    @property
    def requires_known_member_id(self) -> bool:
        """v4+ (KIP-394): a new dynamic member first gets its id with MEMBER_ID_REQUIRED."""
        return self.api_version >= 4

    @property
    def supports_skip_assignment(self) -> bool:
        """v9+ (KIP-814): a rejoining static leader is told to skip the assignment."""
        return self.api_version >= 9


@dataclass(slots=True)
class CommitPartition:
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = None


@dataclass(slots=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(slots=True)
class DescribedGroup:
    group_id: str
    error: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    state: str = ""
    protocol_type: str = ""
    protocol_data: str = ""
    members: list[DescribedMember] = field(default_factory=list)


@dataclass(slots=True)
class FetchedPartition:
    partition: int
    offset: int = INVALID_OFFSET
    leader_epoch: int = -1
    metadata: str = ""
    error: ErrorCode = ErrorCode.NONE


def append_error_to_response_error(code: ErrorCode) -> ErrorCode:
    """How a failed write of group records surfaces to clients (appendGroupMetadataErrorToResponseError)."""
    if code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.REQUEST_TIMED_OUT):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return code


def heartbeat_key(group_id: str, member_id: str) -> str:
    return f"heartbeat-{group_id}-{member_id}"


def join_key(group_id: str) -> str:
    return f"join-{group_id}"


def sync_key(group_id: str) -> str:
    return f"sync-{group_id}"


class GroupMetadataManager:
    """All classic groups and their committed offsets, on every ``__consumer_offsets`` partition
    this node leads (all of them)."""

    def __init__(
        self,
        config: GroupConfig,
        timer: Timer,
        writer: Writer,
        time_ms: Callable[[], int] = SYSTEM_CLOCK.now_ms,
        partition_for: Callable[[str], int] | None = None,
        on_rebalanced: Callable[[str], None] | None = None,
        consumer_config: ConsumerGroupConfig | None = None,
        topics: Topics | None = None,
        group_config: Callable[[str], Mapping[str, str]] | None = None,
    ) -> None:
        self.config = config
        self.timer = timer
        self.writer = writer
        self.time_ms = time_ms
        self.partition_for = partition_for  # group -> __consumer_offsets partition (markers)
        self.on_rebalanced = on_rebalanced  # a group completed a rebalance: a new generation with members
        self.groups: dict[str, ClassicGroup] = {}
        self.offsets = OffsetStore()
        # KIP-848 consumer groups share the offsets, the log and the group id space.
        self.consumer = ConsumerGroupManager(consumer_config or ConsumerGroupConfig(), timer, self._write_and_replay,
                                             topics, self.groups.get, self._classic_tombstones, time_ms,
                                             group_config)

    def _write_and_replay(self, group_id: str, records: list[Record]) -> int:
        """The consumer group manager's writer: classic records among its own (the tombstone of an
        empty classic group it converts) are applied here."""
        base = self._write(group_id, records)
        for key, value in records:
            if rec.decode_key(key) is not None:
                self.replay(-1, NO_PRODUCER_ID, key, value)
        return base

    def _classic_tombstones(self, group_id: str) -> list[Record]:
        return [(rec.group_metadata_key(group_id), None)]

    # ======================================================================================
    # JoinGroup
    # ======================================================================================

    def join_group(self, req: JoinRequest, respond: JoinCallback) -> None:
        if not req.group_id:
            respond(JoinResult(error=ErrorCode.INVALID_GROUP_ID, member_id=req.member_id))
            return
        if not self.config.min_session_timeout_ms <= req.session_timeout_ms <= self.config.max_session_timeout_ms:
            respond(JoinResult(error=ErrorCode.INVALID_SESSION_TIMEOUT, member_id=req.member_id))
            return
        is_unknown = req.member_id == ""
        consumer_group = self.consumer.groups.get(req.group_id)
        if consumer_group is not None:
            if not consumer_group.is_empty():
                # Kafka would take the classic member into the consumer group (online migration).
                respond(JoinResult(error=ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=req.member_id))
                return
            try:
                self._write(req.group_id, self.consumer.delete_group_records(consumer_group))
            except KafkaError as e:
                respond(JoinResult(error=append_error_to_response_error(e.code)))
                return
            self.consumer.forget(req.group_id)
        group = self.groups.get(req.group_id)
        if group is None:
            if not is_unknown:
                # A member id for a group that does not exist: let it reset and rejoin.
                respond(JoinResult(error=ErrorCode.UNKNOWN_MEMBER_ID, member_id=req.member_id))
                return
            group = ClassicGroup(req.group_id, EMPTY, self.time_ms())
            try:
                # Kafka commits a freshly created group to the log right away.
                self._write(group.group_id, [self._empty_group_record(group)])
            except KafkaError as e:
                respond(JoinResult(error=append_error_to_response_error(e.code)))
                return
            self.groups[req.group_id] = group

        if not self._accept_joining_member(group, req.member_id):
            group.remove(req.member_id)
            respond(JoinResult(error=ErrorCode.GROUP_MAX_SIZE_REACHED, member_id=""))
        elif is_unknown:
            self._join_new_member(req, group, respond)
        else:
            self._join_existing_member(req, group, respond)

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        if group.state in (EMPTY, DEAD):
            return True
        if group.state is PREPARING_REBALANCE:
            return (group.has_member(member_id) and group.member(member_id).is_awaiting_join) or \
                group.num_members_awaiting_join < self.config.max_size
        return group.has_member(member_id) or group.num_members < self.config.max_size

    def _join_new_member(self, req: JoinRequest, group: ClassicGroup, respond: JoinCallback) -> None:
        if group.state is DEAD:
            respond(JoinResult(error=ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id=""))
            return
        if not group.supports_protocols(req.protocol_type, [name for name, _ in req.protocols]):
            respond(JoinResult(error=ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=""))
            return
        new_member_id = group.generate_member_id(req.client_id, req.group_instance_id)
        if req.group_instance_id is not None:
            existing = group.static_member_id(req.group_instance_id)
            if existing is not None:
                log.info("static member rejoins with unknown member id; replacing the old member id",
                         group=group.group_id, group_instance_id=req.group_instance_id, old_member_id=existing,
                         new_member_id=new_member_id, state=str(group.state))
                self._update_static_member_then_rebalance_or_complete_join(req, group, existing, new_member_id, respond)
            else:
                self._add_member_then_rebalance_or_complete_join(req, group, new_member_id, respond)
        elif req.requires_known_member_id:
            # Park the id; the member must come back with it (KIP-394).
            group.add_pending_member(new_member_id)
            self.timer.schedule(heartbeat_key(group.group_id, new_member_id), req.session_timeout_ms,
                                lambda: self._expire_heartbeat(group.group_id, new_member_id))
            respond(JoinResult(error=ErrorCode.MEMBER_ID_REQUIRED, member_id=new_member_id))
        else:
            self._add_member_then_rebalance_or_complete_join(req, group, new_member_id, respond)

    def _join_existing_member(self, req: JoinRequest, group: ClassicGroup, respond: JoinCallback) -> None:
        member_id = req.member_id
        if group.state is DEAD:
            respond(JoinResult(error=ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id=member_id))
            return
        if not group.supports_protocols(req.protocol_type, [name for name, _ in req.protocols]):
            respond(JoinResult(error=ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id))
            return
        if group.is_pending_member(member_id):
            if req.group_instance_id is not None:
                # A pending member is always dynamic; Kafka treats this as a bug.
                respond(JoinResult(error=ErrorCode.UNKNOWN_SERVER_ERROR, member_id=member_id))
                return
            self._add_member_then_rebalance_or_complete_join(req, group, member_id, respond)
            return
        try:
            group.validate_member(member_id, req.group_instance_id)
        except KafkaError as e:
            respond(JoinResult(error=e.code, member_id=member_id))
            return
        member = group.member(member_id)
        if group.state is PREPARING_REBALANCE:
            self._update_member_then_rebalance_or_complete_join(req, group, member, respond)
        elif group.state is COMPLETING_REBALANCE:
            if member.matches(req.protocols):
                # Same metadata: the member probably missed the JoinGroup response; resend it.
                respond(self._current_generation(group, member_id, with_members=group.is_leader(member_id)))
            else:
                self._update_member_then_rebalance_or_complete_join(req, group, member, respond)
        elif group.state is STABLE:
            if group.is_leader(member_id) or not member.matches(req.protocols):
                # The leader rejoining forces a rebalance (e.g. topic metadata changed).
                self._update_member_then_rebalance_or_complete_join(req, group, member, respond)
            else:
                respond(self._current_generation(group, member_id, with_members=False))
        else:
            log.warning("rejoining member found the group in an unexpected state", group=group.group_id,
                        member_id=member_id, state=str(group.state))
            respond(JoinResult(error=ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id))

    def _current_generation(self, group: ClassicGroup, member_id: str, *, with_members: bool) -> JoinResult:
        return JoinResult(
            member_id=member_id,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=group.leader_id,
            members=group.current_members() if with_members else [],
        )

    def _add_member_then_rebalance_or_complete_join(
        self, req: JoinRequest, group: ClassicGroup, member_id: str, respond: JoinCallback
    ) -> None:
        member = ClassicGroupMember(
            member_id, req.group_instance_id, req.client_id, req.client_host, req.rebalance_timeout_ms,
            req.session_timeout_ms, req.protocol_type, req.protocols,
        )
        member.is_new = True
        if group.state is PREPARING_REBALANCE and group.previous_state is EMPTY:
            group.new_member_added = True  # lets the initial rebalance wait a little longer
        group.add(member, respond)
        # A new member cannot heartbeat while its JoinGroup is parked; bound how long it may
        # stay in the group without completing a join.
        self._reschedule_heartbeat(group, member, self.config.new_member_join_timeout_ms)
        self._maybe_prepare_rebalance_or_complete_join(
            group, f"Adding new member {member_id} with group instance id {req.group_instance_id}; "
                   f"client reason: {req.reason or 'not provided'}")

    def _update_member_then_rebalance_or_complete_join(
        self, req: JoinRequest, group: ClassicGroup, member: ClassicGroupMember, respond: JoinCallback
    ) -> None:
        group.update_member(member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, respond)
        self._maybe_prepare_rebalance_or_complete_join(
            group, f"Updating metadata for member {member.member_id} during {group.state}; "
                   f"client reason: {req.reason or 'not provided'}")

    def _update_static_member_then_rebalance_or_complete_join(
        self, req: JoinRequest, group: ClassicGroup, old_member_id: str, new_member_id: str, respond: JoinCallback
    ) -> None:
        instance_id = req.group_instance_id
        assert instance_id is not None
        current_leader = group.leader_id
        member = group.replace_static_member(instance_id, old_member_id, new_member_id)
        self.timer.cancel(heartbeat_key(group.group_id, old_member_id))
        self._reschedule_heartbeat(group, member)
        old_protocols = member.supported_protocols
        old_rebalance, old_session = member.rebalance_timeout_ms, member.session_timeout_ms
        group.update_member(member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, respond)

        if group.state is STABLE:
            if group.protocol_name == group.select_protocol():
                # KIP-345: a known static member restarting does not trigger a rebalance; just
                # persist its new member id.
                try:
                    self._write(group.group_id, [self._group_metadata_record(group, group.group_assignment())])
                except KafkaError as e:
                    group.update_member(member, old_protocols, old_rebalance, old_session, None)
                    old = group.replace_static_member(instance_id, new_member_id, old_member_id)
                    self.timer.cancel(heartbeat_key(group.group_id, new_member_id))
                    self._reschedule_heartbeat(group, old)
                    respond(JoinResult(
                        error=append_error_to_response_error(e.code), member_id="",
                        generation_id=group.generation_id, protocol_type=group.protocol_type,
                        protocol_name=group.protocol_name, leader=current_leader,
                    ))
                    return
                log.info("static member rejoined a stable group without a rebalance", group=group.group_id,
                         group_instance_id=instance_id, member_id=new_member_id)
                if req.supports_skip_assignment:
                    is_leader = group.is_leader(new_member_id)
                    group.complete_join(member, JoinResult(
                        member_id=new_member_id, generation_id=group.generation_id,
                        protocol_type=group.protocol_type, protocol_name=group.protocol_name,
                        leader=group.leader_id, skip_assignment=is_leader,
                        members=group.current_members() if is_leader else [],
                    ))
                else:
                    # Answer with the old leader id so a rejoining leader does not reassign.
                    group.complete_join(member, JoinResult(
                        member_id=new_member_id, generation_id=group.generation_id,
                        protocol_type=group.protocol_type, protocol_name=group.protocol_name,
                        leader=current_leader,
                    ))
            else:
                self._maybe_prepare_rebalance_or_complete_join(
                    group, f"Group's selectedProtocol will change because static member {new_member_id} "
                           f"with instance id {instance_id} joined with change of protocol")
        elif group.state is COMPLETING_REBALANCE:
            # The leader may already be assigning to the old member id: rebalance again.
            self._prepare_rebalance(group, f"Updating metadata for static member {new_member_id} "
                                           f"with instance id {instance_id}")
        elif group.state is PREPARING_REBALANCE:
            self._maybe_complete_join_phase(group)
        else:
            log.error("static member rejoined a group in an impossible state", group=group.group_id,
                      state=str(group.state))

    # --- rebalance machinery ---------------------------------------------------------------

    def _maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)
        else:
            self._maybe_complete_join_phase(group)

    def _prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.state is COMPLETING_REBALANCE:
            self._reset_and_propagate_assignment_with_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        self._remove_sync_expiration(group)
        is_initial = group.state is EMPTY
        if is_initial:
            # A new group waits group.initial.rebalance.delay.ms for more members, extended by
            # each new member up to the rebalance timeout.
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            gid = group.group_id
            self.timer.schedule(join_key(gid), delay,
                                lambda: self._try_complete_initial_rebalance_else_schedule(gid, delay, remaining))
        group.transition_to(PREPARING_REBALANCE, self.time_ms())
        log.info("preparing to rebalance group", group=group.group_id, generation=group.generation_id, reason=reason)
        if not is_initial:
            self._maybe_complete_join_else_schedule(group)

    def _maybe_complete_join_else_schedule(self, group: ClassicGroup) -> None:
        if group.has_all_members_joined():
            self._complete_join(group)
        else:
            gid = group.group_id
            self.timer.schedule(join_key(gid), group.rebalance_timeout_ms(), lambda: self._complete_join_by_id(gid))

    def _try_complete_initial_rebalance_else_schedule(self, group_id: str, delay: int, remaining: int) -> None:
        group = self.groups.get(group_id)
        if group is None:
            return
        if group.new_member_added and remaining != 0:
            group.new_member_added = False
            new_delay = min(self.config.initial_rebalance_delay_ms, remaining)
            new_remaining = max(remaining - delay, 0)
            self.timer.schedule(join_key(group_id), new_delay,
                                lambda: self._try_complete_initial_rebalance_else_schedule(group_id, new_delay,
                                                                                          new_remaining))
        else:
            self._complete_join(group)

    def _maybe_complete_join_phase(self, group: ClassicGroup) -> None:
        if group.state is not PREPARING_REBALANCE:
            return
        if group.previous_state is EMPTY:
            return  # the initial rebalance completes on its timer
        if not group.has_all_members_joined():
            return
        self._complete_join(group)

    def _complete_join_by_id(self, group_id: str) -> None:
        group = self.groups.get(group_id)
        if group is not None:
            self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> None:
        """End the join phase: drop dynamic members that did not rejoin, start the next
        generation, answer every parked JoinGroup and wait for SyncGroups."""
        gid = group.group_id
        self.timer.cancel(join_key(gid))
        if group.state is not PREPARING_REBALANCE:
            return
        for member in group.not_yet_rejoined_members():
            if not member.is_static:
                group.remove(member.member_id)
                self.timer.cancel(heartbeat_key(gid, member.member_id))
                log.info("removed dynamic member that did not rejoin", group=gid, member_id=member.member_id)
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Only static members that have not rejoined are left: wait for their sessions.
            log.error("group could not complete rebalance because no members rejoined", group=gid)
            self.timer.schedule(join_key(gid), group.rebalance_timeout_ms(), lambda: self._complete_join_by_id(gid))
            return
        group.init_next_generation(self.time_ms())
        if group.state is EMPTY:
            log.info("group is now empty", group=gid, generation=group.generation_id)
            try:
                self._write(gid, [self._group_metadata_record(group, {})])
            except KafkaError as e:
                # The previous generation stays in the log; with no members that is harmless.
                log.warning("failed to write empty group metadata", group=gid, error=e.code.name)
            return
        log.info("stabilized group", group=gid, generation=group.generation_id, members=group.num_members,
                 protocol=group.protocol_name)
        if self.on_rebalanced is not None:
            self.on_rebalanced(gid)
        for member in list(group.members.values()):
            is_leader = group.is_leader(member.member_id)
            group.complete_join(member, JoinResult(
                member_id=member.member_id,
                generation_id=group.generation_id,
                protocol_type=group.protocol_type,
                protocol_name=group.protocol_name,
                leader=group.leader_id,
                members=group.current_members() if is_leader else [],
            ))
            self._reschedule_heartbeat(group, member)
            member.is_new = False
            group.add_pending_sync_member(member.member_id)
        generation = group.generation_id
        self.timer.schedule(sync_key(gid), group.rebalance_timeout_ms(),
                            lambda: self._expire_pending_sync(gid, generation))

    def _expire_pending_sync(self, group_id: str, generation_id: int) -> None:
        group = self.groups.get(group_id)
        if group is None or generation_id != group.generation_id:
            return
        if group.state in (COMPLETING_REBALANCE, STABLE) and not group.has_received_sync_from_all_members():
            pending = set(group.pending_sync_members)
            for member_id in pending:
                group.remove(member_id)
                self.timer.cancel(heartbeat_key(group_id, member_id))
            self._prepare_rebalance(group, f"Removing {sorted(pending)} on pending sync request expiration")

    def _remove_sync_expiration(self, group: ClassicGroup) -> None:
        group.pending_sync_members.clear()
        self.timer.cancel(sync_key(group.group_id))

    def _reset_and_propagate_assignment_with_error(self, group: ClassicGroup, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = EMPTY_ASSIGNMENT
        self._propagate_assignment(group, error)

    def _set_and_propagate_assignment(self, group: ClassicGroup, assignment: dict[str, bytes]) -> None:
        for member in group.members.values():
            member.assignment = assignment.get(member.member_id, EMPTY_ASSIGNMENT)
        self._propagate_assignment(group, ErrorCode.NONE)

    def _propagate_assignment(self, group: ClassicGroup, error: ErrorCode) -> None:
        ok = error == ErrorCode.NONE
        for member in list(group.members.values()):
            result = SyncResult(
                error=error,
                protocol_type=group.protocol_type if ok else None,
                protocol_name=group.protocol_name if ok else None,
                assignment=member.assignment,
            )
            if group.complete_sync(member, result):
                # The session restarts once the member has its assignment.
                self._reschedule_heartbeat(group, member)

    # --- heartbeats and member expiry ------------------------------------------------------

    def _reschedule_heartbeat(self, group: ClassicGroup, member: ClassicGroupMember, timeout_ms: int | None = None) -> None:
        gid, mid = group.group_id, member.member_id
        self.timer.schedule(heartbeat_key(gid, mid), member.session_timeout_ms if timeout_ms is None else timeout_ms,
                            lambda: self._expire_heartbeat(gid, mid))

    def _expire_heartbeat(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if group is None or group.state is DEAD:
            return
        if group.is_pending_member(member_id):
            log.info("pending member removed after session timeout", group=group_id, member_id=member_id)
            group.remove(member_id)
            if group.state is PREPARING_REBALANCE and group.has_all_members_joined():
                self._complete_join(group)
            return
        member = group.members.get(member_id)
        if member is not None and not member.has_satisfied_heartbeat():
            log.info("member failed its session timeout; removing it", group=group_id, member_id=member_id)
            self._remove_member_and_update_group(group, member, f"removing member {member_id} on heartbeat expiration")

    def _remove_member_and_update_group(self, group: ClassicGroup, member: ClassicGroupMember, reason: str) -> None:
        # A parked JoinGroup is answered first so a live client simply rejoins.
        group.complete_join(member, JoinResult(error=ErrorCode.UNKNOWN_MEMBER_ID, member_id=""))
        group.remove(member.member_id)
        if group.state in (STABLE, COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance_or_complete_join(group, reason)
        elif group.state is PREPARING_REBALANCE and group.has_all_members_joined():
            self._complete_join(group)

    # ======================================================================================
    # SyncGroup, Heartbeat, LeaveGroup
    # ======================================================================================

    def sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: list[tuple[str, bytes]],
        respond: SyncCallback,
    ) -> None:
        if not group_id:
            respond(SyncResult(error=ErrorCode.INVALID_GROUP_ID))
            return
        group = self.groups.get(group_id)
        if group is None or group.is_empty():
            respond(SyncResult(error=ErrorCode.UNKNOWN_MEMBER_ID))
            return
        error = self._validate_sync_group(group, generation_id, member_id, group_instance_id, protocol_type,
                                          protocol_name)
        if error is not None:
            respond(SyncResult(error=error))
        elif group.state is PREPARING_REBALANCE:
            respond(SyncResult(error=ErrorCode.REBALANCE_IN_PROGRESS))
        elif group.state is COMPLETING_REBALANCE:
            group.member(member_id).awaiting_sync = respond
            self._remove_pending_sync_member(group, member_id)
            if group.is_leader(member_id):
                self._store_leader_assignment(group, generation_id, member_id, assignments)
        elif group.state is STABLE:
            self._remove_pending_sync_member(group, member_id)
            respond(SyncResult(protocol_type=group.protocol_type, protocol_name=group.protocol_name,
                               assignment=group.member(member_id).assignment))

    def _validate_sync_group(
        self, group: ClassicGroup, generation_id: int, member_id: str, group_instance_id: str | None,
        protocol_type: str | None, protocol_name: str | None,
    ) -> ErrorCode | None:
        if group.state is DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        try:
            group.validate_member(member_id, group_instance_id)
        except KafkaError as e:
            return e.code
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if _inconsistent(protocol_type, group.protocol_type) or _inconsistent(protocol_name, group.protocol_name):
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        return None

    def _store_leader_assignment(
        self, group: ClassicGroup, generation_id: int, member_id: str, assignments: list[tuple[str, bytes]]
    ) -> None:
        """Persist the leader's assignment, then hand every member its part and go Stable."""
        assignment = {mid: bytes(a) for mid, a in assignments}
        missing = [mid for mid in group.members if mid not in assignment]
        for mid in missing:
            assignment[mid] = EMPTY_ASSIGNMENT
        if missing:
            log.warning("setting empty assignments for members missing from the leader's assignment",
                        group=group.group_id, generation=group.generation_id, members=missing)
        log.info("assignment received from leader", group=group.group_id, leader=member_id,
                 generation=group.generation_id, members=group.num_members)
        try:
            self._write(group.group_id, [self._group_metadata_record(group, assignment)])
        except KafkaError as e:
            if group.state is COMPLETING_REBALANCE and generation_id == group.generation_id:
                error = append_error_to_response_error(e.code)
                self._reset_and_propagate_assignment_with_error(group, error)
                self._maybe_prepare_rebalance_or_complete_join(
                    group, f"Error {error.name} when storing group assignment during SyncGroup (member: {member_id}).")
            return
        if group.state is COMPLETING_REBALANCE and generation_id == group.generation_id:
            self._set_and_propagate_assignment(group, assignment)
            group.transition_to(STABLE, self.time_ms())

    def _remove_pending_sync_member(self, group: ClassicGroup, member_id: str) -> None:
        group.remove_pending_sync_member(member_id)
        if group.state in (DEAD, EMPTY, PREPARING_REBALANCE) or group.has_received_sync_from_all_members():
            self.timer.cancel(sync_key(group.group_id))

    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int) -> ErrorCode:
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.state is DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        try:
            group.validate_member(member_id, group_instance_id)
        except KafkaError as e:
            return e.code
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if group.state is EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._reschedule_heartbeat(group, group.member(member_id))
        if group.state is PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def leave_group(
        self, group_id: str, members: list[tuple[str, str | None, str | None]]
    ) -> tuple[ErrorCode, list[tuple[str, str | None, ErrorCode]]]:
        """Remove ``(member_id, group_instance_id, reason)`` members; returns the top-level error
        and one error per member. An empty member id with an instance id removes that static
        member administratively."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID, []
        group = self.groups.get(group_id)
        if group is None and group_id in self.consumer.groups:
            return ErrorCode.NONE, [(mid, iid, self.consumer.leave_by_classic_request(group_id, mid, iid))
                                    for mid, iid, _ in members]
        if group is None:
            return ErrorCode.NONE, [(mid, iid, ErrorCode.UNKNOWN_MEMBER_ID) for mid, iid, _ in members]
        if group.state is DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        results: list[tuple[str, str | None, ErrorCode]] = []
        left = 0
        for member_id, instance_id, reason in members:
            if member_id == "":
                if instance_id is not None and group.has_static_member(instance_id):
                    self._remove_current_member(group, group.static_members[instance_id], reason)
                    results.append((member_id, instance_id, ErrorCode.NONE))
                    left += 1
                else:
                    results.append((member_id, instance_id, ErrorCode.UNKNOWN_MEMBER_ID))
            elif group.is_pending_member(member_id):
                group.remove(member_id)
                self.timer.cancel(heartbeat_key(group_id, member_id))
                log.info("pending member left the group", group=group_id, member_id=member_id,
                         reason=reason or "not provided")
                results.append((member_id, instance_id, ErrorCode.NONE))
                left += 1
            else:
                try:
                    group.validate_member(member_id, instance_id)
                except KafkaError as e:
                    results.append((member_id, instance_id, e.code))
                    continue
                self._remove_current_member(group, member_id, reason)
                results.append((member_id, instance_id, ErrorCode.NONE))
                left += 1
        if left:
            reason = "explicit `LeaveGroup` request"
            if group.state in (STABLE, COMPLETING_REBALANCE):
                self._maybe_prepare_rebalance_or_complete_join(group, reason)
            elif group.state is PREPARING_REBALANCE:
                self._maybe_complete_join_phase(group)
        return ErrorCode.NONE, results

    def _remove_current_member(self, group: ClassicGroup, member_id: str, reason: str | None) -> None:
        member = group.member(member_id)
        self.timer.cancel(heartbeat_key(group.group_id, member_id))
        log.info("member left the group", group=group.group_id, member_id=member_id, reason=reason or "not provided")
        group.complete_join(member, JoinResult(error=ErrorCode.UNKNOWN_MEMBER_ID, member_id=""))
        group.remove(member_id)

    # ======================================================================================
    # Offsets
    # ======================================================================================

    def offset_commit_records(
        self, group_id: str, topics: list[tuple[str, list[CommitPartition]]], now: int, expire: int | None,
    ) -> tuple[dict[tuple[str, int], ErrorCode], list[tuple[str, int, OffsetAndMetadata]], list[Record]]:
        """The offsets of a commit (plain or transactional) as records to write: per partition
        NONE or OFFSET_METADATA_TOO_LARGE, the values to apply once written, and the records."""
        results: dict[tuple[str, int], ErrorCode] = {}
        staged: list[tuple[str, int, OffsetAndMetadata]] = []
        records: list[Record] = []
        for topic, parts in topics:
            for p in parts:
                if p.metadata is not None and len(p.metadata) > self.config.offset_metadata_max_bytes:
                    results[(topic, p.partition)] = ErrorCode.OFFSET_METADATA_TOO_LARGE
                    continue
                value = OffsetAndMetadata(p.offset, p.leader_epoch, p.metadata or "", now, expire, -1)
                results[(topic, p.partition)] = ErrorCode.NONE
                staged.append((topic, p.partition, value))
                records.append((rec.offset_commit_key(group_id, topic, p.partition),
                                rec.offset_commit_value(value.to_value())))
        return results, staged, records

    def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        retention_time_ms: int,
        topics: list[tuple[str, list[CommitPartition]]],
        api_version: int,
    ) -> dict[tuple[str, int], ErrorCode]:
        """Validate, write and apply an OffsetCommit; one error per (topic, partition)."""
        def all_failed(code: ErrorCode) -> dict[tuple[str, int], ErrorCode]:
            return {(t, p.partition): code for t, parts in topics for p in parts}

        if group_id is None:
            return all_failed(ErrorCode.INVALID_GROUP_ID)
        group = self.groups.get(group_id)
        consumer_group = self.consumer.groups.get(group_id) if group is None else None
        created = False
        if consumer_group is not None:
            try:
                self.consumer.validate_offset_commit(consumer_group, member_id, generation_id, False, api_version)
            except KafkaError as e:
                return all_failed(e.code)
        elif group is None:
            if generation_id < 0:
                # Admin client or manual assignment: a "simple" group, kept in memory only.
                group = ClassicGroup(group_id, EMPTY, self.time_ms())
                created = True
            else:
                return all_failed(ErrorCode.GROUP_ID_NOT_FOUND if api_version >= 9 else ErrorCode.ILLEGAL_GENERATION)
        try:
            if group is not None:
                group.validate_offset_commit(member_id, group_instance_id, generation_id, is_transactional=False)
        except KafkaError as e:
            return all_failed(e.code)
        if group is not None and group.state in (STABLE, PREPARING_REBALANCE) and member_id in group.members:
            # Classic consumers keep their session alive by committing.
            self._reschedule_heartbeat(group, group.member(member_id))

        now = self.time_ms()
        # clamped: Java would wrap a retention near Long.MAX_VALUE; either way the commit stands
        expire = None if retention_time_ms == -1 else min(now + retention_time_ms, (1 << 63) - 1)
        results, pending, records = self.offset_commit_records(group_id, topics, now, expire)
        if records:
            try:
                base = self._write(group_id, records)
            except KafkaError as e:
                return all_failed(append_error_to_response_error(e.code))
            for i, (topic, partition, value) in enumerate(pending):
                value.record_offset = base + i
                self.offsets.put(group_id, topic, partition, value)
        if created and group is not None:
            self.groups[group_id] = group
        return results

    def fetch_offsets(
        self, group_id: str | None, topics: list[tuple[str, list[int]]] | None, require_stable: bool,
        member_id: str | None = None, member_epoch: int = -1,
    ) -> tuple[ErrorCode, list[tuple[str, list[FetchedPartition]]]]:
        """Committed offsets of ``topics`` (None: every committed partition). An unknown group
        is not an error: every partition simply has no offset. A consumer group checks the
        member id and epoch that OffsetFetch v9+ carries."""
        if group_id is None:
            return ErrorCode.INVALID_GROUP_ID, []
        group = self.groups.get(group_id)
        consumer_group = self.consumer.groups.get(group_id) if group is None else None
        if consumer_group is not None:
            try:
                self.consumer.validate_offset_fetch(consumer_group, member_id, member_epoch)
            except KafkaError as e:
                return e.code, []
        known = (group is not None and group.state is not DEAD) or consumer_group is not None
        committed = self.offsets.group_offsets(group_id) if known else {}
        out: list[tuple[str, list[FetchedPartition]]] = []
        if topics is None:
            for topic, parts in committed.items():
                out.append((topic, [self._fetched(group_id, topic, p, o, require_stable) for p, o in parts.items()]))
            return ErrorCode.NONE, out
        for topic, partitions in topics:
            parts = committed.get(topic, {})
            out.append((topic, [self._fetched(group_id, topic, p, parts.get(p), require_stable) for p in partitions]))
        return ErrorCode.NONE, out

    def _fetched(
        self, group_id: str, topic: str, partition: int, value: OffsetAndMetadata | None, require_stable: bool
    ) -> FetchedPartition:
        if require_stable and self.offsets.has_pending_transactional_offsets(group_id, topic, partition):
            # Hook for transactions: a TxnOffsetCommit awaiting its marker makes the offset unstable.
            return FetchedPartition(partition, error=ErrorCode.UNSTABLE_OFFSET_COMMIT)
        if value is None:
            return FetchedPartition(partition)
        return FetchedPartition(partition, value.committed_offset, value.leader_epoch, value.metadata)

    def delete_offsets(
        self, group_id: str, topics: list[tuple[str, list[int]]]
    ) -> tuple[ErrorCode, list[tuple[str, list[tuple[int, ErrorCode]]]]]:
        group = self.groups.get(group_id)
        consumer_group = self.consumer.groups.get(group_id) if group is None else None
        is_subscribed: Callable[[str], bool]
        if consumer_group is not None:
            is_subscribed = consumer_group.subscribed_topic_names(self.consumer.regex_resolver(group_id)).__contains__
        elif group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND, []
        else:
            try:
                group.validate_offset_delete()
            except KafkaError as e:
                return e.code, []
            is_subscribed = group.is_subscribed_to_topic
        out: list[tuple[str, list[tuple[int, ErrorCode]]]] = []
        doomed: list[tuple[str, int]] = []
        for topic, partitions in topics:
            if is_subscribed(topic):
                out.append((topic, [(p, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC) for p in partitions]))
                continue
            out.append((topic, [(p, ErrorCode.NONE) for p in partitions]))
            for p in partitions:
                if self.offsets.get(group_id, topic, p) is not None or \
                        self.offsets.has_pending_transactional_offsets(group_id, topic, p):
                    doomed.append((topic, p))
        if doomed:
            try:
                self._write(group_id, [(rec.offset_commit_key(group_id, t, p), None) for t, p in doomed])
            except KafkaError as e:
                return append_error_to_response_error(e.code), []
            for t, p in doomed:
                self.offsets.remove(group_id, t, p)
        return ErrorCode.NONE, out

    def on_topic_deleted(self, topic: str) -> int:
        """Kafka's onPartitionsDeleted: every group forgets the deleted topic's offsets, with a
        tombstone each so a reload agrees. Returns how many offsets were removed."""
        removed = 0
        for group_id in list(self.offsets.committed):
            doomed = [(topic, p) for p in self.offsets.group_offsets(group_id).get(topic, {})]
            if not doomed:
                continue
            try:
                self._write(group_id, [(rec.offset_commit_key(group_id, t, p), None) for t, p in doomed])
            except KafkaError:
                continue  # the offsets stay; a later delete or expiry removes them
            for t, p in doomed:
                self.offsets.remove(group_id, t, p)
            removed += len(doomed)
        return removed

    # ======================================================================================
    # Admin: DescribeGroups, ListGroups, DeleteGroups
    # ======================================================================================

    def describe_groups(self, group_ids: list[str], api_version: int) -> list[DescribedGroup]:
        out = []
        for gid in group_ids:
            group = self.groups.get(gid)
            if group is None and gid in self.consumer.groups:
                # Kafka's describeGroups only knows classic groups.
                if api_version >= 6:
                    out.append(DescribedGroup(gid, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} is not a classic group.",
                                              state=str(DEAD)))
                else:
                    out.append(DescribedGroup(gid, state=str(DEAD)))
                continue
            if group is None or group.state is DEAD:
                if api_version >= 6:
                    out.append(DescribedGroup(gid, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} not found.",
                                              state=str(DEAD)))
                else:
                    out.append(DescribedGroup(gid, state=str(DEAD)))
                continue
            stable = group.state is STABLE
            out.append(DescribedGroup(
                gid,
                state=str(group.state),
                protocol_type=group.protocol_type or "",
                protocol_data=(group.protocol_name or "") if stable else "",
                members=[
                    DescribedMember(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                    m.metadata(group.protocol_name) if stable else b"", m.assignment)
                    for m in group.members.values()
                ],
            ))
        return out

    def list_groups(self, states_filter: list[str], types_filter: list[str]) -> list[tuple[str, str, str, str]]:
        """(group_id, protocol_type, state, type) of every group passing both filters
        (case-insensitive; an empty filter passes everything)."""
        states = {s.lower() for s in states_filter}
        types = {t.lower() for t in types_filter}
        out = []
        if not types or GROUP_TYPE_CLASSIC in types:
            out += [(g.group_id, g.protocol_type or "", str(g.state), GROUP_TYPE_CLASSIC)
                    for g in self.groups.values()
                    if g.state is not DEAD and (not states or str(g.state).lower() in states)]
        if not types or GROUP_TYPE_CONSUMER in types:
            out += [(g.group_id, GROUP_TYPE_CONSUMER, g.state, GROUP_TYPE_CONSUMER)
                    for g in self.consumer.groups.values() if not states or g.state.lower() in states]
        return out

    def delete_groups(self, group_ids: list[str | None]) -> list[tuple[str | None, ErrorCode]]:
        out: list[tuple[str | None, ErrorCode]] = []
        for gid in group_ids:
            if gid is None:
                out.append((gid, ErrorCode.INVALID_GROUP_ID))
                continue
            group = self.groups.get(gid)
            if group is None and gid in self.consumer.groups:
                out.append((gid, self._delete_consumer_group(gid)))
                continue
            if group is None:
                out.append((gid, ErrorCode.GROUP_ID_NOT_FOUND))
                continue
            try:
                group.validate_delete_group()
            except KafkaError as e:
                out.append((gid, e.code))
                continue
            records = self._offset_tombstones(gid) + [(rec.group_metadata_key(gid), None)]
            try:
                self._write(gid, records)
            except KafkaError as e:
                out.append((gid, append_error_to_response_error(e.code)))
                continue
            self._remove_group(gid, drop_offsets=True)
            out.append((gid, ErrorCode.NONE))
        return out

    def _delete_consumer_group(self, group_id: str) -> ErrorCode:
        group = self.consumer.groups[group_id]
        if not group.is_empty():
            return ErrorCode.NON_EMPTY_GROUP
        try:
            self._write(group_id, self._offset_tombstones(group_id) + self.consumer.delete_group_records(group))
        except KafkaError as e:
            return append_error_to_response_error(e.code)
        self.consumer.forget(group_id)
        self._remove_group(group_id, drop_offsets=True)
        return ErrorCode.NONE

    def _offset_tombstones(self, group_id: str) -> list[Record]:
        keys = {(t, p) for t, parts in self.offsets.group_offsets(group_id).items() for p in parts}
        keys |= {(t, p) for (g, t, p) in self.offsets.open_transactions if g == group_id}
        return [(rec.offset_commit_key(group_id, t, p), None) for t, p in sorted(keys)]

    def _remove_group(self, group_id: str, *, drop_offsets: bool) -> None:
        group = self.groups.pop(group_id, None)
        if group is not None:
            if group.state is not DEAD:
                group.transition_to(DEAD, self.time_ms())
            self.timer.cancel(join_key(group_id))
            self.timer.cancel(sync_key(group_id))
            for mid in list(group.members) + list(group.pending_join_members):
                self.timer.cancel(heartbeat_key(group_id, mid))
        if drop_offsets:
            for topic, parts in list(self.offsets.group_offsets(group_id).items()):
                for p in list(parts):
                    self.offsets.remove(group_id, topic, p)
            for key in [k for k in self.offsets.open_transactions if k[0] == group_id]:
                self.offsets.remove(*key)

    # ======================================================================================
    # Offset expiry (offsets.retention.minutes)
    # ======================================================================================

    def cleanup_expired(self) -> int:
        """Tombstone expired offsets, and delete Empty groups left with no offsets (Kafka's
        cleanupGroupMetadata). Returns the number of offsets removed."""
        now = self.time_ms()
        removed = 0
        for gid in list(self.groups):
            group = self.groups.get(gid)
            if group is None:
                continue
            expired, all_expired = self._expired_offsets(group, now)
            delete_group = all_expired and group.is_empty()

            def forget(gid: str = gid) -> None:
                self._remove_group(gid, drop_offsets=False)
            removed += self._expire(gid, expired, [(rec.group_metadata_key(gid), None)] if delete_group else None,
                                    forget)
        return removed + self._cleanup_consumer_groups(now)

    def _expire(self, gid: str, expired: list[tuple[str, int]], group_tombstones: list[Record] | None,
                forget_group: Callable[[], None]) -> int:
        """Tombstone ``expired`` offsets (and the group, given its tombstones) in one write, then
        apply; returns how many offsets went."""
        records = [(rec.offset_commit_key(gid, t, p), None) for t, p in expired] + (group_tombstones or [])
        if not records:
            return 0
        try:
            self._write(gid, records)
        except KafkaError as e:
            log.warning("failed to write offset expiry tombstones", group=gid, error=e.code.name)
            return 0
        for t, p in expired:
            self.offsets.remove(gid, t, p)
        if group_tombstones:
            log.info("group deleted after its offsets expired", group=gid)
            forget_group()
        elif expired:
            log.info("expired offsets", group=gid, count=len(expired))
        return len(expired)

    def _cleanup_consumer_groups(self, now: int) -> int:
        """Consumer groups: offsets of topics no member subscribes to expire from their commit
        time (Kafka's ConsumerGroup.offsetExpirationCondition); an Empty group left with no
        offsets is deleted."""
        removed = 0
        retention = self.config.offsets_retention_ms
        for gid, group in list(self.consumer.groups.items()):
            subscribed = group.subscribed_topic_names(self.consumer.regex_resolver(gid))
            expired: list[tuple[str, int]] = []
            total = 0
            for topic, parts in self.offsets.group_offsets(gid).items():
                for p, o in parts.items():
                    total += 1
                    due = now >= o.expire_timestamp_ms if o.expire_timestamp_ms is not None \
                        else now - o.commit_timestamp_ms >= retention
                    if topic not in subscribed and due and not self.offsets.has_pending_transactional_offsets(gid, topic, p):
                        expired.append((topic, p))
            delete_group = group.is_empty() and len(expired) == total and \
                not self.offsets.group_has_open_transactions(gid)

            def forget(gid: str = gid) -> None:
                self.consumer.forget(gid)
            removed += self._expire(gid, expired, self.consumer.delete_group_records(group) if delete_group else None,
                                    forget)
        return removed

    def _expired_offsets(self, group: ClassicGroup, now: int) -> tuple[list[tuple[str, int]], bool]:
        gid = group.group_id
        offsets = self.offsets.group_offsets(gid)
        if not offsets:
            return [], not self.offsets.group_has_open_transactions(gid)
        # Which timestamp the retention counts from (OffsetExpirationCondition).
        if group.protocol_type:
            if group.state is EMPTY:
                since_empty = group.current_state_timestamp
                def base(o: OffsetAndMetadata) -> int:
                    return since_empty if since_empty is not None else o.commit_timestamp_ms
            elif group.uses_consumer_protocol() and group.subscribed_topics is not None and group.state is STABLE:
                def base(o: OffsetAndMetadata) -> int:
                    return o.commit_timestamp_ms
            else:
                return [], False
        else:
            def base(o: OffsetAndMetadata) -> int:
                return o.commit_timestamp_ms
        retention = self.config.offsets_retention_ms
        expired: list[tuple[str, int]] = []
        all_expired = True
        for topic, parts in offsets.items():
            if group.is_subscribed_to_topic(topic):
                all_expired = False
                continue
            for p, o in parts.items():
                is_expired = (now >= o.expire_timestamp_ms) if o.expire_timestamp_ms is not None \
                    else now - base(o) >= retention
                if is_expired and not self.offsets.has_pending_transactional_offsets(gid, topic, p):
                    expired.append((topic, p))
                else:
                    all_expired = False
        return expired, all_expired and not self.offsets.group_has_open_transactions(gid)

    # ======================================================================================
    # Loading (replay of __consumer_offsets) and unloading
    # ======================================================================================

    def replay(self, record_offset: int, producer_id: int, key: bytes | None, value: bytes | None) -> None:
        """Apply one record read back from ``__consumer_offsets``; raises RecordFormatError."""
        if key is None:  # checked here too so that a KIP-848 key below is known to be bytes
            raise rec.RecordFormatError("record without a key")
        k = rec.decode_key(key)
        if k is None:
            self.consumer.replay(bytes(key), None if value is None else bytes(value))
            return
        if isinstance(k, rec.OffsetCommitKey):
            if value is None:
                self.offsets.remove(k.group, k.topic, k.partition)
                return
            if k.group not in self.groups and k.group not in self.consumer.groups:
                # Offsets without membership: a simple group, as Kafka materialises it.
                self.groups[k.group] = ClassicGroup(k.group, EMPTY, self.time_ms())
            v = OffsetAndMetadata.from_record(record_offset, rec.decode_offset_commit_value(value))
            self.offsets.replay(k.group, k.topic, k.partition, producer_id, v)
        elif isinstance(k, rec.GroupMetadataKey):
            if value is None:
                self.groups.pop(k.group, None)
                return
            self.groups[k.group] = self._group_from_record(k.group, rec.decode_group_metadata_value(value))

    def replay_end_transaction(self, producer_id: int, commit: bool, partition: int | None = None) -> None:
        """A COMMIT/ABORT marker in ``__consumer_offsets`` partition ``partition`` (loading or
        live): resolves the producer's pending offsets of the groups in that partition."""
        pf = self.partition_for
        if partition is None or pf is None:
            self.offsets.replay_end_transaction(producer_id, commit)
        else:
            self.offsets.replay_end_transaction(producer_id, commit, lambda group: pf(group) == partition)

    def _group_from_record(self, group_id: str, value: rec.GroupMetadataValue) -> ClassicGroup:
        group = ClassicGroup(
            group_id,
            STABLE if value.members else EMPTY,
            self.time_ms(),
            generation_id=value.generation,
            protocol_type=value.protocol_type or None,
            protocol_name=value.protocol,
            leader_id=value.leader,
            current_state_timestamp=None if value.current_state_timestamp == -1 else value.current_state_timestamp,
        )
        for m in value.members:
            rebalance = m.session_timeout if m.rebalance_timeout == -1 else m.rebalance_timeout
            member = ClassicGroupMember(
                m.member_id, m.group_instance_id, m.client_id, m.client_host, rebalance, m.session_timeout,
                value.protocol_type, [(value.protocol or "", m.subscription)], m.assignment,
            )
            group.add(member)
        group.subscribed_topics = group.compute_subscribed_topics()
        return group

    def on_loaded(self, only: set[str] | None = None) -> None:
        """After loading (``only`` these groups: one partition's): every loaded member must
        heartbeat within its session timeout."""
        for group in list(self.groups.values()):
            if only is not None and group.group_id not in only:
                continue
            for member in group.members.values():
                self._reschedule_heartbeat(group, member)
            if group.num_members > self.config.max_size:
                self._prepare_rebalance(group, f"Freshly-loaded group {group.group_id} is over capacity")
        self.consumer.on_loaded(only)

    def groups_of_partition(self, partition: int) -> set[str]:
        """Every group id (classic, consumer, or with offsets only) kept in ``partition``."""
        ids = set(self.groups) | set(self.consumer.groups) | set(self.offsets.committed)
        ids.update(k[0] for entries in self.offsets.pending.values() for k in entries)
        partition_of = self.partition_for
        if partition_of is None:  # one partition holds everything (tests)
            return ids
        return {g for g in ids if partition_of(g) == partition}

    def unload_partition(self, partition: int) -> int:
        """GroupMetadataManager.removeGroupsForPartition: the partition's groups leave this broker;
        their parked JoinGroup/SyncGroup answer NOT_COORDINATOR; returns how many groups left."""
        gone = self.groups_of_partition(partition)
        for group_id in gone:
            group = self.groups.pop(group_id, None)
            if group is not None:
                group.complete_all_join(ErrorCode.NOT_COORDINATOR)
                group.complete_all_sync(ErrorCode.NOT_COORDINATOR)
                self.timer.cancel(join_key(group_id))
                self.timer.cancel(sync_key(group_id))
                for member_id in group.members:
                    self.timer.cancel(heartbeat_key(group_id, member_id))
        self.consumer.unload(gone)
        self.offsets.unload(gone)
        return len(gone)

    def unload(self) -> None:
        """Answer every parked JoinGroup/SyncGroup with NOT_COORDINATOR (shutdown)."""
        for group in self.groups.values():
            group.complete_all_join(ErrorCode.NOT_COORDINATOR)
            group.complete_all_sync(ErrorCode.NOT_COORDINATOR)

    # --- records ---------------------------------------------------------------------------

    def _write(self, group_id: str, records: list[Record]) -> int:
        return self.writer(group_id, records)

    @staticmethod
    def _empty_group_record(group: ClassicGroup) -> tuple[bytes, bytes]:
        value = rec.GroupMetadataValue("", 0, None, None, group.current_state_timestamp or -1, [])
        return rec.group_metadata_key(group.group_id), rec.group_metadata_value(value)

    @staticmethod
    def _group_metadata_record(group: ClassicGroup, assignment: dict[str, bytes]) -> tuple[bytes, bytes]:
        members = [
            rec.MemberMetadata(
                m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                m.session_timeout_ms, m.metadata(group.protocol_name), assignment.get(m.member_id, EMPTY_ASSIGNMENT),
            )
            for m in group.members.values()
        ]
        ts = group.current_state_timestamp
        value = rec.GroupMetadataValue(group.protocol_type or "", group.generation_id, group.protocol_name,
                                       group.leader_id, -1 if ts is None else ts, members)
        return rec.group_metadata_key(group.group_id), rec.group_metadata_value(value)


def _inconsistent(requested: str | None, current: str | None) -> bool:
    return requested is not None and current is not None and requested != current


__all__ = [
    "NO_PRODUCER_ID",
    "CommitPartition",
    "DescribedGroup",
    "DescribedMember",
    "FetchedPartition",
    "GroupConfig",
    "GroupMetadataManager",
    "GroupState",
    "JoinRequest",
    "Timer",
]
