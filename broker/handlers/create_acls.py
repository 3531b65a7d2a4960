"""CreateAcls (key 30), v1-3: no authorizer, so every creation fails with SECURITY_DISABLED
(Kafka's ``CreateAclsRequest.getErrorResponse``); nothing is stored."""

from __future__ import annotations

from broker.handlers.describe_acls import NO_AUTHORIZER
from broker.handlers.registry import api
from broker.net.context import RequestContext
from protocol.errors import ErrorCode
from protocol.messages import ApiMessage, lazy_response

Response = lazy_response(30)
Result = Response.AclCreationResult


@api(30, (1, 3))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage:
    return Response(throttle_time_ms=0, results=[
        Result(error_code=ErrorCode.SECURITY_DISABLED, error_message=NO_AUTHORIZER) for _ in req.creations
    ])
