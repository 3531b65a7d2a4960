"""AlterConfigs (key 33), v0-2: the legacy, non-incremental form.

The request's config list REPLACES the topic's whole override set (Kafka's semantics, which is
why IncrementalAlterConfigs exists); kafka-python's admin ``alter_configs`` uses it. Broker
configs are static here: INVALID_REQUEST.
"""

from __future__ import annotations

from broker.handlers.registry import api
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import lazy_response

Response = lazy_response(33)
Result = Response.AlterConfigsResourceResponse


@api(33, (0, 2))
def handle(ctx, req):
    broker = ctx.broker
    results = []
    for r in req.resources:
        base = {"resource_type": r.resource_type, "resource_name": r.resource_name}
        try:
            if r.resource_type != 2:
                raise KafkaError(ErrorCode.INVALID_REQUEST,
                                 "Only topic configs can be altered on this broker (broker configs are static)")
            if broker.metadata.get(r.resource_name) is None:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {r.resource_name} does not exist")
            configs = {c.name: c.value for c in r.configs}
            broker.controller.alter_configs(r.resource_name, configs, validate_only=req.validate_only)
            results.append(Result(error_code=0, error_message=None, **base))
        except KafkaError as e:
            results.append(Result(error_code=e.code, error_message=e.message, **base))
    return Response(throttle_time_ms=0, responses=results)
