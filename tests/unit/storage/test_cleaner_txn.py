"""The cleaner and transactions/idempotence: aborted data goes, ABORT markers and their .txnindex
entries stay while the transaction has data and then get a delete horizon, COMMIT markers the
same, the last batch of every producer is kept so sequence checks and fencing survive a restart,
nothing at or past the last stable offset is cleaned, producer snapshots follow the segments, and
Kafka's own DumpLogSegments accepts the cleaned files."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess

import pytest

from protocol.records import build_batch, build_control_batch, validate_batches
from storage.log_manager import LogManager
from storage.producer.types import TV_0, AppendOrigin, OutOfOrderSequence
from tests.unit.storage.test_cleaner import (
    T0,
    append,
    check_indexes,
    clean,
    log_records,
    make_log,
    segment_batches,
)

RETENTION = 10_000


@pytest.fixture(autouse=True)
def _no_fsync(monkeypatch):
    monkeypatch.setattr(os, "fsync", lambda fd: None)


def produce(plog, pid: int, epoch: int, seq: int, records, *, txn: bool = False, ts: int = T0):
    buf = build_batch(
        records, timestamp=ts, producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=txn
    )
    return plog.append(buf, validate_batches(buf), now_ms=ts)


def end_txn(plog, pid: int, epoch: int, commit: bool):
    buf = build_control_batch(
        producer_id=pid, producer_epoch=epoch, commit=commit, coordinator_epoch=0, timestamp=T0
    )
    return plog.append(buf, validate_batches(buf), now_ms=T0, origin=AppendOrigin.COORDINATOR,
                       transaction_version=TV_0)


def filler(plog, n: int, tag: bytes) -> None:
    """Unique keys, enough to roll segments and make the log dirty."""
    for i in range(n):
        append(plog, [(b"fill-%s-%d" % (tag, i), b"x" * 60)])


def markers(plog) -> dict[int, dict]:
    """offset -> header of every control batch still in the log."""
    out = {}
    for seg in plog.segments:
        for b, _recs in segment_batches(seg):
            if b["attrs"] & 0x20:
                out[b["base"]] = b
    return out


def txn_entries(plog) -> list[tuple[int, int, int]]:
    return [
        (t.producer_id, t.first_offset, t.last_offset) for s in plog.segments for t in s.txn_index.entries
    ]


def test_aborted_data_goes_marker_and_txnindex_follow(tmp_path):
    lm, plog = make_log(tmp_path, segment_bytes=600, delete_retention_ms=RETENTION)
    r = produce(plog, 7, 0, 0, [(b"k1", b"aborted"), (b"t1", b"aborted")], txn=True)
    aborted_first = r.first_offset
    append(plog, [(b"k1", b"plain")])
    abort = end_txn(plog, 7, 0, commit=False).first_offset
    # The producer moves on: its aborted batch is no longer its last one.
    produce(plog, 7, 0, 2, [(b"k9", b"committed")], txn=True)
    commit = end_txn(plog, 7, 0, commit=True).first_offset
    filler(plog, 12, b"a")
    assert txn_entries(plog) == [(7, aborted_first, abort)]
    committed_fetch = plog.read(0, 1 << 20, include_aborted_txns=True)
    assert (7, aborted_first) in committed_fetch.aborted_txns

    now = T0 + 1000
    clean(lm, now=now)
    recs = log_records(plog)
    assert not [r for r in recs if r[2] == b"aborted"]
    assert (aborted_first + 2, b"k1", b"plain") in recs
    # The marker and its index entry stay (the cleaning saw data of the transaction), in the
    # cleaned segment that holds the marker.
    assert abort in markers(plog) and not markers(plog)[abort]["attrs"] & 0x40
    assert txn_entries(plog) == [(7, aborted_first, abort)]
    holder = next(s for s in plog.segments if s.base_offset <= abort < s.next_offset)
    assert [t.last_offset for t in holder.txn_index.entries] == [abort]
    check_indexes(plog, tmp_path)

    # Next cleaning: no data of the transaction left, so the marker gets a delete horizon and
    # the index entry goes.
    filler(plog, 12, b"b")
    clean(lm, now=now + 1)
    assert markers(plog)[abort]["attrs"] & 0x40 and markers(plog)[abort]["base_ts"] == now + 1 + RETENTION
    assert txn_entries(plog) == []
    # Before the horizon it stays; after, it goes. The COMMIT marker of the producer's last
    # transaction stays (its data is still there).
    filler(plog, 12, b"c")
    clean(lm, now=now + RETENTION)
    assert abort in markers(plog)
    filler(plog, 12, b"d")
    clean(lm, now=now + 1 + RETENTION)
    assert abort not in markers(plog)
    assert commit in markers(plog)
    assert (commit - 1, b"k9", b"committed") in log_records(plog)
    lm.shutdown()


def test_commit_marker_kept_while_its_data_is_there(tmp_path):
    lm, plog = make_log(tmp_path, segment_bytes=600, delete_retention_ms=RETENTION)
    produce(plog, 8, 0, 0, [(b"c1", b"txn-a")], txn=True)
    commit_a = end_txn(plog, 8, 0, commit=True).first_offset
    produce(plog, 8, 0, 1, [(b"c2", b"txn-b")], txn=True)
    commit_b = end_txn(plog, 8, 0, commit=True).first_offset
    append(plog, [(b"c1", b"overwritten")])
    filler(plog, 12, b"a")
    now = T0 + 1000
    clean(lm, now=now)
    # txn A's data is superseded and gone, but the cleaning saw it: the marker stays as it was.
    assert not [r for r in log_records(plog) if r[2] == b"txn-a"]
    assert commit_a in markers(plog) and not markers(plog)[commit_a]["attrs"] & 0x40
    filler(plog, 12, b"b")
    clean(lm, now=now)
    assert markers(plog)[commit_a]["attrs"] & 0x40
    filler(plog, 12, b"c")
    clean(lm, now=now + RETENTION)
    assert commit_a not in markers(plog)
    # txn B's data is the producer's last: data and marker stay.
    assert commit_b in markers(plog) and (commit_b - 1, b"c2", b"txn-b") in log_records(plog)
    lm.shutdown()


def test_last_batch_of_each_producer_survives_and_restart_keeps_sequences(tmp_path):
    lm, plog = make_log(tmp_path, segment_bytes=600)
    for seq in range(5):
        produce(plog, 9, 3, seq, [(b"p", b"seq%d" % seq)])
    last = produce(plog, 9, 3, 5, [(b"p", b"seq5"), (b"q", b"seq6")])
    append(plog, [(b"p", b"other"), (b"q", b"other")])
    filler(plog, 12, b"a")
    clean(lm)
    # Every record of producer 9 is superseded; its last batch stays, emptied, with its
    # offsets, epoch and sequence range.
    kept = [b for s in plog.segments for b, _ in segment_batches(s) if b["pid"] == 9]
    assert [(b["base"], b["last"], b["epoch"], b["seq"], b["count"]) for b in kept] == [
        (last.first_offset, last.last_offset, 3, 5, 0)
    ]
    assert not [r for r in log_records(plog) if r[2].startswith(b"seq")]
    # Restart from the log alone (no snapshot): the producer's sequence state is rebuilt.
    d = plog.dir
    lm.shutdown()
    for snap in glob.glob(os.path.join(d, "*.snapshot")):
        os.unlink(snap)
    lm2 = LogManager([os.path.dirname(d)])
    lm2.startup(now_ms=T0)
    plog2 = lm2.get("t", 0)
    entry = plog2.producer_state.manager.last_entry(9)
    assert (entry.producer_epoch, entry.last_seq, entry.last_data_offset) == (3, 6, last.last_offset)
    dup = produce(plog2, 9, 3, 5, [(b"p", b"seq5"), (b"q", b"seq6")])
    assert dup.first_offset == last.first_offset  # a retry is still recognised as a duplicate
    with pytest.raises(OutOfOrderSequence):
        produce(plog2, 9, 3, 8, [(b"p", b"gap")])
    produce(plog2, 9, 3, 7, [(b"p", b"next")])
    lm2.shutdown()


def test_nothing_at_or_past_the_last_stable_offset_is_cleaned(tmp_path):
    lm, plog = make_log(tmp_path, segment_bytes=600)
    filler(plog, 8, b"a")
    for i in range(10):
        append(plog, [(b"k", b"before-%d" % i)])
    open_at = produce(plog, 10, 0, 0, [(b"k", b"open-txn")], txn=True).first_offset
    for i in range(20):
        append(plog, [(b"k", b"after-%d" % i)])
    plog.roll()
    lso_segment = max(s.base_offset for s in plog.segments if s.base_offset <= open_at)
    before = log_records(plog)
    c = clean(lm)
    after = log_records(plog)
    assert c.all_checkpoints()[("t", 0)] == lso_segment
    assert [r for r in after if r[0] >= lso_segment] == [r for r in before if r[0] >= lso_segment]
    assert [r for r in after if r[1] == b"k" and r[0] < lso_segment] == [
        max(r for r in before if r[1] == b"k" and r[0] < lso_segment)
    ]
    lm.shutdown()


def test_producer_snapshots_of_merged_segments_go(tmp_path):
    lm, plog = make_log(tmp_path, segment_bytes=1500)
    for i in range(150):
        produce(plog, 11, 0, i, [(b"k%d" % (i % 5), b"v" * 40)])
    manager = plog.producer_state.manager
    assert len(manager.snapshot_offsets()) >= 2
    for _ in range(3):
        for i in range(10):
            append(plog, [(b"k%d" % (i % 5), b"w" * 40)])
        plog.roll()
        clean(lm)
    bases = {s.base_offset for s in plog.segments}
    assert set(manager.snapshot_offsets()) <= bases | {plog.log_end_offset}
    on_disk = {
        int(os.path.basename(p).split(".")[0]) for p in glob.glob(os.path.join(plog.dir, "*.snapshot"))
    }
    assert on_disk == set(manager.snapshot_offsets())
    lm.shutdown()


def _kafka_libs() -> str | None:
    cache = os.environ.get("KAFKA_REF_CACHE", os.path.expanduser("~/.cache/pykafka-ref"))
    for libs in sorted(glob.glob(os.path.join(cache, "kafka-*", "libs"))):
        if glob.glob(os.path.join(libs, "kafka-tools-*.jar")):
            return libs
    return None


@pytest.mark.java
@pytest.mark.skipif(
    _kafka_libs() is None or shutil.which("java") is None, reason="needs java + cached Kafka jars"
)
def test_kafka_dump_log_segments_reads_cleaned_segments(tmp_path):
    """Delete-horizon batches, emptied batches, rebuilt compressed batches and a cleaned
    .txnindex, read by Kafka 4.3.1's DumpLogSegments with deep iteration and index checks."""
    lm, plog = make_log(tmp_path, segment_bytes=800, delete_retention_ms=RETENTION, index_interval_bytes=100)
    produce(plog, 7, 0, 0, [(b"k1", b"aborted")], txn=True)
    end_txn(plog, 7, 0, commit=False)
    produce(plog, 7, 0, 1, [(b"k2", b"committed")], txn=True)
    end_txn(plog, 7, 0, commit=True)
    append(plog, [(b"a", b"1"), (b"b", None), (b"c", b"3")], codec=3)
    append(plog, [(b"a", b"2")])
    for seq in range(3):
        produce(plog, 9, 0, seq, [(b"z", b"%d" % seq)])
    append(plog, [(b"z", b"last")])
    filler(plog, 20, b"a")
    clean(lm, now=T0 + 1000)
    lm.shutdown()
    files = sorted(glob.glob(os.path.join(plog.dir, "0*")))
    libs = _kafka_libs()

    def dump(paths, *args):
        cmd = ["java", "-Xmx256m", "-cp", os.path.join(libs, "*"), "org.apache.kafka.tools.DumpLogSegments"]
        return subprocess.run(
            [*cmd, "--files", ",".join(paths), *args], capture_output=True, text=True, timeout=120, check=True
        ).stdout

    # One JVM: indexes verified against their .log, logs deep-iterated, the .txnindex printed.
    out = dump(files, "--verify-index-only", "--deep-iteration", "--print-data-log")
    assert "Mismatches" not in out and "not found" not in out and "isvalid: false" not in out
    assert "isvalid: true" in out
    assert "deleteHorizonMs: OptionalLong[1700000011000]" in out  # the tombstone's batch, rewritten
    assert "compresscodec: lz4" in out
    assert "valueSize: -1 sequence: -1 headerKeys: [] key: b\n" in out
    assert "count: 0 baseSequence: 2 lastSequence: 2 producerId: 9" in out  # emptied, kept
    assert "endTxnMarker: ABORT" in out
    assert "version: 0 producerId: 7 firstOffset: 0 lastOffset: 1 lastStableOffset: 2" in out
