"""JoinGroup (key 11), v0-9: the classic rebalance's first phase.

The request is parked until the join phase completes (all known members rejoined, the
rebalance timeout, or the initial rebalance delay for a new group), then every member gets
the new generation and the leader also gets everyone's metadata. Behaviour follows Kafka's
GroupMetadataManager (see coordinator/group/manager.py):

- v4+: a new dynamic member without an id is answered MEMBER_ID_REQUIRED with its new id.
- v5+: ``group_instance_id`` makes a static member (KIP-345): rejoining with a new id replaces
  the old member without a rebalance; a stale id gets FENCED_INSTANCE_ID.
- v0: the rebalance timeout is the session timeout (the field does not exist yet).
- v7+: ``protocol_type``/``protocol_name`` are nullable; before v7 a missing name is "".
- v9: a static leader that rejoins a stable group is told ``skip_assignment``.
Errors: INVALID_GROUP_ID, INVALID_SESSION_TIMEOUT (outside group.min/max.session.timeout.ms),
INCONSISTENT_GROUP_PROTOCOL, UNKNOWN_MEMBER_ID, GROUP_MAX_SIZE_REACHED, COORDINATOR_NOT_AVAILABLE.
Authorization (KafkaApis.handleJoinGroupRequest): READ on the group, else GROUP_AUTHORIZATION_FAILED
at the top level (JoinGroupRequest.getErrorResponse).
"""

from __future__ import annotations

from collections.abc import Awaitable

from broker.handlers.group_writes import replicated
from broker.handlers.registry import api
from broker.net.context import RequestContext
from broker.security.checks import Operation, ResourceType, allowed
from coordinator.group.group import JoinResult
from coordinator.group.manager import JoinRequest
from protocol.errors import ErrorCode
from protocol.messages import ApiMessage, lazy_response

Response = lazy_response(11)
Member = Response.JoinGroupResponseMember


def build(version: int, r: JoinResult) -> ApiMessage:
    protocol_name = r.protocol_name
    if protocol_name is None and (version < 7 or r.error != ErrorCode.NONE):
        protocol_name = ""
    return Response(
        throttle_time_ms=0,
        error_code=r.error,
        generation_id=r.generation_id,
        protocol_type=r.protocol_type,
        protocol_name=protocol_name,
        leader=r.leader or "",
        skip_assignment=r.skip_assignment,
        member_id=r.member_id,
        members=[Member(member_id=m, group_instance_id=i, metadata=md) for m, i, md in r.members],
    )


def client_address(peer: str) -> str:
    """Kafka shows the client's InetAddress ("/127.0.0.1"), without the port."""
    host = peer.rsplit(":", 1)[0] if ":" in peer else peer
    return "/" + host.strip("[]")


async def _answer(ctx: RequestContext, group_id: str, version: int, pending: Awaitable[JoinResult]) -> ApiMessage:
    result = await pending
    if result.error == ErrorCode.NONE and (code := await replicated(ctx, group_id)) != ErrorCode.NONE:
        return build(version, JoinResult(error=code, member_id=result.member_id))
    return build(version, result)


@api(11, (0, 9))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage | Awaitable[ApiMessage]:
    v = ctx.api_version
    # KafkaApis.handleJoinGroupRequest: READ on the group
    if not allowed(ctx, Operation.READ, ResourceType.GROUP, req.group_id):
        return Response(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, generation_id=-1,
                        protocol_type=None, protocol_name=None if v >= 7 else "", leader="", skip_assignment=False,
                        member_id="", members=[])
    join = JoinRequest(
        group_id=req.group_id,
        member_id=req.member_id,
        group_instance_id=req.group_instance_id if v >= 5 else None,
        session_timeout_ms=req.session_timeout_ms,
        rebalance_timeout_ms=req.session_timeout_ms if v == 0 else req.rebalance_timeout_ms,
        protocol_type=req.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in req.protocols],
        client_id=ctx.client_id or "",
        client_host=client_address(ctx.client_host),
        api_version=v,
        reason=req.reason if v >= 8 else None,
    )
    return _answer(ctx, req.group_id, v, ctx.broker.group_coordinator.join_group(join))
