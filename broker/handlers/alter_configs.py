"""AlterConfigs (key 33), v0-2: the legacy, non-incremental form.

The request's config list REPLACES the resource's whole set (Kafka's semantics, which is why
IncrementalAlterConfigs exists); kafka-python's admin ``alter_configs`` uses it. For a topic, its
overrides; for a broker (its id, or "" for the cluster default), its dynamic configs
(broker.config.dynamic_config); for a group (type 32), its overrides (broker.config.group_configs).

Authorization (ControllerApis.authorizeAlterResource, after the broker's preprocessing: repeated
keys, null values, a broker resource's id and its configs' validity): ALTER_CONFIGS on the cluster
for a broker, on the topic (before its existence) or on the group; refused: CLUSTER_/TOPIC_/
GROUP_AUTHORIZATION_FAILED with the error's default message, in the resource's place.
"""

from __future__ import annotations

from broker.config import dynamic_config, group_configs
from broker.handlers.registry import api
from broker.net.context import RequestContext
from broker.security.checks import Operation, ResourceType, allowed, cluster_allowed
from protocol.error_messages import default_message
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import ApiMessage, lazy_response

Response = lazy_response(33)
Result = Response.AlterConfigsResourceResponse
RESOURCE_TOPIC, RESOURCE_BROKER, RESOURCE_GROUP = 2, 4, 32
RESOURCE_CLIENT_METRICS = 16


def check_alter_allowed(ctx: RequestContext, resource_type: int, name: str) -> None:
    """ControllerApis.authorizeAlterResource: ALTER_CONFIGS on the cluster (a broker or client-metrics
    resource), the topic or the group; raises the refusal (with the error's default message)."""
    if resource_type in (RESOURCE_BROKER, RESOURCE_CLIENT_METRICS):
        ok, code = cluster_allowed(ctx, Operation.ALTER_CONFIGS), ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    elif resource_type == RESOURCE_TOPIC:
        ok = allowed(ctx, Operation.ALTER_CONFIGS, ResourceType.TOPIC, name)
        code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    elif resource_type == RESOURCE_GROUP:
        ok = allowed(ctx, Operation.ALTER_CONFIGS, ResourceType.GROUP, name)
        code = ErrorCode.GROUP_AUTHORIZATION_FAILED
    else:
        return  # not a config resource: refused as such
    if not ok:
        raise KafkaError(code, default_message(code))


@api(33, (0, 2))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage:
    broker = ctx.broker
    results = []
    for r in req.resources:
        base = {"resource_type": r.resource_type, "resource_name": r.resource_name}
        try:
            if r.resource_type == RESOURCE_BROKER:
                if len({c.name for c in r.configs}) != len(r.configs):
                    raise KafkaError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
                configs = {c.name: c.value for c in r.configs}
                nulls = [n for n, v in configs.items() if v is None]
                if nulls:
                    raise KafkaError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {nulls[0]}")
                # the broker's preprocessing validates the change before the controller authorizes it
                dynamic_config.validate(configs, dynamic_config.resource_is_this_broker(r.resource_name, broker.node_id))
                check_alter_allowed(ctx, r.resource_type, r.resource_name)
                dynamic_config.alter(broker, r.resource_name, configs, req.validate_only)
                results.append(Result(error_code=0, error_message=None, **base))
                continue
            if r.resource_type == RESOURCE_GROUP:  # the group's whole set of overrides (broker.config.group_configs)
                if len({c.name for c in r.configs}) != len(r.configs):
                    raise KafkaError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
                nulls = [c.name for c in r.configs if c.value is None]
                if nulls:
                    raise KafkaError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {nulls[0]}")
                check_alter_allowed(ctx, r.resource_type, r.resource_name)
                group_configs.alter(broker, r.resource_name, {c.name: c.value for c in r.configs}, req.validate_only)
                results.append(Result(error_code=0, error_message=None, **base))
                continue
            check_alter_allowed(ctx, r.resource_type, r.resource_name)  # a topic: before its existence
            if r.resource_type != RESOURCE_TOPIC:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {r.resource_type}")
            if broker.metadata.get(r.resource_name) is None:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {r.resource_name} does not exist")
            configs = {c.name: c.value for c in r.configs}
            broker.controller.alter_configs(r.resource_name, configs, validate_only=req.validate_only)
            results.append(Result(error_code=0, error_message=None, **base))
        except KafkaError as e:
            results.append(Result(error_code=e.code, error_message=e.message, **base))
    return Response(throttle_time_ms=0, responses=results)
