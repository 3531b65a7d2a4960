"""LeaveGroup (key 13), v0-5: members leave a classic group, which then rebalances.

v0-2 name one member; v3+ batch ``members`` (an empty member id with a group instance id
removes that static member administratively, KIP-345), answered one error per member; v5 adds
a reason per member. Unknown group: every member gets UNKNOWN_MEMBER_ID. For v0-2 the single
member's error becomes the top-level error, as Kafka's LeaveGroupResponse does.
Authorization (KafkaApis.handleLeaveGroupRequest): READ on the group, else a top-level
GROUP_AUTHORIZATION_FAILED with no members.
"""

from __future__ import annotations

from collections.abc import Awaitable

from broker.handlers.group_writes import replicated, waits
from broker.handlers.registry import api
from broker.net.context import RequestContext
from broker.security.checks import Operation, ResourceType, allowed
from protocol.errors import ErrorCode
from protocol.messages import ApiMessage, lazy_response

Response = lazy_response(13)
MemberResponse = Response.MemberResponse


@api(13, (0, 5))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage | Awaitable[ApiMessage]:
    v = ctx.api_version
    # KafkaApis.handleLeaveGroupRequest: READ on the group
    if not allowed(ctx, Operation.READ, ResourceType.GROUP, req.group_id):
        return _response(v, ErrorCode.GROUP_AUTHORIZATION_FAILED, [])
    members: list[tuple[str, str | None, str | None]]  # (member id, group instance id, reason)
    if v < 3:
        members = [(req.member_id, None, None)]
    else:
        members = [(m.member_id, m.group_instance_id, m.reason if v >= 5 else None) for m in req.members]
    gc = ctx.broker.group_coordinator
    results: list[tuple[str, str | None, ErrorCode]] = []  # (member id, group instance id, error)
    if (top := gc.check(req.group_id)) != ErrorCode.NONE:
        pass
    else:
        top, results = gc.manager.leave_group(req.group_id, members)
        if top == ErrorCode.NONE and waits(ctx):
            return _after_replication(ctx, req.group_id, top, results)
    return _response(v, top, results)


async def _after_replication(ctx: RequestContext, group_id: str, top: ErrorCode,
                             results: list[tuple[str, str | None, ErrorCode]]) -> ApiMessage:
    """Answered once the ISR holds the group without the members that left."""
    code = await replicated(ctx, group_id)
    return _response(ctx.api_version, code, results if code == ErrorCode.NONE else [])


def _response(v: int, top: ErrorCode, results: list[tuple[str, str | None, ErrorCode]]) -> ApiMessage:
    if v < 3:
        if top == ErrorCode.NONE and results:
            top = results[0][2]
        return Response(throttle_time_ms=0, error_code=top)
    return Response(
        throttle_time_ms=0,
        error_code=top,
        members=[MemberResponse(member_id=m, group_instance_id=i, error_code=e) for m, i, e in results],
    )
