"""DescribeQuorum (key 55, v0-2; ``kafka-metadata-quorum.sh describe``) compared with Apache Kafka.

Both are single-node combined broker+controller clusters, so the answer has one shape: topic
``__cluster_metadata`` partition 0 led by the node itself (the controller id DescribeCluster gives), the
node as the only voter, no observers, and in v2 one Node. Normalised, because they legitimately differ
between two clusters: the high watermark and log end offsets (Kafka's grow with its metadata log, ours
with the time since the cluster was formatted; see broker/handlers/describe_quorum.py), the leader epoch
(Kafka's single voter bumps it on every restart, ours stays 1), wall-clock timestamps, directory ids and
ports. Deliberately different: the listener Kafka lists is its CONTROLLER listener, ours (which serves
no separate controller listener) its client listener; each is checked to be the node's own.

Any other request shape is answered by both with UNKNOWN_TOPIC_OR_PARTITION in every requested
partition and no nodes (KafkaRaftClient.hasValidTopicPartition); those answers are compared exactly,
error messages included.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from kafka.protocol.admin import DescribeClusterRequest

from protocol.messages import request_class
from storage.checkpoints import kafka_str_to_uuid, read_meta_properties
from tests.differential.harness import build, normalise, to_plain

DescribeQuorumRequest = request_class(55)
METADATA = "__cluster_metadata"
UNKNOWN_TOPIC_OR_PARTITION = 3
VARYING = ("high_watermark", "log_end_offset", "last_fetch_timestamp", "last_caught_up_timestamp",
           "replica_directory_id", "leader_epoch", "port")


def describe_quorum(t, version: int, topics: list[dict]) -> dict:
    with t.client() as c:
        return to_plain(c.send(build(DescribeQuorumRequest, version, topics=topics), version))


def metadata_partition(*partitions: int, topic: str = METADATA) -> list[dict]:
    return [dict(topic_name=topic, partitions=[dict(partition_index=p) for p in partitions])]


def controller_id(t) -> int:
    with t.client() as c:
        r = c.send(build(DescribeClusterRequest, 1, include_cluster_authorized_operations=False,
                         endpoint_type=1), 1)
    assert r.error_code == 0, r
    return r.controller_id


def metadata_directory_id(t) -> uuid.UUID:
    """directory.id of the log dir holding each cluster's metadata (both use a single log dir)."""
    data_dir = (Path(t.reference.workdir) / "data") if t.name == "kafka" else Path(t.process.data_dir)
    props = read_meta_properties(str(data_dir / "meta.properties"))
    assert props and props.get("directory.id"), (t.name, props)
    return kafka_str_to_uuid(props["directory.id"])


def quorum_status(t, version: int) -> tuple[dict, dict]:
    """The normalised answer, and the checks of the values normalised away (as booleans/sets)."""
    before_ms = int(time.time() * 1000)
    r = describe_quorum(t, version, metadata_partition(0))
    after_ms = int(time.time() * 1000)
    node = controller_id(t)
    (topic,) = r["topics"]
    (part,) = topic["partitions"]
    voters = part["current_voters"]
    checks = {
        "leader_is_controller": part["leader_id"] == node,
        "voters_are_controller": [v["replica_id"] == node for v in voters],
        "epoch_positive": part["leader_epoch"] >= 1,
        "offsets_sane": all(v["log_end_offset"] >= part["high_watermark"] >= 0 for v in voters),
    }
    if version >= 1:
        checks["timestamps_now"] = all(before_ms - 60_000 <= v[k] <= after_ms + 60_000
                                       for v in voters for k in ("last_fetch_timestamp", "last_caught_up_timestamp"))
    if version >= 2:
        checks["directory_id_is_metadata_dirs"] = [v["replica_directory_id"] == metadata_directory_id(t)
                                                   for v in voters]
        checks["node_ids"] = [n["node_id"] == node for n in r["nodes"]]
        checks["listener_counts"] = [len(n["listeners"]) for n in r["nodes"]]
        checks["hosts"] = sorted({li["host"] for n in r["nodes"] for li in n["listeners"]})
    return normalise(r, replace={k: "<varies>" for k in VARYING} | {"leader_id": "<node>", "replica_id": "<node>",
                                                                      "node_id": "<node>", "name": "<listener>"}), checks


@pytest.mark.parametrize("version", [0, 1, 2])
def test_describe_quorum(pair, version):
    (k, k_checks), (o, o_checks) = pair.run(lambda t: quorum_status(t, version))
    assert o == k
    assert o_checks == k_checks
    assert all(v for key, v in k_checks.items() if isinstance(v, bool)), k_checks
    (part,) = k["topics"][0]["partitions"]
    assert (k["error_code"], k["topics"][0]["topic_name"], part["partition_index"], part["error_code"],
            len(part["current_voters"]), part["observers"]) == (0, METADATA, 0, 0, 1, [])
    if version >= 2:
        assert len(k["nodes"]) == 1 and k_checks["listener_counts"] == [1]


def test_describe_quorum_listeners(pair):
    """Kafka lists its CONTROLLER listener; ours its client listener (it has no separate controller
    listener). Either is the node's own endpoint on the host the client used."""
    def listeners(t):
        return [(li["name"], li["host"], li["port"])
                for n in describe_quorum(t, 2, metadata_partition(0))["nodes"] for li in n["listeners"]]

    k, o = pair.run(listeners)
    assert k == [("CONTROLLER", "127.0.0.1", pair.kafka.reference.controller_port)]
    host, port = pair.ours.bootstrap.rsplit(":", 1)
    assert o == [("PLAINTEXT", host, int(port))]


def test_describe_quorum_high_watermark_only_grows(pair):
    def offsets(t):
        seen = []
        for _ in range(3):
            (part,) = describe_quorum(t, 2, metadata_partition(0))["topics"][0]["partitions"]
            seen.append((part["high_watermark"], part["current_voters"][0]["log_end_offset"]))
            time.sleep(0.6)
        return seen

    for seen in pair.run(offsets):
        hws = [hw for hw, _ in seen]
        assert hws == sorted(hws) and hws[-1] > hws[0], seen  # both grow while idle (Kafka: NoOpRecords)


@pytest.mark.parametrize("version", [0, 1, 2])
@pytest.mark.parametrize("topics", [
    metadata_partition(0, topic="other-topic"),
    metadata_partition(1),
    metadata_partition(-1),
    metadata_partition(0, 0),
    metadata_partition(0, 1),
    metadata_partition(),
    [],
    metadata_partition(0) * 2,
    metadata_partition(0) + metadata_partition(0, topic="other-topic"),
], ids=["other-topic", "partition-1", "partition-minus-1", "partition-0-twice", "partitions-0-1",
        "no-partitions", "no-topics", "topic-twice", "metadata-and-other"])
def test_describe_quorum_invalid_shapes(pair, version, topics):
    k, o = pair.run(lambda t: describe_quorum(t, version, topics))
    assert o == k
    assert all(p["error_code"] == UNKNOWN_TOPIC_OR_PARTITION for t in k["topics"] for p in t["partitions"])
    assert k.get("nodes", []) == []
