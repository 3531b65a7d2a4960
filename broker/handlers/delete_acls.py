"""DeleteAcls (key 31), v1-3 (Kafka's AclApis.handleDeleteAcls and AclControlManager): ALTER on
the cluster (CLUSTER_AUTHORIZATION_FAILED for every filter otherwise), SECURITY_DISABLED when no
authorizer is configured; then every ACL each filter matches (DescribeAcls' matching) is removed, at
once and durably, and listed under that filter (an ACL two filters match is listed under both).
A filter with an unknown type or operation code fails alone (INVALID_REQUEST); more than 10,000
removals fail every filter, as Kafka's controller refuses them; code 0 closes the connection."""

from __future__ import annotations

from broker.handlers.describe_acls import NO_AUTHORIZER, acl_filter, cluster_denied
from broker.handlers.registry import api
from broker.net.context import RequestContext
from broker.security.acls import Operation
from broker.security.checks import cluster_allowed
from protocol.errors import ErrorCode
from protocol.messages import ApiMessage, lazy_response

Response = lazy_response(31)
FilterResult = Response.DeleteAclsFilterResult
Matching = FilterResult.DeleteAclsMatchingAcl


@api(31, (1, 3))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage:
    filters = [acl_filter(f, f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter,
                          f.principal_filter, f.host_filter, f.operation, f.permission_type) for f in req.filters]

    def every(code: ErrorCode, message: str | None) -> ApiMessage:
        return Response(throttle_time_ms=0, filter_results=[
            FilterResult(error_code=code, error_message=message, matching_acls=[]) for _ in filters])

    if not cluster_allowed(ctx, Operation.ALTER):
        return every(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, cluster_denied(ctx, Operation.ALTER))
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return every(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    results = []
    for error, matched in authorizer.delete(filters):
        if error is not None:
            results.append(FilterResult(error_code=error.code, error_message=error.message, matching_acls=[]))
            continue
        results.append(FilterResult(error_code=ErrorCode.NONE, error_message=None, matching_acls=[
            Matching(error_code=ErrorCode.NONE, error_message=None, resource_type=int(a.resource_type),
                     resource_name=a.name, pattern_type=int(a.pattern_type), principal=a.principal, host=a.host,
                     operation=int(a.operation), permission_type=int(a.permission)) for a in matched]))
    return Response(throttle_time_ms=0, filter_results=results)
