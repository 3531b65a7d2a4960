"""AlterPartitionReassignments (key 45), v0-1: ``kafka-reassign-partitions.sh --execute/--cancel``.

Each partition goes to the controller (ReplicationControlManager.alterPartitionReassignment): the
topic and partition must exist; a null replica list cancels, and with nothing in progress that is
NO_REASSIGNMENT_IN_PROGRESS; a target list must be non-empty and name registered brokers once each
(INVALID_REPLICA_ASSIGNMENT, Kafka's messages); with ``allow_replication_factor_change`` false
(v1, KIP-860) it must keep the replication factor. An accepted reassignment adds the new replicas
at once and completes when they are in sync (ListPartitionReassignments shows it meanwhile); on
one node the only valid target is the replica it already has, so it is complete at once.
Authorization (ControllerApis.handleAlterPartitionReassignments): ALTER on the cluster, else
CLUSTER_AUTHORIZATION_FAILED with the "needs ALTER permission" message at the top level and on
every requested partition, and nothing changes.
"""

from __future__ import annotations

from broker.cluster.controller import deadline_passed
from broker.handlers.describe_acls import cluster_denied
from broker.handlers.registry import api
from broker.net.context import RequestContext
from broker.security.checks import Operation, cluster_allowed
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import ApiMessage, lazy_response

Response = lazy_response(45)
TopicResponse = Response.ReassignableTopicResponse
PartitionResponse = TopicResponse.ReassignablePartitionResponse


@api(45, (0, 1))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage:
    # ControllerApis.handleAlterPartitionReassignments: ALTER on the cluster (authorizeClusterOperation)
    if not cluster_allowed(ctx, Operation.ALTER):
        refused, denied = int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED), cluster_denied(ctx, Operation.ALTER)
        return Response(throttle_time_ms=0, error_code=refused, error_message=denied, responses=[
            TopicResponse(name=t.name, partitions=[
                PartitionResponse(partition_index=p.partition_index, error_code=refused, error_message=denied)
                for p in t.partitions])
            for t in req.topics], allow_replication_factor_change=True)
    control = ctx.broker.replication_control
    timed_out = deadline_passed(req.timeout_ms)
    allow_change = bool(getattr(req, "allow_replication_factor_change", True))
    responses = []
    for t in req.topics:
        partitions = []
        for p in t.partitions:
            code, message = ErrorCode.NONE, None
            if timed_out:
                code = ErrorCode.REQUEST_TIMED_OUT
            else:
                try:
                    control.reassign(t.name, p.partition_index, None if p.replicas is None else list(p.replicas),
                                     allow_change)
                except KafkaError as e:
                    code, message = e.code, (e.message or None)
            partitions.append(PartitionResponse(partition_index=p.partition_index, error_code=int(code),
                                                error_message=message))
        responses.append(TopicResponse(name=t.name, partitions=partitions))
    return Response(throttle_time_ms=0, error_code=int(ErrorCode.REQUEST_TIMED_OUT if timed_out else 0),
                    error_message=None, responses=responses, allow_replication_factor_change=allow_change)
