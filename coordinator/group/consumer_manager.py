"""KIP-848 consumer groups, sans-IO (Kafka's GroupMetadataManager for ``consumer`` groups).

A heartbeat computes the records that describe its effect (member metadata, group epoch,
target assignment, current assignment), appends them to the group's ``__consumer_offsets``
partition, and only then applies them through :meth:`replay`, the same path that loads the
log at start-up: what a member was told is exactly what a restarted coordinator rebuilds.

Deliberate differences from Apache Kafka 4.3 (documented in the README):
- the target assignment is computed on the heartbeat that makes it stale, not at most once
  per ``group.consumer.assignment.interval.ms``: a rebalance converges a heartbeat sooner;
- regular expression subscriptions are resolved with Python's ``re`` (full match, as RE2J's
  ``matches``, internal topics included) on every heartbeat instead of in the background, and not persisted (record
  type 16); the resolution is recomputed after a restart;
- a classic group and a consumer group cannot share an id while either has members (Kafka's
  online migration, ``group.consumer.migration.policy``, is not implemented); an *empty*
  group of either kind is converted on the first join of the other kind, keeping its offsets.
"""

from __future__ import annotations

import base64
import re
import struct
import uuid
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

import structlog

from coordinator.group import consumer_records as crec
from coordinator.group.assignors import ASSIGNORS
from coordinator.group.consumer_group import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    LEAVE_STATIC_EPOCH,
    Assignment,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    reconcile,
)
from coordinator.group.group import ClassicGroup, parse_subscription_topics
from protocol.errors import ErrorCode, KafkaError
from storage.clock import SYSTEM_CLOCK

log = structlog.get_logger(__name__)

Record = tuple[bytes, bytes | None]
Writer = Callable[[str, list[Record]], int]


class Timer(Protocol):
    def schedule(self, key: str, delay_ms: int, fn: Callable[[], None]) -> None: ...

    def cancel(self, key: str) -> None: ...


class TopicInfo(Protocol):
    name: str
    topic_id: uuid.UUID
    partitions: int


class Topics(Protocol):
    """The cluster's topics, as the broker's metadata store serves them."""

    @property
    def topics(self) -> Mapping[str, TopicInfo]:
        """Read-only (hence covariant): the store's dict holds its own TopicInfo class."""
        ...

    def get(self, name: str) -> TopicInfo | None: ...

    def name_of(self, topic_id: uuid.UUID) -> str | None: ...


@dataclass(slots=True)
class ConsumerGroupConfig:
    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 5000
    max_size: int = 2**31 - 1
    assignors: tuple[str, ...] = ("uniform", "range")
    # A new target assignment is computed at most this often (the first one at once).
    assignment_interval_ms: int = 1000

    @classmethod
    def from_broker(cls, get: Callable[[str], Any]) -> ConsumerGroupConfig:
        defaults = cls()

        def value(name: str, default: object) -> Any:
            try:
                return get(name)
            except KeyError:
                return default

        names = value("group.consumer.assignors", ",".join(defaults.assignors))
        assignors = tuple(a.strip() for a in (names.split(",") if isinstance(names, str) else names or ()))
        return cls(
            session_timeout_ms=int(value("group.consumer.session.timeout.ms", defaults.session_timeout_ms)),
            heartbeat_interval_ms=int(value("group.consumer.heartbeat.interval.ms", defaults.heartbeat_interval_ms)),
            max_size=int(value("group.consumer.max.size", defaults.max_size)),
            assignment_interval_ms=int(value("group.consumer.assignment.interval.ms",
                                             defaults.assignment_interval_ms)),
            assignors=tuple(a for a in assignors if a in ASSIGNORS) or defaults.assignors,
        )


@dataclass(slots=True)
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: list[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Assignment | None = None  # TopicPartitions; None when not sent
    client_id: str = ""
    client_host: str = ""
    api_version: int = 1
    # With an authorizer: whether the member may DESCRIBE a topic. Regular expressions then resolve to
    # those topics only, as Kafka's TopicRegexResolver resolves them as the member whose heartbeat
    # refreshed them (filterTopicDescribeAuthorizedTopics); None: every topic.
    topic_describable: Callable[[str], bool] | None = None


@dataclass(slots=True)
class HeartbeatResult:
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


def _fail(code: ErrorCode, message: str) -> KafkaError:
    return KafkaError(code, message)


def session_key(group_id: str, member_id: str) -> str:
    return f"consumer-session:{group_id}:{member_id}"


def rebalance_key(group_id: str, member_id: str) -> str:
    return f"consumer-rebalance:{group_id}:{member_id}"


class ConsumerGroupManager:
    def __init__(self, config: ConsumerGroupConfig, timer: Timer, writer: Writer, topics: Topics | None,
                 classic_group: Callable[[str], ClassicGroup | None],
                 convert_empty_classic: Callable[[str], list[Record]],
                 time_ms: Callable[[], int] | None = None,
                 group_config: Callable[[str], Mapping[str, str]] | None = None) -> None:
        self.config = config
        # group id -> its dynamic group configs (Kafka's GroupConfigManager), overriding ``config``
        self.group_config = group_config or (lambda _group_id: {})
        self.time_ms = time_ms or SYSTEM_CLOCK.now_ms
        self.timer = timer
        self.writer = writer
        self.topics = topics
        self.classic_group = classic_group  # group id -> the classic group of that id, if any
        self.convert_empty_classic = convert_empty_classic  # its tombstone records; forgets it once written
        self.groups: dict[str, ConsumerGroup] = {}
        self._regex_cache: dict[str, re.Pattern] = {}
        # group id -> the topics its regexes may resolve to: the last heartbeat's (HeartbeatRequest.topic_describable)
        self._regex_filters: dict[str, Callable[[str], bool]] = {}

    # ======================================================================================
    # ConsumerGroupHeartbeat
    # ======================================================================================

    def heartbeat(self, req: HeartbeatRequest) -> HeartbeatResult:
        try:
            self._validate(req)
            if req.member_epoch in (LEAVE_EPOCH, LEAVE_STATIC_EPOCH):
                return self._leave(req)
            return self._heartbeat(req)
        except KafkaError as e:
            return HeartbeatResult(error=e.code, message=e.message)

    def _validate(self, req: HeartbeatRequest) -> None:
        """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid, with its messages."""
        def invalid(message: str) -> KafkaError:
            return _fail(ErrorCode.INVALID_REQUEST, message)

        if not req.group_id:
            raise invalid("GroupId can't be empty.")
        if not req.member_id and (req.api_version >= 1 or req.member_epoch != JOIN_EPOCH):
            raise invalid("MemberId can't be empty.")
        if req.instance_id is not None and not req.instance_id:
            raise invalid("InstanceId can't be empty.")
        if req.rack_id is not None and not req.rack_id:
            raise invalid("RackId can't be empty.")
        if req.member_epoch == JOIN_EPOCH:
            if req.rebalance_timeout_ms == -1:
                raise invalid("RebalanceTimeoutMs must be provided in first request.")
            if req.owned is None or req.owned:
                raise invalid("TopicPartitions must be empty when (re-)joining.")
            if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
                raise invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
        elif req.member_epoch == LEAVE_STATIC_EPOCH:
            if req.instance_id is None:
                raise invalid("InstanceId can't be null.")
        elif req.member_epoch < LEAVE_STATIC_EPOCH:
            raise invalid("MemberEpoch is invalid.")
        if req.server_assignor is not None and req.server_assignor not in self.config.assignors:
            raise _fail(ErrorCode.UNSUPPORTED_ASSIGNOR,
                        f"ServerAssignor {req.server_assignor} is not supported. "
                        f"Supported assignors: {', '.join(self.config.assignors)}.")
        if req.subscribed_topic_regex:
            try:
                self._pattern(req.subscribed_topic_regex)
            except re.error as e:
                raise _fail(ErrorCode.INVALID_REGULAR_EXPRESSION,
                            f"SubscribedTopicRegex `{req.subscribed_topic_regex}` is not a valid regular "
                            f"expression: {_re2j_message(e.msg)}.") from None

    def _pattern(self, regex: str) -> re.Pattern:
        p = self._regex_cache.get(regex)
        if p is None:
            p = self._regex_cache[regex] = re.compile(regex)
        return p

    def resolve_regex(self, regex: str, group_id: str | None = None) -> list[str]:
        """The topics whose whole name matches (RE2J ``matches``); internal topics are not skipped,
        as Kafka does not skip them. For a group, only those its last heartbeat's member may
        DESCRIBE when an authorizer is configured (the others are left out silently)."""
        if self.topics is None or not regex:
            return []
        try:
            p = self._pattern(regex)
        except re.error:
            return []
        describable = self._regex_filters.get(group_id) if group_id is not None else None
        return sorted(n for n in self.topics.topics if p.fullmatch(n) and (describable is None or describable(n)))

    def regex_resolver(self, group_id: str) -> Callable[[str], list[str]]:
        """``resolve_regex`` for one group (ConsumerGroup.subscribed_topic_names takes it)."""
        return lambda regex: self.resolve_regex(regex, group_id)

    # --- the regular heartbeat -------------------------------------------------------------

    def _heartbeat(self, req: HeartbeatRequest) -> HeartbeatResult:
        records: list[Record] = []
        group = self._group_for_heartbeat(req, records)
        if req.topic_describable is not None:  # this heartbeat's member resolves the group's regexes
            self._regex_filters[req.group_id] = req.topic_describable
        member_id = req.member_id or _new_member_id()
        joining = req.member_epoch == JOIN_EPOCH
        if joining and member_id not in group.members and len(group.members) >= self.config.max_size and \
                (req.instance_id is None or req.instance_id not in group.static_members):
            raise _fail(ErrorCode.GROUP_MAX_SIZE_REACHED,
                        f"The consumer group has reached its maximum capacity of {self.config.max_size} members.")
        member, replaced = self._member_for_heartbeat(group, member_id, req)
        new_member = member.member_id not in group.members

        updated = replace(
            member,
            instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
            rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1
            else member.rebalance_timeout_ms,
            server_assignor=req.server_assignor if req.server_assignor is not None else member.server_assignor,
            subscribed_topic_names=tuple(req.subscribed_topic_names) if req.subscribed_topic_names is not None
            else member.subscribed_topic_names,
            subscribed_topic_regex=(req.subscribed_topic_regex or None) if req.subscribed_topic_regex is not None
            else member.subscribed_topic_regex,
            client_id=req.client_id,
            client_host=req.client_host,
        )
        if replaced is not None:
            records += self._member_tombstones(group.group_id, replaced.member_id)
        if new_member or updated.metadata_key() != member.metadata_key():
            records.append(self._member_metadata_record(group.group_id, updated))

        # 1. The group epoch: a new group, a changed subscription or changed subscribed topics.
        bumps = 1 if group.group_epoch == 0 else 0
        if (updated.subscribed_topic_names, updated.subscribed_topic_regex) != \
                (member.subscribed_topic_names, member.subscribed_topic_regex):
            bumps += 1
        members = {m.member_id: m for m in group.members.values()
                   if replaced is None or m.member_id != replaced.member_id}
        members[updated.member_id] = updated
        metadata_hash = self._metadata_hash(members.values(), group.group_id)
        if metadata_hash != group.metadata_hash and not bumps:
            bumps = 1
        group_epoch = group.group_epoch + bumps
        if bumps:
            records.append(self._group_epoch_record(group.group_id, group_epoch, metadata_hash))

        # 2. The target assignment, when the group epoch moved past it.
        targets = dict(group.target)
        if replaced is not None and replaced.member_id in targets:
            targets[updated.member_id] = targets.pop(replaced.member_id)
        now = self.time_ms()
        due = group.assignment_epoch < 0 or now - group.assignment_timestamp >= self._assignment_interval_ms(group.group_id)
        if group_epoch > group.assignment_epoch and due:
            new_targets = self._assign(members, group, targets)
            for mid in sorted(new_targets):
                if new_targets[mid] != targets.get(mid, {}) or (replaced is not None and mid == updated.member_id):
                    records.append(self._target_record(group.group_id, mid, new_targets[mid]))
            records.append(self._target_metadata_record(group.group_id, group_epoch, now))
            targets, target_epoch = new_targets, group_epoch
        else:
            target_epoch = group.assignment_epoch
            if replaced is not None and updated.member_id in targets:
                records.append(self._target_record(group.group_id, updated.member_id, targets[updated.member_id]))

        # 3. Reconcile the member with its target.
        subscription_changed = (updated.subscribed_topic_names, updated.subscribed_topic_regex) != \
            (member.subscribed_topic_names, member.subscribed_topic_regex)
        subscribed = self._topic_ids(updated, group.group_id) if subscription_changed and not new_member else None
        reconciled = reconcile(updated, target_epoch, targets.get(updated.member_id, {}), group, req.owned, subscribed)
        if new_member or reconciled.assignment_key() != member.assignment_key():
            records.append(self._current_assignment_record(group.group_id, reconciled))

        if records:
            self._write_and_replay(group.group_id, records)
        self._schedule_session(group.group_id, reconciled.member_id)
        self._maybe_schedule_rebalance_timeout(group.group_id, member, reconciled)

        full = joining or (req.rebalance_timeout_ms != -1 and req.subscribed_topic_names is not None
                           and req.owned is not None)
        changed = reconciled.assigned != member.assigned
        return HeartbeatResult(member_id=reconciled.member_id, member_epoch=reconciled.member_epoch,
                               heartbeat_interval_ms=self._heartbeat_interval_ms(group.group_id),
                               assignment=reconciled.assigned if full or changed else None)

    def _group_for_heartbeat(self, req: HeartbeatRequest, records: list[Record]) -> ConsumerGroup:
        group = self.groups.get(req.group_id)
        if group is not None:
            return group
        classic = self.classic_group(req.group_id)
        if classic is not None:
            if req.member_epoch != JOIN_EPOCH or not classic.is_empty():
                raise _fail(ErrorCode.GROUP_ID_NOT_FOUND, _not_upgradable(classic, req.member_epoch == JOIN_EPOCH))
            records += self.convert_empty_classic(req.group_id)
        elif req.member_epoch != JOIN_EPOCH:
            raise _fail(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {req.group_id} not found.")
        return ConsumerGroup(req.group_id)

    def _member_for_heartbeat(self, group: ConsumerGroup, member_id: str,
                              req: HeartbeatRequest) -> tuple[ConsumerGroupMember, ConsumerGroupMember | None]:
        """The member as it stands (a fresh one when joining), and the static member it replaces."""
        gid = group.group_id
        if req.instance_id is not None:
            owner_id = group.static_members.get(req.instance_id)
            owner = group.members.get(owner_id) if owner_id is not None else None
            if req.member_epoch == JOIN_EPOCH:
                if owner is None:
                    return group.members.get(member_id) or ConsumerGroupMember(member_id), None
                if owner.member_id == member_id:
                    return owner, None
                if owner.member_epoch != LEAVE_STATIC_EPOCH:
                    raise _fail(ErrorCode.UNRELEASED_INSTANCE_ID,
                                f"Static member {member_id} with instance id {req.instance_id} cannot join the "
                                f"group because the instance id is owned by {owner.member_id} member.")
                # The instance comes back under a new member id: it takes over the old assignment.
                return replace(owner, member_id=member_id, member_epoch=owner.previous_member_epoch), owner
            if owner is None:
                raise _fail(ErrorCode.UNKNOWN_MEMBER_ID,
                            f"Instance id {req.instance_id} is unknown.")
            if owner.member_id != member_id:
                raise _fail(ErrorCode.FENCED_INSTANCE_ID,
                            f"Static member {member_id} with instance id {req.instance_id} was fenced by member "
                            f"{owner.member_id}.")
            self._check_epoch(owner, req)
            return owner, None
        member = group.members.get(member_id)
        if req.member_epoch == JOIN_EPOCH:
            # A known member sending a full join again keeps its epoch and assignment (and is sent it).
            return (member if member is not None else ConsumerGroupMember(member_id)), None
        if member is None:
            raise _fail(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {gid}.")
        self._check_epoch(member, req)
        return member, None

    @staticmethod
    def _rejoined(member: ConsumerGroupMember) -> ConsumerGroupMember:
        """A known member joining again with epoch 0 owns nothing any more (it said so)."""
        return replace(member, member_epoch=0, previous_member_epoch=0, state=MemberState.STABLE,
                       assigned={}, pending_revocation={})

    @staticmethod
    def _check_epoch(member: ConsumerGroupMember, req: HeartbeatRequest) -> None:
        """Kafka's throwIfMemberEpochIsInvalid."""
        received = req.member_epoch
        if received > member.member_epoch:
            raise _fail(ErrorCode.FENCED_MEMBER_EPOCH,
                        f"The consumer group member has a greater member epoch ({received}) than the one known by "
                        f"the group coordinator ({member.member_epoch}). The member must abandon all its "
                        f"partitions and rejoin.")
        # A member one epoch behind is accepted: the answer that moved it on may have been lost.
        lost_answer = received == member.previous_member_epoch and req.owned is not None and \
            _is_subset(req.owned, member.assigned)
        if received < member.member_epoch and not lost_answer:
            raise _fail(ErrorCode.FENCED_MEMBER_EPOCH,
                        f"The consumer group member has a smaller member epoch ({received}) than the one known "
                        f"by the group coordinator ({member.member_epoch}). The member must abandon all its "
                        f"partitions and rejoin.")

    def _assign(self, members: dict[str, ConsumerGroupMember], group: ConsumerGroup,
                current: dict[str, Assignment]) -> dict[str, Assignment]:
        name = self.assignor_name(members.values())
        partitions: dict[uuid.UUID, int] = {}
        subscriptions: dict[str, frozenset[uuid.UUID]] = {}
        for m in members.values():
            ids = []
            for topic in self._member_topics(m, group.group_id):
                info = self.topics.get(topic) if self.topics is not None else None
                if info is not None:
                    partitions[info.topic_id] = info.partitions
                    ids.append(info.topic_id)
            subscriptions[m.member_id] = frozenset(ids)
        return ASSIGNORS[name](subscriptions, partitions, current)

    def assignor_name(self, members: Iterable[ConsumerGroupMember]) -> str:
        """The assignor most members ask for (ties: the configured order), else the first configured."""
        votes: dict[str, int] = {}
        for m in members:
            if m.server_assignor is not None:
                votes[m.server_assignor] = votes.get(m.server_assignor, 0) + 1
        if not votes:
            return self.config.assignors[0]
        return max(votes, key=lambda a: (votes[a], -self.config.assignors.index(a) if a in self.config.assignors
                                         else -99))

    def _topic_ids(self, m: ConsumerGroupMember, group_id: str) -> frozenset[uuid.UUID]:
        infos = (self.topics.get(t) for t in self._member_topics(m, group_id)) if self.topics is not None else ()
        return frozenset(info.topic_id for info in infos if info is not None)

    def _member_topics(self, m: ConsumerGroupMember, group_id: str) -> list[str]:
        topics = list(m.subscribed_topic_names)
        if m.subscribed_topic_regex:
            topics += self.resolve_regex(m.subscribed_topic_regex, group_id)
        return topics

    def _metadata_hash(self, members: Iterable[ConsumerGroupMember], group_id: str) -> int:
        """A hash of the subscribed topics' ids and partition counts: a change moves the group epoch."""
        if self.topics is None:
            return 0
        parts = []
        for name in sorted({t for m in members for t in self._member_topics(m, group_id)}):
            info = self.topics.get(name)
            if info is not None:
                parts.append(f"{name}:{info.topic_id}:{info.partitions}")
        if not parts:
            return 0
        return zlib.crc32("|".join(parts).encode()) or 1

    # --- leaving -----------------------------------------------------------------------------

    def _leave(self, req: HeartbeatRequest) -> HeartbeatResult:
        group = self.groups.get(req.group_id)
        if group is None:
            if self.classic_group(req.group_id) is not None:
                raise _fail(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a consumer group.")
            raise _fail(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {req.group_id} not found.")
        member = group.members.get(req.member_id)
        if req.instance_id is not None:
            owner_id = group.static_members.get(req.instance_id)
            if owner_id is None:
                raise _fail(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
            if owner_id != req.member_id:
                raise _fail(ErrorCode.FENCED_INSTANCE_ID,
                            f"Static member {req.member_id} with instance id {req.instance_id} was fenced by member "
                            f"{owner_id}.")
            member = group.members[owner_id]
        if member is None:
            raise _fail(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group {group.group_id}.")
        if req.member_epoch == LEAVE_STATIC_EPOCH:
            # A static member going away for a while keeps its partitions until its session expires.
            left = replace(member, member_epoch=LEAVE_STATIC_EPOCH, previous_member_epoch=member.member_epoch)
            self._write_and_replay(group.group_id, [self._current_assignment_record(group.group_id, left)])
            self.timer.cancel(rebalance_key(group.group_id, member.member_id))
        else:
            self._remove_member(group, member.member_id)
        return HeartbeatResult(member_id=req.member_id, member_epoch=req.member_epoch, heartbeat_interval_ms=0)

    def _remove_member(self, group: ConsumerGroup, member_id: str) -> None:
        """Fence a member: its records go, the group epoch moves so the others get its partitions."""
        remaining = [m for mid, m in group.members.items() if mid != member_id]
        records = self._member_tombstones(group.group_id, member_id)
        records.append(self._group_epoch_record(group.group_id, group.group_epoch + 1, self._metadata_hash(remaining, group.group_id)))
        self._write_and_replay(group.group_id, records)
        self.timer.cancel(session_key(group.group_id, member_id))
        self.timer.cancel(rebalance_key(group.group_id, member_id))

    # --- per-group configs (consumer.*.ms group configs, else the broker's) ---------------

    def _group_int(self, group_id: str, name: str, default: int) -> int:
        value = self.group_config(group_id).get(name)
        try:
            return default if value is None else int(value.strip())
        except ValueError:
            return default

    def _session_timeout_ms(self, group_id: str) -> int:
        return self._group_int(group_id, "consumer.session.timeout.ms", self.config.session_timeout_ms)

    def _heartbeat_interval_ms(self, group_id: str) -> int:
        return self._group_int(group_id, "consumer.heartbeat.interval.ms", self.config.heartbeat_interval_ms)

    def _assignment_interval_ms(self, group_id: str) -> int:
        return self._group_int(group_id, "consumer.assignment.interval.ms", self.config.assignment_interval_ms)

    # --- timers ----------------------------------------------------------------------------

    def _schedule_session(self, group_id: str, member_id: str) -> None:
        self.timer.schedule(session_key(group_id, member_id), self._session_timeout_ms(group_id),
                            lambda: self._expire(group_id, member_id, "session timeout"))

    def _maybe_schedule_rebalance_timeout(self, group_id: str, before: ConsumerGroupMember | None,
                                          member: ConsumerGroupMember) -> None:
        """A member asked to revoke partitions must do so within its rebalance timeout, counted from
        when it was asked."""
        key = rebalance_key(group_id, member.member_id)
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            if before is not None and before.state is MemberState.UNREVOKED_PARTITIONS and \
                    before.member_epoch == member.member_epoch and before.pending_revocation == member.pending_revocation:
                return
            epoch = member.member_epoch

            def expire() -> None:
                group = self.groups.get(group_id)
                m = group.members.get(member.member_id) if group is not None else None
                if m is not None and m.state is MemberState.UNREVOKED_PARTITIONS and m.member_epoch == epoch:
                    self._expire(group_id, member.member_id, "rebalance timeout")

            self.timer.schedule(key, max(member.rebalance_timeout_ms, 0), expire)
        else:
            self.timer.cancel(key)

    def _expire(self, group_id: str, member_id: str, why: str) -> None:
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return
        try:
            self._remove_member(group, member_id)
            log.info("consumer group member fenced", group=group_id, member=member_id, reason=why)
        except KafkaError as e:
            log.warning("could not fence consumer group member", group=group_id, member=member_id, error=e.code.name)
            self._schedule_session(group_id, member_id)

    # ======================================================================================
    # Offsets: who may commit and fetch
    # ======================================================================================

    def validate_offset_commit(self, group: ConsumerGroup, member_id: str, member_epoch: int,
                               transactional: bool, api_version: int) -> None:
        """Kafka's ConsumerGroup.validateOffsetCommit."""
        if member_epoch < 0 and not group.members:
            return
        member = group.members.get(member_id)
        if member is None:
            raise _fail(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group.group_id}.")
        if not transactional and api_version < 9:
            raise _fail(ErrorCode.UNSUPPORTED_VERSION,
                        "OffsetCommit version 9 or above must be used by members using the modern group protocol")
        _validate_member_epoch(member_epoch, member.member_epoch)

    def validate_offset_fetch(self, group: ConsumerGroup, member_id: str | None, member_epoch: int) -> None:
        """Kafka's ConsumerGroup.validateOffsetFetch (OffsetFetch v9+ with a member)."""
        if member_epoch < 0 and member_id is None:
            return
        member = group.members.get(member_id or "")
        if member is None:
            raise _fail(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group.group_id}.")
        _validate_member_epoch(member_epoch, member.member_epoch)

    # ======================================================================================
    # Admin
    # ======================================================================================

    def leave_by_classic_request(self, group_id: str, member_id: str, instance_id: str | None) -> ErrorCode:
        """LeaveGroup naming a member of a consumer group removes it, as Kafka does."""
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if not member_id and instance_id is not None:
            member_id = group.static_members.get(instance_id, "")
        if member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        try:
            self._remove_member(group, member_id)
        except KafkaError as e:
            return e.code
        return ErrorCode.NONE

    def delete_group_records(self, group: ConsumerGroup) -> list[Record]:
        """The tombstones that delete an empty group (Kafka's createGroupTombstoneRecords)."""
        gid = group.group_id
        records: list[Record] = []
        for mid in group.members:
            records += self._member_tombstones(gid, mid)
        records.append((crec.key(crec.TARGET_ASSIGNMENT_METADATA, gid), None))
        records.append((crec.key(crec.GROUP_METADATA, gid), None))
        return records

    def forget(self, group_id: str) -> None:
        group = self.groups.pop(group_id, None)
        self._regex_filters.pop(group_id, None)
        if group is not None:
            for mid in group.members:
                self.timer.cancel(session_key(group_id, mid))
                self.timer.cancel(rebalance_key(group_id, mid))

    def topic_name(self, topic_id: uuid.UUID) -> str:
        name = self.topics.name_of(topic_id) if self.topics is not None else None
        return name or ""

    # ======================================================================================
    # Records: writing, replaying, loading
    # ======================================================================================

    def _write_and_replay(self, group_id: str, records: list[Record]) -> None:
        self.writer(group_id, records)
        for k, v in records:
            self.replay(k, v)

    def replay(self, key: bytes, value: bytes | None) -> None:
        """Apply one consumer group record (types 3, 5-8); raises RecordFormatError."""
        record_type = int.from_bytes(key[:2], "big", signed=True)
        if record_type not in crec.RECORD_TYPES:
            return
        k = crec.decode_key(record_type, key[2:])
        group = self.groups.get(k.group_id)
        if value is None:
            self._replay_tombstone(record_type, k, group)
            return
        v = crec.decode_value(record_type, value)
        if group is None:
            group = self.groups[k.group_id] = ConsumerGroup(k.group_id)
        if record_type == crec.GROUP_METADATA:
            group.group_epoch, group.metadata_hash = v.epoch, v.metadata_hash
        elif record_type == crec.TARGET_ASSIGNMENT_METADATA:
            group.assignment_epoch, group.assignment_timestamp = v.assignment_epoch, v.assignment_timestamp
        elif record_type == crec.TARGET_ASSIGNMENT_MEMBER:
            group.target[k.member] = crec.from_topic_partitions(v.topic_partitions)
        elif record_type == crec.MEMBER_METADATA:
            old = group.members.get(k.member) or ConsumerGroupMember(k.member)
            group.put_member(replace(
                old, instance_id=v.instance_id, rack_id=v.rack_id, client_id=v.client_id, client_host=v.client_host,
                subscribed_topic_names=tuple(v.subscribed_topic_names), subscribed_topic_regex=v.subscribed_topic_regex,
                rebalance_timeout_ms=v.rebalance_timeout_ms, server_assignor=v.server_assignor))
        elif record_type == crec.CURRENT_MEMBER_ASSIGNMENT:
            old = group.members.get(k.member) or ConsumerGroupMember(k.member)
            try:
                state = MemberState(v.state)
            except ValueError:
                state = MemberState.UNKNOWN
            group.put_member(replace(
                old, member_epoch=v.member_epoch, previous_member_epoch=v.previous_member_epoch, state=state,
                assigned=crec.from_topic_partitions(v.assigned_partitions),
                pending_revocation=crec.from_topic_partitions(v.partitions_pending_revocation)))

    def _replay_tombstone(self, record_type: int, k: crec.ConsumerRecordKey, group: ConsumerGroup | None) -> None:
        if group is None:
            return
        if record_type == crec.GROUP_METADATA:
            self.forget(k.group_id)
        elif record_type == crec.TARGET_ASSIGNMENT_METADATA:
            group.assignment_epoch = -1
        elif record_type == crec.TARGET_ASSIGNMENT_MEMBER:
            group.target.pop(k.member, None)
        elif record_type == crec.MEMBER_METADATA:
            group.remove_member(k.member)
        elif record_type == crec.CURRENT_MEMBER_ASSIGNMENT:
            member = group.members.get(k.member)
            if member is not None:
                group.put_member(self._rejoined(member))

    def unload(self, group_ids: set[str]) -> None:
        """Drop these consumer groups and their timers (their partition moved to another broker)."""
        for group_id in group_ids:
            group = self.groups.pop(group_id, None)
            self._regex_filters.pop(group_id, None)
            if group is None:
                continue
            for member_id in group.members:
                self.timer.cancel(session_key(group_id, member_id))
                self.timer.cancel(rebalance_key(group_id, member_id))

    def on_loaded(self, only: set[str] | None = None) -> None:
        """Every loaded member must heartbeat within its session timeout."""
        for group in self.groups.values():
            if only is not None and group.group_id not in only:
                continue
            for member in group.members.values():
                self._schedule_session(group.group_id, member.member_id)
                self._maybe_schedule_rebalance_timeout(group.group_id, None, member)

    # --- record builders ---------------------------------------------------------------------

    @staticmethod
    def _member_tombstones(group_id: str, member_id: str) -> list[Record]:
        return [(crec.key(crec.CURRENT_MEMBER_ASSIGNMENT, group_id, member_id), None),
                (crec.key(crec.TARGET_ASSIGNMENT_MEMBER, group_id, member_id), None),
                (crec.key(crec.MEMBER_METADATA, group_id, member_id), None)]

    @staticmethod
    def _member_metadata_record(group_id: str, m: ConsumerGroupMember) -> Record:
        return (crec.key(crec.MEMBER_METADATA, group_id, m.member_id), crec.value(
            crec.MEMBER_METADATA, instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id,
            client_host=m.client_host, subscribed_topic_names=list(m.subscribed_topic_names),
            subscribed_topic_regex=m.subscribed_topic_regex, rebalance_timeout_ms=m.rebalance_timeout_ms,
            server_assignor=m.server_assignor, classic_member_metadata=None))

    @staticmethod
    def _group_epoch_record(group_id: str, epoch: int, metadata_hash: int) -> Record:
        return (crec.key(crec.GROUP_METADATA, group_id),
                crec.value(crec.GROUP_METADATA, epoch=epoch, metadata_hash=metadata_hash))

    @staticmethod
    def _target_record(group_id: str, member_id: str, assignment: Assignment) -> Record:
        return (crec.key(crec.TARGET_ASSIGNMENT_MEMBER, group_id, member_id),
                crec.value(crec.TARGET_ASSIGNMENT_MEMBER, topic_partitions=crec.topic_partitions(assignment)))

    @staticmethod
    def _target_metadata_record(group_id: str, epoch: int, now_ms: int) -> Record:
        return (crec.key(crec.TARGET_ASSIGNMENT_METADATA, group_id),
                crec.value(crec.TARGET_ASSIGNMENT_METADATA, assignment_epoch=epoch, assignment_timestamp=now_ms))

    @staticmethod
    def _current_assignment_record(group_id: str, m: ConsumerGroupMember) -> Record:
        return (crec.key(crec.CURRENT_MEMBER_ASSIGNMENT, group_id, m.member_id), crec.value(
            crec.CURRENT_MEMBER_ASSIGNMENT, member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch,
            state=int(m.state), assigned_partitions=crec.topic_partitions(m.assigned),
            partitions_pending_revocation=crec.topic_partitions(m.pending_revocation)))


_RE2J_MESSAGES = {
    "unterminated character set": "missing closing ]",
    "missing ), unterminated subpattern": "missing closing )",
    "unbalanced parenthesis": "unexpected )",
    "nothing to repeat": "missing argument to repetition operator",
    "multiple repeat": "bad nested repetition operator",
}


def _re2j_message(python_message: str) -> str:
    """Python's ``re`` error in RE2J's words where they name the same mistake."""
    return _RE2J_MESSAGES.get(python_message, python_message)


def _not_upgradable(classic: ClassicGroup, joining: bool) -> str:
    """Why a classic group with members cannot become a consumer group (Kafka's messages; Kafka
    would upgrade a group of consumer-protocol members online, which this broker does not)."""
    gid = classic.group_id
    if joining and classic.protocol_type != "consumer":
        return f"Cannot upgrade classic group {gid} to consumer group because the group does not use the consumer " \
               f"embedded protocol."
    if joining and not _valid_subscriptions(classic):
        return f"Cannot upgrade classic group {gid} to consumer group because the embedded consumer protocol is " \
               f"malformed."
    return f"Group {gid} is not a consumer group."


def _valid_subscriptions(classic: ClassicGroup) -> bool:
    try:
        for m in classic.members.values():
            parse_subscription_topics(m.metadata(classic.protocol_name))
    except (ValueError, IndexError, UnicodeDecodeError, struct.error):
        return False
    return True


def _new_member_id() -> str:
    """Kafka's Uuid.randomUuid().toString(): 16 random bytes, URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def _is_subset(owned: Assignment, assigned: Assignment) -> bool:
    return all(ps <= assigned.get(t, frozenset()) for t, ps in owned.items())


def _validate_member_epoch(received: int, expected: int) -> None:
    """Offsets: any other epoch than the member's is stale (Kafka's ConsumerGroup.validateMemberEpoch)."""
    if received != expected:
        raise _fail(ErrorCode.STALE_MEMBER_EPOCH,
                    f"The received member epoch {received} does not match the expected member epoch {expected}.")
