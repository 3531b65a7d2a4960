"""Log compaction through the real broker and stock clients (confluent-kafka).

A compacted topic with small segments gets many updates per key and tombstones; once the
cleaner's checkpoint (``cleaner-offset-checkpoint`` in the log dir) has passed them, a consumer
reading from the beginning sees only the latest record of each key at its original offset (and
the tombstones, within delete.retention.ms). Keyless records are refused as Kafka refuses them.
The internal topics are compacted too, and the coordinators rebuild the same state from the
cleaned logs after a restart: committed offsets (many commits of one group/partition) and
transactional ids (many transactions of one id).
"""

from __future__ import annotations

import glob
import os
import struct
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.record.default_records import DefaultRecordBatch

from coordinator.group.java_hash import partition_for
from storage.checkpoints import read_offset_checkpoint
from tests.support.broker_process import BrokerProcess
from tests.unit.coordinator.test_group_records import parse_key, parse_offset_value

OVERRIDES = {
    "log.cleaner.backoff.ms": "100",
    "log.cleaner.min.cleanable.ratio": "0.01",
    "offsets.topic.num.partitions": "3",
    "offsets.topic.segment.bytes": "2048",
    "transaction.state.log.num.partitions": "3",
    "transaction.state.log.segment.bytes": "2048",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "offsets.topic.replication.factor": "1",
}


@pytest.fixture(scope="module")
def cbroker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("compaction") / "data", overrides=OVERRIDES).start()
    yield b
    assert b.stop() == 0, b.log_tail()


def create_compacted(bootstrap: str, name: str, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    conf = {"cleanup.policy": "compact", "internal.segment.bytes": "2048", "min.cleanable.dirty.ratio": "0.01"}
    conf.update({k.replace("_", "."): v for k, v in configs.items()})
    admin.create_topics([NewTopic(name, 1, 1, config=conf)])[name].result(15)


def checkpoint(data_dir: str, topic: str, partition: int = 0) -> int:
    try:
        return read_offset_checkpoint(os.path.join(data_dir, "cleaner-offset-checkpoint")).get(
            (topic, partition), -1
        )
    except OSError:
        return -1


def wait_cleaned(data_dir: str, topic: str, past: int, partition: int = 0, timeout: float = 30.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        at = checkpoint(data_dir, topic, partition)
        if at > past:
            return at
        time.sleep(0.1)
    raise AssertionError(
        f"{topic}-{partition} not cleaned past {past} (checkpoint {checkpoint(data_dir, topic)})"
    )


def wait_for(cond, what: str, timeout: float = 30.0) -> None:
    """The cleaner keeps going behind the active segment (every log.cleaner.backoff.ms)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def produce_all(bootstrap: str, topic: str, records) -> dict[tuple[bytes, int], int]:
    """Produce (key, value) records in order; returns {(key, index): offset}."""
    p = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 2, "enable.idempotence": True, "batch.size": 1024}
    )
    offsets: dict[tuple[bytes, int], int] = {}

    def done(i, key):
        def cb(err, msg):
            assert err is None, err
            offsets[(key, i)] = msg.offset()

        return cb

    for i, (key, value) in enumerate(records):
        p.produce(topic, key=key, value=value, partition=0, on_delivery=done(i, key))
        if i % 500 == 0:
            p.poll(0)
    assert p.flush(30) == 0
    return offsets


def consume_all(bootstrap: str, topic: str) -> list[tuple[int, bytes | None, bytes | None]]:
    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"r-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False}
    )
    try:
        _low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        c.assign([TopicPartition(topic, 0, 0)])
        out = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for m in c.consume(1000, timeout=1):
                assert m.error() is None, m.error()
                out.append((m.offset(), m.key(), m.value()))
            if out and out[-1][0] >= high - 1:
                return out
        raise AssertionError(f"read {len(out)} records, never reached {high}")
    finally:
        c.close()


def test_compacted_topic_keeps_the_latest_record_of_each_key(cbroker):
    topic = f"compact-{uuid.uuid4().hex[:8]}"
    create_compacted(cbroker.bootstrap, topic)
    keys = [b"key-%02d" % k for k in range(40)]
    records = []
    for round_ in range(25):
        for k in keys:
            records.append((k, b"%s=%d-" % (k, round_) + b"x" * 30))
    records += [(k, None) for k in keys[:5]]  # tombstones (delete.retention.ms: a day)
    written = produce_all(cbroker.bootstrap, topic, records)
    last_update = max(written.values())
    # Unique keys after the updates roll those segments out of the active one.
    fill = [(b"fill-%04d" % i, b"f" * 60) for i in range(60)]
    written.update(produce_all(cbroker.bootstrap, topic, fill))
    wait_cleaned(cbroker.data_dir, topic, last_update)

    got = consume_all(cbroker.bootstrap, topic)
    assert [o for o, _k, _v in got] == sorted({o for o, _k, _v in got})
    latest = {}
    for (key, i), offset in written.items():
        if key not in latest or offset > latest[key][0]:
            latest[key] = (offset, i)
    # Every key once: its latest record, at the offset it was written to (tombstones included).
    by_key = {}
    for offset, key, value in got:
        if offset <= last_update:
            assert key not in by_key, f"{key!r} twice in the cleaned range"
        by_key.setdefault(key, []).append((offset, value))
    values = dict(zip(((k, i) for i, (k, _v) in enumerate(records)), (v for _k, v in records), strict=True))
    values.update(zip(((k, i) for i, (k, _v) in enumerate(fill)), (v for _k, v in fill), strict=True))
    for key, (offset, i) in latest.items():
        assert (offset, values[(key, i)]) in by_key[key]
    for k in keys[:5]:
        assert by_key[k] == [(latest[k][0], None)]
    assert len([r for r in got if r[0] <= last_update]) == len(keys)


def test_tombstones_go_after_delete_retention(cbroker):
    topic = f"tomb-{uuid.uuid4().hex[:8]}"
    create_compacted(cbroker.bootstrap, topic, delete_retention_ms="500")
    written = produce_all(cbroker.bootstrap, topic, [(b"gone", b"v1"), (b"kept", b"v1"), (b"gone", None)])
    written.update(produce_all(cbroker.bootstrap, topic, [(b"fill-%d" % i, b"f" * 60) for i in range(60)]))
    first = wait_cleaned(cbroker.data_dir, topic, written[(b"gone", 2)])
    assert (written[(b"gone", 2)], b"gone", None) in consume_all(cbroker.bootstrap, topic)
    time.sleep(0.6)  # past the horizon stamped by that cleaning
    more = produce_all(cbroker.bootstrap, topic, [(b"more-%d" % i, b"m" * 60) for i in range(60)])
    wait_cleaned(cbroker.data_dir, topic, max(first, min(more.values())))
    got = consume_all(cbroker.bootstrap, topic)
    assert not [r for r in got if r[1] == b"gone"]
    assert (written[(b"kept", 1)], b"kept", b"v1") in got


def test_keyless_records_are_refused_on_a_compacted_topic(cbroker):
    topic = f"nokey-{uuid.uuid4().hex[:8]}"
    create_compacted(cbroker.bootstrap, topic)
    errors = []
    p = Producer({"bootstrap.servers": cbroker.bootstrap, "enable.idempotence": False, "retries": 0})
    p.produce(topic, value=b"no key", partition=0, on_delivery=lambda err, msg: errors.append(err))
    p.flush(15)  # its own batch: Kafka refuses a whole batch with any keyless record in it
    p.produce(topic, key=b"k", value=b"keyed", partition=0, on_delivery=lambda err, msg: errors.append(err))
    p.flush(15)
    assert len(errors) == 2
    assert errors[0] is not None and errors[0].code() == KafkaError.INVALID_RECORD
    assert errors[1] is None


# --- internal topics ------------------------------------------------------------------------------


def partition_records(
    data_dir: str, topic: str, partition: int
) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record on disk (files read directly, kafka-python's decoder). The running broker's
    cleaner swaps segments in and out, so a listing whose file has vanished is read again."""
    for _attempt in range(50):
        try:
            return _read_partition_records(data_dir, topic, partition)
        except FileNotFoundError:
            time.sleep(0.05)
    return _read_partition_records(data_dir, topic, partition)


def _read_partition_records(data_dir: str, topic: str, partition: int) -> list[tuple[int, bytes | None, bytes | None]]:
    out = []
    for path in sorted(glob.glob(os.path.join(data_dir, f"{topic}-{partition}", "*.log"))):
        with open(path, "rb") as f:
            data = f.read()
        pos = 0
        while pos + 12 <= len(data):
            size = struct.unpack_from(">i", data, pos + 8)[0] + 12
            batch = DefaultRecordBatch(data[pos : pos + size])
            assert batch.validate_crc()
            if not batch.is_control_batch:
                out.extend((r.offset, r.key, r.value) for r in batch)
            pos += size
    return out


def test_committed_offsets_survive_compaction_and_restart(tmp_path):
    b = BrokerProcess(tmp_path / "data", overrides=OVERRIDES).start()
    try:
        topic = f"src-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": b.bootstrap})  # must outlive the future
        admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(15)
        group = f"g-{uuid.uuid4().hex[:8]}"
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "enable.auto.commit": False})
        for i in range(1, 301):
            c.commit(
                offsets=[TopicPartition(topic, 0, i), TopicPartition(topic, 1, 1000 + i)], asynchronous=False
            )
        c.close()
        p = partition_for(group, 3)
        # 600 commit records were written (offsets are never reassigned, so the last offset on
        # disk counts them); the cleaner works behind the active segment while they stream in.
        written = max(r[0] for r in partition_records(b.data_dir, "__consumer_offsets", p)) + 1
        assert written >= 600
        wait_cleaned(b.data_dir, "__consumer_offsets", written // 2, partition=p)
        wait_for(
            lambda: len(partition_records(b.data_dir, "__consumer_offsets", p)) < written / 10, "cleaning"
        )
        assert b.stop() == 0
        b.start()
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "enable.auto.commit": False})
        committed = c.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=15)
        c.close()
        assert [(tp.partition, tp.offset) for tp in committed] == [(0, 300), (1, 1300)]
        # On disk the surviving commit records are the latest per (group, topic, partition).
        # On disk: below the cleaner's checkpoint at most one commit per (group, topic,
        # partition) is left, and the newest one is 300 / 1300.
        cleaned_to = checkpoint(b.data_dir, "__consumer_offsets", p)
        commits: dict[tuple, list[tuple[int, int]]] = {}
        for offset, key, value in partition_records(b.data_dir, "__consumer_offsets", p):
            parsed = parse_key(key)
            if value is not None and parsed[0] == "offset" and parsed[1] == group:
                commits.setdefault(parsed[2:], []).append((offset, parse_offset_value(value)["offset"]))
        for tp, expected in (((topic, 0), 300), ((topic, 1), 1300)):
            assert commits[tp][-1][1] == expected
            assert len([o for o, _v in commits[tp] if o < cleaned_to]) <= 1
    finally:
        if b.proc is not None:
            b.kill()


def test_transactional_ids_survive_compaction_and_restart(tmp_path):
    b = BrokerProcess(tmp_path / "data", overrides=OVERRIDES).start()
    try:
        topic = f"txn-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": b.bootstrap})  # must outlive the future
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
        tid = f"tid-{uuid.uuid4().hex[:8]}"
        p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": tid, "linger.ms": 0})
        p.init_transactions(15)
        for i in range(40):
            p.begin_transaction()
            p.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=0)
            p.commit_transaction(15)
        txn_partition = partition_for(tid, 3)  # abs(javaHashCode) % partitions, as for groups
        # Ongoing, PrepareCommit and CompleteCommit per transaction: 120 records or so.
        written = max(r[0] for r in partition_records(b.data_dir, "__transaction_state", txn_partition)) + 1
        assert written >= 100
        wait_cleaned(b.data_dir, "__transaction_state", written // 2, partition=txn_partition)
        wait_for(
            lambda: len(partition_records(b.data_dir, "__transaction_state", txn_partition)) < written / 3,
            "cleaning",
        )
        assert b.stop() == 0
        b.start()
        # The coordinator reloaded the id from the cleaned log: a new producer of the id fences
        # nothing it should not and goes on committing.
        p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": tid, "linger.ms": 0})
        p.init_transactions(15)
        p.begin_transaction()
        p.produce(topic, key=b"after", value=b"restart", partition=0)
        p.commit_transaction(15)
        c = Consumer(
            {
                "bootstrap.servers": b.bootstrap,
                "group.id": f"r-{uuid.uuid4().hex[:8]}",
                "isolation.level": "read_committed",
                "auto.offset.reset": "earliest",
            }
        )
        c.assign([TopicPartition(topic, 0, 0)])
        seen = []
        deadline = time.monotonic() + 20
        while len(seen) < 41 and time.monotonic() < deadline:
            for m in c.consume(100, timeout=1):
                assert m.error() is None
                seen.append(m.key())
        c.close()
        assert seen[-1] == b"after" and len(seen) == 41
    finally:
        if b.proc is not None:
            b.kill()
