"""DescribeAcls (key 29), v1-3 (Kafka's AclApis.handleDescribeAcls): DESCRIBE on the cluster
(CLUSTER_AUTHORIZATION_FAILED otherwise, checked first, as Kafka does), then SECURITY_DISABLED when
no authorizer is configured, else the ACLs the filter matches (``broker.security.acls.AclFilter``:
LITERAL and PREFIXED match that pattern exactly, ANY any pattern with that name, MATCH every ACL
that applies to a resource of that name), grouped by resource. A filter field with the code 0
(UNKNOWN) fails the request's parsing: the connection is closed, as Kafka closes it."""

from __future__ import annotations

from broker.handlers.registry import api
from broker.net.context import RequestContext
from broker.net.dispatch import CloseConnection
from broker.security.acls import AclFilter, Operation, PatternType, Permission, ResourceType, known
from broker.security.checks import cluster_allowed
from protocol.errors import ErrorCode
from protocol.messages import ApiMessage, api_name, lazy_response

Response = lazy_response(29)
Resource = Response.DescribeAclsResource
AclDescription = Resource.AclDescription
NO_AUTHORIZER = "No Authorizer is configured."  # CreateAcls / DeleteAcls results


def cluster_denied(ctx: RequestContext, operation: Operation) -> str:
    """The message of a ClusterAuthorizationException thrown by authorizeClusterOperation."""
    return f"Request {api_name(ctx.api_key)} (v{ctx.api_version}) needs {operation.name} permission."


def acl_filter(f: ApiMessage, resource_type: int, name: str | None, pattern_type: int, principal: str | None,
               host: str | None, operation: int, permission: int) -> AclFilter:
    """A filter from a request's fields; code 0 anywhere fails the request's parsing (the connection
    is closed), other unknown codes become UNKNOWN and match nothing."""
    if 0 in (resource_type, pattern_type, operation, permission):
        raise CloseConnection("an ACL filter with an UNKNOWN (0) resource type, pattern type, operation or permission")
    return AclFilter(known(ResourceType, resource_type), name, known(PatternType, pattern_type), principal, host,
                     known(Operation, operation), known(Permission, permission))


@api(29, (1, 3))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage:
    f = acl_filter(req, req.resource_type_filter, req.resource_name_filter, req.pattern_type_filter,
                   req.principal_filter, req.host_filter, req.operation, req.permission_type)
    if not cluster_allowed(ctx, Operation.DESCRIBE):
        return Response(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                        error_message=cluster_denied(ctx, Operation.DESCRIBE), resources=[])
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return Response(throttle_time_ms=0, error_code=ErrorCode.SECURITY_DISABLED,
                        error_message="No Authorizer is configured on the broker", resources=[])
    grouped: dict[tuple[int, str, int], list] = {}
    for acl in authorizer.describe(f):
        grouped.setdefault((int(acl.resource_type), acl.name, int(acl.pattern_type)), []).append(
            AclDescription(principal=acl.principal, host=acl.host, operation=int(acl.operation),
                           permission_type=int(acl.permission)))
    return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, resources=[
        Resource(resource_type=t, resource_name=n, pattern_type=p, acls=acls) for (t, n, p), acls in grouped.items()])
