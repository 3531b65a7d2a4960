"""Transactions across ``kill -9``, checked on the wire and on disk.

(a) killed mid-transaction: after the restart the coordinator reloads the Ongoing transaction
    with its start time, times it out and aborts it (epoch bump): never visible to
    read_committed, and the LSO moves past it;
(b) killed after PrepareCommit is durable but before any marker is written (the test-only
    ``test.txn.stop.before.markers`` hook withholds them): after the restart the coordinator
    resumes the markers, the commit completes and every record becomes visible;
(c) killed after a mix of commits and aborts: every committed record is there, no aborted one.

The files are read with decoders written here from Kafka's format descriptions (record batch
v2, ``.txnindex`` 34-byte entries, TransactionLogKey/Value v0/v1), not with the broker's code.
"""

from __future__ import annotations

import struct
import time
import uuid
from collections import Counter
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker_process import BrokerProcess

STATES = {0: "Empty", 1: "Ongoing", 2: "PrepareCommit", 3: "PrepareAbort", 4: "CompleteCommit",
          5: "CompleteAbort", 6: "Dead", 7: "PrepareEpochFence"}
FAST_ABORT = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "200"}
HOOK = "test.txn.stop.before.markers"


# --- independent decoders ---------------------------------------------------------------------


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """Zigzag varint of the record format."""
    raw = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7


def read_batches(partition_dir: Path):
    """(base offset, attributes, producer id, producer epoch, [(offset, key, value)]) per batch of
    every ``.log`` segment; uncompressed batches only (what the broker writes itself)."""
    for seg in sorted(partition_dir.glob("*.log")):
        data = seg.read_bytes()
        pos = 0
        while pos + 61 <= len(data):
            base, length = struct.unpack_from(">qi", data, pos)
            if length <= 0 or pos + 12 + length > len(data):
                break
            attrs, _delta, _bts, _mts, pid, epoch, _seq, count = struct.unpack_from(">hiqqqhii", data, pos + 21)
            records = []
            if attrs & 0x07 == 0:
                p = pos + 61
                for _ in range(count):
                    _length, p = _varint(data, p)
                    p += 1  # attributes
                    _ts, p = _varint(data, p)
                    delta, p = _varint(data, p)
                    klen, p = _varint(data, p)
                    key = data[p:p + klen] if klen >= 0 else None
                    p += max(klen, 0)
                    vlen, p = _varint(data, p)
                    value = data[p:p + vlen] if vlen >= 0 else None
                    p += max(vlen, 0)
                    nh, p = _varint(data, p)
                    for _ in range(nh):
                        hk, p = _varint(data, p)
                        p += hk
                        hv, p = _varint(data, p)
                        p += max(hv, 0)
                    records.append((base + delta, key, value))
            yield base, attrs, pid, epoch, records
            pos += 12 + length


def _uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def decode_txn_key(key: bytes) -> str:
    version, n = struct.unpack_from(">hh", key, 0)
    assert version == 0
    return key[4:4 + n].decode()


def decode_txn_value(value: bytes) -> dict:
    """TransactionLogValue v0 (fixed-width) or v1 (compact + tagged fields)."""
    version, pid, epoch, timeout, status = struct.unpack_from(">hqhib", value, 0)
    pos = 17
    parts: list[tuple[str, int]] | None
    if version == 0:
        (n,) = struct.unpack_from(">i", value, pos)
        pos += 4
        parts = None if n < 0 else []
        for _ in range(max(n, 0)):
            (tl,) = struct.unpack_from(">h", value, pos)
            topic = value[pos + 2:pos + 2 + tl].decode()
            pos += 2 + tl
            (pc,) = struct.unpack_from(">i", value, pos)
            pos += 4
            for _ in range(pc):
                parts.append((topic, struct.unpack_from(">i", value, pos)[0]))
                pos += 4
    else:
        assert version == 1
        n, pos = _uvarint(value, pos)
        parts = None if n == 0 else []
        for _ in range(max(n - 1, 0)):
            tl, pos = _uvarint(value, pos)
            topic = value[pos:pos + tl - 1].decode()
            pos += tl - 1
            pc, pos = _uvarint(value, pos)
            for _ in range(pc - 1):
                parts.append((topic, struct.unpack_from(">i", value, pos)[0]))
                pos += 4
            _tags, pos = _uvarint(value, pos)
    last_update, start = struct.unpack_from(">qq", value, pos)
    return {"version": version, "producer_id": pid, "epoch": epoch, "timeout": timeout, "state": STATES[status],
            "partitions": None if parts is None else sorted(parts), "start": start, "last_update": last_update}


def txn_log(data_dir: Path, transactional_id: str) -> list[dict]:
    """Every __transaction_state record of ``transactional_id``, in log order (None = tombstone)."""
    out = []
    for d in sorted(data_dir.glob("__transaction_state-*")):
        for _base, _attrs, pid, _epoch, records in read_batches(d):
            assert pid == -1, "transaction log batches carry no producer id"
            for _offset, key, value in records:
                if decode_txn_key(key) == transactional_id:
                    out.append(None if value is None else decode_txn_value(value))
    return out


def read_txn_index(partition_dir: Path) -> list[tuple[int, int, int, int]]:
    """(producer id, first offset, last offset, last stable offset) of every aborted transaction."""
    entries = []
    for f in sorted(partition_dir.glob("*.txnindex")):
        data = f.read_bytes()
        assert len(data) % 34 == 0, f"{f}: {len(data)} bytes is not a whole number of 34-byte entries"
        for pos in range(0, len(data), 34):
            version, pid, first, last, lso = struct.unpack_from(">hqqqq", data, pos)
            assert version == 0
            entries.append((pid, first, last, lso))
    return entries


def markers(partition_dir: Path) -> list[tuple[int, int, str, int]]:
    """(offset, producer id, COMMIT/ABORT, coordinator epoch) of every control batch."""
    out = []
    for _base, attrs, pid, _epoch, records in read_batches(partition_dir):
        if attrs & 0x20:
            for offset, key, value in records:
                _kv, ctype = struct.unpack_from(">hh", key, 0)
                _vv, coordinator_epoch = struct.unpack_from(">hi", value, 0)
                out.append((offset, pid, {0: "ABORT", 1: "COMMIT"}[ctype], coordinator_epoch))
    return out


# --- helpers ----------------------------------------------------------------------------------------


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)


def read_committed(bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 20.0) -> list[str]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": uid("r"), "isolation.level": "read_committed",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[str] = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < expected and time.monotonic() < deadline:
            got += [m.value().decode() for m in c.consume(100, 0.2) if m.error() is None]
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            got += [m.value().decode() for m in c.consume(100, 0.2) if m.error() is None]
    finally:
        c.close()
    return got


def txn_producer(bootstrap: str, txn_id: str, **conf) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5,
                  "reconnect.backoff.max.ms": 200, **conf})
    p.init_transactions(30)
    return p


def send_txn(p: Producer, topic: str, values: list[tuple[int, str]]) -> None:
    for partition, v in values:
        p.produce(topic, value=v.encode(), partition=partition)
    p.flush(15)


# --- (a) killed mid-transaction ----------------------------------------------------------------------


def test_kill_mid_transaction_then_timeout_abort(tmp_path):
    b = BrokerProcess(tmp_path / "data", overrides=FAST_ABORT).start()
    try:
        topic, txn_id = uid("crash-a"), uid("tid-a")
        create_topic(b.bootstrap, topic, 2)
        p = txn_producer(b.bootstrap, txn_id, **{"transaction.timeout.ms": 4000})
        p.begin_transaction()
        send_txn(p, topic, [(0, "ok-0"), (1, "ok-1")])
        p.commit_transaction(15)
        p.begin_transaction()
        send_txn(p, topic, [(0, "doomed-0"), (0, "doomed-1"), (1, "doomed-2")])
        b.kill()
        b.start()
        plain = Producer({"bootstrap.servers": b.bootstrap})
        plain.produce(topic, value=b"after", partition=0)
        plain.flush(15)
        got = read_committed(b.bootstrap, topic, 2, 3)
        assert Counter(got) == Counter(["ok-0", "ok-1", "after"]), got
        data = Path(b.data_dir)
        states = [r["state"] for r in txn_log(data, txn_id)]
        assert states[-2:] == ["PrepareAbort", "CompleteAbort"], states
        log = txn_log(data, txn_id)
        ongoing = [r for r in log if r["state"] == "Ongoing"][-1]
        assert log[-1]["epoch"] == ongoing["epoch"] + 1, "the timeout abort bumps the epoch (fences the producer)"
        assert log[-1]["timeout"] == 4000 and log[-1]["partitions"] == []
        assert log[-2]["partitions"] == [(topic, 0), (topic, 1)]
        pid = log[-1]["producer_id"]
        # p0: ok-0 @0, COMMIT @1, doomed-0 @2, doomed-1 @3, then "after" and the ABORT written after the
        # restart, in either order.
        kinds = markers(data / f"{topic}-0")
        assert [m[2] for m in kinds] == ["COMMIT", "ABORT"]
        abort_at = kinds[1][0]
        assert read_txn_index(data / f"{topic}-0") == [(pid, 2, abort_at, abort_at + 1)]
        assert all(m[3] == 0 for m in markers(data / f"{topic}-0")), "coordinator epoch 0"
    finally:
        b.kill()


# --- (b) killed between PrepareCommit and the markers ----------------------------------------------------


def test_kill_after_prepare_commit_before_markers(tmp_path):
    b = BrokerProcess(tmp_path / "data", overrides={HOOK: "true"}).start()
    try:
        topic, txn_id = uid("crash-b"), uid("tid-b")
        create_topic(b.bootstrap, topic, 3)
        p = txn_producer(b.bootstrap, txn_id)
        p.begin_transaction()
        values = [(i % 3, f"v-{i}") for i in range(9)]
        send_txn(p, topic, values)
        p.commit_transaction(15)  # answered once PrepareCommit is durable
        data = Path(b.data_dir)
        assert [r["state"] for r in txn_log(data, txn_id)][-1] == "PrepareCommit"
        assert read_committed(b.bootstrap, topic, 3, 1, timeout=2) == [], "no marker yet: the LSO holds everything"
        assert all(markers(data / f"{topic}-{i}") == [] for i in range(3))
        b.kill()
        del b.overrides[HOOK]
        b.start()
        got = read_committed(b.bootstrap, topic, 3, len(values))
        assert Counter(got) == Counter(v for _, v in values)
        deadline = time.monotonic() + 10
        while txn_log(data, txn_id)[-1]["state"] != "CompleteCommit" and time.monotonic() < deadline:
            time.sleep(0.1)
        log = txn_log(data, txn_id)
        assert [r["state"] for r in log][-2:] == ["PrepareCommit", "CompleteCommit"]
        assert log[-2]["partitions"] == [(topic, 0), (topic, 1), (topic, 2)]
        for i in range(3):
            assert [(m[1], m[2], m[3]) for m in markers(data / f"{topic}-{i}")] == [(log[-1]["producer_id"], "COMMIT", 0)]
            assert read_txn_index(data / f"{topic}-{i}") == []
    finally:
        b.kill()


# --- (c) committed data survives ----------------------------------------------------------------------------


def test_kill_after_commits_and_aborts(tmp_path):
    b = BrokerProcess(tmp_path / "data").start()
    try:
        topic, txn_id = uid("crash-c"), uid("tid-c")
        create_topic(b.bootstrap, topic, 2)
        p = txn_producer(b.bootstrap, txn_id)
        committed: list[str] = []
        for t in range(8):
            p.begin_transaction()
            values = [(i % 2, f"t{t}-{i}") for i in range(4)]
            send_txn(p, topic, values)
            if t % 3 == 1:
                p.abort_transaction(15)
            else:
                p.commit_transaction(15)
                committed += [v for _, v in values]
        # EndTxn answers at PrepareAbort; the markers and CompleteAbort follow. Killed before
        # CompleteAbort, the broker would write the markers again on restart (as Kafka does).
        data = Path(b.data_dir)
        deadline = time.monotonic() + 10
        while txn_log(data, txn_id)[-1]["state"] != "CompleteAbort":
            assert time.monotonic() < deadline, "the last abort never completed"
            time.sleep(0.02)
        b.kill()
        b.start()
        got = read_committed(b.bootstrap, topic, 2, len(committed))
        assert Counter(got) == Counter(committed)
        log = txn_log(data, txn_id)
        # transaction.version=2 (the default, as Kafka 4.x formats) writes value v1
        assert log[0]["state"] == "Empty" and log[0]["partitions"] is None and log[0]["version"] == 1
        assert [r["state"] for r in log if r["state"].startswith("Complete")] == \
            ["CompleteAbort" if t % 3 == 1 else "CompleteCommit" for t in range(8)]
        assert all(r["epoch"] == 0 for r in log), "TV1 transactions keep the epoch"
        pid = log[-1]["producer_id"]
        # Each transaction puts 2 records + 1 marker in each partition: t starts at offset 3t.
        for part in range(2):
            assert read_txn_index(data / f"{topic}-{part}") == [(pid, 3 * t, 3 * t + 2, 3 * t + 3) for t in (1, 4, 7)]
            kinds = [m[2] for m in markers(data / f"{topic}-{part}")]
            assert kinds == ["ABORT" if t % 3 == 1 else "COMMIT" for t in range(8)]
    finally:
        b.kill()
