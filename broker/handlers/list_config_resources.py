"""ListConfigResources (key 74), v0-1 (KIP-714, KIP-1142): ``kafka-configs.sh --describe`` and
``kafka-client-metrics.sh --list`` find the resources to describe with it.

v0 lists client-metrics subscriptions only; v1 lists the types asked for (all supported ones when
none are) in Kafka's order: groups, client metrics, broker loggers, brokers, topics. Groups are those
with dynamic configs (broker.config.group_configs; a group without any is not listed, as in Kafka). This
broker keeps no client-metrics subscriptions (IncrementalAlterConfigs refuses them), so that list is
empty. A type Kafka cannot list is UNSUPPORTED_VERSION for the request, as Kafka answers.
Authorization (KafkaApis.handleListConfigResources): DESCRIBE_CONFIGS on the cluster (every version),
else a top-level CLUSTER_AUTHORIZATION_FAILED and nothing listed.
"""

from __future__ import annotations

from broker.handlers.registry import api
from broker.net.context import RequestContext
from broker.security.checks import Operation, cluster_allowed
from protocol.errors import ErrorCode
from protocol.messages import ApiMessage, lazy_response

Response = lazy_response(74)
Resource = Response.ConfigResource
TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
LISTABLE = frozenset({TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP})


@api(74, (0, 1))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage:
    # KafkaApis.handleListConfigResources: DESCRIBE_CONFIGS on the cluster
    if not cluster_allowed(ctx, Operation.DESCRIBE_CONFIGS):
        return Response(throttle_time_ms=0, error_code=int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
                        config_resources=[])
    if ctx.api_version == 0:
        return Response(throttle_time_ms=0, error_code=0, config_resources=[])
    wanted = set(req.resource_types) or LISTABLE
    if not wanted <= LISTABLE:
        return Response(throttle_time_ms=0, error_code=int(ErrorCode.UNSUPPORTED_VERSION), config_resources=[])
    node = str(ctx.broker.node_id)
    out = []
    if GROUP in wanted:
        out += [Resource(resource_name=name, resource_type=GROUP) for name in sorted(ctx.broker.metadata.group_configs)]
    if BROKER_LOGGER in wanted:
        out.append(Resource(resource_name=node, resource_type=BROKER_LOGGER))
    if BROKER in wanted:
        out.append(Resource(resource_name=node, resource_type=BROKER))
    if TOPIC in wanted:
        out += [Resource(resource_name=name, resource_type=TOPIC) for name in sorted(ctx.broker.metadata.topics)]
    return Response(throttle_time_ms=0, error_code=0, config_resources=out)
