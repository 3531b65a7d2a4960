"""CreateAcls (key 30), v1-3 (Kafka's AclApis.handleCreateAcls and AclControlManager): ALTER on
the cluster (CLUSTER_AUTHORIZATION_FAILED for every creation otherwise), SECURITY_DISABLED when no
authorizer is configured; then each ACL is checked (a CLUSTER resource is named kafka-cluster, a
name is not empty, a principal has a ``type:`` prefix) and the valid new ones are stored at once,
durably, in the cluster metadata. An ACL already there, or twice in the request, is a success.
A creation with ANY or MATCH in it fails the whole request with UNKNOWN_SERVER_ERROR, as Kafka's
AclBinding constructors throw before any is looked at; a field with code 0 closes the connection."""

from __future__ import annotations

from broker.handlers.describe_acls import NO_AUTHORIZER, cluster_denied
from broker.handlers.registry import api
from broker.net.context import RequestContext
from broker.net.dispatch import CloseConnection
from broker.security.acls import Acl, Operation, PatternType, Permission, ResourceType, known
from broker.security.checks import cluster_allowed
from protocol.errors import ErrorCode
from protocol.messages import ApiMessage, lazy_response

Response = lazy_response(30)
Result = Response.AclCreationResult


@api(30, (1, 3))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage:
    for c in req.creations:
        if 0 in (c.resource_type, c.resource_pattern_type, c.operation, c.permission_type):
            raise CloseConnection("an ACL creation with an UNKNOWN (0) field")

    def every(code: ErrorCode, message: str | None) -> ApiMessage:
        return Response(throttle_time_ms=0, results=[Result(error_code=code, error_message=message)
                                                     for _ in req.creations])

    if not cluster_allowed(ctx, Operation.ALTER):
        return every(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, cluster_denied(ctx, Operation.ALTER))
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return every(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    acls = [Acl(known(ResourceType, c.resource_type), c.resource_name, known(PatternType, c.resource_pattern_type),
                c.principal, c.host, known(Operation, c.operation), known(Permission, c.permission_type))
            for c in req.creations]
    if any(a.resource_type == ResourceType.ANY or a.pattern_type in (PatternType.ANY, PatternType.MATCH)
           or a.operation == Operation.ANY or a.permission == Permission.ANY for a in acls):
        return every(ErrorCode.UNKNOWN_SERVER_ERROR, None)
    return Response(throttle_time_ms=0, results=[
        Result(error_code=ErrorCode.NONE, error_message=None) if error is None
        else Result(error_code=error.code, error_message=error.message) for error in authorizer.create(acls)])
