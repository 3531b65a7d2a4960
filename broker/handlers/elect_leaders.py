"""ElectLeaders (key 43), v0-2: ``kafka-leader-election.sh`` and ``Admin.electLeaders``.

Among several brokers each partition goes to the controller (ReplicationControlManager.
electLeaders): a preferred election moves leadership to the first replica when it is a live ISR
member (PREFERRED_LEADER_NOT_AVAILABLE otherwise), an unclean one elects any live replica of a
leaderless partition; ELECTION_NOT_NEEDED when the leader would stay. On one node every
partition's only replica is its leader and also its preferred one, so no election is ever needed.
A missing topic or partition is UNKNOWN_TOPIC_OR_PARTITION (Kafka's messages), an unknown
election type INVALID_REQUEST for the request and every partition in it. A null topic list means
every partition, and Kafka then reports only the elections it did.
Authorization (ControllerApis.handleElectLeaders): ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED
with the "needs ALTER permission" message on every requested partition and (v1+) at the top level.
"""

from __future__ import annotations

from broker.cluster.controller import deadline_passed
from broker.cluster.partition_change import Election
from broker.handlers.describe_acls import cluster_denied
from broker.handlers.registry import api
from broker.net.context import RequestContext
from broker.security.checks import Operation, cluster_allowed
from protocol.errors import ErrorCode
from protocol.messages import ApiMessage, lazy_response

Response = lazy_response(43)
TopicResult = Response.ReplicaElectionResult
PartitionResult = TopicResult.PartitionResult
ELECTION_TYPES = (0, 1)  # PREFERRED, UNCLEAN
NOT_NEEDED = "Leader election not needed for topic partition."
MESSAGES = {  # Kafka's Errors messages
    ErrorCode.ELECTION_NOT_NEEDED: NOT_NEEDED,
    ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE: "The preferred leader was not available.",
    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE: "Eligible topic partition leaders are not available.",
}


@api(43, (0, 2))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage:
    # ControllerApis.handleElectLeaders: ALTER on the cluster (ElectLeadersRequest.getErrorResponse)
    if not cluster_allowed(ctx, Operation.ALTER):
        code, message = int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED), cluster_denied(ctx, Operation.ALTER)
        return Response(throttle_time_ms=0, error_code=code, replica_election_results=[
            TopicResult(topic=t.topic, partition_result=[
                PartitionResult(partition_id=p, error_code=code, error_message=message) for p in t.partitions])
            for t in req.topic_partitions or ()])
    metadata = ctx.broker.metadata
    election_type = req.election_type if ctx.api_version >= 1 else 0
    if deadline_passed(req.timeout_ms):
        return Response(throttle_time_ms=0, error_code=int(ErrorCode.REQUEST_TIMED_OUT), replica_election_results=[
            TopicResult(topic=t.topic, partition_result=[
                PartitionResult(partition_id=p, error_code=int(ErrorCode.REQUEST_TIMED_OUT), error_message=None)
                for p in t.partitions]) for t in req.topic_partitions or ()])
    clustered = ctx.broker.shared is not None
    election = Election.PREFERRED if election_type == 0 else Election.UNCLEAN
    control = ctx.broker.replication_control
    if req.topic_partitions is None:
        out = []
        for name, every in list(metadata.topics.items()):
            done = [p for p in range(every.partitions)
                    if clustered and election_type in ELECTION_TYPES and control.elect(name, p, election) == ErrorCode.NONE]
            out.append(TopicResult(topic=name, partition_result=[
                PartitionResult(partition_id=p, error_code=0, error_message=None) for p in done]))
        return Response(throttle_time_ms=0, error_code=0, replica_election_results=out)
    bad_type = election_type not in ELECTION_TYPES
    results = []
    for t in req.topic_partitions:
        info = metadata.get(t.topic)
        partitions = []
        for p in t.partitions:
            if bad_type:
                code, message = ErrorCode.INVALID_REQUEST, f"Unknown election type {election_type}"
            elif info is None:
                code, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {t.topic}"
            elif not 0 <= p < info.partitions:
                code, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {t.topic}-{p}"
            elif clustered:
                code = control.elect(t.topic, p, election)
                message = MESSAGES.get(code, "")
            else:
                code, message = ErrorCode.ELECTION_NOT_NEEDED, NOT_NEEDED
            partitions.append(PartitionResult(partition_id=p, error_code=int(code), error_message=message or None))
        results.append(TopicResult(topic=t.topic, partition_result=partitions))
    return Response(throttle_time_ms=0, error_code=int(ErrorCode.INVALID_REQUEST if bad_type else 0),
                    replica_election_results=results)
