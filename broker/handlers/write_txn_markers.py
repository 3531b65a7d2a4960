"""WriteTxnMarkers (key 27), v1-2: the partition-leader side of the marker channel.

For every marker and every partition it names, append the COMMIT/ABORT control batch with the
coordinator epoch (``broker.replica.txn_markers.write_txn_markers``, the same function the
in-process marker channel calls) and answer that partition's error once its ISR holds the marker
(Kafka appends markers with acks=-1): UNKNOWN_TOPIC_OR_PARTITION for a partition this node does
not have, INVALID_PRODUCER_EPOCH for a stale producer epoch, TRANSACTION_COORDINATOR_FENCED for a
stale coordinator epoch, NOT_ENOUGH_REPLICAS or REQUEST_TIMED_OUT when the ISR cannot take it.
v2 (KIP-1228, Kafka 4.2+) carries each marker's TransactionVersion: a TV2 marker needs an epoch
strictly above the producer's (its coordinator bumped it at EndTxn); v1 markers are TV0. Admin
tools may call it directly (``kafka-transactions.sh abort``).

Authorization: ALTER or CLUSTER_ACTION on the cluster (CLUSTER_AUTHORIZATION_FAILED on every partition).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

from broker.handlers.registry import api
from broker.net.context import RequestContext
from broker.replica.txn_markers import write_txn_markers
from broker.security.checks import Operation, cluster_allowed
from protocol.errors import ErrorCode
from protocol.messages import ApiMessage, lazy_response

Response = lazy_response(27)
MarkerResult = Response.WritableTxnMarkerResult
TopicResult = MarkerResult.WritableTxnMarkerTopicResult
PartitionResult = TopicResult.WritableTxnMarkerPartitionResult


@api(27, (1, 2))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage | Awaitable[ApiMessage]:
    # KafkaApis.handleWriteTxnMarkersRequest: ALTER or CLUSTER_ACTION on the cluster, else every
    # partition of every marker is refused
    if not cluster_allowed(ctx, Operation.ALTER) and not cluster_allowed(ctx, Operation.CLUSTER_ACTION):
        return Response(markers=[MarkerResult(producer_id=m.producer_id, topics=[
            TopicResult(name=t.name, partitions=[
                PartitionResult(partition_index=p, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
                for p in t.partition_indexes]) for t in m.topics]) for m in req.markers])
    version = ctx.api_version
    answers = [  # appended now, answered once each partition's ISR holds its marker
        write_txn_markers(ctx.broker, [(t.name, p) for t in m.topics for p in t.partition_indexes], m.producer_id,
                          m.producer_epoch, bool(m.transaction_result), m.coordinator_epoch,
                          getattr(m, "transaction_version", 0) if version >= 2 else 0, via="WriteTxnMarkers")
        for m in req.markers]
    return _respond(req, answers)


async def _respond(req: ApiMessage, answers: list[Awaitable[dict[tuple[str, int], ErrorCode]]]) -> ApiMessage:
    errors_by_marker = await asyncio.gather(*answers)
    return Response(markers=[MarkerResult(producer_id=m.producer_id, topics=[
        TopicResult(name=t.name, partitions=[PartitionResult(partition_index=p, error_code=int(errors[(t.name, p)]))
                                             for p in t.partition_indexes])
        for t in m.topics]) for m, errors in zip(req.markers, errors_by_marker, strict=True)])
