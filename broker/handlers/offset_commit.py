"""OffsetCommit (key 8), v2-10: commit a group's consumed positions to ``__consumer_offsets``.

Every accepted partition becomes one OffsetCommitValue record (v3, or v1 when v2-4's
``retention_time_ms`` sets an expire timestamp), appended in one batch to the group's
partition before the answer, so an answered commit survives a crash. As in Kafka:

- partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION (checked here, like KafkaApis);
- generation -1 with no member id is a "simple" commit, accepted only while the group has no
  members (a group that does not exist yet is created Empty); otherwise the member and
  generation must match: UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, ILLEGAL_GENERATION,
  REBALANCE_IN_PROGRESS while CompletingRebalance; for a missing group with a generation,
  ILLEGAL_GENERATION (GROUP_ID_NOT_FOUND from v9);
- metadata longer than ``offset.metadata.max.bytes``: OFFSET_METADATA_TOO_LARGE;
- a commit by a member of a Stable/PreparingRebalance group also counts as its heartbeat.
v6+ carry the committed leader epoch; v7+ the group instance id. v10 names topics by id
(KIP-848's topic ids, also sent by the classic Java consumer): an unknown id gets UNKNOWN_TOPIC_ID
for each of its partitions; offsets are still stored by topic name, as Kafka stores them.
Authorization (KafkaApis.handleOffsetCommitRequest): READ on the group (GROUP_AUTHORIZATION_FAILED
on every partition otherwise), then READ on each topic (TOPIC_AUTHORIZATION_FAILED on its
partitions, before its existence is looked at; an unknown v10 id is UNKNOWN_TOPIC_ID first).
"""

from __future__ import annotations

from collections.abc import Awaitable

from broker.handlers.group_writes import replicated
from broker.handlers.registry import api
from broker.net.context import RequestContext
from broker.security.checks import Operation, ResourceType, allowed, filter_allowed
from coordinator.group.manager import CommitPartition
from protocol.errors import ErrorCode
from protocol.messages import ApiMessage, lazy_response

Response = lazy_response(8)
TopicResp = Response.OffsetCommitResponseTopic
PartResp = TopicResp.OffsetCommitResponsePartition


@api(8, (2, 10))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage | Awaitable[ApiMessage]:
    v = ctx.api_version
    broker = ctx.broker
    # KafkaApis.handleOffsetCommitRequest: READ on the group, else the refusal on every partition
    if not allowed(ctx, Operation.READ, ResourceType.GROUP, req.group_id):
        return _response(req, {}, v, default=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    topics, unknown_ids = broker.metadata.named_by_id(req.topics) if v >= 10 else (req.topics, {})
    # then READ on each (resolved) topic, before its existence
    readable = filter_allowed(ctx, Operation.READ, ResourceType.TOPIC, (t.name for t in topics))
    refused = {(t.name, p.partition_index): ErrorCode.TOPIC_AUTHORIZATION_FAILED
               for t in topics if t.name not in readable for p in t.partitions}
    errors, known = broker.metadata.split_known_partitions([t for t in topics if t.name in readable])
    errors.update(unknown_ids)
    errors.update(refused)
    to_commit = [
        (name, [CommitPartition(p.partition_index, p.committed_offset,
                                p.committed_leader_epoch if v >= 6 else -1, p.committed_metadata) for p in parts])
        for name, parts in known
    ]
    if to_commit:
        gc = broker.group_coordinator
        if (error := gc.check(req.group_id)) != ErrorCode.NONE:
            for name, parts in to_commit:
                for p in parts:
                    errors[(name, p.partition)] = error
        else:
            errors.update(gc.manager.commit_offsets(
                req.group_id,
                req.generation_id_or_member_epoch,
                req.member_id,
                req.group_instance_id if v >= 7 else None,
                req.retention_time_ms if v <= 4 else -1,
                to_commit,
                v,
            ))
            if broker.shared is not None and ErrorCode.NONE in errors.values():
                return _after_replication(ctx, req, errors)
    return _response(req, errors, v)


async def _after_replication(ctx: RequestContext, req: ApiMessage, errors: dict) -> ApiMessage:
    """Among several brokers, the commit is answered once its partition's ISR holds it."""
    code = await replicated(ctx, req.group_id)
    if code != ErrorCode.NONE:
        errors = {k: code if e == ErrorCode.NONE else e for k, e in errors.items()}
    return _response(req, errors, ctx.api_version)


def _response(req: ApiMessage, errors: dict, v: int, default: ErrorCode | None = None) -> ApiMessage:
    """The answer in request order; with ``default``, that error on every partition
    (OffsetCommitRequest.getErrorResponse)."""
    return Response(
        throttle_time_ms=0,
        topics=[
            TopicResp(name=t.name if v < 10 else "", topic_id=t.topic_id if v >= 10 else None, partitions=[
                PartResp(partition_index=p.partition_index,
                         error_code=errors[(t.name, p.partition_index)] if default is None else default)
                for p in t.partitions
            ])
            for t in req.topics
        ],
    )
