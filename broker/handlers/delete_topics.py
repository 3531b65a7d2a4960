"""DeleteTopics (key 20), v1-6.

v6 names topics by name or id. Internal topics cannot be deleted; an unknown name is
UNKNOWN_TOPIC_OR_PARTITION, an unknown id UNKNOWN_TOPIC_ID.
"""

from __future__ import annotations

import uuid

from broker.cluster.controller import deadline_passed
from broker.handlers.registry import api
from broker.net.context import RequestContext
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import ApiMessage, lazy_response

Response = lazy_response(20)
Result = Response.DeletableTopicResult
ZERO = uuid.UUID(int=0)


@api(20, (1, 6))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage:
    broker = ctx.broker
    if ctx.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in req.topics]
    else:
        wanted = [(name, ZERO) for name in req.topic_names]
    if deadline_passed(req.timeout_ms):
        return Response(throttle_time_ms=0, responses=[
            Result(name=name, topic_id=topic_id, error_code=ErrorCode.REQUEST_TIMED_OUT, error_message=None)
            for name, topic_id in wanted])
    results = []
    for name, topic_id in wanted:
        if name is None:
            info = broker.metadata.by_id.get(topic_id)
            if info is None:
                results.append(Result(name=None, topic_id=topic_id, error_code=ErrorCode.UNKNOWN_TOPIC_ID,
                                      error_message=None))
                continue
            name = info.name
        try:
            info = broker.controller.delete_topic(name)
            results.append(Result(name=name, topic_id=info.topic_id, error_code=0, error_message=None))
        except KafkaError as e:
            results.append(Result(name=name, topic_id=topic_id, error_code=e.code, error_message=e.message))
    return Response(throttle_time_ms=0, responses=results)
