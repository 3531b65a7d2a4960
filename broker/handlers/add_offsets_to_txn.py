"""AddOffsetsToTxn (key 25), v0-4.

Adds the group's ``__consumer_offsets`` partition (``abs(hash(group_id)) %
offsets.topic.num.partitions``) to the producer's transaction, exactly as AddPartitionsToTxn
would (TV0: the request only comes from TV1 clients), so the COMMIT/ABORT marker later lands
there and applies or drops the TxnOffsetCommit offsets. v0-1 answer PRODUCER_FENCED as
INVALID_PRODUCER_EPOCH.

Authorization: WRITE on the transactional id, then READ on the group (top-level errors).
"""

from __future__ import annotations

from broker.handlers.registry import api
from broker.net.context import RequestContext
from broker.security.checks import Operation, ResourceType, allowed
from coordinator.txn.state import TV_0
from protocol.error_versions import for_version
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import ApiMessage, lazy_response

Response = lazy_response(25)
OFFSETS_TOPIC = "__consumer_offsets"


@api(25, (0, 4))
async def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage:
    broker = ctx.broker
    txn, gc = broker.txn_coordinator, broker.group_coordinator
    # KafkaApis.handleAddOffsetsToTxnRequest: WRITE on the transactional id, then READ on the group
    if not allowed(ctx, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
        return Response(throttle_time_ms=0, error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not allowed(ctx, Operation.READ, ResourceType.GROUP, req.group_id):
        return Response(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    try:
        gc.ensure_offsets_topic()
    except KafkaError as e:
        return Response(throttle_time_ms=0, error_code=e.code)
    partition = (OFFSETS_TOPIC, gc.partition_for(req.group_id))
    code = await txn.handle_add_partitions_to_transaction(
        req.transactional_id, req.producer_id, req.producer_epoch, {partition}, TV_0,
    )
    code = for_version(25, ctx.api_version, code)  # PRODUCER_FENCED as older versions know it
    return Response(throttle_time_ms=0, error_code=code)
