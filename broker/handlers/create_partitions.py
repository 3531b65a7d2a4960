"""CreatePartitions (key 37), v0-3: grow a topic's partition count (never shrink).

Authorization (ControllerApis.createPartitions): ALTER on each topic, before its existence is
looked at; the refused ones come first, TOPIC_AUTHORIZATION_FAILED without a message.
"""

from __future__ import annotations

from broker.cluster.controller import MAX_RECORDS_PER_BATCH, deadline_passed
from broker.handlers.registry import api
from broker.net.context import RequestContext
from broker.security.checks import Operation, ResourceType, filter_allowed
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import ApiMessage, lazy_response

Response = lazy_response(37)
Result = Response.CreatePartitionsTopicResult


@api(37, (0, 3))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage:
    if deadline_passed(req.timeout_ms):
        return Response(throttle_time_ms=0, results=[
            Result(name=t.name, error_code=ErrorCode.REQUEST_TIMED_OUT, error_message=None) for t in req.topics])
    # ControllerApis.createPartitions: ALTER on each topic, the refused ones answered first
    alterable = filter_allowed(ctx, Operation.ALTER, ResourceType.TOPIC, (t.name for t in req.topics))
    topics = [t for t in req.topics if t.name in alterable]
    added = sum(max(t.count - _current(ctx, t.name), 0) for t in topics if ctx.broker.metadata.get(t.name))
    if added > MAX_RECORDS_PER_BATCH:  # Kafka's controller batch overflows: an unexpected error for all
        return Response(throttle_time_ms=0, results=[
            Result(name=t.name, error_code=ErrorCode.UNKNOWN_SERVER_ERROR, error_message=None) for t in req.topics])
    results: list[ApiMessage] = [Result(name=name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, error_message=None)
                                 for name in dict.fromkeys(t.name for t in req.topics) if name not in alterable]
    for t in topics:
        try:
            if t.assignments is not None and len(t.assignments) != t.count - _current(ctx, t.name):
                raise KafkaError(ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                                 "Increasing the number of partitions by a different amount than the assignments")
            ctx.broker.controller.create_partitions(
                t.name, t.count, validate_only=req.validate_only,
                assignments=[a.broker_ids for a in t.assignments] if t.assignments else None)
            results.append(Result(name=t.name, error_code=0, error_message=None))
        except KafkaError as e:
            results.append(Result(name=t.name, error_code=e.code, error_message=e.message))
    return Response(throttle_time_ms=0, results=results)


def _current(ctx: RequestContext, name: str) -> int:
    info = ctx.broker.metadata.get(name)
    return info.partitions if info else 0
