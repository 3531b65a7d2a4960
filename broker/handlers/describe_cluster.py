"""DescribeCluster (key 60), v0-2: the live brokers (v2 with IncludeFencedBrokers: the stopped
ones too, flagged fenced, KIP-1073) and a random live broker as the controller, as KRaft brokers
answer (they forward controller requests).
Authorization (AuthHelper.computeDescribeClusterResponse): none for the answer itself; the cluster's
authorized operations, when asked for, are the principal's, or none (0) without DESCRIBE on the cluster."""

from __future__ import annotations

from broker.handlers.metadata import operation_codes
from broker.handlers.registry import api
from broker.net.context import RequestContext
from broker.security.acls import CLUSTER_NAME
from broker.security.checks import Operation, ResourceType, authorized_operations, cluster_allowed
from protocol.errors import ErrorCode
from protocol.messages import ApiMessage, lazy_response

Response = lazy_response(60)
Node = Response.DescribeClusterBroker
ENDPOINT_BROKERS = 1


@api(60, (0, 2))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage:
    broker = ctx.broker
    endpoint_type = getattr(req, "endpoint_type", ENDPOINT_BROKERS)
    if endpoint_type != ENDPOINT_BROKERS:
        return Response(throttle_time_ms=0, error_code=ErrorCode.MISMATCHED_ENDPOINT_TYPE,
                        error_message="The request was sent to an endpoint of type BROKER, but we wanted an "
                                      "endpoint of type CONTROLLER", endpoint_type=endpoint_type,
                        cluster_id=broker.cluster_id, controller_id=-1, brokers=[])
    # AuthHelper.computeDescribeClusterResponse: no check; DESCRIBE on the cluster for its operations
    ops: set[int] | None = None  # kafka-python's form of the bit field; None: not asked for
    if req.include_cluster_authorized_operations:
        ops = operation_codes(authorized_operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME)) \
            if cluster_allowed(ctx, Operation.DESCRIBE) else set()
    include_fenced = bool(getattr(req, "include_fenced_brokers", False))
    nodes = []
    for node_id in broker.brokers.all_ids():
        node = broker.brokers.node(node_id)
        alive = broker.brokers.alive(node_id)
        if node is None or not (alive or include_fenced):
            continue
        host, port = node.advertised_endpoint(ctx.listener, ctx.local_host)
        nodes.append(Node(broker_id=node_id, host=host, port=port, rack=node.rack, is_fenced=not alive))
    return Response(
        throttle_time_ms=0, error_code=0, error_message=None, endpoint_type=ENDPOINT_BROKERS,
        cluster_id=broker.cluster_id, controller_id=broker.brokers.random_alive_id(broker.node_id),
        brokers=nodes,
        authorized_operations=ops,
    )
