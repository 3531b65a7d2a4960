"""DescribeQuorum (key 55), v0-2: the KRaft quorum of a single combined broker+controller node.

``kafka-metadata-quorum.sh describe --status/--replication`` asks for it. Kafka answers from its
``__cluster_metadata`` Raft log; this one process is broker and controller and keeps its metadata in
files (broker/cluster/metadata.py), so the answer is the one a single-node KRaft cluster gives, with values that
mean the same here:

- leader and only voter: this node (``node.id``), with the ``directory.id`` of the first log dir's
  meta.properties (where ``__cluster_metadata`` lives; Kafka's zero uuid if it has none); no observers.
- leader epoch 1: the first and only election. Nothing ever contests this node's leadership (Kafka's
  single voter bumps its epoch on each restart; ours stays at 1).
- high watermark = the voter's log end offset = the offset Kafka's idle metadata log would have reached:
  its controller appends a NoOpRecord every ``metadata.max.idle.interval.ms`` (Kafka's default 500 ms,
  fixed here so that a config change cannot move it back), so it is the 500 ms ticks since the cluster
  was formatted (the mtime of that meta.properties, written once and never rewritten). It only grows:
  persistent across restarts, and never below the last answer of this process should the wall clock
  step back. Unlike Kafka's it also advances while the broker is down.
- timestamps: now, as Kafka's leader reports for itself (last fetch and last caught-up).
- v2 Nodes: this node's listeners. Kafka lists its CONTROLLER listener; ours serves no separate
  CONTROLLER listener (broker/net/server.py skips it) and answers controller APIs on its client listeners,
  so those are listed, with the advertised host and port as DescribeCluster gives them.

A request for anything but the single partition ``__cluster_metadata``-0 gets UNKNOWN_TOPIC_OR_PARTITION
in every requested partition and no nodes, as Kafka's KafkaRaftClient answers (``hasValidTopicPartition``).

Authorization (ControllerApis.handleDescribeQuorum): DESCRIBE on the cluster, else a top-level
CLUSTER_AUTHORIZATION_FAILED with the error's default message (v2+) and nothing else
(DescribeQuorumRequest.getTopLevelErrorResponse).
"""

from __future__ import annotations

import os
import uuid
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from broker.handlers.registry import api
from broker.net.context import RequestContext
from broker.security.checks import Operation, cluster_allowed
from protocol.error_messages import default_message
from protocol.errors import ErrorCode
from protocol.messages import ApiMessage, lazy_response
from storage import checkpoints

if TYPE_CHECKING:
    from broker.services import Services

Response = lazy_response(55)

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION = 0
QUORUM_EPOCH = 1
NOOP_INTERVAL_MS = 500  # Kafka's metadata.max.idle.interval.ms default
ZERO_UUID = uuid.UUID(int=0)
UNKNOWN_PARTITION_MESSAGE = "This server does not host this topic-partition."  # Errors.message()

@dataclass(slots=True)
class _Quorum:
    """What a broker's answers are built from: its voter's directory id, when the cluster was
    formatted (ms), and the highest offset answered so far (so it never goes back)."""

    directory_id: uuid.UUID
    formatted_ms: int
    offset: int = 0


_state: weakref.WeakKeyDictionary[Services, _Quorum] = weakref.WeakKeyDictionary()


def _quorum_state(broker: Services) -> _Quorum:
    state = _state.get(broker)
    if state is None:
        path = Path(broker.config.log_dirs[0]) / "meta.properties"
        props = checkpoints.read_meta_properties(str(path)) or {}
        try:
            directory_id = checkpoints.kafka_str_to_uuid(props["directory.id"])
        except (KeyError, ValueError):
            directory_id = ZERO_UUID
        try:
            formatted_ms = int(os.stat(path).st_mtime * 1000)
        except OSError:  # no meta.properties (the broker writes it at start-up): formatted now
            formatted_ms = broker.clock.now_ms()
        state = _state[broker] = _Quorum(directory_id, formatted_ms)
    return state


def _valid_request(req: ApiMessage) -> bool:
    """KafkaRaftClient.hasValidTopicPartition: exactly one topic, ``__cluster_metadata``, partition 0."""
    topics = req.topics or []
    return (len(topics) == 1 and topics[0].topic_name == METADATA_TOPIC
            and len(topics[0].partitions or []) == 1
            and topics[0].partitions[0].partition_index == METADATA_PARTITION)


@api(55, (0, 2))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage:
    # ControllerApis.handleDescribeQuorum: DESCRIBE on the cluster (authorizeClusterOperation)
    if not cluster_allowed(ctx, Operation.DESCRIBE):
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return Response(error_code=code, error_message=default_message(code), topics=[], nodes=[])
    topic_cls = Response.TopicData
    partition_cls = topic_cls.PartitionData
    if not _valid_request(req):
        return Response(error_code=0, error_message="", nodes=[], topics=[
            topic_cls(topic_name=t.topic_name, partitions=[
                partition_cls(partition_index=p.partition_index, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                              error_message=UNKNOWN_PARTITION_MESSAGE, leader_id=0, leader_epoch=0,
                              high_watermark=0, current_voters=[], observers=[])
                for p in t.partitions or []])
            for t in req.topics or []])

    broker = ctx.broker
    state = _quorum_state(broker)
    now_ms = broker.clock.now_ms()
    state.offset = offset = max(state.offset, (now_ms - state.formatted_ms) // NOOP_INTERVAL_MS)
    replica_cls = partition_cls.ReplicaState
    voter = replica_cls(replica_id=broker.node_id, replica_directory_id=state.directory_id, log_end_offset=offset,
                        last_fetch_timestamp=now_ms, last_caught_up_timestamp=now_ms)
    node_cls = Response.Node
    listeners = []
    for name, _host, _port in broker.config.listeners():
        if name == "CONTROLLER" or name not in broker.bound_ports:
            continue
        host, port = broker.advertised_endpoint(name, ctx.local_host)
        listeners.append(node_cls.Listener(name=name, host=host, port=port))
    return Response(
        error_code=0, error_message="",
        topics=[topic_cls(topic_name=METADATA_TOPIC, partitions=[partition_cls(
            partition_index=METADATA_PARTITION, error_code=0, error_message="", leader_id=broker.node_id,
            leader_epoch=QUORUM_EPOCH, high_watermark=offset, current_voters=[voter], observers=[])])],
        nodes=[node_cls(node_id=broker.node_id, listeners=listeners)],
    )
