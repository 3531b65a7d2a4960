"""AlterUserScramCredentials (key 51), v0: delete and upsert users' SCRAM credentials, with the
checks of Kafka's ScramControlManager (one change per user per request, a known mechanism,
4096-16384 iterations, deleting only what exists). Kept in the cluster metadata, durably, before
the answer; ``validate_only`` does not exist in this API."""

from __future__ import annotations

from broker.cluster import scram_credentials
from broker.handlers.registry import api
from broker.net.context import RequestContext
from protocol.errors import ErrorCode
from protocol.messages import ApiMessage, lazy_response

Response = lazy_response(51)
Result = Response.AlterUserScramCredentialsResult


@api(51, (0, 0))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage:
    store = ctx.broker.metadata
    updated, results = scram_credentials.alter(store.scram, req.deletions, req.upsertions)
    if any(code == ErrorCode.NONE for _, code, _ in results):
        store.set_scram(updated)
    return Response(throttle_time_ms=0, results=[
        Result(user=user, error_code=code, error_message=message) for user, code, message in results
    ])
