"""Heartbeat (key 12), v0-4: keeps a classic member's session alive.

NONE in CompletingRebalance/Stable (the session timer restarts), REBALANCE_IN_PROGRESS during
PreparingRebalance (the member must rejoin), UNKNOWN_MEMBER_ID for unknown groups/members or an
Empty group, FENCED_INSTANCE_ID for a stale static member, ILLEGAL_GENERATION, INVALID_GROUP_ID. Authorization (KafkaApis.handleHeartbeatRequest): READ on
the group, else GROUP_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from broker.handlers.registry import api
from broker.net.context import RequestContext
from broker.security.checks import Operation, ResourceType, allowed
from protocol.errors import ErrorCode
from protocol.messages import ApiMessage, lazy_response

Response = lazy_response(12)


@api(12, (0, 4))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage:
    # KafkaApis.handleHeartbeatRequest: READ on the group
    if not allowed(ctx, Operation.READ, ResourceType.GROUP, req.group_id):
        return Response(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    gc = ctx.broker.group_coordinator
    if (error := gc.check(req.group_id)) != ErrorCode.NONE:
        return Response(throttle_time_ms=0, error_code=error)
    code = gc.manager.heartbeat(req.group_id, req.member_id,
                                req.group_instance_id if ctx.api_version >= 3 else None, req.generation_id)
    return Response(throttle_time_ms=0, error_code=code)
