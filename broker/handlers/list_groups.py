"""ListGroups (key 16), v0-5: every group this node coordinates (all of them).

v4 adds ``states_filter`` and v5 ``types_filter``, both case-insensitive; an empty filter
matches everything. Every group here is a classic group ("classic").
Authorization (KafkaApis.handleListGroupsRequest): DESCRIBE on the cluster lists every group;
without it only the groups the principal may DESCRIBE are listed (never an error).
"""

from __future__ import annotations

from broker.handlers.registry import api
from broker.net.context import RequestContext
from broker.security.checks import Operation, ResourceType, allowed, cluster_allowed
from protocol.errors import ErrorCode
from protocol.messages import ApiMessage, lazy_response

Response = lazy_response(16)
Listed = Response.ListedGroup


@api(16, (0, 5))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage:
    v = ctx.api_version
    gc = ctx.broker.group_coordinator
    if not gc.active:
        return Response(throttle_time_ms=0, error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, groups=[])
    states = list(req.states_filter or []) if v >= 4 else []
    types = list(req.types_filter or []) if v >= 5 else []
    groups = gc.manager.list_groups(states, types)
    # KafkaApis.handleListGroupsRequest: DESCRIBE on the cluster shows all, else DESCRIBE on each group
    if not cluster_allowed(ctx, Operation.DESCRIBE):
        groups = [row for row in groups if allowed(ctx, Operation.DESCRIBE, ResourceType.GROUP, row[0])]
    return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, groups=[
        Listed(group_id=g, protocol_type=pt, group_state=state, group_type=gtype) for g, pt, state, gtype in groups
    ])
