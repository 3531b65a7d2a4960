"""DeleteAcls (key 31), v1-3: no authorizer, so every filter fails with SECURITY_DISABLED and
matches nothing (Kafka's ``DeleteAclsRequest.getErrorResponse``)."""

from __future__ import annotations

from broker.handlers.describe_acls import NO_AUTHORIZER
from broker.handlers.registry import api
from broker.net.context import RequestContext
from protocol.errors import ErrorCode
from protocol.messages import ApiMessage, lazy_response

Response = lazy_response(31)
FilterResult = Response.DeleteAclsFilterResult


@api(31, (1, 3))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage:
    return Response(throttle_time_ms=0, filter_results=[
        FilterResult(error_code=ErrorCode.SECURITY_DISABLED, error_message=NO_AUTHORIZER, matching_acls=[])
        for _ in req.filters
    ])
