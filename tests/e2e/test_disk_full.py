"""A disk that fills up under a producing broker, on a small tmpfs the test mounts itself (needs
root, as CI runs): every acknowledged record is at its offset, no offset is given twice, and after
a ``kill -9`` and a restart (with space again) every acknowledged record is still there.

The issue's reproduction: a 20 MiB tmpfs and ``index.interval.bytes=0`` (an index entry per batch),
filled up so that the log's last page still takes small batches while the index's next page does
not fit: the batch is written, the index write fails (before, the append then failed after its
bytes were in the log, and the next batch was given the same offsets).
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker_process import BrokerProcess


@pytest.fixture
def small_disk(tmp_path):
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.fail("mounting a tmpfs needs root (CI runs as root)")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", str(mount)], check=True)
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


class Filler:
    """The rest of the disk as 4 KiB files, given back one page at a time."""

    def __init__(self, disk) -> None:
        self.files = []
        i = 0
        while True:
            path = disk / f"filler-{i}"
            try:
                with open(path, "wb") as f:
                    f.write(b"\0" * 4096)
            except OSError:
                path.unlink(missing_ok=True)
                break
            self.files.append(path)
            i += 1

    def free(self, pages: int) -> None:
        for _ in range(min(pages, len(self.files))):
            self.files.pop().unlink()


def _produce_until_refused(p: Producer, topic: str, start: int, acked: dict[int, bytes]) -> int:
    """Small records one request each until three in a row are refused; returns the next index."""
    refused = 0
    i = start
    while refused < 3:
        errors: list[int] = []

        def done(err, msg, errors=errors):
            if err is None:
                acked[msg.offset()] = msg.value()
            else:
                errors.append(err.code())

        p.produce(topic, value=b"%08d" % i + b"x" * 92, partition=0, on_delivery=done)
        assert p.flush(10) == 0
        if errors:
            assert errors == [KafkaError.KAFKA_STORAGE_ERROR], errors
            refused += 1
        else:
            refused = 0
        i += 1
    return i


def _read_all(bootstrap: str, topic: str) -> dict[int, bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"df-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False})
    try:
        _low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        c.assign([TopicPartition(topic, 0, 0)])
        got: dict[int, bytes] = {}
        deadline = time.monotonic() + 60
        while len(got) < high and time.monotonic() < deadline:
            for m in c.consume(500, timeout=1):
                assert m.error() is None, m.error()
                assert m.offset() not in got, f"offset {m.offset()} twice"
                got[m.offset()] = m.value()
        assert len(got) == high, (len(got), high)
        return got
    finally:
        c.close()


def test_acknowledged_records_survive_a_full_disk_and_kill_9(small_disk):
    b = BrokerProcess(small_disk).start()  # the data dir is the tmpfs; the broker log is beside it
    try:
        topic = "full"
        admin = AdminClient({"bootstrap.servers": b.bootstrap})  # must outlive the future
        admin.create_topics([NewTopic(topic, 1, 1, config={"index.interval.bytes": "0"})])[topic].result(15)
        # The disk full but for the log's last page: small batches still fit in it while a new
        # page for an index write does not; then one page at a time is given back.
        filler = Filler(small_disk)
        p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "enable.idempotence": False,
                      "retries": 0, "linger.ms": 0, "message.timeout.ms": 10000,
                      "max.in.flight.requests.per.connection": 1})
        acked: dict[int, bytes] = {}
        i = 0
        for _cycle in range(25):
            i = _produce_until_refused(p, topic, i, acked)
            filler.free(1 + _cycle % 2)  # the log takes a page, the next time an index write may too
        assert len(acked) > 500
        stored = _read_all(b.bootstrap, topic)
        for offset, value in acked.items():
            assert stored.get(offset) == value, f"acknowledged offset {offset} lost or changed"
        b.kill()
        filler.free(512)
        b.start()
        after = _read_all(b.bootstrap, topic)
        for offset, value in acked.items():
            assert after.get(offset) == value, f"acknowledged offset {offset} lost after kill -9"
        # and the partition takes appends again at the next offset
        p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all"})
        p.produce(topic, value=b"after", partition=0)
        assert p.flush(15) == 0
        assert max(_read_all(b.bootstrap, topic)) == max(after) + 1
    finally:
        b.kill()
