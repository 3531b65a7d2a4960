"""DescribeUserScramCredentials (key 50), v0: the users' SCRAM mechanisms and iteration counts
(never the keys), or all users for a null/empty list, as Kafka's ScramImage.describe answers.
Authorization (KafkaApis.handleDescribeUserScramCredentialsRequest): DESCRIBE on the cluster, else a
top-level CLUSTER_AUTHORIZATION_FAILED and one refused result per requested user, its name left ""
(DescribeUserScramCredentialsRequest.getErrorResponse; none for a request for every user)."""

from __future__ import annotations

from broker.cluster import scram_credentials
from broker.handlers.registry import api
from broker.net.context import RequestContext
from broker.security.checks import Operation, cluster_allowed
from protocol.errors import ErrorCode
from protocol.messages import ApiMessage, lazy_response

Response = lazy_response(50)
Result = Response.DescribeUserScramCredentialsResult
Info = Result.CredentialInfo


@api(50, (0, 0))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage:
    # KafkaApis.handleDescribeUserScramCredentialsRequest: DESCRIBE on the cluster
    if not cluster_allowed(ctx, Operation.DESCRIBE):
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return Response(throttle_time_ms=0, error_code=code, error_message=None, results=[
            Result(user="", error_code=code, error_message=None, credential_infos=[]) for _ in req.users or ()])
    users = None if req.users is None else [u.name for u in req.users]
    described = scram_credentials.describe(ctx.broker.metadata.scram, users)
    return Response(throttle_time_ms=0, error_code=0, error_message="", results=[
        Result(user=user, error_code=code, error_message=message,
               credential_infos=[Info(mechanism=m, iterations=i) for m, i in infos])
        for user, code, message, infos in described
    ])
