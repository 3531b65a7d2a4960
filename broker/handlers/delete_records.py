"""DeleteRecords (key 21), v0-2: advance a partition's log start offset (the low watermark).

Offset -1 means the high watermark. Kafka's rules: POLICY_VIOLATION unless the topic's
cleanup.policy includes ``delete``, OFFSET_OUT_OF_RANGE beyond the high watermark; segments
wholly below the new start are deleted. Consumers then see the new earliest offset.
Authorization (KafkaApis.handleDeleteRecordsRequest): DELETE on each topic, else
TOPIC_AUTHORIZATION_FAILED (low watermark -1) on its partitions, before their existence.
"""

from __future__ import annotations

from broker.handlers.registry import api
from broker.net.context import RequestContext
from broker.security.checks import Operation, ResourceType, filter_allowed
from protocol.errors import ErrorCode, error_code_of
from protocol.messages import ApiMessage, lazy_response

Response = lazy_response(21)
TopicResult = Response.DeleteRecordsTopicResult
PartResult = TopicResult.DeleteRecordsPartitionResult


@api(21, (0, 2))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage:
    rm = ctx.broker.replica_manager
    # KafkaApis.handleDeleteRecordsRequest: DELETE on each topic
    deletable = filter_allowed(ctx, Operation.DELETE, ResourceType.TOPIC, (t.name for t in req.topics))
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            if t.name not in deletable:
                parts.append(PartResult(partition_index=p.partition_index, low_watermark=-1,
                                        error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            try:
                low = rm.partition_log(t.name, p.partition_index).delete_records_before(p.offset)
                parts.append(PartResult(partition_index=p.partition_index, low_watermark=low, error_code=0))
            except Exception as e:  # noqa: BLE001 - per-partition error code
                parts.append(PartResult(partition_index=p.partition_index, low_watermark=-1,
                                        error_code=error_code_of(e)))
        topics.append(TopicResult(name=t.name, partitions=parts))
    return Response(throttle_time_ms=0, topics=topics)
