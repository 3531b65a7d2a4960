"""Each coordinator-failure case of Kafka's transaction design, with a stock transactional client
(aiokafka) against three brokers in one process, RF 3 and min.insync.replicas=2:

(a) the coordinator's broker goes down before PrepareCommit is written: the client finds the new
    coordinator, which loaded the Ongoing transaction, and commits there;
(b) it goes down after PrepareCommit and before the markers: the client already has its answer;
    the new coordinator finds the PrepareCommit while loading and completes the commit;
(c) it goes down after CompleteCommit and before the EndTxn answer reaches the client: the client
    retries EndTxn at the new coordinator, which answers success (a retried commit);
(d) a partition's only leader is down while the markers are pending: the other partitions
    commit, that one when its broker returns (read_committed readers wait at its LSO);
and consume-transform-produce while the group coordinator moves mid-transaction.

In every case read_committed sees exactly the committed records, once. The test reaches into the
process only to time the failure (when the state is PrepareCommit, when the answer is due)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from broker.cluster_process import ClusterProcess
from coordinator.txn.state import TransactionState
from tests.unit.broker.test_cluster_process import _bootstrap, _cluster, _consume_all

pytestmark = pytest.mark.timeout(120)
TXN_TOPIC = "__transaction_state"


def _txn_coordinator(cluster: ClusterProcess, txn_id: str) -> int:
    partition = cluster.running()[0].txn_coordinator.partition_for(txn_id)
    reg = cluster.shared.metadata.partition(TXN_TOPIC, partition)
    assert reg is not None
    return reg.leader


def _txn_state(cluster: ClusterProcess, txn_id: str) -> TransactionState | None:
    """The state the current coordinator holds (None while it loads or has none)."""
    leader = _txn_coordinator(cluster, txn_id)
    broker = cluster.brokers.get(leader)
    if broker is None or broker.stopping:
        return None
    _code, found = broker.txn_coordinator.state_manager.get_transaction_state(txn_id)
    return found[1].state if found is not None else None


async def _until(what: str, check: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


async def _producer(cluster: ClusterProcess, txn_id: str) -> AIOKafkaProducer:
    producer = AIOKafkaProducer(bootstrap_servers=_bootstrap(cluster), transactional_id=txn_id,
                                request_timeout_ms=10000, retry_backoff_ms=50)
    await producer.start()  # InitProducerId: the coordinator (and __transaction_state) exist after it
    assert producer._txn_manager is not None
    await asyncio.wait_for(producer._txn_manager.wait_for_pid(), 20)
    return producer


async def _values(cluster: ClusterProcess, topic: str, partitions: int, expected: int) -> list[bytes]:
    return sorted(v for _p, v in await _consume_all(_bootstrap(cluster), topic, partitions, expected))


async def _readable(cluster: ClusterProcess, topic: str, partitions: int) -> int:
    """How many records a read_committed consumer gets in a second."""
    consumer = AIOKafkaConsumer(bootstrap_servers=_bootstrap(cluster), isolation_level="read_committed",
                                auto_offset_reset="earliest", enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        batch = await consumer.getmany(timeout_ms=1000)
        return sum(len(records) for records in batch.values())
    finally:
        await consumer.stop()


def _batch(prefix: str, n: int = 6) -> list[bytes]:
    return [f"{prefix}{i}".encode() for i in range(n)]


async def _send(producer: AIOKafkaProducer, topic: str, values: list[bytes], partitions: int = 2) -> None:
    for i, v in enumerate(values):
        await producer.send_and_wait(topic, v, partition=i % partitions)


async def _setup(tmp_path: Path) -> ClusterProcess:
    cluster = await _cluster(tmp_path, **{"transaction.state.log.num.partitions": "3",
                                          "offsets.topic.num.partitions": "3"})
    cluster.brokers[1].controller.create_topic("out", 2, 3, {"min.insync.replicas": "2"})
    return cluster


async def test_a_coordinator_down_before_prepare_commit(tmp_path: Path) -> None:
    cluster = await _setup(tmp_path)
    try:
        producer = await _producer(cluster, "tx-a")
        try:
            await producer.begin_transaction()
            await _send(producer, "out", _batch("a"))
            coordinator = _txn_coordinator(cluster, "tx-a")
            assert _txn_state(cluster, "tx-a") is TransactionState.ONGOING
            await cluster.stop_broker(coordinator)
            await producer.commit_transaction()  # NOT_COORDINATOR, FindCoordinator, EndTxn again
            assert _txn_coordinator(cluster, "tx-a") != coordinator
            await _until("CompleteCommit", lambda: _txn_state(cluster, "tx-a") is TransactionState.COMPLETE_COMMIT)
        finally:
            await producer.stop()
        assert await _values(cluster, "out", 2, 6) == sorted(_batch("a"))
    finally:
        await cluster.stop()


async def test_b_coordinator_down_after_prepare_commit_before_the_markers(tmp_path: Path) -> None:
    cluster = await _setup(tmp_path)
    try:
        producer = await _producer(cluster, "tx-b")
        try:
            coordinator = _txn_coordinator(cluster, "tx-b")
            # the old coordinator writes PrepareCommit, answers EndTxn, and never sends the markers
            cluster.brokers[coordinator].txn_coordinator.markers.stop_before_commit_markers = True
            await producer.begin_transaction()
            await _send(producer, "out", _batch("b"))
            await producer.commit_transaction()
            assert _txn_state(cluster, "tx-b") is TransactionState.PREPARE_COMMIT
            # nothing is readable yet: the LSO waits for the markers
            assert await _readable(cluster, "out", 2) == 0
            await cluster.stop_broker(coordinator)
            await _until("the new coordinator's CompleteCommit",
                         lambda: _txn_state(cluster, "tx-b") is TransactionState.COMPLETE_COMMIT)
            assert await _values(cluster, "out", 2, 6) == sorted(_batch("b"))
            await producer.begin_transaction()  # the producer goes on with the new coordinator
            await _send(producer, "out", _batch("c"))
            await producer.commit_transaction()
        finally:
            await producer.stop()
        assert await _values(cluster, "out", 2, 12) == sorted(_batch("b") + _batch("c"))
    finally:
        await cluster.stop()


async def test_c_coordinator_down_after_complete_commit_before_the_answer(tmp_path: Path) -> None:
    cluster = await _setup(tmp_path)
    try:
        producer = await _producer(cluster, "tx-c")
        coordinator = _txn_coordinator(cluster, "tx-c")
        txn = cluster.brokers[coordinator].txn_coordinator
        original: Callable[..., Awaitable[Any]] = txn.handle_end_transaction
        lost: list[bool] = []

        async def answer_lost(*args: Any, **kwargs: Any) -> Any:
            result = await original(*args, **kwargs)
            if lost:
                return result
            lost.append(True)
            await _until("CompleteCommit", lambda: _txn_state(cluster, "tx-c") is TransactionState.COMPLETE_COMMIT)
            asyncio.get_running_loop().create_task(cluster.stop_broker(coordinator))
            await asyncio.Event().wait()  # the broker goes down before this answer is sent

        txn.handle_end_transaction = answer_lost  # type: ignore[method-assign]
        try:
            await producer.begin_transaction()
            await _send(producer, "out", _batch("d"))
            await producer.commit_transaction()  # the retried EndTxn succeeds at the new coordinator
            assert lost and _txn_coordinator(cluster, "tx-c") != coordinator
            await producer.begin_transaction()
            await _send(producer, "out", _batch("e"))
            await producer.commit_transaction()
        finally:
            await producer.stop()
        assert await _values(cluster, "out", 2, 12) == sorted(_batch("d") + _batch("e"))
    finally:
        await cluster.stop()


async def test_d_a_partition_leader_down_while_markers_are_pending(tmp_path: Path) -> None:
    cluster = await _setup(tmp_path)
    try:
        producer = await _producer(cluster, "tx-d")
        coordinator = _txn_coordinator(cluster, "tx-d")
        solo = next(b for b in (1, 2, 3) if b != coordinator)
        cluster.brokers[1].controller.create_topic("solo", -1, -1, {}, assignments=[[solo]])  # one replica
        try:
            await producer.begin_transaction()
            await _send(producer, "out", _batch("f"))
            await _send(producer, "solo", _batch("s", 3), partitions=1)
            await cluster.stop_broker(solo)  # "solo" has no leader now
            await producer.commit_transaction()
            # "out" commits; "solo"'s marker waits for its leader, so the transaction is not complete
            assert await _values(cluster, "out", 2, 6) == sorted(_batch("f"))
            await asyncio.sleep(0.5)
            assert _txn_state(cluster, "tx-d") is TransactionState.PREPARE_COMMIT
            await cluster.start_broker(solo)
            await _until("CompleteCommit", lambda: _txn_state(cluster, "tx-d") is TransactionState.COMPLETE_COMMIT)
        finally:
            await producer.stop()
        assert await _values(cluster, "solo", 1, 3) == sorted(_batch("s", 3))
        assert await _values(cluster, "out", 2, 6) == sorted(_batch("f"))
    finally:
        await cluster.stop()


async def test_consume_transform_produce_while_the_group_coordinator_moves(tmp_path: Path) -> None:
    cluster = await _setup(tmp_path)
    try:
        cluster.brokers[1].controller.create_topic("in", 2, 3, {"min.insync.replicas": "2"})
        seed = AIOKafkaProducer(bootstrap_servers=_bootstrap(cluster), acks="all")
        await seed.start()
        try:
            await _send(seed, "in", _batch("i", 20))
        finally:
            await seed.stop()
        consumer = AIOKafkaConsumer("in", bootstrap_servers=_bootstrap(cluster), group_id="ctp",
                                    enable_auto_commit=False, auto_offset_reset="earliest",
                                    isolation_level="read_committed")
        await consumer.start()
        producer = await _producer(cluster, "tx-ctp")
        group_partition = cluster.brokers[1].group_coordinator.partition_for("ctp")
        try:
            copied = 0
            moved = False
            while copied < 20:
                batch = await consumer.getmany(timeout_ms=1000, max_records=5)
                if not batch:
                    continue
                await producer.begin_transaction()
                offsets = {}
                for tp, records in batch.items():
                    for r in records:
                        await producer.send_and_wait("out", r.value.upper(), partition=tp.partition)
                    offsets[tp] = records[-1].offset + 1
                    copied += len(records)
                if not moved:  # mid-transaction: the group's coordinator moves to another broker
                    reg = cluster.shared.metadata.partition("__consumer_offsets", group_partition)
                    target = next(b for b in reg.isr if b != reg.leader)
                    cluster.shared.replication_control.move_leader("__consumer_offsets", group_partition, target)
                    moved = True
                await producer.send_offsets_to_transaction(offsets, "ctp")
                await producer.commit_transaction()
        finally:
            await producer.stop()
            await consumer.stop()
        assert moved
        assert await _values(cluster, "out", 2, 20) == sorted(v.upper() for v in _batch("i", 20))
        reader = AIOKafkaConsumer(bootstrap_servers=_bootstrap(cluster), group_id="ctp", enable_auto_commit=False)
        await reader.start()
        try:
            committed = [await reader.committed(TopicPartition("in", p)) for p in (0, 1)]
        finally:
            await reader.stop()
        assert committed == [10, 10]  # the transactional offsets, committed by the new coordinator
    finally:
        await cluster.stop()
