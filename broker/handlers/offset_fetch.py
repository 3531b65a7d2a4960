"""OffsetFetch (key 9), v1-10: read a group's committed offsets.

v1-7 ask for one group, v8+ for several (``groups``). A null topic list (v2+) means every
partition the group has committed. Partitions without a committed offset, and every partition
of a group that does not exist, answer offset -1 with no error (Kafka does not check topics
here). ``require_stable`` (v7+): a partition with a pending transactional commit answers
UNSTABLE_OFFSET_COMMIT (the hook for exactly-once; see coordinator/group/offsets.py).
Group-level errors are top-level from v2 and repeated on every partition in v1. v10 names
topics by id both ways: an unknown id answers UNKNOWN_TOPIC_ID on each requested partition (after
the known ones, as Kafka orders them), and an all-topics fetch lists the committed topics that
still have an id.
Authorization (KafkaApis.handleOffsetFetchRequest): DESCRIBE on each group (refused: 30 on every
requested partition in v1, top-level in v2-7, the group's own error from v8), then DESCRIBE on each
topic: a requested one refused answers TOPIC_AUTHORIZATION_FAILED on its partitions, after the
coordinator's topics; an all-topics fetch leaves the refused ones out.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence

from broker.handlers.registry import api
from broker.net.context import RequestContext
from broker.security.checks import Operation, ResourceType, allowed, filter_allowed
from coordinator.group.manager import FetchedPartition
from protocol.errors import ErrorCode
from protocol.messages import ApiMessage, lazy_response

Response = lazy_response(9)
OldTopic = Response.OffsetFetchResponseTopic
OldPartition = OldTopic.OffsetFetchResponsePartition
Group = Response.OffsetFetchResponseGroup
GroupTopic = Group.OffsetFetchResponseTopics
GroupPartition = GroupTopic.OffsetFetchResponsePartitions
Member = tuple[str | None, int]  # (member id, member epoch) of a consumer group's member, v9+
Requested = list[tuple[str, list[int]]]  # (topic, partitions); None asks for every committed one
Fetched = list[FetchedPartition]


def requested_of(topics: Iterable[ApiMessage] | None) -> Requested | None:
    return None if topics is None else [(t.name, list(t.partition_indexes)) for t in topics]


def _coordinator_fetch(ctx: RequestContext, group_id: str | None, requested: Requested | None, require_stable: bool,
                      member: Member) -> tuple[ErrorCode, list[tuple[str, Fetched]]]:
    """What the group coordinator answers for one group: (group error, [(topic, [FetchedPartition])])."""
    gc = ctx.broker.group_coordinator
    if (error := gc.check(group_id or "")) != ErrorCode.NONE:
        return error, []
    return gc.manager.fetch_offsets(group_id, requested, require_stable, *member)


def fetch_group(ctx: RequestContext, group_id: str | None, requested: Requested | None, require_stable: bool,
                member: Member = (None, -1)) -> tuple[ErrorCode, list[tuple[str, Fetched]]]:
    """(group error, [(topic, [FetchedPartition])]) for one requested group (none on a group
    error); ``member`` (v9+: member id and epoch) is checked by a consumer group. As KafkaApis:
    requested topics the client may not DESCRIBE are not asked for and follow the coordinator's
    answer with TOPIC_AUTHORIZATION_FAILED; from an all-topics fetch they are left out."""
    if requested is None:
        code, result = _coordinator_fetch(ctx, group_id, None, require_stable, member)
        if code != ErrorCode.NONE:
            return code, []
        describable = filter_allowed(ctx, Operation.DESCRIBE, ResourceType.TOPIC, (name for name, _ in result))
        return code, [(name, parts) for name, parts in result if name in describable]
    describable = filter_allowed(ctx, Operation.DESCRIBE, ResourceType.TOPIC, (name for name, _ in requested))
    code, result = _coordinator_fetch(ctx, group_id, [(n, ps) for n, ps in requested if n in describable],
                                      require_stable, member)
    if code != ErrorCode.NONE:
        return code, []
    return code, result + _with_error([(n, ps) for n, ps in requested if n not in describable],
                                      ErrorCode.TOPIC_AUTHORIZATION_FAILED)


def fetch_group_by_id(ctx: RequestContext, group_id: str, topics: Sequence[ApiMessage] | None,
                      require_stable: bool, member: Member = (None, -1)
                      ) -> tuple[ErrorCode, list[tuple[uuid.UUID, Fetched]]]:
    """v10, as Kafka 4.x's KafkaApis: (group error, [(topic id, [FetchedPartition])]). Requested
    ids are resolved first and the coordinator asked for the known ones the client may DESCRIBE
    (even none, so group errors still show); the others follow in request order: UNKNOWN_TOPIC_ID
    (an unknown id), TOPIC_AUTHORIZATION_FAILED on each partition. An all-topics fetch leaves out
    committed topics that no longer have an id (it cannot name them)."""
    metadata = ctx.broker.metadata
    if topics is None:
        code, result = fetch_group(ctx, group_id, None, require_stable, member)
        if code != ErrorCode.NONE:
            return code, []
        named = [(metadata.topics.get(name), parts) for name, parts in result]
        return code, [(info.topic_id, parts) for info, parts in named if info is not None]
    names = [metadata.name_of(t.topic_id) for t in topics]
    describable = filter_allowed(ctx, Operation.DESCRIBE, ResourceType.TOPIC, (n for n in names if n is not None))
    known = [(t, name) for t, name in zip(topics, names, strict=True) if name is not None and name in describable]
    code, result = _coordinator_fetch(ctx, group_id, [(name, list(t.partition_indexes)) for t, name in known],
                                      require_stable, member)
    if code != ErrorCode.NONE:
        return code, []
    refused = [(t.topic_id, [FetchedPartition(p, error=ErrorCode.UNKNOWN_TOPIC_ID if name is None
                                              else ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                             for p in t.partition_indexes])
               for t, name in zip(topics, names, strict=True) if name is None or name not in describable]
    return code, [(t.topic_id, parts) for (t, _), (_, parts) in zip(known, result, strict=True)] + refused


def _with_error(requested: Requested | None, code: ErrorCode) -> list[tuple[str, Fetched]]:
    return [(name, [FetchedPartition(p, error=code) for p in parts]) for name, parts in requested or []]


@api(9, (1, 10))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage:
    v = ctx.api_version
    require_stable = bool(req.require_stable) if v >= 7 else False
    if v < 8:
        topics = req.topics
        if v < 2 and topics is None:
            topics = []
        requested = requested_of(topics)
        # KafkaApis.handleOffsetFetchRequest: DESCRIBE on the group (OffsetFetchResponse.groupError)
        result: list[tuple[str, Fetched]] = []
        if not allowed(ctx, Operation.DESCRIBE, ResourceType.GROUP, req.group_id or ""):
            code = ErrorCode.GROUP_AUTHORIZATION_FAILED
        else:
            code, result = fetch_group(ctx, req.group_id, requested, require_stable)
        if code != ErrorCode.NONE:  # group-level: top-level from v2; v1 has only partition errors
            result = _with_error(requested, code) if v < 2 else []
        return Response(
            throttle_time_ms=0,
            error_code=code,
            topics=[
                OldTopic(name=name, partitions=[
                    OldPartition(partition_index=p.partition, committed_offset=p.offset,
                                 committed_leader_epoch=p.leader_epoch, metadata=p.metadata, error_code=p.error)
                    for p in parts
                ])
                for name, parts in result
            ],
        )
    groups: list[ApiMessage] = []
    for g in req.groups:
        member: Member = (g.member_id, g.member_epoch) if v >= 9 else (None, -1)
        rows: list[tuple[str, uuid.UUID | None, Fetched]] = []  # (name, topic id, partitions)
        if not allowed(ctx, Operation.DESCRIBE, ResourceType.GROUP, g.group_id or ""):  # as for v1-7
            code = ErrorCode.GROUP_AUTHORIZATION_FAILED
        elif v >= 10:
            code, by_id = fetch_group_by_id(ctx, g.group_id, g.topics, require_stable, member)
            if code == ErrorCode.NONE:
                rows = [("", topic_id, parts) for topic_id, parts in by_id]
        else:
            code, result = fetch_group(ctx, g.group_id, requested_of(g.topics), require_stable, member)
            if code == ErrorCode.NONE:
                rows = [(name, None, parts) for name, parts in result]
        groups.append(Group(
            group_id=g.group_id,
            error_code=code,
            topics=[
                GroupTopic(name=name, topic_id=topic_id, partitions=[
                    GroupPartition(partition_index=p.partition, committed_offset=p.offset,
                                   committed_leader_epoch=p.leader_epoch, metadata=p.metadata, error_code=p.error)
                    for p in parts
                ])
                for name, topic_id, parts in rows
            ],
        ))
    return Response(throttle_time_ms=0, groups=groups)
