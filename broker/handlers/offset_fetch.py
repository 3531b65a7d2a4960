"""OffsetFetch (key 9), v1-9: read a group's committed offsets.

v1-7 ask for one group, v8+ for several (``groups``). A null topic list (v2+) means every
partition the group has committed. Partitions without a committed offset, and every partition
of a group that does not exist, answer offset -1 with no error (Kafka does not check topics
here). ``require_stable`` (v7+): a partition with a pending transactional commit answers
UNSTABLE_OFFSET_COMMIT (the hook for exactly-once; see coordinator/group/offsets.py).
Group-level errors are top-level from v2 and repeated on every partition in v1.
"""

from __future__ import annotations

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


def fetch_group(ctx, group_id: str | None, topics, require_stable: bool):
    """(group error, [(topic, [FetchedPartition])]) for one requested group."""
    requested = None if topics is None else [(t.name, list(t.partition_indexes)) for t in topics]
    gc = ctx.broker.group_coordinator
    if gc is None or not gc.active:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, requested
    return gc.manager.fetch_offsets(group_id, requested, require_stable)


def _with_error(requested, code: ErrorCode) -> list[tuple[str, list[FetchedPartition]]]:
    return [(name, [FetchedPartition(p, error=code) for p in parts]) for name, parts in requested or []]


@api(9, (1, 9))
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
    for g in req.groups:
        code, result = fetch_group(ctx, g.group_id, g.topics, require_stable)
        if code != ErrorCode.NONE:
            result = []
        groups.append(Group(
            group_id=g.group_id,
            error_code=code,
            topics=[
                GroupTopic(name=name, partitions=[
                    GroupPartition(partition_index=p.partition, committed_offset=p.offset,
                                   committed_leader_epoch=p.leader_epoch, metadata=p.metadata, error_code=p.error)
                    for p in parts
                ])
                for name, parts in result
            ],
        ))
    return Response(throttle_time_ms=0, groups=groups)
