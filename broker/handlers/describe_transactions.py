"""DescribeTransactions (key 65), v0 (kafka-transactions.sh describe, Admin.describeTransactions).

Per requested transactional id: state name, producer id/epoch, timeout, start time and the
partitions still in the transaction (during PrepareCommit/PrepareAbort only those still
waiting for their marker). TRANSACTIONAL_ID_NOT_FOUND for an unknown (or expiring) id,
INVALID_REQUEST for "", COORDINATOR_LOAD_IN_PROGRESS while loading. Authorization: DESCRIBE on
each transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); the partitions of topics the client may
not describe are left out.
"""

from __future__ import annotations

from broker.handlers.registry import api
from broker.net.context import RequestContext
from broker.security.checks import Operation, ResourceType, allowed, filter_allowed
from coordinator.txn.coordinator import TransactionCoordinator
from protocol.errors import ErrorCode
from protocol.messages import ApiMessage, lazy_response

Response = lazy_response(65)
State = Response.TransactionState
TopicData = State.TopicData


def _describe(ctx: RequestContext, txn: TransactionCoordinator, transactional_id: str) -> ApiMessage:
    # KafkaApis.handleDescribeTransactionsRequest: DESCRIBE on the transactional id
    if not allowed(ctx, Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id):
        code, m = int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED), None
    else:
        code, m = txn.handle_describe_transaction(transactional_id)
    if m is None:
        return State(error_code=int(code), transactional_id=transactional_id, transaction_state="",
                     transaction_timeout_ms=0, transaction_start_time_ms=0, producer_id=0, producer_epoch=0,
                     topics=[])
    by_topic: dict[str, list[int]] = {}
    describable = filter_allowed(ctx, Operation.DESCRIBE, ResourceType.TOPIC, (t for t, _ in m.topic_partitions))
    for topic, p in sorted(m.topic_partitions):
        if topic in describable:  # the topics the client may not describe are left out
            by_topic.setdefault(topic, []).append(p)
    return State(
        error_code=0, transactional_id=transactional_id, transaction_state=m.state.state_name,
        transaction_timeout_ms=m.txn_timeout_ms, transaction_start_time_ms=m.txn_start_timestamp,
        producer_id=m.producer_id, producer_epoch=m.producer_epoch,
        topics=[TopicData(topic=t, partitions=parts) for t, parts in by_topic.items()],
    )


@api(65, (0, 0))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage:
    txn = ctx.broker.txn_coordinator
    return Response(throttle_time_ms=0, transaction_states=[_describe(ctx, txn, t) for t in req.transactional_ids or ()])
