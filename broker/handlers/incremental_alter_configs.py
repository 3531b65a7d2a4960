"""IncrementalAlterConfigs (key 44), v0-1, for topic configs, dynamic broker configs and group
configs (type 32, broker.config.group_configs).

Operations: SET (0), DELETE (1), APPEND (2) and SUBTRACT (3) for list-typed configs. The new
set is validated as a whole before anything changes; ``validate_only`` changes nothing. A broker
resource is this broker's id, or "" for the cluster-wide default (broker.config.dynamic_config).

Authorization (ConfigAdminManager.preprocess, then ControllerApis.authorizeAlterResource): after the
broker's checks (repeated resources and keys, null values, a broker resource's id and new set),
ALTER_CONFIGS on the cluster for a broker, on the topic (before its existence) or on the group;
refused: CLUSTER_/TOPIC_/GROUP_AUTHORIZATION_FAILED with the error's default message, in the
resource's place. A broker logger (handled by the broker itself, RuntimeLoggerManager) needs the
cluster's ALTER_CONFIGS too, refused without a message.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from broker.config import dynamic_config, group_configs
from broker.config.broker_config import BROKER_CONFIGS
from broker.handlers.alter_configs import check_alter_allowed
from broker.handlers.registry import api
from broker.net.context import RequestContext
from broker.security.checks import Operation, cluster_allowed
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import ApiMessage, lazy_response
from storage.log_config import INTERNAL_TOPIC_CONFIGS, TOPIC_CONFIGS, format_config_value

Response = lazy_response(44)
Result = Response.AlterConfigsResourceResponse
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
RESOURCE_TOPIC, RESOURCE_BROKER, RESOURCE_BROKER_LOGGER, RESOURCE_GROUP = 2, 4, 8, 32


def _check_keys(ops: Sequence[ApiMessage]) -> None:
    """KafkaApis: one operation per key, and SET needs a value."""
    names = [op.name for op in ops]
    if len(set(names)) != len(names):
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    for op in ops:
        if op.config_operation == SET and op.value is None:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {op.name}")


def _apply(current: Mapping[str, str], ops: Iterable[ApiMessage], check: Callable[[ApiMessage], None],
           list_default: Callable[[str], str]) -> dict[str, str]:
    """The operations in order; ``check(op)`` refuses what the resource type does not take, and
    APPEND/SUBTRACT start from the resource's own value, else ``list_default(name)``."""
    configs = dict(current)
    for op in ops:
        check(op)
        if op.config_operation == SET:
            configs[op.name] = op.value
        elif op.config_operation == DELETE:
            configs.pop(op.name, None)
        elif op.config_operation in (APPEND, SUBTRACT):
            text = configs.get(op.name, list_default(op.name))
            items = [v.strip() for v in text.split(",") if v.strip()]
            values = [v.strip() for v in (op.value or "").split(",") if v.strip()]
            if op.config_operation == APPEND:
                items += [v for v in values if v not in items]
            else:
                items = [v for v in items if v not in values]
            configs[op.name] = ",".join(items)
        else:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown operations type {op.config_operation}")
    return configs


def apply_topic_ops(current: Mapping[str, str], ops: Iterable[ApiMessage]) -> dict[str, str]:
    """A topic's new overrides: topic config names only; lists start from Kafka's default."""

    def check(op: ApiMessage) -> None:
        d = TOPIC_CONFIGS.get(op.name) or INTERNAL_TOPIC_CONFIGS.get(op.name)
        if d is None:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {op.name}")
        if op.config_operation in (APPEND, SUBTRACT) and d.type != "list":
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Config value append is not allowed for config key: {op.name}")

    return _apply(current, ops, check, lambda name: format_config_value(name, TOPIC_CONFIGS[name].default)
                  if name in TOPIC_CONFIGS else "")


def apply_broker_ops(current: Mapping[str, str], ops: Iterable[ApiMessage]) -> dict[str, str]:
    """A broker resource's new dynamic set: APPEND/SUBTRACT only on Kafka's list-typed names, from
    the resource's own value else Kafka's default, not another layer's (the controller's getParts)."""

    def check(op: ApiMessage) -> None:
        if op.config_operation not in (APPEND, SUBTRACT):
            return
        if not dynamic_config.is_known(op.name):
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown config name: {op.name}")
        if not dynamic_config.is_list(op.name):
            verb = "append" if op.config_operation == APPEND else "subtract"
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Config value {verb} is not allowed for config key: {op.name}")

    def list_default(name: str) -> str:
        d = BROKER_CONFIGS.get(name)
        return "" if d is None or d.default is None else str(d.default)

    return _apply(current, ops, check, list_default)


@api(44, (0, 1))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage:
    broker = ctx.broker
    results = []
    seen = [(r.resource_type, r.resource_name) for r in req.resources]
    repeated = {key for key in seen if seen.count(key) > 1}
    for r in req.resources:
        base = {"resource_type": r.resource_type, "resource_name": r.resource_name}
        try:
            if (r.resource_type, r.resource_name) in repeated:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Each resource must appear at most once.")
            _check_keys(r.configs)
            if r.resource_type == RESOURCE_BROKER:
                per_broker = dynamic_config.resource_is_this_broker(r.resource_name, broker.node_id)
                current = broker.metadata.broker_configs.get(r.resource_name, {})
                configs = apply_broker_ops(current, r.configs)
                dynamic_config.validate(configs, per_broker)  # the broker's preprocessing, before authorization
                check_alter_allowed(ctx, r.resource_type, r.resource_name)
                dynamic_config.alter(broker, r.resource_name, configs, req.validate_only,
                                     touched=[op.name for op in r.configs])
                results.append(Result(error_code=0, error_message=None, **base))
                continue
            if r.resource_type == RESOURCE_BROKER_LOGGER and not cluster_allowed(ctx, Operation.ALTER_CONFIGS):
                # RuntimeLoggerManager.applyChangesForResource: ALTER_CONFIGS on the cluster, first
                raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
            check_alter_allowed(ctx, r.resource_type, r.resource_name)  # a topic: before its existence
            if r.resource_type == RESOURCE_GROUP:
                current = broker.metadata.group_configs.get(r.resource_name, {})
                group_configs.alter(broker, r.resource_name, group_configs.apply_ops(current, r.configs),
                                    req.validate_only)
                results.append(Result(error_code=0, error_message=None, **base))
                continue
            if r.resource_type != RESOURCE_TOPIC:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {r.resource_type}")
            info = broker.metadata.get(r.resource_name)
            if info is None:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {r.resource_name} does not exist")
            broker.controller.alter_configs(r.resource_name, apply_topic_ops(info.configs, r.configs),
                                            validate_only=req.validate_only)
            results.append(Result(error_code=0, error_message=None, **base))
        except KafkaError as e:
            results.append(Result(error_code=e.code, error_message=e.message, **base))
    return Response(throttle_time_ms=0, responses=results)
