"""SyncGroup (key 14), v0-5: the classic rebalance's second phase.

The leader sends the assignment; it is written to ``__consumer_offsets`` (GroupMetadataValue
v3) before anyone is answered, then every parked SyncGroup gets its member's part and the
group becomes Stable. A follower's SyncGroup waits for the leader's. In Stable the current
assignment is returned at once; during PreparingRebalance the answer is REBALANCE_IN_PROGRESS.
Errors: UNKNOWN_MEMBER_ID (unknown or Empty group, unknown member), FENCED_INSTANCE_ID,
ILLEGAL_GENERATION, INCONSISTENT_GROUP_PROTOCOL (v5 protocol type/name that differ from the
group's, or are missing: KafkaApis requires both from v5), INVALID_GROUP_ID.
Authorization (KafkaApis.handleSyncGroupRequest): after that v5 check, READ on the group, else
GROUP_AUTHORIZATION_FAILED with an empty assignment.
"""

from __future__ import annotations

from collections.abc import Awaitable

from broker.handlers.group_writes import replicated
from broker.handlers.registry import api
from broker.net.context import RequestContext
from broker.security.checks import Operation, ResourceType, allowed
from coordinator.group.group import SyncResult
from protocol.errors import ErrorCode
from protocol.messages import ApiMessage, lazy_response

Response = lazy_response(14)


def build(r: SyncResult) -> ApiMessage:
    return Response(throttle_time_ms=0, error_code=r.error, protocol_type=r.protocol_type,
                    protocol_name=r.protocol_name, assignment=r.assignment)


async def _answer(ctx: RequestContext, group_id: str, pending: Awaitable[SyncResult]) -> ApiMessage:
    result = await pending
    if result.error == ErrorCode.NONE and (code := await replicated(ctx, group_id)) != ErrorCode.NONE:
        return build(SyncResult(error=code))  # the assignment did not reach the ISR
    return build(result)


@api(14, (0, 5))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage | Awaitable[ApiMessage]:
    v = ctx.api_version
    protocol_type = req.protocol_type if v >= 5 else None
    protocol_name = req.protocol_name if v >= 5 else None
    if v >= 5 and (protocol_type is None or protocol_name is None):
        return build(SyncResult(error=ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
    # KafkaApis.handleSyncGroupRequest: READ on the group
    if not allowed(ctx, Operation.READ, ResourceType.GROUP, req.group_id):
        return build(SyncResult(error=ErrorCode.GROUP_AUTHORIZATION_FAILED))
    return _answer(ctx, req.group_id, ctx.broker.group_coordinator.sync_group(
        req.group_id,
        req.generation_id,
        req.member_id,
        req.group_instance_id if v >= 3 else None,
        protocol_type,
        protocol_name,
        [(a.member_id, bytes(a.assignment)) for a in req.assignments],
    ))
