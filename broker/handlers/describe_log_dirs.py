"""DescribeLogDirs (key 35), v1-4: each log dir with its partitions' sizes and disk space.

A null topic list means every partition. OffsetLag is Kafka's getLogEndOffsetLag: how far the
replica's log end is below its high watermark (0 for a leader and a caught-up follower);
IsFutureKey is false (no in-progress moves between dirs).
Authorization (KafkaApis.handleDescribeLogDirsRequest): DESCRIBE on the cluster, else no results and
a top-level CLUSTER_AUTHORIZATION_FAILED (a field of v3+ only: v1-2 see just the empty list).
"""

from __future__ import annotations

import os
import shutil

from broker.handlers.registry import api
from broker.net.context import RequestContext
from broker.security.checks import Operation, cluster_allowed
from protocol.errors import ErrorCode
from protocol.messages import ApiMessage, lazy_response

Response = lazy_response(35)
DirResult = Response.DescribeLogDirsResult
TopicResult = DirResult.DescribeLogDirsTopic
PartResult = TopicResult.DescribeLogDirsPartition


@api(35, (1, 4))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage:
    # KafkaApis.handleDescribeLogDirsRequest: DESCRIBE on the cluster
    if not cluster_allowed(ctx, Operation.DESCRIBE):
        return Response(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, results=[])
    lm = ctx.broker.log_manager
    wanted = None
    if req.topics is not None:
        wanted = {(t.topic, p) for t in req.topics for p in t.partitions}
    results: list[ApiMessage] = []
    for d in lm.log_dirs:
        by_topic: dict[str, list[ApiMessage]] = {}
        for plog in lm.logs():
            topic, partition = plog.topic, plog.partition
            if wanted is not None and (topic, partition) not in wanted:
                continue
            if lm.dir_of(topic, partition) != d:
                continue
            by_topic.setdefault(topic, []).append(
                PartResult(partition_index=partition, partition_size=plog.size,
                           offset_lag=max(plog.high_watermark - plog.log_end_offset, 0), is_future_key=False))
        try:
            usage = shutil.disk_usage(d)
            total, usable = usage.total, usage.free
        except OSError:
            total = usable = -1
        results.append(DirResult(
            error_code=0, log_dir=os.path.abspath(d),
            topics=[TopicResult(name=t, partitions=ps) for t, ps in sorted(by_topic.items())],
            total_bytes=total, usable_bytes=usable, is_cordoned=False))
    return Response(throttle_time_ms=0, error_code=0, results=results)
