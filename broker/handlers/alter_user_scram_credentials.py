"""AlterUserScramCredentials (key 51), v0: delete and upsert users' SCRAM credentials, with the
checks of Kafka's ScramControlManager (one change per user per request, a known mechanism,
4096-16384 iterations, deleting only what exists). Kept in the cluster metadata, durably, before
the answer; ``validate_only`` does not exist in this API.
Authorization (ControllerApis.handleAlterUserScramCredentials): ALTER on the cluster, else each
distinct user named, sorted, is CLUSTER_AUTHORIZATION_FAILED with the "needs ALTER permission"
message (AlterUserScramCredentialsRequest.getErrorResponse) and nothing changes."""

from __future__ import annotations

from broker.cluster import scram_credentials
from broker.handlers.describe_acls import cluster_denied
from broker.handlers.registry import api
from broker.net.context import RequestContext
from broker.security.checks import Operation, cluster_allowed
from protocol.errors import ErrorCode
from protocol.messages import ApiMessage, lazy_response

Response = lazy_response(51)
Result = Response.AlterUserScramCredentialsResult


@api(51, (0, 0))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage:
    # ControllerApis.handleAlterUserScramCredentials: ALTER on the cluster (authorizeClusterOperation)
    if not cluster_allowed(ctx, Operation.ALTER):
        message = cluster_denied(ctx, Operation.ALTER)
        users = sorted({u.name for u in req.deletions} | {u.name for u in req.upsertions})
        return Response(throttle_time_ms=0, results=[
            Result(user=user, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=message)
            for user in users])
    store = ctx.broker.metadata
    updated, results = scram_credentials.alter(store.scram, req.deletions, req.upsertions)
    if any(code == ErrorCode.NONE for _, code, _ in results):
        store.set_scram(updated)
    return Response(throttle_time_ms=0, results=[
        Result(user=user, error_code=code, error_message=message) for user, code, message in results
    ])
