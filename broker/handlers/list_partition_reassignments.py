"""ListPartitionReassignments (key 46), v0: ``kafka-reassign-partitions.sh --list/--verify``.

The partitions in a reassignment (adding and removing replicas not yet settled), of every topic
(a null list) or of the named ones; as Kafka's controller answers, unknown topics and partitions
and partitions not being reassigned are left out, and so is a topic with none.
Authorization (ControllerApis.handleListPartitionReassignments): DESCRIBE on the cluster, else a
top-level CLUSTER_AUTHORIZATION_FAILED with the "needs DESCRIBE permission" message, the requested
topics and partitions echoed (ListPartitionReassignmentsRequest.getErrorResponse).
"""

from __future__ import annotations

from broker.handlers.describe_acls import cluster_denied
from broker.handlers.registry import api
from broker.net.context import RequestContext
from broker.security.checks import Operation, cluster_allowed
from protocol.errors import ErrorCode
from protocol.messages import ApiMessage, lazy_response

Response = lazy_response(46)
Topic = Response.OngoingTopicReassignment
Partition = Topic.OngoingPartitionReassignment


@api(46, (0, 0))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage:
    # ControllerApis.handleListPartitionReassignments: DESCRIBE on the cluster (authorizeClusterOperation)
    if not cluster_allowed(ctx, Operation.DESCRIBE):
        return Response(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                        error_message=cluster_denied(ctx, Operation.DESCRIBE), topics=[
                            Topic(name=t.name, partitions=[
                                Partition(partition_index=p, replicas=[], adding_replicas=[], removing_replicas=[])
                                for p in t.partition_indexes])
                            for t in req.topics or ()])
    named = None if req.topics is None else {t.name: list(t.partition_indexes) for t in req.topics}
    ongoing = ctx.broker.replication_control.reassignments(named)
    return Response(throttle_time_ms=0, error_code=0, error_message=None, topics=[
        Topic(name=name, partitions=[
            Partition(partition_index=p, replicas=list(reg.replicas), adding_replicas=list(reg.adding),
                      removing_replicas=list(reg.removing)) for p, reg in parts])
        for name, parts in ongoing.items()])
