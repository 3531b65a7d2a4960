"""Three brokers in one process, through the wire with aiokafka: partitions led by different
brokers, followers that replicate over Fetch, acks=all that waits for the ISR, a leader taken down
mid-stream (clients fail over, no acknowledged record lost or doubled), and min.insync.replicas."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError as AIOKafkaError

from broker.cluster_process import ClusterProcess
from broker.config.broker_config import BrokerConfig
from protocol.errors import ErrorCode, KafkaError

pytestmark = pytest.mark.timeout(120)


async def _cluster(tmp_path: Path, **overrides: str) -> ClusterProcess:
    config = BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "data"),
                           "cluster.brokers": "3", "group.initial.rebalance.delay.ms": "0",
                           "replica.lag.time.max.ms": "2000", **overrides})
    cluster = ClusterProcess(config)
    await cluster.start()
    return cluster


def _bootstrap(cluster: ClusterProcess) -> str:
    return ",".join(f"127.0.0.1:{b.bound_ports['PLAINTEXT']}" for b in cluster.running())


async def _caught_up(cluster: ClusterProcess, topic: str, partitions: int, timeout: float = 10.0) -> None:
    """Every running replica's log end equals its leader's, and the high watermark is there."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        ok = True
        for p in range(partitions):
            reg = cluster.shared.metadata.partition(topic, p)
            assert reg is not None
            leader = cluster.brokers[reg.leader].log_manager.get(topic, p)
            for b in cluster.running():
                plog = b.log_manager.get(topic, p)
                if plog is not None and (plog.log_end_offset != leader.log_end_offset
                                         or plog.high_watermark != leader.log_end_offset):
                    ok = False
        if ok:
            return
        assert asyncio.get_running_loop().time() < deadline, "replicas did not catch up"
        await asyncio.sleep(0.05)


async def _consume_all(bootstrap: str, topic: str, partitions: int, expected: int) -> list[tuple[int, bytes]]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                auto_offset_reset="earliest", isolation_level="read_committed")
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        out: list[tuple[int, bytes]] = []
        deadline = asyncio.get_running_loop().time() + 20
        while len(out) < expected and asyncio.get_running_loop().time() < deadline:
            batch = await consumer.getmany(timeout_ms=500)
            for tp, records in batch.items():
                out.extend((tp.partition, r.value) for r in records)
        return out
    finally:
        await consumer.stop()


async def test_three_brokers_replicate_and_survive_a_leader_going_down(tmp_path: Path) -> None:
    cluster = await _cluster(tmp_path)
    try:
        b1 = cluster.brokers[1]
        info = b1.controller.create_topic("orders", 3, 3, {"min.insync.replicas": "2"})
        assert info is not None
        regs = info.registrations
        assert sorted(r.leader for r in regs) == [1, 2, 3]  # one partition led by each broker
        for b in cluster.running():  # every broker has a replica of every partition
            assert all(b.log_manager.get("orders", p) is not None for p in range(3))

        producer = AIOKafkaProducer(bootstrap_servers=_bootstrap(cluster), acks="all", enable_idempotence=True,
                                    request_timeout_ms=5000, retry_backoff_ms=50)
        await producer.start()
        try:
            sent = []
            for i in range(60):
                value = f"v{i}".encode()
                md = await producer.send_and_wait("orders", value, partition=i % 3)
                sent.append((md.partition, md.offset, value))
            await _caught_up(cluster, "orders", 3)

            # a follower of partition 0 goes down: the ISR shrinks, acks=all goes on with two
            follower = next(b for b in (1, 2, 3) if b != cluster.shared.metadata.partition("orders", 0).leader)
            await cluster.stop_broker(follower)
            assert follower not in cluster.shared.metadata.partition("orders", 0).isr
            for i in range(60, 90):
                value = f"f{i}".encode()
                md = await producer.send_and_wait("orders", value, partition=i % 3)
                sent.append((md.partition, md.offset, value))
            await cluster.start_broker(follower)  # it catches up and the ISR expands again
            deadline = asyncio.get_running_loop().time() + 10
            while any(len(cluster.shared.metadata.partition("orders", p).isr) < 3 for p in range(3)):
                assert asyncio.get_running_loop().time() < deadline, "the follower never rejoined the ISR"
                await asyncio.sleep(0.05)

            # the leader of partition 0 goes down in the middle of the stream
            leader0 = cluster.shared.metadata.partition("orders", 0).leader
            await cluster.stop_broker(leader0)
            reg = cluster.shared.metadata.partition("orders", 0)
            assert reg.leader != leader0 and reg.leader_epoch == 1 and leader0 not in reg.isr
            for i in range(60, 120):
                value = f"v{i}".encode()
                md = await producer.send_and_wait("orders", value, partition=i % 3)
                sent.append((md.partition, md.offset, value))
        finally:
            await producer.stop()

        got = await _consume_all(_bootstrap(cluster), "orders", 3, len(sent))
        assert sorted(got) == sorted((p, v) for p, _o, v in sent)  # every acknowledged record, once
        for p in range(3):  # in order within each partition
            assert [v for q, v in got if q == p] == [v for q, _o, v in sent if q == p]

        # the broker comes back: it truncates what it must, catches up and rejoins the ISR
        await cluster.start_broker(leader0)
        await _caught_up(cluster, "orders", 3)
        deadline = asyncio.get_running_loop().time() + 10
        while leader0 not in cluster.shared.metadata.partition("orders", 0).isr:
            assert asyncio.get_running_loop().time() < deadline, "the returning broker never rejoined the ISR"
            await asyncio.sleep(0.05)
    finally:
        await cluster.stop()


async def test_acks_all_needs_min_insync_replicas(tmp_path: Path) -> None:
    cluster = await _cluster(tmp_path)
    try:
        b1 = cluster.brokers[1]
        b1.controller.create_topic("strict", -1, -1, {"min.insync.replicas": "2"},
                                   assignments=[[1, 2, 3]])
        await cluster.stop_broker(3)
        await cluster.stop_broker(2)
        assert cluster.shared.metadata.partition("strict", 0).isr == (1,)
        plog = b1.log_manager.get("strict", 0)
        with pytest.raises(KafkaError) as e:
            b1.replication.append_error("strict", 0, -1, plog)
        assert e.value.code == ErrorCode.NOT_ENOUGH_REPLICAS
        producer = AIOKafkaProducer(bootstrap_servers=_bootstrap(cluster), acks="all", request_timeout_ms=3000,
                                    retry_backoff_ms=100)
        await producer.start()
        try:
            with pytest.raises(AIOKafkaError):
                await asyncio.wait_for(producer.send_and_wait("strict", b"x", partition=0), 6)
        finally:
            await producer.stop()
        assert plog.log_end_offset == 0  # refused before the append: nothing written
    finally:
        await cluster.stop()


async def _coordinator_of(cluster: ClusterProcess, topic: str, key_partition: int) -> int:
    reg = cluster.shared.metadata.partition(topic, key_partition)
    assert reg is not None
    return reg.leader


async def test_transactions_and_groups_survive_their_coordinators_going_down(tmp_path: Path) -> None:
    """The transaction coordinator's broker and then the group coordinator's go down between
    transactions: the clients find the new coordinators, which load the replicated state."""
    cluster = await _cluster(tmp_path, **{"transaction.state.log.num.partitions": "3",
                                          "offsets.topic.num.partitions": "3"})
    try:
        cluster.brokers[1].controller.create_topic("in", 2, 3, {"min.insync.replicas": "2"})
        producer = AIOKafkaProducer(bootstrap_servers=_bootstrap(cluster), transactional_id="tx-1",
                                    request_timeout_ms=5000, retry_backoff_ms=50)
        await producer.start()
        try:
            async with producer.transaction():
                for i in range(5):
                    await producer.send("in", f"a{i}".encode(), partition=i % 2)
            txn_partition = cluster.brokers[1].txn_coordinator.partition_for("tx-1")
            coordinator = await _coordinator_of(cluster, "__transaction_state", txn_partition)
            await cluster.stop_broker(coordinator)
            assert await _coordinator_of(cluster, "__transaction_state", txn_partition) != coordinator
            async with producer.transaction():
                for i in range(5):
                    await producer.send("in", f"b{i}".encode(), partition=i % 2)
        finally:
            await producer.stop()
        await cluster.start_broker(coordinator)

        got = await _consume_all(_bootstrap(cluster), "in", 2, 10)
        assert sorted(v for _p, v in got) == sorted([f"a{i}".encode() for i in range(5)]
                                                    + [f"b{i}".encode() for i in range(5)])

        consumer = AIOKafkaConsumer("in", bootstrap_servers=_bootstrap(cluster), group_id="g",
                                    enable_auto_commit=False, auto_offset_reset="earliest")
        await consumer.start()
        try:
            await consumer.getmany(timeout_ms=2000)
            await consumer.commit({TopicPartition("in", 0): 3, TopicPartition("in", 1): 4})
        finally:
            await consumer.stop()
        group_partition = cluster.brokers[1].group_coordinator.partition_for("g")
        coordinator = await _coordinator_of(cluster, "__consumer_offsets", group_partition)
        await cluster.stop_broker(coordinator)
        consumer = AIOKafkaConsumer(bootstrap_servers=_bootstrap(cluster), group_id="g", enable_auto_commit=False)
        await consumer.start()
        try:
            committed = await consumer.committed(TopicPartition("in", 0)), await consumer.committed(
                TopicPartition("in", 1))
        finally:
            await consumer.stop()
        assert committed == (3, 4)  # the new coordinator loaded the replicated offsets
    finally:
        await cluster.stop()


async def _http(port: int, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
    import json

    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    data = json.dumps(body).encode() if body is not None else b""
    writer.write(f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(data)}\r\n\r\n".encode() + data)
    raw = await reader.read()
    writer.close()
    head, _, payload = raw.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), json.loads(payload)


async def test_the_control_endpoint_drives_the_topology(tmp_path: Path) -> None:
    cluster = await _cluster(tmp_path, **{"control.port": "0"})
    await cluster.control.start("127.0.0.1", 0)
    port = cluster.control.port
    assert port is not None
    try:
        cluster.brokers[1].controller.create_topic("t", -1, -1, {}, assignments=[[1, 2, 3]])
        status, view = await _http(port, "GET", "/cluster")
        assert status == 200 and [b["alive"] for b in view["brokers"]] == [True, True, True]
        status, moved = await _http(port, "POST", "/topics/t/partitions/0/leader", {"broker": 3})
        assert status == 200 and (moved["leader"], moved["leader_epoch"]) == (3, 1)
        status, down = await _http(port, "POST", "/brokers/3/down")
        assert status == 200 and down == {"alive": False, "broker": 3}
        status, topic = await _http(port, "GET", "/topics/t")
        assert topic["partitions"][0]["leader"] in (1, 2) and 3 not in topic["partitions"][0]["isr"]
        status, refused = await _http(port, "POST", "/topics/t/partitions/0/leader", {"broker": 3})
        assert status == 409 and refused["error"] == "PREFERRED_LEADER_NOT_AVAILABLE"
        status, up = await _http(port, "POST", "/brokers/3/up")
        assert status == 200 and up["alive"] is True
        status, bad = await _http(port, "POST", "/topics/t/partitions/0/leader", {"node": 3})
        assert status == 400
        status, _ = await _http(port, "DELETE", "/cluster")
        assert status == 404
    finally:
        await cluster.stop()


async def test_elect_leaders_moves_leadership_back_to_the_preferred_replica(tmp_path: Path) -> None:
    """kafka-leader-election.sh --election-type preferred after a leader came back."""
    from protocol.messages import request_class
    from tests.support.raw_client import RawClient

    cluster = await _cluster(tmp_path)
    try:
        cluster.brokers[1].controller.create_topic("p", -1, -1, {}, assignments=[[1, 2, 3]])
        await cluster.stop_broker(1)
        await cluster.start_broker(1)
        await _caught_up(cluster, "p", 1)
        deadline = asyncio.get_running_loop().time() + 10
        while 1 not in cluster.shared.metadata.partition("p", 0).isr:
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.05)
        assert cluster.shared.metadata.partition("p", 0).leader != 1
        Elect = request_class(43)

        def elect() -> list[tuple[int, int]]:
            request = Elect(election_type=0, timeout_ms=5000, topic_partitions=[
                Elect.TopicPartitions(topic="p", partitions=[0])])
            with RawClient(_bootstrap(cluster).split(",")[1]) as client:
                response = client.send(request, 1)
            return [(r.partition_id, r.error_code) for t in response.replica_election_results
                    for r in t.partition_result]

        assert await asyncio.to_thread(elect) == [(0, 0)]
        assert cluster.shared.metadata.partition("p", 0).leader == 1
        assert await asyncio.to_thread(elect) == [(0, ErrorCode.ELECTION_NOT_NEEDED)]
    finally:
        await cluster.stop()


async def test_a_reassignment_moves_a_partition_to_other_brokers(tmp_path: Path) -> None:
    """kafka-reassign-partitions.sh --execute, then --verify: the new replicas copy the log from the
    leader, join the ISR, the old replica leaves and its log is deleted; nothing is lost."""
    from protocol.messages import request_class
    from tests.support.raw_client import RawClient

    cluster = await _cluster(tmp_path)
    try:
        cluster.brokers[1].controller.create_topic("moving", -1, -1, {}, assignments=[[1]])
        bootstrap = _bootstrap(cluster)
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True)
        await producer.start()
        try:
            for i in range(200):
                await producer.send("moving", f"v{i}".encode(), partition=0)
            await producer.flush()
            Alter, List = request_class(45), request_class(46)

            def call(request: object, api_version: int) -> object:
                with RawClient(bootstrap.split(",")[2]) as client:
                    return client.send(request, api_version)

            response = await asyncio.to_thread(call, Alter(timeout_ms=5000, topics=[
                Alter.ReassignableTopic(name="moving", partitions=[
                    Alter.ReassignableTopic.ReassignablePartition(partition_index=0, replicas=[2, 3])])]), 0)
            assert [(p.partition_index, p.error_code) for t in response.responses for p in t.partitions] == [(0, 0)]
            deadline = asyncio.get_running_loop().time() + 15
            while True:  # --verify: listed until the new replicas are in sync
                listed = await asyncio.to_thread(call, List(timeout_ms=5000, topics=None), 0)
                if not listed.topics:
                    break
                assert [(p.replicas, p.adding_replicas, p.removing_replicas) for t in listed.topics
                        for p in t.partitions] == [([2, 3, 1], [2, 3], [1])]
                assert asyncio.get_running_loop().time() < deadline, "the reassignment never completed"
                await asyncio.sleep(0.05)
            reg = cluster.shared.metadata.partition("moving", 0)
            assert reg.replicas == (2, 3) and set(reg.isr) == {2, 3} and reg.leader in (2, 3)
            assert cluster.brokers[1].log_manager.get("moving", 0) is None
            assert not [d for d in (tmp_path / "data" / "broker-1").iterdir() if d.name.startswith("moving-0")]
            for i in range(200, 250):  # the producer follows the new leader
                await producer.send("moving", f"v{i}".encode(), partition=0)
            await producer.flush()
        finally:
            await producer.stop()
        got = await _consume_all(bootstrap, "moving", 1, 250)
        assert [v for _p, v in got] == [f"v{i}".encode() for i in range(250)]
        for b in (2, 3):
            assert cluster.brokers[b].log_manager.get("moving", 0).log_end_offset == 250
    finally:
        await cluster.stop()
