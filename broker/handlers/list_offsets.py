"""ListOffsets (key 2), v1-11.

Timestamps: -2 earliest (log start), -1 latest (the high watermark, or the LSO for
read_committed), -3 the record with the largest timestamp (v7+), -4 earliest local (v8+; =
earliest here, no tiered storage), -5 latest tiered (v9+) and -6 earliest pending upload (v11+;
both -1 without tiered storage), otherwise the first offset whose timestamp is >= the target,
found through the ``.timeindex``. A negative timestamp the request's version does not define
gets UNSUPPORTED_VERSION, as from Kafka.

Authorization: DESCRIBE on each topic; the partitions of the others are TOPIC_AUTHORIZATION_FAILED,
after the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.handlers.registry import api
from broker.net.context import RequestContext
from broker.replica.replica_manager import ISOLATION_READ_COMMITTED, last_stable_offset
from broker.security.checks import Operation, ResourceType, filter_allowed
from protocol.errors import ErrorCode, KafkaError, error_code_of
from protocol.messages import ApiMessage, lazy_response

if TYPE_CHECKING:
    from broker.services import Services

Response = lazy_response(2)
TopicResp = Response.ListOffsetsTopicResponse
PartResp = TopicResp.ListOffsetsPartitionResponse

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED, EARLIEST_PENDING_UPLOAD = -1, -2, -3, -4, -5, -6
# The first ListOffsets version that defines each special timestamp.
DEFINED_SINCE = {LATEST: 0, EARLIEST: 0, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9,
                 EARLIEST_PENDING_UPLOAD: 11}


DEBUGGING_REPLICA_ID = -2  # ListOffsetsRequest.DEBUGGING_REPLICA_ID: may read a follower's log


def lookup(broker: Services, topic: str, partition: int, timestamp: int, isolation_level: int,
           version: int, leader_only: bool = True) -> tuple[int, int, int]:
    """fetchOffsetForTimestamp: (timestamp, offset, leader epoch), at the leader
    (NOT_LEADER_OR_FOLLOWER elsewhere) except for the debugging replica id. The epoch is the
    current leader epoch for the latest offset and the epoch of the records found otherwise."""
    rm = broker.replica_manager
    plog = rm.leader_log(topic, partition) if leader_only else rm.partition_log(topic, partition)
    if timestamp < 0 and DEFINED_SINCE.get(timestamp, version + 1) > version:
        raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, f"timestamp {timestamp} at ListOffsets v{version}")

    def epoch_of(offset: int) -> int:
        epoch = plog.epoch_cache.epoch_for_offset(offset)
        return epoch if epoch is not None else -1

    if timestamp == LATEST:
        offset = last_stable_offset(plog) if isolation_level == ISOLATION_READ_COMMITTED else plog.high_watermark
        return -1, offset, rm.leader_epoch(topic, partition)
    if timestamp == EARLIEST:  # the earliest epoch, if it starts at or before the log start
        first = plog.epoch_cache.earliest_entry
        epoch = first[0] if first is not None and first[1] <= plog.log_start_offset else -1
        return -1, plog.log_start_offset, epoch
    if timestamp == EARLIEST_LOCAL:
        return -1, plog.log_start_offset, epoch_of(plog.log_start_offset)
    if timestamp in (EARLIEST_PENDING_UPLOAD, LATEST_TIERED):
        return -1, -1, -1
    if timestamp == MAX_TIMESTAMP:
        largest = plog.max_timestamp_and_offset()
        return (largest[0], largest[1], epoch_of(largest[1])) if largest is not None else (-1, -1, -1)
    found = plog.offset_for_timestamp(timestamp)
    if found is None:
        return -1, -1, -1
    offset, ts = found
    upper = last_stable_offset(plog) if isolation_level == ISOLATION_READ_COMMITTED else plog.high_watermark
    if offset >= upper:
        return -1, -1, -1
    return ts, offset, epoch_of(offset)


@api(2, (1, 11))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage:
    broker = ctx.broker
    isolation = getattr(req, "isolation_level", 0) if ctx.api_version >= 2 else 0
    topics: list[ApiMessage] = []
    # KafkaApis.handleListOffsetRequest: DESCRIBE on each topic; the others come after, refused
    describable = filter_allowed(ctx, Operation.DESCRIBE, ResourceType.TOPIC, (t.name for t in req.topics))
    refused = [TopicResp(name=t.name, partitions=[
        PartResp(partition_index=p.partition_index, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, timestamp=-1,
                 offset=-1, leader_epoch=-1) for p in t.partitions]) for t in req.topics if t.name not in describable]
    for t in req.topics:
        if t.name not in describable:
            continue
        seen: dict[int, int] = {}
        for p in t.partitions:
            seen[p.partition_index] = seen.get(p.partition_index, 0) + 1
        parts = []
        for p in t.partitions:
            if seen[p.partition_index] > 1:
                parts.append(PartResp(partition_index=p.partition_index, error_code=ErrorCode.INVALID_REQUEST,
                                      timestamp=-1, offset=-1, leader_epoch=-1))
                continue
            try:
                rm = broker.replica_manager
                rm.check_leader_epoch(t.name, p.partition_index, getattr(p, "current_leader_epoch", -1))
                ts, offset, epoch = lookup(broker, t.name, p.partition_index, p.timestamp, isolation,
                                           ctx.api_version, leader_only=req.replica_id != DEBUGGING_REPLICA_ID)
                parts.append(PartResp(partition_index=p.partition_index, error_code=0, timestamp=ts, offset=offset,
                                      leader_epoch=epoch if offset >= 0 else -1))
            except Exception as e:  # noqa: BLE001 - per-partition error code
                parts.append(PartResp(partition_index=p.partition_index, error_code=error_code_of(e),
                                      timestamp=-1, offset=-1, leader_epoch=-1))
        topics.append(TopicResp(name=t.name, partitions=parts))
    return Response(throttle_time_ms=0, topics=topics + refused)
