"""Large Fetch answers go out with sendfile (storage.file_region, broker.net.socket_writer): through
the real wire they are byte for byte the log's batches, whole, in request order, also when
requests are pipelined behind one another and around small answers."""

from __future__ import annotations

import struct

from kafka.protocol.metadata import MetadataRequest

from protocol.messages import response_class
from protocol.records import build_batch
from storage.log.segment import ZERO_COPY_MIN
from tests.e2e.test_wire_errors import _create, _fetch_req, _produce
from tests.support.raw_client import RawClient

_BATCH_HEAD = struct.Struct(">qi")


def _batches(records: bytes) -> list[tuple[int, bytes]]:
    """(base offset, bytes) of each whole batch."""
    out, pos = [], 0
    while pos + 12 <= len(records):
        base, length = _BATCH_HEAD.unpack_from(records, pos)
        out.append((base, records[pos:pos + 12 + length]))
        pos += 12 + length
    assert pos == len(records), "a Fetch answer ends with a whole batch"
    return out


def _framed(request, version: int, correlation_id: int) -> bytes:
    request.with_header(correlation_id=correlation_id, client_id="zero-copy")
    return bytes(request.encode(version=version, header=True, framed=True))


def test_large_fetches_are_the_log_bytes_in_order_when_pipelined(broker, topic_name):
    assert _create(broker.bootstrap, topic_name) == 0
    produced = []
    offset = 0
    for i in range(60):  # 60 batches of 8 x 2 KiB: about 1 MiB
        batch = build_batch([(b"k%d" % j, bytes([i % 251]) * 2048) for j in range(8)], timestamp=1000 + i)
        assert _produce(broker.bootstrap, topic_name, bytes(batch)).error_code == 0
        produced.append(offset)
        offset += 8
    # Fetches of 256 KiB from several offsets (inside batches too), a Metadata request between
    # them, all sent before any answer is read.
    starts = [0, 3, 130, 250, 0]
    meta = MetadataRequest[9](topics=[MetadataRequest.MetadataRequestTopic(name=topic_name)],
                              allow_auto_topic_creation=False)
    with RawClient(broker.bootstrap) as c:
        wire = b""
        for i, start in enumerate(starts):
            wire += _framed(_fetch_req(topic_name, start, partition_max=256 << 10, max_bytes=256 << 10), 11, 2 * i + 1)
            wire += _framed(meta, 9, 2 * i + 2)
        c.send_bytes(wire)
        answers = []
        for i in range(2 * len(starts)):
            frame = c.recv_frame()
            assert struct.unpack_from(">i", frame, 0)[0] == i + 1  # in request order
            if i % 2 == 0:
                answers.append(response_class(1).decode(frame[4:], version=11))
        # the whole log in one read (the reference), then each answer against it
        whole = c.send(_fetch_req(topic_name, 0, partition_max=4 << 20, max_bytes=4 << 20), 11)
    log = dict(_batches(bytes(whole.responses[0].partitions[0].records)))
    assert sorted(log) == produced
    for start, answer in zip(starts, answers, strict=True):
        p = answer.responses[0].partitions[0]
        assert p.error_code == 0 and p.high_watermark == offset
        records = bytes(p.records)
        assert ZERO_COPY_MIN <= len(records) <= 256 << 10
        got = _batches(records)
        assert got[0][0] == start - start % 8  # from the batch holding the fetch offset
        assert all(log[base] == data for base, data in got)
        assert [b for b, _ in got] == list(range(got[0][0], got[0][0] + 8 * len(got), 8))  # contiguous


def test_consumers_read_every_record_of_a_large_log(broker, topic_name):
    from confluent_kafka import Consumer, Producer

    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    values = [bytes([i % 256]) * 1000 + str(i).encode() for i in range(6000)]
    for v in values:
        p.produce(topic_name, v)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": topic_name, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "fetch.max.bytes": 2 << 20, "max.partition.fetch.bytes": 1 << 20})
    c.subscribe([topic_name])
    got = []
    try:
        while len(got) < len(values):
            msgs = c.consume(1000, timeout=10)
            assert msgs, f"stalled after {len(got)} records"
            for m in msgs:
                assert m.error() is None, m.error()
                got.append(m.value())
    finally:
        c.close()
    assert got == values
