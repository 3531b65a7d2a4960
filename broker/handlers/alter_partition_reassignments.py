"""AlterPartitionReassignments (key 45), v0-1: ``kafka-reassign-partitions.sh --execute/--cancel``.

Checked as Kafka's ReplicationControlManager does, partition by partition: the topic and partition
must exist; a null replica list cancels, and with nothing in progress that is
NO_REASSIGNMENT_IN_PROGRESS; a target list must be non-empty and name registered brokers once each
(INVALID_REPLICA_ASSIGNMENT, Kafka's messages). On one node the only valid target is this node,
which already holds the partition, so an accepted reassignment is complete at once.
"""

from __future__ import annotations

from broker.cluster.controller import deadline_passed
from broker.cluster.metadata import TopicInfo
from broker.handlers.registry import api
from broker.net.context import RequestContext
from protocol.errors import ErrorCode
from protocol.messages import ApiMessage, lazy_response

Response = lazy_response(45)
TopicResponse = Response.ReassignableTopicResponse
PartitionResponse = TopicResponse.ReassignablePartitionResponse


def _check(node_id: int, topic: str, info: TopicInfo | None, partition: int,
           replicas: list[int] | None) -> tuple[int, str | None]:
    if info is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {topic}."
    if not 0 <= partition < info.partitions:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {topic}:{partition}."
    if replicas is None:
        return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None
    if not replicas:
        return ErrorCode.INVALID_REPLICATION_ASSIGNMENT, "The manual partition assignment includes an empty replica list."
    previous = None
    for broker_id in sorted(replicas):
        if broker_id != node_id:
            return (ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                    f"The manual partition assignment includes broker {broker_id}, but no such broker is registered.")
        if broker_id == previous:
            return (ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                    f"The manual partition assignment includes the broker {broker_id} more than once.")
        previous = broker_id
    return ErrorCode.NONE, None


@api(45, (0, 1))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage:
    broker = ctx.broker
    timed_out = deadline_passed(req.timeout_ms)
    responses = []
    for t in req.topics:
        info = broker.metadata.get(t.name)
        partitions = []
        for p in t.partitions:
            code, message = ((ErrorCode.REQUEST_TIMED_OUT, None) if timed_out
                             else _check(broker.node_id, t.name, info, p.partition_index, p.replicas))
            partitions.append(PartitionResponse(partition_index=p.partition_index, error_code=int(code),
                                                error_message=message))
        responses.append(TopicResponse(name=t.name, partitions=partitions))
    return Response(throttle_time_ms=0, error_code=int(ErrorCode.REQUEST_TIMED_OUT if timed_out else 0),
                    error_message=None, responses=responses,
                    allow_replication_factor_change=getattr(req, "allow_replication_factor_change", True))
