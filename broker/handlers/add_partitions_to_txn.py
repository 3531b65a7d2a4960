"""AddPartitionsToTxn (key 24), v0-5.

v0-3 come from producers (TV1): one transactional id, its producer id/epoch and the partitions
it is about to write; the coordinator adds them (Empty/Complete* -> Ongoing, written to
``__transaction_state`` before the answer). Every partition of the request gets the same error.
v4-5 are the broker-to-broker batched form (Kafka requires CLUSTER_ACTION; there is no
authorizer here): several transactions, each either added (TV2 semantics) or, with
``verify_only``, checked partition by partition (KIP-890: NONE if in the transaction, else
TRANSACTION_ABORTABLE), and a top-level error code (NONE).

As KafkaApis does: a partition of an unknown topic fails the whole transaction's request with
UNKNOWN_TOPIC_OR_PARTITION on that partition and OPERATION_NOT_ATTEMPTED on the others; v0-1
answer PRODUCER_FENCED as INVALID_PRODUCER_EPOCH.

Authorization: v0-3 WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED on every
partition), then WRITE on each topic (internal topics never: TOPIC_AUTHORIZATION_FAILED, the other
partitions OPERATION_NOT_ATTEMPTED); v4+ (between brokers) CLUSTER_ACTION on the cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from broker.cluster.metadata import INTERNAL_TOPICS
from broker.handlers.registry import api
from broker.net.context import RequestContext
from broker.security.checks import Operation, ResourceType, allowed, cluster_allowed, filter_allowed
from coordinator.runtime import TopicPartition
from coordinator.txn.state import TV_0, TV_2
from protocol.error_versions import for_version
from protocol.errors import ErrorCode
from protocol.messages import ApiMessage, lazy_response

Response = lazy_response(24)
Result = Response.AddPartitionsToTxnResult
TopicResult = Response.AddPartitionsToTxnTopicResult
PartitionResult = TopicResult.AddPartitionsToTxnPartitionResult


def _topic_results(errors: Mapping[TopicPartition, int]) -> list[ApiMessage]:
    by_topic: dict[str, list[ApiMessage]] = {}
    for (topic, partition), code in errors.items():
        by_topic.setdefault(topic, []).append(PartitionResult(partition_index=partition, partition_error_code=int(code)))
    return [TopicResult(name=t, results_by_partition=parts) for t, parts in by_topic.items()]


async def _one(ctx: RequestContext, transactional_id: str | None, producer_id: int, producer_epoch: int,
               topics: Iterable[ApiMessage], verify_only: bool) -> dict[TopicPartition, ErrorCode]:
    broker = ctx.broker
    version = ctx.api_version
    requested = [(t.name, p) for t in topics for p in t.partitions]
    unknown: dict[TopicPartition, ErrorCode] = {}
    if version < 4:
        # KafkaApis.handleAddPartitionsToTxnRequest (clients): WRITE on the transactional id, then on
        # each topic; an internal topic is never added (TOPIC_AUTHORIZATION_FAILED, authorizer or not)
        if transactional_id is None or not allowed(ctx, Operation.WRITE, ResourceType.TRANSACTIONAL_ID,
                                                    transactional_id):
            return dict.fromkeys(requested, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        writable = filter_allowed(ctx, Operation.WRITE, ResourceType.TOPIC,
                                  (topic for topic, _ in requested if topic not in INTERNAL_TOPICS))
        unknown = {(topic, p): ErrorCode.TOPIC_AUTHORIZATION_FAILED for topic, p in requested if topic not in writable}
    for topic, p in requested:
        if (topic, p) in unknown:
            continue
        info = broker.metadata.get(topic)
        if info is None or not 0 <= p < info.partitions:
            unknown[(topic, p)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if unknown:
        return {tp: unknown.get(tp, ErrorCode.OPERATION_NOT_ATTEMPTED) for tp in requested}
    txn = broker.txn_coordinator
    if verify_only:
        return dict(txn.handle_verify_partitions_in_transaction(transactional_id, producer_id, producer_epoch,
                                                                set(requested)))
    code = await txn.handle_add_partitions_to_transaction(
        transactional_id, producer_id, producer_epoch, set(requested), TV_2 if version > 3 else TV_0,
    )
    code = for_version(24, version, code)  # PRODUCER_FENCED as older versions know it
    return dict.fromkeys(requested, code)


@api(24, (0, 5))
async def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage:
    if ctx.api_version >= 4 and not cluster_allowed(ctx, Operation.CLUSTER_ACTION):  # broker to broker
        return Response(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                        results_by_transaction=[])
    if ctx.api_version < 4:
        errors = await _one(ctx, req.v3_and_below_transactional_id, req.v3_and_below_producer_id,
                            req.v3_and_below_producer_epoch, req.v3_and_below_topics, False)
        return Response(throttle_time_ms=0, results_by_topic_v3_and_below=_topic_results(errors))
    results = []
    for t in req.transactions:
        errors = await _one(ctx, t.transactional_id, t.producer_id, t.producer_epoch, t.topics, bool(t.verify_only))
        results.append(Result(transactional_id=t.transactional_id, topic_results=_topic_results(errors)))
    return Response(throttle_time_ms=0, error_code=0, results_by_transaction=results)
