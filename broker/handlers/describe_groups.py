"""DescribeGroups (key 15), v0-6: state, protocol and members of classic groups.

Member metadata and the protocol name are only shown while the group is Stable (as Kafka's
``describeNoMetadata`` for other states); assignments always. A group that does not exist is
reported as state "Dead" with no error before v6 and GROUP_ID_NOT_FOUND (with a message) from
v6 (KIP-1043). v3+ may ask for authorized operations: the group operations the principal may do
(all of them with no authorizer), for the groups described without an error.
Authorization (KafkaApis.handleDescribeGroupsRequest): DESCRIBE on each group; the refused ones come
first, GROUP_AUTHORIZATION_FAILED with an empty description.

A request naming many groups (a 1 MB request can name a million) is answered in slices that give
the event loop back, each distinct id described once and encoded once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

from broker.handlers.metadata import operation_codes
from broker.handlers.registry import api
from broker.net.context import RawResponse, RequestContext
from broker.security.checks import Operation, ResourceType, allowed, authorized_operations
from coordinator.group.coordinator import GroupCoordinator
from coordinator.group.manager import DescribedGroup
from protocol.errors import ErrorCode
from protocol.messages import ApiMessage, lazy_response
from protocol.repeated import encode_last_array

Response = lazy_response(15)
Described = Response.DescribedGroup
DescribedMember = Described.DescribedGroupMember

# AclOperation codes a group supports (AclEntry.supportedOperations(GROUP) in Kafka 4): READ(3),
# DELETE(6), DESCRIBE(8), DESCRIBE_CONFIGS(10), ALTER_CONFIGS(11).
GROUP_OPERATIONS = frozenset({3, 6, 8, 10, 11})
SLICE = 2000  # groups described between two returns to the event loop


@api(15, (0, 6))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage | Awaitable[RawResponse]:
    with_ops = bool(getattr(req, "include_authorized_operations", False)) and ctx.api_version >= 3
    gc = ctx.broker.group_coordinator
    # KafkaApis.handleDescribeGroupsRequest: DESCRIBE on each group, the refused ones first
    refused = [g for g in req.groups if not allowed(ctx, Operation.DESCRIBE, ResourceType.GROUP, g)]
    authorized = [g for g in req.groups if g not in set(refused)] if refused else list(req.groups)
    if not gc.active:
        return Response(throttle_time_ms=0, groups=[_refused(g) for g in refused] + [
            Described(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, group_id=g, group_state="", protocol_type="",
                      protocol_data="", members=[])
            for g in authorized
        ])
    if len(req.groups) > SLICE:
        return _describe_many(ctx, gc, refused, authorized, with_ops)
    described = gc.manager.describe_groups(authorized, ctx.api_version)
    return Response(throttle_time_ms=0, groups=[_refused(g) for g in refused] +
                    [_entry(ctx, d, with_ops, gc) for d in described])


def _refused(group_id: str) -> ApiMessage:
    """DescribeGroupsResponse.groupError(id, GROUP_AUTHORIZATION_FAILED)."""
    return Described(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, group_id=group_id, group_state="",
                     protocol_type="", protocol_data="", members=[], authorized_operations=None)


def _entry(ctx: RequestContext, d: DescribedGroup, with_ops: bool, gc: GroupCoordinator) -> ApiMessage:
    if (error := gc.check(d.group_id)) != ErrorCode.NONE:  # another broker coordinates it
        return Described(error_code=error, group_id=d.group_id, group_state="", protocol_type="",
                         protocol_data="", members=[])
    return Described(
        error_code=d.error,
        error_message=d.error_message,
        group_id=d.group_id,
        group_state=d.state,
        protocol_type=d.protocol_type,
        protocol_data=d.protocol_data,
        members=[
            DescribedMember(member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                            client_host=m.client_host, member_metadata=m.metadata, member_assignment=m.assignment)
            for m in d.members
        ],
        authorized_operations=operation_codes(authorized_operations(ctx, ResourceType.GROUP, d.group_id))
        if with_ops and d.error == ErrorCode.NONE else None,
    )


async def _describe_many(ctx: RequestContext, gc: GroupCoordinator, refused: list[str], group_ids: list[str],
                         with_ops: bool) -> RawResponse:
    """``refused`` answered first, then ``group_ids`` described."""
    distinct = list(dict.fromkeys(group_ids))
    entries: dict[str, ApiMessage] = {g: _refused(g) for g in refused}
    for i in range(0, len(distinct), SLICE):
        for d in gc.manager.describe_groups(distinct[i:i + SLICE], ctx.api_version):
            entries[d.group_id] = _entry(ctx, d, with_ops, gc)
        await asyncio.sleep(0)
    body = await asyncio.to_thread(_encode, ctx.api_version, refused + group_ids, entries)
    return RawResponse([body], len(body))


def _encode(version: int, group_ids: list[str], entries: dict[str, ApiMessage]) -> bytes:
    """The answer in request order (in a worker thread: a million entries take a while)."""
    return encode_last_array(Response, version, {"throttle_time_ms": 0}, "groups", [entries[g] for g in group_ids])
