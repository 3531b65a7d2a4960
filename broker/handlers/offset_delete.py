"""OffsetDelete (key 47), v0: delete some committed offsets of a group (KIP-496).

Allowed on Empty groups, and on active consumer-protocol groups for topics they are not
subscribed to (GROUP_SUBSCRIBED_TO_TOPIC otherwise); an active group of another protocol type
gets NON_EMPTY_GROUP, a missing group GROUP_ID_NOT_FOUND (top-level). Partitions of unknown
topics get UNKNOWN_TOPIC_OR_PARTITION, as KafkaApis checks them.
Authorization (KafkaApis.handleOffsetDeleteRequest): DELETE on the group (a top-level
GROUP_AUTHORIZATION_FAILED otherwise), then READ on each topic (TOPIC_AUTHORIZATION_FAILED on its
partitions, before its existence is looked at).
"""

from __future__ import annotations

from collections.abc import Awaitable

from broker.handlers.group_writes import replicated, waits
from broker.handlers.registry import api
from broker.net.context import RequestContext
from broker.security.checks import Operation, ResourceType, allowed, filter_allowed
from protocol.errors import ErrorCode
from protocol.messages import ApiMessage, lazy_response

Response = lazy_response(47)
TopicResp = Response.OffsetDeleteResponseTopic
PartResp = TopicResp.OffsetDeleteResponsePartition


@api(47, (0, 0))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage | Awaitable[ApiMessage]:
    broker = ctx.broker
    # KafkaApis.handleOffsetDeleteRequest: DELETE on the group, then READ on each topic
    if not allowed(ctx, Operation.DELETE, ResourceType.GROUP, req.group_id):
        return Response(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, throttle_time_ms=0, topics=[])
    readable = filter_allowed(ctx, Operation.READ, ResourceType.TOPIC, (t.name for t in req.topics))
    errors, found = broker.metadata.split_known_partitions([t for t in req.topics if t.name in readable])
    errors.update({(t.name, p.partition_index): ErrorCode.TOPIC_AUTHORIZATION_FAILED
                   for t in req.topics if t.name not in readable for p in t.partitions})
    known = [(name, [p.partition_index for p in parts]) for name, parts in found]
    gc = broker.group_coordinator
    if (error := gc.check(req.group_id)) != ErrorCode.NONE:
        return Response(error_code=error, throttle_time_ms=0, topics=[])
    top, results = gc.manager.delete_offsets(req.group_id, known)
    if top != ErrorCode.NONE:
        return Response(error_code=top, throttle_time_ms=0, topics=[])
    for name, parts in results:
        for p, code in parts:
            errors[(name, p)] = code
    if waits(ctx):
        return _after_replication(ctx, req, errors)
    return _response(req, errors)


async def _after_replication(ctx: RequestContext, req: ApiMessage, errors: dict) -> ApiMessage:
    """Answered once the ISR holds the offsets' tombstones."""
    if (code := await replicated(ctx, req.group_id)) != ErrorCode.NONE:
        return Response(error_code=code, throttle_time_ms=0, topics=[])
    return _response(req, errors)


def _response(req: ApiMessage, errors: dict) -> ApiMessage:
    return Response(error_code=ErrorCode.NONE, throttle_time_ms=0, topics=[
        TopicResp(name=t.name, partitions=[
            PartResp(partition_index=p.partition_index, error_code=errors.get((t.name, p.partition_index),
                                                                             ErrorCode.NONE))
            for p in t.partitions
        ])
        for t in req.topics
    ])
