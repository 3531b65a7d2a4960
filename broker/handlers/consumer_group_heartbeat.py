"""ConsumerGroupHeartbeat (key 68), v0-1: the KIP-848 consumer group protocol.

One request joins (member epoch 0), heartbeats, or leaves (-1; -2 for a static member that will
come back). The coordinator answers the member's epoch, the heartbeat interval and, when it
changed or the request was a full one, the partitions the member may own now. v1 requires the
client to choose its member id (KIP-1082) and adds regular expression subscriptions. Errors
carry Kafka's messages; see coordinator/group/consumer_manager.py. With ``group.version`` 0
(UpdateFeatures) the consumer protocol is off: UNSUPPORTED_VERSION, as Kafka's KafkaApis answers.
Authorization (KafkaApis.handleConsumerGroupHeartbeat): READ on the group (a top-level
GROUP_AUTHORIZATION_FAILED otherwise), then DESCRIBE on every subscribed topic name, existing or not
(any refused: a top-level TOPIC_AUTHORIZATION_FAILED); a regular expression resolves only to the
topics the member may DESCRIBE, the others left out silently (Kafka's TopicRegexResolver).
"""

from __future__ import annotations

from collections.abc import Awaitable

from broker.config.features import GROUP_VERSION, level
from broker.handlers.group_writes import replicated, waits
from broker.handlers.join_group import client_address
from broker.handlers.registry import api
from broker.net.context import RequestContext
from broker.security.checks import Operation, ResourceType, allowed, filter_allowed
from coordinator.group.consumer_manager import HeartbeatRequest
from protocol.errors import ErrorCode
from protocol.messages import ApiMessage, lazy_response

Response = lazy_response(68)
Assignment = Response.Assignment


@api(68, (0, 1))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage | Awaitable[ApiMessage]:
    if level(ctx.broker, GROUP_VERSION) < 1:
        return Response(throttle_time_ms=0, error_code=ErrorCode.UNSUPPORTED_VERSION, member_id=None,
                        member_epoch=0, heartbeat_interval_ms=0, assignment=None)
    # KafkaApis.handleConsumerGroupHeartbeat: READ on the group, then DESCRIBE on every subscribed name
    if not allowed(ctx, Operation.READ, ResourceType.GROUP, req.group_id):
        return _refused(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if req.subscribed_topic_names:
        names = set(req.subscribed_topic_names)
        if len(filter_allowed(ctx, Operation.DESCRIBE, ResourceType.TOPIC, names)) < len(names):
            return _refused(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    gc = ctx.broker.group_coordinator
    if (error := gc.check(req.group_id)) != ErrorCode.NONE:
        return Response(throttle_time_ms=0, error_code=error, member_id=None,
                        member_epoch=0, heartbeat_interval_ms=0, assignment=None)
    owned = None if req.topic_partitions is None else {
        tp.topic_id: frozenset(tp.partitions) for tp in req.topic_partitions if tp.partitions}
    result = gc.manager.consumer.heartbeat(HeartbeatRequest(
        group_id=req.group_id,
        member_id=req.member_id,
        member_epoch=req.member_epoch,
        instance_id=req.instance_id,
        rack_id=req.rack_id,
        rebalance_timeout_ms=req.rebalance_timeout_ms,
        subscribed_topic_names=None if req.subscribed_topic_names is None else list(req.subscribed_topic_names),
        subscribed_topic_regex=req.subscribed_topic_regex if ctx.api_version >= 1 else None,
        server_assignor=req.server_assignor,
        owned=owned,
        client_id=ctx.client_id or "",
        client_host=client_address(ctx.client_host),
        api_version=ctx.api_version,
        topic_describable=None if ctx.broker.authorizer is None else
        lambda topic: allowed(ctx, Operation.DESCRIBE, ResourceType.TOPIC, topic),
    ))
    assignment = None
    if result.assignment is not None:
        assignment = Assignment(topic_partitions=[
            Assignment.TopicPartitions(topic_id=t, partitions=sorted(ps))
            for t, ps in sorted(result.assignment.items(), key=lambda i: str(i[0]))
        ])
    response = Response(throttle_time_ms=0, error_code=result.error, error_message=result.message,
                        member_id=result.member_id, member_epoch=result.member_epoch,
                        heartbeat_interval_ms=result.heartbeat_interval_ms, assignment=assignment)
    if result.error == ErrorCode.NONE and waits(ctx):
        return _after_replication(ctx, req.group_id, response)
    return response


def _refused(code: ErrorCode) -> ApiMessage:
    """ConsumerGroupHeartbeatRequest.getErrorResponse: the error alone, no message."""
    return Response(throttle_time_ms=0, error_code=code, error_message=None, member_id=None, member_epoch=0,
                    heartbeat_interval_ms=0, assignment=None)


async def _after_replication(ctx: RequestContext, group_id: str, response: ApiMessage) -> ApiMessage:
    """Answered once the ISR holds what the heartbeat wrote (a new epoch, assignment or member)."""
    if (code := await replicated(ctx, group_id)) != ErrorCode.NONE:
        return Response(throttle_time_ms=0, error_code=code, member_id=None, member_epoch=0,
                        heartbeat_interval_ms=0, assignment=None)
    return response
