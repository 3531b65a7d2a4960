"""DeleteTopics (key 20), v1-6.

v6 names topics by name or id. Internal topics cannot be deleted; an unknown name is
UNKNOWN_TOPIC_OR_PARTITION, an unknown id UNKNOWN_TOPIC_ID.

Authorization (ControllerApis.deleteTopics): DELETE on the cluster allows every topic; else a name
the client may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED whether it exists or not, one it may
describe but not DELETE too (after its existence); an unknown id is UNKNOWN_TOPIC_ID first, a known
one the client may not DELETE is TOPIC_AUTHORIZATION_FAILED, named only when it may DESCRIBE it.
With an authorizer the results are shuffled, as Kafka shuffles them so that their positions say
nothing about which topics exist.
"""

from __future__ import annotations

import random
import uuid

from broker.cluster.controller import deadline_passed
from broker.handlers.registry import api
from broker.net.context import RequestContext
from broker.security.checks import Operation, ResourceType, cluster_allowed, filter_allowed
from protocol.error_messages import default_message
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import ApiMessage, lazy_response

Response = lazy_response(20)
Result = Response.DeletableTopicResult
ZERO = uuid.UUID(int=0)
TOPIC_DENIED = default_message(ErrorCode.TOPIC_AUTHORIZATION_FAILED)  # new ApiError(TOPIC_AUTHORIZATION_FAILED)


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
    # ControllerApis.deleteTopics: DELETE on the cluster, else DESCRIBE and DELETE on each topic
    every = cluster_allowed(ctx, Operation.DELETE)
    describable: set[str] = set()
    deletable: set[str] = set()
    if not every:
        resolved = (name if name is not None else broker.metadata.name_of(topic_id) for name, topic_id in wanted)
        names = {name for name in resolved if name is not None}
        describable = filter_allowed(ctx, Operation.DESCRIBE, ResourceType.TOPIC, names)
        deletable = filter_allowed(ctx, Operation.DELETE, ResourceType.TOPIC, names)
    results = []
    for name, topic_id in wanted:
        if name is None:
            info = broker.metadata.by_id.get(topic_id)
            if info is None:
                results.append(Result(name=None, topic_id=topic_id, error_code=ErrorCode.UNKNOWN_TOPIC_ID,
                                      error_message=None))
                continue
            if not every and info.name not in deletable:
                results.append(Result(name=info.name if info.name in describable else None, topic_id=topic_id,
                                      error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, error_message=TOPIC_DENIED))
                continue
            name = info.name
        elif not every and (name not in describable
                            or (broker.metadata.get(name) is not None and name not in deletable)):
            results.append(Result(name=name, topic_id=ZERO, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                  error_message=TOPIC_DENIED))
            continue
        try:
            info = broker.controller.delete_topic(name)
            results.append(Result(name=name, topic_id=info.topic_id, error_code=0, error_message=None))
        except KafkaError as e:
            results.append(Result(name=name, topic_id=topic_id, error_code=e.code, error_message=e.message))
    if broker.authorizer is not None:
        random.shuffle(results)
    return Response(throttle_time_ms=0, responses=results)
