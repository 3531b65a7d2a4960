"""DescribeAcls (key 29), v1-3: this broker has no authorizer (``authorizer.class.name`` is
empty, as in a default Kafka), so, like Kafka's AclApis, it answers SECURITY_DISABLED."""

from __future__ import annotations

from broker.handlers.registry import api
from broker.net.context import RequestContext
from protocol.errors import ErrorCode
from protocol.messages import ApiMessage, lazy_response

Response = lazy_response(29)
NO_AUTHORIZER = "No Authorizer is configured."  # CreateAcls / DeleteAcls results


@api(29, (1, 3))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage:
    return Response(throttle_time_ms=0, error_code=ErrorCode.SECURITY_DISABLED,
                    error_message="No Authorizer is configured on the broker", resources=[])
