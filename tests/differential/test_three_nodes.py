"""Three brokers compared with a three-node Apache Kafka 4.3.1 cluster (three JVMs, node 1 also the
KRaft controller): the same topic with the same replica assignment on both, then the same requests
to the same node ids. Metadata (leaders, leader epochs, replicas, ISR, offline replicas, the
brokers listed), Produce and ListOffsets at the leader and at a follower (NOT_LEADER_OR_FOLLOWER,
with the current leader and its endpoint for Produce, KIP-951), and all of it again after broker 3
stops (controlled shutdown: its partitions get new leaders, the ISR shrinks) and after it returns.

Normalised: hosts and ports (per cluster), the controller id (Kafka's brokers name a random live
broker; compared as "one of the brokers"), cluster ids, throttle times.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.producer import ProduceRequest

from tests.differential.conftest import SHARED_SETTINGS
from tests.differential.wire import WireClient, build, record_batch
from tests.support.broker_process import BrokerProcess, free_port_block

pytestmark = pytest.mark.timeout(300)

TOPIC = "three-nodes"
ASSIGNMENT = [[1, 2, 3], [2, 3, 1], [3, 1, 2]]  # each broker leads one partition
CLUSTER_SETTINGS = {
    **SHARED_SETTINGS, "default.replication.factor": "3", "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3", "replica.lag.time.max.ms": "30000",
}


class Cluster:
    """A three-node cluster behind one small API: connect to node i, stop it, start it."""

    def __init__(self, name: str, ports: dict[int, int], stop: Callable[[int], None],
                 start: Callable[[int], None]) -> None:
        self.name, self.ports, self.stop, self.start = name, ports, stop, start

    def client(self, node: int) -> WireClient:
        return WireClient(f"127.0.0.1:{self.ports[node]}")

    def send(self, node: int, request: Any, version: int) -> Any:
        with self.client(node) as c:
            return c.send(request, version)


@pytest.fixture(scope="module")
def kafka3(tmp_path_factory):
    from tests.support.kafka_reference import KafkaReferenceCluster

    ref = KafkaReferenceCluster(3, extra_props=CLUSTER_SETTINGS)
    try:
        ref.start(tmp_path_factory.mktemp("kafka-three-nodes"))
    except Exception:
        ref.stop()
        raise
    print(f"\n[differential] three Apache Kafka nodes at {ref.bootstrap}: "
          + ", ".join(f"{k}={v:.1f}s" for k, v in ref.timings.items()))
    yield Cluster("kafka", ref.ports, lambda n: ref.stop_node(n), lambda n: ref.start_node(n))
    ref.stop()


@pytest.fixture(scope="module")
def ours3(tmp_path_factory):
    import json
    import urllib.request

    base = free_port_block(4)
    control = f"http://127.0.0.1:{base + 3}"
    b = BrokerProcess(tmp_path_factory.mktemp("ours-three-nodes") / "data", port=base, overrides={
        **CLUSTER_SETTINGS, "cluster.brokers": "3", "control.port": str(base + 3)}).start()
    b.wait_for_cluster(base + 3)

    def post(path: str) -> None:
        request = urllib.request.Request(control + path, data=b"{}", method="POST")
        json.loads(urllib.request.urlopen(request, timeout=60).read())

    yield Cluster("ours", {i: base + i - 1 for i in (1, 2, 3)}, lambda n: post(f"/brokers/{n}/down"),
                  lambda n: post(f"/brokers/{n}/up"))
    assert b.stop() == 0, b.log_tail()


def _metadata(c: Cluster, node: int) -> dict:
    r = c.send(node, build(MetadataRequest, 12, topics=[dict(name=TOPIC)], allow_auto_topic_creation=False,
                           include_topic_authorized_operations=False), 12)
    brokers = sorted(b.node_id for b in r.brokers)
    (t,) = r.topics
    return {
        "brokers": brokers,
        "controller_is_a_broker": r.controller_id in brokers,
        "error": t.error_code,
        "partitions": sorted((p.partition_index, p.error_code, p.leader_id, p.leader_epoch, list(p.replica_nodes),
                              list(p.isr_nodes), list(p.offline_replicas)) for p in t.partitions),
    }


def _produce(c: Cluster, node: int, partition: int, values: list[bytes]) -> tuple:
    r = c.send(node, build(ProduceRequest, 11, transactional_id=None, acks=-1, timeout_ms=10000, topic_data=[
        dict(name=TOPIC, partition_data=[dict(index=partition, records=record_batch(values))])]), 11)
    p = r.responses[0].partition_responses[0]
    leader = p.current_leader
    endpoints = sorted((e.node_id, e.port == c.ports[e.node_id]) for e in r.node_endpoints)
    return (p.error_code, p.base_offset, (leader.leader_id, leader.leader_epoch) if leader else None, endpoints)


def _list_offsets(c: Cluster, node: int) -> list[tuple]:
    out = []
    for timestamp in (-2, -1):  # earliest, latest
        r = c.send(node, build(ListOffsetsRequest, 9, replica_id=-1, isolation_level=0, topics=[dict(
            name=TOPIC, partitions=[dict(partition_index=p, current_leader_epoch=-1, timestamp=timestamp)
                                    for p in range(3)])]), 9)
        out.extend((timestamp, p.partition_index, p.error_code, p.offset, p.leader_epoch)
                   for p in r.topics[0].partitions)
    return sorted(out)


def _fetch(c: Cluster, node: int, partition: int, version: int) -> tuple:
    """One Fetch of ``partition`` from offset 0: (error, high watermark, records' bytes > 0, current
    leader); a follower's answer is polled until its high watermark caught up with the leader's 3."""
    deadline = time.monotonic() + 15
    while True:
        with c.client(node) as client:
            r = client.send(build(FetchRequest, version, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                                  isolation_level=1, session_id=0, session_epoch=-1, topics=[dict(
                                      topic=TOPIC, partitions=[dict(
                                          partition=partition, current_leader_epoch=-1, fetch_offset=0,
                                          last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20)])],
                                  forgotten_topics_data=[], rack_id=""), version)
        p = r.responses[0].partitions[0]
        if p.error_code != 0 or p.high_watermark >= 3 or time.monotonic() > deadline:
            leader = getattr(p, "current_leader", None)
            return (p.error_code, p.high_watermark, p.last_stable_offset, bool(p.records),
                    (leader.leader_id, leader.leader_epoch) if leader is not None and version >= 12 else None)
        time.sleep(0.1)


def _wait(c: Cluster, what: str, check: Callable[[dict], bool], node: int = 1, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        md = _metadata(c, node)
        if check(md):
            return md
        assert time.monotonic() < deadline, f"{c.name}: {what}: {md}"
        time.sleep(0.1)


def _full_isr(md: dict) -> bool:
    return md["error"] == 0 and len(md["partitions"]) == 3 and all(len(p[5]) == 3 for p in md["partitions"])


def _scenario(c: Cluster) -> dict:
    r = c.send(1, build(CreateTopicsRequest, 7, topics=[dict(
        name=TOPIC, num_partitions=-1, replication_factor=-1,
        assignments=[dict(partition_index=i, broker_ids=ids) for i, ids in enumerate(ASSIGNMENT)],
        configs=[dict(name="min.insync.replicas", value="2")])], timeout_ms=30000, validate_only=False), 7)
    out: dict[str, Any] = {"create": [(t.error_code, t.num_partitions, t.replication_factor) for t in r.topics]}
    out["metadata"] = _wait(c, "every partition with its three replicas in sync", _full_isr)
    out["metadata_from_each_node"] = [_metadata(c, n) == out["metadata"] for n in (2, 3)]
    # each partition at its leader (node p + 1), then partition 0 at a follower
    out["produce_at_leaders"] = [_produce(c, p + 1, p, [b"a", b"b", b"c"]) for p in range(3)]
    out["produce_at_a_follower"] = _produce(c, 2, 0, [b"x"])
    out["list_offsets_at_node_1"] = _list_offsets(c, 1)  # leads partition 0 only
    # a consumer may read a follower from Fetch v11 (KIP-392), up to the follower's high watermark
    out["fetch_v12_at_a_follower"] = _fetch(c, 2, 0, 12)
    out["fetch_v10_at_a_follower"] = _fetch(c, 2, 0, 10)
    out["fetch_v12_at_the_leader"] = _fetch(c, 1, 0, 12)

    c.stop(3)  # partition 2 loses its leader; 3 leaves every ISR
    out["metadata_without_3"] = _wait(c, "broker 3 out of the ISR", lambda md: md["brokers"] == [1, 2] and all(
        3 not in p[5] and p[2] in (1, 2) for p in md["partitions"]))
    new_leader = out["metadata_without_3"]["partitions"][2][2]
    out["produce_at_the_new_leader"] = _produce(c, new_leader, 2, [b"d"])
    out["list_offsets_at_the_new_leader"] = _list_offsets(c, new_leader)

    c.start(3)  # it catches up and rejoins; leadership stays where it moved
    out["metadata_with_3_back"] = _wait(c, "broker 3 back in every ISR",
                                        lambda md: md["brokers"] == [1, 2, 3] and _full_isr(md))
    return out


def test_three_nodes_answer_as_three_kafka_brokers(kafka3, ours3):
    kafka = _scenario(kafka3)
    ours = _scenario(ours3)
    for key in kafka:
        assert ours[key] == kafka[key], f"{key}:\n  kafka {kafka[key]}\n  ours  {ours[key]}"
