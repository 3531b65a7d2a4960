"""DescribeCluster (key 60), v0-2: this node is the whole cluster and its controller."""

from __future__ import annotations

from broker.handlers.metadata import CLUSTER_OPERATIONS
from broker.handlers.registry import api
from broker.net.context import RequestContext
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
    host, port = broker.advertised_endpoint(ctx.listener, ctx.local_host)
    return Response(
        throttle_time_ms=0, error_code=0, error_message=None, endpoint_type=ENDPOINT_BROKERS,
        cluster_id=broker.cluster_id, controller_id=broker.node_id,
        brokers=[Node(broker_id=broker.node_id, host=host, port=port, rack=broker.config.get("broker.rack"),
                      is_fenced=False)],
        authorized_operations=set(CLUSTER_OPERATIONS) if req.include_cluster_authorized_operations else None,
    )
