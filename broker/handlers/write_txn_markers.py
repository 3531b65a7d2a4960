"""WriteTxnMarkers (key 27), v1-2: the partition-leader side of the marker channel.

For every marker and every partition it names, append the COMMIT/ABORT control batch with the
coordinator epoch (``broker.replica.txn_markers.write_txn_marker``, the same function the in-process
marker channel calls) and answer that partition's error: UNKNOWN_TOPIC_OR_PARTITION for a
partition this node does not have, INVALID_PRODUCER_EPOCH for a stale producer epoch,
TRANSACTION_COORDINATOR_FENCED for a stale coordinator epoch. v2 (KIP-1228, Kafka 4.2+) carries
each marker's TransactionVersion: a TV2 marker needs an epoch strictly above the producer's
(its coordinator bumped it at EndTxn); v1 markers are TV0. Admin tools may call it directly
(``kafka-transactions.sh abort``).

Authorization: ALTER or CLUSTER_ACTION on the cluster (CLUSTER_AUTHORIZATION_FAILED on every partition).
"""

from __future__ import annotations

from broker.handlers.registry import api
from broker.net.context import RequestContext
from broker.replica.txn_markers import write_txn_marker
from broker.security.checks import Operation, cluster_allowed
from protocol.errors import ErrorCode
from protocol.messages import ApiMessage, lazy_response

Response = lazy_response(27)
MarkerResult = Response.WritableTxnMarkerResult
TopicResult = MarkerResult.WritableTxnMarkerTopicResult
PartitionResult = TopicResult.WritableTxnMarkerPartitionResult


@api(27, (1, 2))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage:
    broker = ctx.broker
    # KafkaApis.handleWriteTxnMarkersRequest: ALTER or CLUSTER_ACTION on the cluster, else every
    # partition of every marker is refused
    if not cluster_allowed(ctx, Operation.ALTER) and not cluster_allowed(ctx, Operation.CLUSTER_ACTION):
        return Response(markers=[MarkerResult(producer_id=m.producer_id, topics=[
            TopicResult(name=t.name, partitions=[
                PartitionResult(partition_index=p, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
                for p in t.partition_indexes]) for t in m.topics]) for m in req.markers])
    markers = []
    for m in req.markers:
        tv = getattr(m, "transaction_version", 0) if ctx.api_version >= 2 else 0
        topics = []
        for t in m.topics:
            parts = [
                PartitionResult(partition_index=p, error_code=int(write_txn_marker(
                    broker, t.name, p, m.producer_id, m.producer_epoch, bool(m.transaction_result),
                    m.coordinator_epoch, tv, via="WriteTxnMarkers",
                )))
                for p in t.partition_indexes
            ]
            topics.append(TopicResult(name=t.name, partitions=parts))
        markers.append(MarkerResult(producer_id=m.producer_id, topics=topics))
    return Response(markers=markers)
