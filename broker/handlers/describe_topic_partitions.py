"""DescribeTopicPartitions (key 75), v0: Kafka 4's paged topic description (KIP-966), used by
``kafka-topics.sh --describe`` and ``Admin.describeTopics``.

As Kafka's DescribeTopicPartitionsRequestHandler and KRaftMetadataCache.describeTopicResponse do:
the requested names (every topic when none are named) sorted and deduplicated, those below the
cursor's topic dropped; partitions handed out from the cursor's index up to
``max(min(max.request.partition.size.limit, ResponsePartitionLimit), 1)``; when the limit runs out
inside a topic the next cursor points at its next partition, when it runs out at a topic's end it
points at partition 0 of the next name. Unknown names are answered with UNKNOWN_TOPIC_OR_PARTITION
(INVALID_TOPIC_EXCEPTION for illegal ones) and take nothing from the limit. A cursor whose topic is
not among the named ones, or with a negative index, fails the request with INVALID_REQUEST; an
empty name fails it with UNKNOWN_SERVER_ERROR, as Kafka 4.3.1 answers both.

Authorization (DescribeTopicPartitionsRequestHandler): DESCRIBE on each topic, after the cursor's
checks and before anything about the topic is looked at. Only the authorized names are paged; the
refused named ones (from the cursor's topic on) follow them, TOPIC_AUTHORIZATION_FAILED with a zero
id, and when every topic is asked for the refused ones are left out. Every answered topic carries
the operations the principal may do on it (there is no flag to ask for them).
"""

from __future__ import annotations

import uuid

from broker.cluster.brokers import BrokerRegistry, offline_replicas
from broker.cluster.metadata import INTERNAL_TOPICS, validate_topic_name
from broker.cluster.partition_change import PartitionRegistration
from broker.handlers.registry import api
from broker.net.context import RequestContext
from broker.security.checks import OPERATIONS_OMITTED, Operation, ResourceType, allowed, authorized_operations
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import ApiMessage, lazy_response

Response = lazy_response(75)
Topic = Response.DescribeTopicPartitionsResponseTopic
Partition = Topic.DescribeTopicPartitionsResponsePartition
Cursor = Response.Cursor
NOT_COMPUTED = OPERATIONS_OMITTED  # Kafka's default (not computed): Integer.MIN_VALUE
ZERO_UUID = uuid.UUID(int=0)


def _request_error(req: ApiMessage, code: int) -> ApiMessage:
    """Kafka's getErrorResponse: every requested name, in request order, with ``code``."""
    return Response(throttle_time_ms=0, next_cursor=None, topics=[
        Topic(error_code=int(code), name=t.name, topic_id=None, is_internal=False, partitions=[],
              topic_authorized_operations=NOT_COMPUTED) for t in req.topics])


def _unknown(ctx: RequestContext, name: str) -> ApiMessage:
    try:
        validate_topic_name(name)
        code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    except KafkaError as e:
        code = e.code
    return Topic(error_code=int(code), name=name, topic_id=None, is_internal=name in INTERNAL_TOPICS,
                 partitions=[], topic_authorized_operations=authorized_operations(ctx, ResourceType.TOPIC, name))


@api(75, (0, 0))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage:
    broker = ctx.broker
    named = [t.name for t in req.topics]
    cursor = req.cursor
    if any(not n for n in named):
        return _request_error(req, ErrorCode.UNKNOWN_SERVER_ERROR)
    if cursor is not None and (cursor.partition_index < 0 or (named and cursor.topic_name not in named)):
        return _request_error(req, ErrorCode.INVALID_REQUEST)
    start_name = cursor.topic_name if cursor is not None else ""
    # DescribeTopicPartitionsRequestHandler: DESCRIBE on each topic; the refused named ones come last
    names = []
    refused = []
    for name in sorted(set(named) if named else broker.metadata.topics):
        if allowed(ctx, Operation.DESCRIBE, ResourceType.TOPIC, name):
            names.append(name)
        elif named and name >= start_name:
            refused.append(Topic(error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED), name=name, topic_id=ZERO_UUID,
                                 is_internal=False, partitions=[], topic_authorized_operations=NOT_COMPUTED))
    remaining = max(min(broker.config.get("max.request.partition.size.limit"), req.response_partition_limit), 1)
    topics: list[ApiMessage] = []
    next_cursor = None
    for name in names:
        if name < start_name:
            continue
        if remaining == 0:
            next_cursor = Cursor(topic_name=name, partition_index=0)
            break
        info = broker.metadata.get(name)
        if info is None:
            topics.append(_unknown(ctx, name))
            continue
        first = cursor.partition_index if cursor is not None and name == start_name else 0
        end = min(info.partitions, first + remaining)
        topics.append(Topic(
            error_code=0, name=name, topic_id=info.topic_id, is_internal=info.internal,
            topic_authorized_operations=authorized_operations(ctx, ResourceType.TOPIC, name),
            partitions=[_partition(p, info.registrations[p], broker.brokers) for p in range(first, end)]))
        if end < info.partitions:
            next_cursor = Cursor(topic_name=name, partition_index=end)
            break
        remaining -= max(end - first, 0)
    return Response(throttle_time_ms=0, topics=topics + refused, next_cursor=next_cursor)


def _partition(index: int, reg: PartitionRegistration, brokers: BrokerRegistry) -> ApiMessage:
    """A partition as its registration says, with its ELR (KIP-966); no live leader: -1."""
    return Partition(error_code=0, partition_index=index, leader_id=reg.leader if brokers.alive(reg.leader) else -1,
                     leader_epoch=reg.leader_epoch, replica_nodes=list(reg.replicas), isr_nodes=list(reg.isr),
                     eligible_leader_replicas=list(reg.elr), last_known_elr=list(reg.last_known_elr),
                     offline_replicas=offline_replicas(reg.replicas, brokers))
