"""Every compression codec through stock clients against the broker as users install it (the
runtime venv: no python-snappy, lz4 or zstandard; see tests/support/runtime_env.py).

Per codec and client: records produced with that ``compression.type`` are acknowledged, stored in
batches of that codec (read from the segment files), and consumed back identical, including
records far larger than one lz4 block or xerial snappy chunk; ListOffsets by timestamp decodes
the stored batches too. franz-go's default producer (snappy) and every kgo codec run from
tests/go/codecs_test.go; the Java client's every-codec run is the ``produce-consume`` scenario of
tests/e2e/test_java_clients.py.
"""

from __future__ import annotations

import asyncio
import glob
import os
import subprocess
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from protocol.records import iter_batch_positions, read_header
from tests.e2e.test_franz_go import GO, GO_MODULE

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def _records(codec: str, n: int = 300) -> list[tuple[bytes | None, bytes | None]]:
    out: list[tuple[bytes | None, bytes | None]] = []
    for i in range(n):
        key = None if i % 10 == 0 else f"{codec}-key-{i}".encode()
        value = None if i % 50 == 7 else (f"{codec}-value-{i}-".encode() + bytes(range(256)) * (i % 5))
        out.append((key, value))
    # larger than a 64 KiB lz4 block, a 32 KiB xerial chunk and the 1 MiB streaming chunk
    out.append((b"big", os.urandom(150_000) + b"z" * 2_000_000))
    return out


def _create(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={"max.message.bytes": "8388608"})])[topic].result(15)


def _stored_codecs(data_dir: str, topic: str) -> set[int]:
    codecs = set()
    for path in glob.glob(os.path.join(data_dir, f"{topic}-0", "*.log")):
        with open(path, "rb") as f:
            data = f.read()
        for pos, _size in iter_batch_positions(data):
            info = read_header(data, pos)
            if not info.is_control:
                codecs.add(info.compression)
    return codecs


def _consume(bootstrap: str, topic: str, n: int) -> list[tuple[bytes | None, bytes | None]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False, "fetch.message.max.bytes": 8 * 1024 * 1024})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        got: list[tuple[bytes | None, bytes | None]] = []
        for _ in range(60):
            for m in c.consume(1000, timeout=1):
                assert m.error() is None, m.error()
                got.append((m.key(), m.value()))
            if len(got) >= n:
                break
        return got
    finally:
        c.close()


@pytest.mark.parametrize("codec", list(CODECS))
def test_confluent_kafka_every_codec(broker, codec):
    topic = f"codec-ck-{codec}-{uuid.uuid4().hex[:6]}"
    _create(broker.bootstrap, topic)
    records = _records(codec)
    p = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec, "enable.idempotence": True,
                  "linger.ms": 5, "message.max.bytes": 8 * 1024 * 1024})
    errors = []
    for key, value in records:
        p.produce(topic, key=key, value=value, partition=0, on_delivery=lambda err, _m: errors.append(err))
    assert p.flush(30) == 0
    assert errors == [None] * len(records)
    assert _stored_codecs(broker.data_dir, topic) == {CODECS[codec]}
    assert _consume(broker.bootstrap, topic, len(records)) == records


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_kafka_python_every_codec(broker, codec):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KafkaTP

    topic = f"codec-kp-{codec}-{uuid.uuid4().hex[:6]}"
    _create(broker.bootstrap, topic)
    records = _records(codec, 200)[:-1]
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=codec, linger_ms=5)
    futures = [producer.send(topic, key=k, value=v, partition=0) for k, v in records]
    producer.flush(30)
    assert [f.get(10).offset for f in futures] == list(range(len(records)))
    producer.close()
    assert _stored_codecs(broker.data_dir, topic) == {CODECS[codec]}
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=10_000)
    consumer.assign([KafkaTP(topic, 0)])
    got = []
    for m in consumer:
        got.append((m.key, m.value))
        if len(got) == len(records):
            break
    consumer.close()
    assert got == records


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_aiokafka_every_codec(broker, codec):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition as AioTP

    topic = f"codec-aio-{codec}-{uuid.uuid4().hex[:6]}"
    _create(broker.bootstrap, topic)
    records = _records(codec, 100)[:-1]

    async def run() -> list[tuple[bytes | None, bytes | None]]:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=codec, linger_ms=5)
        await producer.start()
        try:
            futures = [await producer.send(topic, key=k, value=v, partition=0) for k, v in records]
            await producer.flush()
            assert [(await f).offset for f in futures] == list(range(len(records)))
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                                    enable_auto_commit=False)
        await consumer.start()
        try:
            consumer.assign([AioTP(topic, 0)])
            got = []
            while len(got) < len(records):
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 15)
                for msgs in batch.values():
                    got.extend((m.key, m.value) for m in msgs)
            return got
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == records
    assert _stored_codecs(broker.data_dir, topic) == {CODECS[codec]}


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_list_offsets_by_timestamp_reads_compressed_batches(broker, codec):
    """ListOffsets with a timestamp decodes the stored batch to find the record (the broker's own
    decoder, not a test library)."""
    topic = f"codec-ts-{codec}-{uuid.uuid4().hex[:6]}"
    _create(broker.bootstrap, topic)
    p = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec, "linger.ms": 50})
    base = 1_700_000_000_000
    for i in range(100):
        p.produce(topic, key=b"k%d" % i, value=b"v" * 100, partition=0, timestamp=base + i * 10)
    assert p.flush(15) == 0
    assert _stored_codecs(broker.data_dir, topic) == {CODECS[codec]}
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"ts-{uuid.uuid4().hex[:6]}"})
    try:
        (found,) = c.offsets_for_times([TopicPartition(topic, 0, base + 555)], timeout=10)
        assert found.offset == 56
    finally:
        c.close()


@pytest.mark.go
@pytest.mark.skipif(GO is None, reason="needs Go 1.21+ (go on PATH or /usr/local/go/bin/go)")
def test_franz_go_default_and_every_codec(broker):
    """tests/go/codecs_test.go: franz-go's default producer (snappy) and each kgo codec."""
    env = {**os.environ, "GOFLAGS": "-mod=mod -buildvcs=false", "CODECS_SEEDS": broker.bootstrap,
           "CODECS_TOPIC_PREFIX": f"codec-go-{uuid.uuid4().hex[:6]}"}
    run = subprocess.run([GO, "test", "-run", "^TestCodecs$", "-count=1", "-v", "."], cwd=GO_MODULE,
                         env=env, capture_output=True, text=True, timeout=300)
    out = run.stdout + run.stderr
    assert run.returncode == 0 and "--- PASS: TestCodecs" in out, out[-4000:]
    for name in ("default", "none", "gzip", "snappy", "lz4", "zstd"):
        assert f"--- PASS: TestCodecs/{name}" in out, out[-4000:]
        topic = f"{env['CODECS_TOPIC_PREFIX']}-{name}"
        expected = {"default": 2, **CODECS}[name]
        assert _stored_codecs(broker.data_dir, topic) == {expected}, name
