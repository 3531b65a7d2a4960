"""EndTxn (key 26), v0-5.

Commit or abort the producer's transaction. The answer comes once PrepareCommit/PrepareAbort is
durable in ``__transaction_state``; the markers then go out to every partition of the
transaction and CompleteCommit/CompleteAbort is written afterwards (new requests for the id get
CONCURRENT_TRANSACTIONS until it is). v0-4 are Transactions V1 (the epoch stays); v5 is TV2,
decided by the request version as Kafka does: the epoch is bumped and the new producer id/epoch
are in the answer. v0-1 answer PRODUCER_FENCED as INVALID_PRODUCER_EPOCH. Authorization: WRITE on
the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from broker.handlers.registry import api
from broker.net.context import RequestContext
from broker.security.checks import Operation, ResourceType, allowed
from coordinator.txn.state import TV_0, TV_2
from protocol.error_versions import for_version
from protocol.errors import ErrorCode
from protocol.messages import ApiMessage, lazy_response

Response = lazy_response(26)


@api(26, (0, 5))
async def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage:
    version = ctx.api_version
    if not allowed(ctx, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
        return Response(throttle_time_ms=0, error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    code, pid, epoch = await ctx.broker.txn_coordinator.handle_end_transaction(
        req.transactional_id, req.producer_id, req.producer_epoch, bool(req.committed),
        TV_2 if version > 4 else TV_0,
    )
    code = for_version(26, version, code)  # PRODUCER_FENCED as older versions know it
    if version >= 5:
        return Response(throttle_time_ms=0, error_code=code, producer_id=pid, producer_epoch=epoch)
    return Response(throttle_time_ms=0, error_code=code)
