"""Stock clients produce and consume through the real wire: keys, headers, every codec."""

from __future__ import annotations

import asyncio
import subprocess

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient
from kafka.admin import NewTopic as KpNewTopic

N = 10_000
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def _create(bootstrap: str, name: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fut = admin.create_topics([NewTopic(name, partitions, 1)])[name]
    fut.result(15)


def _expected(i: int) -> tuple[bytes, bytes, list]:
    return f"key-{i}".encode(), f"value-{i}-".encode() * 4, [("h", f"{i}".encode()), ("n", None)]


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_kafka_roundtrip(broker, topic_name, codec):
    _create(broker.bootstrap, topic_name, 2)
    p = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec, "linger.ms": 5,
                  "enable.idempotence": False, "acks": "all"})
    for i in range(N):
        k, v, h = _expected(i)
        p.produce(topic_name, key=k, value=v, headers=h, partition=i % 2)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{topic_name}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.assign([TopicPartition(topic_name, 0, 0), TopicPartition(topic_name, 1, 0)])
    seen: dict[bytes, tuple] = {}
    try:
        while len(seen) < N:
            msgs = c.consume(1000, timeout=10)
            assert msgs, f"stalled after {len(seen)} records"
            for m in msgs:
                assert m.error() is None, m.error()
                seen[m.key()] = (m.value(), m.headers(), m.partition(), m.offset())
    finally:
        c.close()
    for i in range(N):
        k, v, h = _expected(i)
        value, headers, partition, _ = seen[k]
        assert value == v
        assert headers == h
        assert partition == i % 2
    # offsets per partition are dense 0..n-1
    for part in (0, 1):
        offsets = sorted(o for (_, _, p_, o) in seen.values() if p_ == part)
        assert offsets == list(range(len(offsets)))


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_kafka_python_roundtrip(broker, topic_name, codec):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([KpNewTopic(topic_name, 1, 1)])
    admin.close()
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=None if codec == "none" else codec,
                      enable_idempotence=False, acks="all", linger_ms=5)
    futures = []
    for i in range(N):
        k, v, h = _expected(i)
        futures.append(p.send(topic_name, key=k, value=v, headers=[("h", h[0][1]), ("n", b"")]))
    p.flush(30)
    offsets = [f.get(10).offset for f in futures]
    assert offsets == list(range(N))
    p.close()
    c = KafkaConsumer(topic_name, bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                      enable_auto_commit=False, consumer_timeout_ms=10000)
    got = []
    for m in c:
        got.append(m)
        if len(got) == N:
            break
    c.close()
    assert len(got) == N
    for i, m in enumerate(got):
        k, v, _ = _expected(i)
        assert (m.key, m.value, m.offset) == (k, v, i)
        assert m.headers == [("h", f"{i}".encode()), ("n", b"")]


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
def test_aiokafka_roundtrip(broker, topic_name, codec):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def run():
        p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=codec, linger_ms=5,
                             acks="all")
        await p.start()
        try:
            batch = []
            for i in range(N):
                k, v, _ = _expected(i)
                batch.append(await p.send(topic_name, key=k, value=v, headers=[("h", f"{i}".encode())]))
            metas = await asyncio.gather(*batch)
        finally:
            await p.stop()
        assert [m.offset for m in metas] == list(range(N))
        c = AIOKafkaConsumer(topic_name, bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False)
        await c.start()
        got = []
        try:
            while len(got) < N:
                res = await c.getmany(timeout_ms=10000)
                assert res, f"stalled after {len(got)}"
                for msgs in res.values():
                    got.extend(msgs)
        finally:
            await c.stop()
        for i, m in enumerate(sorted(got, key=lambda m: m.offset)):
            k, v, _ = _expected(i)
            assert (m.key, m.value, m.offset) == (k, v, i)
            assert list(m.headers) == [("h", f"{i}".encode())]

    asyncio.run(run())


def test_kcat_lists_broker(broker, topic_name):
    _create(broker.bootstrap, topic_name, 3)
    out = subprocess.run(["kcat", "-L", "-b", broker.bootstrap, "-t", topic_name], capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert "1 brokers:" in out.stdout
    assert f'topic "{topic_name}" with 3 partitions' in out.stdout


def test_consumer_starts_at_timestamp(broker, topic_name):
    _create(broker.bootstrap, topic_name, 1)
    p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": False, "linger.ms": 0})
    base = 1_700_000_000_000
    for i in range(500):
        p.produce(topic_name, value=str(i).encode(), timestamp=base + i * 10)
        if i % 50 == 0:
            p.flush(10)  # several batches, so the time index has entries to search
    p.flush(10)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "ts-" + topic_name})
    try:
        found = c.offsets_for_times([TopicPartition(topic_name, 0, base + 2345)], timeout=10)
        assert found[0].offset == 235  # first record with timestamp >= base+2345 is i=235
        latest = c.offsets_for_times([TopicPartition(topic_name, 0, base + 999_999)], timeout=10)
        assert latest[0].offset == -1  # past every record: no offset (the client shows end)
        c.assign([TopicPartition(topic_name, 0, found[0].offset)])
        m = c.poll(10)
        assert m is not None and m.value() == b"235" and m.timestamp()[1] == base + 2350
    finally:
        c.close()
