"""DescribeProducers (key 61), v0: the active producers of each requested partition, from that
partition's producer state (what ``kafka-transactions.sh describe-producers`` shows).

As Kafka 4.3.1's KafkaApis.handleDescribeProducersRequest / ReplicaManager.activeProducerState:

- an illegal topic name: INVALID_TOPIC_EXCEPTION with Topic.validate's message, per partition;
- a topic the cluster does not know: UNKNOWN_TOPIC_OR_PARTITION with the error's default
  message (``new ApiError(Errors.UNKNOWN_TOPIC_OR_PARTITION)``), per partition;
- a known topic but a partition this node does not have: UNKNOWN_TOPIC_OR_PARTITION, no message;
- otherwise NONE and one row per producer id the partition still remembers (until it expires
  after producer.id.expiration.ms): epoch, last sequence (-1 if no batch is retained), last
  timestamp, coordinator epoch, first offset of its open transaction (-1 if none).

Authorization: READ on each topic (TOPIC_AUTHORIZATION_FAILED with Kafka's text), before its existence.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.cluster.metadata import validate_topic_name
from broker.handlers.registry import api
from broker.net.context import RequestContext
from broker.security.checks import Operation, ResourceType, allowed
from protocol.error_messages import default_message
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import ApiMessage, lazy_response

if TYPE_CHECKING:
    from broker.services import Services

Response = lazy_response(61)
TopicResponse = Response.TopicResponse
PartitionResponse = TopicResponse.PartitionResponse
ProducerState = PartitionResponse.ProducerState

UNKNOWN_TOPIC_MESSAGE = "This server does not host this topic-partition."


def _topic_error(ctx: RequestContext, name: str) -> tuple[ErrorCode, str | None] | None:
    """KafkaApis.handleDescribeProducersRequest: a valid name, READ on the topic, then existence."""
    broker = ctx.broker
    try:
        validate_topic_name(name)
    except KafkaError as e:
        return e.code, e.message
    if not allowed(ctx, Operation.READ, ResourceType.TOPIC, name):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED, default_message(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    if broker.metadata.get(name) is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_MESSAGE
    return None


def _partition(broker: Services, topic: str, index: int) -> ApiMessage:
    plog = broker.log_manager.get(topic, index)
    if plog is None:
        return PartitionResponse(partition_index=index, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                 error_message=None, active_producers=[])
    producers = plog.producer_state.manager.describe_producers() if plog.producer_state is not None else []
    return PartitionResponse(
        partition_index=index, error_code=0, error_message=None,
        active_producers=[
            ProducerState(producer_id=p.producer_id, producer_epoch=p.producer_epoch, last_sequence=p.last_sequence,
                          last_timestamp=p.last_timestamp, coordinator_epoch=p.coordinator_epoch,
                          current_txn_start_offset=p.current_txn_start_offset)
            for p in producers
        ],
    )


@api(61, (0, 0))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage:
    broker = ctx.broker
    topics: list[ApiMessage] = []
    for t in req.topics:
        error = _topic_error(ctx, t.name)
        if error is not None:
            partitions = [PartitionResponse(partition_index=i, error_code=error[0], error_message=error[1],
                                            active_producers=[]) for i in t.partition_indexes]
        else:
            partitions = [_partition(broker, t.name, i) for i in t.partition_indexes]
        topics.append(TopicResponse(name=t.name, partitions=partitions))
    return Response(throttle_time_ms=0, topics=topics)
