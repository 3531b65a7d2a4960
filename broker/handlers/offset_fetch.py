"""OffsetFetch (key 9), v1-10: read a group's committed offsets.

v1-7 ask for one group, v8+ for several (``groups``). A null topic list (v2+) means every
partition the group has committed. Partitions without a committed offset, and every partition
of a group that does not exist, answer offset -1 with no error (Kafka does not check topics
here). ``require_stable`` (v7+): a partition with a pending transactional commit answers
UNSTABLE_OFFSET_COMMIT (the hook for exactly-once; see coordinator/group/offsets.py).
Group-level errors are top-level from v2 and repeated on every partition in v1. v10 names
topics by id both ways: an unknown id answers UNKNOWN_TOPIC_ID on each requested partition, and
the topics of an all-topics fetch carry their current id (zero for a topic that is gone).
"""

from __future__ import annotations

import uuid

from broker.handlers.registry import api
from coordinator.group.manager import FetchedPartition
from protocol.errors import ErrorCode
from protocol.messages import lazy_response

Response = lazy_response(9)
OldTopic = Response.OffsetFetchResponseTopic
OldPartition = OldTopic.OffsetFetchResponsePartition
Group = Response.OffsetFetchResponseGroup
GroupTopic = Group.OffsetFetchResponseTopics
GroupPartition = GroupTopic.OffsetFetchResponsePartitions


ZERO_UUID = uuid.UUID(int=0)


def fetch_group(ctx, group_id: str | None, topics, require_stable: bool, by_id: bool = False):
    """(group error, [(topic, [FetchedPartition])]) for one requested group; ``by_id`` (v10): the
    topics are named by id, and those with an unknown id are answered UNKNOWN_TOPIC_ID here."""
    if by_id and topics is not None:
        return _fetch_by_id(ctx, group_id, topics, require_stable)
    requested = None if topics is None else [(t.name, list(t.partition_indexes)) for t in topics]
    gc = ctx.broker.group_coordinator
    if gc is None or not gc.active:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, requested
    return gc.manager.fetch_offsets(group_id, requested, require_stable)


def _fetch_by_id(ctx, group_id: str, topics, require_stable: bool):
    known_ids = ctx.broker.metadata.by_id
    names = {t.topic_id: known_ids[t.topic_id].name for t in topics if t.topic_id in known_ids}
    for t in topics:
        t.name = names.get(t.topic_id, "")
    code, result = fetch_group(ctx, group_id, [t for t in topics if t.topic_id in names], require_stable) \
        if names else (ErrorCode.NONE, [])
    if code != ErrorCode.NONE:
        return code, result
    fetched = iter(result)  # the known topics, in the request's order
    return code, [next(fetched) if t.topic_id in names
                  else (None, [FetchedPartition(p, error=ErrorCode.UNKNOWN_TOPIC_ID) for p in t.partition_indexes])
                  for t in topics]


def _with_error(requested, code: ErrorCode) -> list[tuple[str, list[FetchedPartition]]]:
    return [(name, [FetchedPartition(p, error=code) for p in parts]) for name, parts in requested or []]


@api(9, (1, 10))
def handle(ctx, req):
    v = ctx.api_version
    require_stable = bool(req.require_stable) if v >= 7 else False
    if v < 8:
        topics = req.topics
        if v < 2 and topics is None:
            topics = []
        code, result = fetch_group(ctx, req.group_id, topics, require_stable)
        if code != ErrorCode.NONE:
            # Group-level error: top-level from v2; v1 has only partition errors.
            requested = None if topics is None else [(t.name, list(t.partition_indexes)) for t in topics]
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
    groups = []
    topic_ids = {name: info.topic_id for name, info in ctx.broker.metadata.topics.items()} if v >= 10 else {}
    for g in req.groups:
        code, result = fetch_group(ctx, g.group_id, g.topics, require_stable, by_id=v >= 10)
        if code != ErrorCode.NONE:
            result = []
        if v >= 10 and g.topics is not None:  # answered in the request's order, by the request's ids
            ids = [t.topic_id for t in g.topics]
        else:
            ids = [topic_ids.get(name, ZERO_UUID) for name, _ in result] if v >= 10 else [None] * len(result)
        groups.append(Group(
            group_id=g.group_id,
            error_code=code,
            topics=[
                GroupTopic(name=name or "", topic_id=topic_id, partitions=[
                    GroupPartition(partition_index=p.partition, committed_offset=p.offset,
                                   committed_leader_epoch=p.leader_epoch, metadata=p.metadata, error_code=p.error)
                    for p in parts
                ])
                for (name, parts), topic_id in zip(result, ids, strict=True)
            ],
        ))
    return Response(throttle_time_ms=0, groups=groups)
