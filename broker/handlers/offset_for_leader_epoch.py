"""OffsetForLeaderEpoch (key 23), v2-4: the end offset of a leader epoch.

Consumers call it after a leader change to detect truncation. Epochs come from the
partition's ``leader-epoch-checkpoint``; an epoch we never had answers the next epoch's start.
Authorization (KafkaApis.handleOffsetForLeaderEpochRequest): CLUSTER_ACTION on the cluster (brokers)
allows every topic; else DESCRIBE on each topic (KIP-320: consumers), the refused ones answered after
the others with TOPIC_AUTHORIZATION_FAILED on each partition.
"""

from __future__ import annotations

from broker.handlers.registry import api
from broker.net.context import RequestContext
from broker.security.checks import Operation, ResourceType, cluster_allowed, filter_allowed
from protocol.errors import ErrorCode, error_code_of
from protocol.messages import ApiMessage, lazy_response

Response = lazy_response(23)
TopicResult = Response.OffsetForLeaderTopicResult
EpochEnd = TopicResult.EpochEndOffset


@api(23, (2, 4))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage:
    rm = ctx.broker.replica_manager
    # KafkaApis.handleOffsetForLeaderEpochRequest: CLUSTER_ACTION on the cluster, else DESCRIBE on each topic
    if cluster_allowed(ctx, Operation.CLUSTER_ACTION):
        authorized, refused = list(req.topics), []
    else:
        describable = filter_allowed(ctx, Operation.DESCRIBE, ResourceType.TOPIC, (t.topic for t in req.topics))
        authorized = [t for t in req.topics if t.topic in describable]
        refused = [t for t in req.topics if t.topic not in describable]
    topics = []
    for t in authorized:
        parts = []
        for p in t.partitions:
            try:
                plog = rm.partition_log(t.topic, p.partition)
                rm.check_leader_epoch(t.topic, p.partition, p.current_leader_epoch)
                epoch, end = plog.end_offset_for_epoch(p.leader_epoch)
                parts.append(EpochEnd(error_code=0, partition=p.partition, leader_epoch=epoch, end_offset=end))
            except Exception as e:  # noqa: BLE001
                parts.append(EpochEnd(error_code=error_code_of(e), partition=p.partition, leader_epoch=-1,
                                      end_offset=-1))
        topics.append(TopicResult(topic=t.topic, partitions=parts))
    topics += [TopicResult(topic=t.topic, partitions=[
        EpochEnd(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, partition=p.partition, leader_epoch=-1, end_offset=-1)
        for p in t.partitions]) for t in refused]
    return Response(throttle_time_ms=0, topics=topics)
