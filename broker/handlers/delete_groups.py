"""DeleteGroups (key 42), v0-3: delete Empty groups with all their committed offsets.

Tombstones for every offset and for the group metadata are written to the group's
``__consumer_offsets`` partition before the answer. A group with members: NON_EMPTY_GROUP; one
that does not exist: GROUP_ID_NOT_FOUND. v3 (Kafka 4.4) adds a per-group ErrorMessage, which
Kafka's coordinator fills only for streams-group topology errors: always null here.
Authorization (KafkaApis.handleDeleteGroupsRequest): DELETE on each group; the refused ones,
GROUP_AUTHORIZATION_FAILED, come after the others' results, once each.
"""

from __future__ import annotations

from collections.abc import Awaitable

from broker.handlers.group_writes import replicated, waits
from broker.handlers.registry import api
from broker.net.context import RequestContext
from broker.security.checks import Operation, ResourceType, filter_allowed
from protocol.errors import ErrorCode
from protocol.messages import ApiMessage, lazy_response

Response = lazy_response(42)
Result = Response.DeletableGroupResult


@api(42, (0, 3))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage | Awaitable[ApiMessage]:
    gc = ctx.broker.group_coordinator
    # KafkaApis.handleDeleteGroupsRequest: DELETE on each distinct group; the refused ones answered last
    deletable = filter_allowed(ctx, Operation.DELETE, ResourceType.GROUP, req.groups_names)
    names = [g for g in req.groups_names if g in deletable]
    denied = [(g, ErrorCode.GROUP_AUTHORIZATION_FAILED) for g in dict.fromkeys(req.groups_names) if g not in deletable]
    if not gc.active:
        results = [(g, ErrorCode.COORDINATOR_NOT_AVAILABLE) for g in names]
    else:
        refused = {g: e for g in names if (e := gc.check(g)) != ErrorCode.NONE}  # another broker's groups
        if not refused:
            results = gc.manager.delete_groups(names)
        else:
            done = dict(gc.manager.delete_groups([g for g in names if g not in refused]))
            results = [(g, refused[g] if g in refused else done[g]) for g in names]
    results += denied
    if waits(ctx) and any(e == ErrorCode.NONE for _g, e in results):
        return _after_replication(ctx, results)
    return _response(results)


async def _after_replication(ctx: RequestContext, results: list[tuple[str, ErrorCode]]) -> ApiMessage:
    """Each deleted group is answered once the ISR of its partition holds its tombstones."""
    out = []
    for g, e in results:
        out.append((g, await replicated(ctx, g) if e == ErrorCode.NONE else e))
    return _response(out)


def _response(results: list[tuple[str, ErrorCode]]) -> ApiMessage:
    return Response(throttle_time_ms=0, results=[Result(group_id=g, error_code=e, error_message=None)
                                                    for g, e in results])
