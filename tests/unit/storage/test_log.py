"""PartitionLog: append/read/roll/retention/timestamps/leader epoch/reopen/transactions."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from protocol.records import build_batch, validate_batches
from storage.errors import InvalidTimestamp, OffsetOutOfRange, PolicyViolation, RecordTooLarge
from storage.log import segment as segment_mod
from storage.log.partition_log import AppendResult, PartitionLog
from storage.log.txn_index import AbortedTxn
from storage.log_config import LogConfig
from tests.unit.storage.helpers import append_batch, decode_log, read_bytes, read_text

T0 = 1_700_000_000_000


def open_log(tmp_path, config=None, *, needs_recovery=False, now=T0, **kw) -> PartitionLog:
    return PartitionLog.open(
        str(tmp_path / "topic-0"),
        "topic",
        0,
        config or LogConfig(),
        needs_recovery=needs_recovery,
        now_ms=now,
        **kw,
    )


def kp_batch(timestamps, compression=0):
    """A batch with per-record timestamps, built by kafka-python (an independent encoder)."""
    b = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=compression,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for i, ts in enumerate(timestamps):
        b.append(i, timestamp=ts, key=b"k%d" % i, value=b"v" * 30, headers=[])
    return bytearray(b.build())


def append_buf(plog, buf, now=T0, **kw):
    return plog.append(buf, validate_batches(buf), leader_epoch=kw.pop("epoch", 0), now_ms=now, **kw)


def test_append_assigns_offsets_and_read_back(tmp_path):
    plog = open_log(tmp_path)
    r1 = append_batch(plog, 3, timestamp=T0)
    buf = build_batch([(b"a", b"1")], timestamp=T0) + build_batch([(b"b", b"2"), (b"c", b"3")], timestamp=T0)
    r2 = append_buf(plog, buf, epoch=0)
    assert (r1.first_offset, r1.last_offset, r1.num_messages) == (0, 2, 3)
    assert (r2.first_offset, r2.last_offset, r2.num_messages) == (3, 5, 3)
    assert r2.log_append_time_ms == -1 and plog.log_end_offset == plog.high_watermark == 6
    res = plog.read(0, 1 << 20)
    got = decode_log(bytes(res.records))
    assert [(b["base"], b["last"], b["ple"]) for b in got] == [(0, 2, 0), (3, 3, 0), (4, 5, 0)]
    assert res.next_offset == 6
    # the stored batches decode with kafka-python, offsets included
    offsets = [
        rec.offset
        for b in got
        for rec in DefaultRecordBatch(bytes(res.records)[b["pos"] : b["pos"] + b["size"]])
    ]
    assert offsets == list(range(6))
    assert len(plog.read(6, 100).records) == 0
    with pytest.raises(OffsetOutOfRange):
        plog.read(7, 100)
    plog.close()


def test_log_append_time_and_validation(tmp_path):
    plog = open_log(tmp_path, LogConfig(message_timestamp_type="LogAppendTime", max_message_bytes=500))
    r = append_batch(plog, 2, timestamp=5, now_ms=T0)
    assert r.log_append_time_ms == T0
    b = decode_log(bytes(plog.read(0, 10_000).records))[0]  # CRC re-checked by the decoder
    assert b["max_ts"] == T0
    with pytest.raises(RecordTooLarge):
        append_batch(plog, 1, timestamp=T0, value_size=1000)
    plog.close()
    strict = open_log(tmp_path / "x", LogConfig(message_timestamp_before_max_ms=1000))
    with pytest.raises(InvalidTimestamp) as e:
        append_batch(strict, 1, timestamp=T0 - 5000, now_ms=T0)
    assert e.value.code == 32
    with pytest.raises(InvalidTimestamp):
        append_batch(strict, 1, timestamp=T0 + 3_600_001, now_ms=T0)  # after.max.ms default 1h
    assert strict.log_end_offset == 0
    strict.close()


def test_roll_by_size_time_and_index_full(tmp_path):
    plog = open_log(tmp_path, LogConfig(segment_bytes=1000))
    for i in range(20):
        append_batch(plog, 1, timestamp=T0 + i, value_size=100)
    assert len(plog.segments) > 3
    assert all(s.size <= 1000 for s in plog.segments)
    bases = [s.base_offset for s in plog.segments]
    assert bases == sorted(bases) and bases[0] == 0
    names = sorted(os.listdir(plog.dir))
    assert f"{bases[1]:020d}.log" in names and f"{bases[1]:020d}.index" in names
    # every offset is readable from the right segment
    for off in range(20):
        assert decode_log(bytes(plog.read(off, 1, min_one_message=True).records))[0]["base"] == off
    plog.close()

    timed = open_log(tmp_path / "t", LogConfig(segment_ms=1000))
    append_batch(timed, 1, timestamp=T0)
    append_batch(timed, 1, timestamp=T0 + 1000)
    assert len(timed.segments) == 1
    append_batch(timed, 1, timestamp=T0 + 1001)  # first batch's timestamp + segment.ms exceeded
    assert [s.base_offset for s in timed.segments] == [0, 2]
    timed.close()

    small_index = open_log(tmp_path / "i", LogConfig(segment_index_bytes=16, index_interval_bytes=0))
    for i in range(6):
        append_batch(small_index, 1, timestamp=T0 + i)
    assert len(small_index.segments) >= 2 and all(s.offset_index.entries <= 2 for s in small_index.segments)
    small_index.close()


def test_read_spans_into_next_segment_over_offset_gap(tmp_path):
    # A compacted-like layout: segment 0 holds 0..4, segment 10 holds 10..14.
    d = tmp_path / "topic-0"
    d.mkdir()
    for base in (0, 10):
        buf = bytearray(
            b"".join(build_batch([(b"k", b"v")], timestamp=T0, base_offset=base + i) for i in range(5))
        )
        (d / f"{base:020d}.log").write_bytes(buf)
    plog = open_log(tmp_path, needs_recovery=True)
    assert plog.log_end_offset == 15
    res = plog.read(7, 1000)
    assert decode_log(bytes(res.records))[0]["base"] == 10
    plog.close()


def test_upper_bound_and_out_of_range(tmp_path):
    plog = open_log(tmp_path)
    for _ in range(5):
        append_batch(plog, 2, timestamp=T0)
    res = plog.read(0, 1 << 20, upper_bound_offset=6)  # e.g. an LSO
    assert [b["base"] for b in decode_log(bytes(res.records))] == [0, 2, 4]
    assert res.next_offset == 6
    assert len(plog.read(6, 1 << 20, upper_bound_offset=6).records) == 0
    plog.delete_records_before(4)
    assert plog.log_start_offset == 4
    with pytest.raises(OffsetOutOfRange) as e:
        plog.read(3, 100)
    assert e.value.code == 1
    assert decode_log(bytes(plog.read(4, 100).records))[0]["base"] == 4
    with pytest.raises(OffsetOutOfRange):
        plog.delete_records_before(11)
    assert plog.delete_records_before(-1) == 10  # -1: up to the high watermark
    plog.close()
    compacted = open_log(tmp_path / "c", LogConfig(cleanup_policy=("compact",)))
    append_batch(compacted, 1, timestamp=T0)
    with pytest.raises(PolicyViolation) as e:
        compacted.delete_records_before(1)
    assert e.value.code == 44
    compacted.close()


def test_offset_for_timestamp_per_record_and_max_timestamp(tmp_path):
    plog = open_log(tmp_path, LogConfig(segment_bytes=400, index_interval_bytes=0))
    append_buf(plog, kp_batch([T0 + 10, T0 + 30, T0 + 20]))  # offsets 0..2
    append_buf(plog, kp_batch([T0 + 40, T0 + 90, T0 + 50], compression=1))  # gzip, offsets 3..5
    append_buf(plog, kp_batch([T0 + 60, T0 + 70]))  # offsets 6..7
    assert plog.offset_for_timestamp(T0) == (0, T0 + 10)
    assert plog.offset_for_timestamp(T0 + 11) == (1, T0 + 30)
    assert plog.offset_for_timestamp(T0 + 31) == (3, T0 + 40)
    assert plog.offset_for_timestamp(T0 + 55) == (4, T0 + 90)
    assert plog.offset_for_timestamp(T0 + 91) is None
    assert plog.max_timestamp_and_offset() == (T0 + 90, 4)
    assert plog.find_offset_by_timestamp(T0 + 11).leader_epoch == 0
    plog.close()
    again = open_log(tmp_path)
    assert again.max_timestamp_and_offset() == (T0 + 90, 4)
    # Kafka: the first batch whose max timestamp >= target, then its first record >= target
    assert again.offset_for_timestamp(T0 + 65) == (4, T0 + 90)
    again.close()


def test_retention_by_size_and_time(tmp_path):
    cfg = LogConfig(segment_bytes=600, retention_bytes=1300)
    plog = open_log(tmp_path, cfg)
    for i in range(30):
        append_batch(plog, 1, timestamp=T0 + i * 1000, value_size=100)
    total_before = plog.size
    deleted = plog.apply_retention(T0 + 30_000)
    assert deleted > 0
    assert plog.size <= 1300 + 600 and plog.size < total_before
    assert plog.log_start_offset == plog.segments[0].base_offset > 0
    assert not [n for n in os.listdir(plog.dir) if n.endswith(".deleted")]
    with pytest.raises(OffsetOutOfRange):
        plog.read(0, 100)

    plog.update_config(LogConfig(segment_bytes=600, retention_ms=10_000))
    plog.apply_retention(T0 + 29_000 + 10_001 - 5000)  # only segments whose max ts is older go
    assert plog.segments[0].largest_timestamp >= T0 + 29_000 + 10_001 - 5000 - 10_000
    # everything expired: the active segment goes too, after rolling an empty one (as Kafka)
    leo = plog.log_end_offset
    plog.apply_retention(T0 + 10**9)
    assert [s.base_offset for s in plog.segments] == [leo] and plog.segments[0].size == 0
    assert plog.log_start_offset == leo == plog.log_end_offset
    assert plog.apply_retention(T0 + 10**9) == 0  # the empty active segment stays
    r = append_batch(plog, 1, timestamp=T0 + 10**9)
    assert r.first_offset == leo
    plog.close()

    compact = open_log(
        tmp_path / "c", LogConfig(segment_bytes=600, retention_ms=1, cleanup_policy=("compact",))
    )
    for _ in range(10):
        append_batch(compact, 1, timestamp=T0, value_size=100)
    assert compact.apply_retention(T0 + 10**9) == 0
    compact.close()


def test_leader_epoch_checkpoint_and_end_offsets(tmp_path):
    plog = open_log(tmp_path)
    path = os.path.join(plog.dir, "leader-epoch-checkpoint")
    assert not os.path.exists(path)
    append_batch(plog, 2, timestamp=T0)
    assert read_text(path) == "0\n1\n0 0\n"
    append_batch(plog, 3, timestamp=T0, epoch=0)
    append_batch(plog, 1, timestamp=T0, epoch=2)
    assert read_text(path) == "0\n2\n0 0\n2 5\n"
    assert plog.leader_epoch == 2
    assert plog.end_offset_for_epoch(2) == (2, 6)
    assert plog.end_offset_for_epoch(0) == (0, 5)
    assert plog.end_offset_for_epoch(1) == (0, 5)  # floor epoch, start of the next epoch
    assert plog.end_offset_for_epoch(3) == (-1, -1)
    assert plog.end_offset_for_epoch(-1) == (-1, -1)
    assert plog.epoch_for_offset(4) == 0 and plog.epoch_for_offset(5) == 2
    plog.truncate_to(5)
    assert read_text(path) == "0\n1\n0 0\n"
    assert plog.log_end_offset == 5
    plog.close()
    again = open_log(tmp_path, needs_recovery=True)
    assert again.epoch_cache.entries == [(0, 0)]
    again.close()


def test_recovery_rebuilds_epoch_cache_from_batches(tmp_path):
    plog = open_log(tmp_path)
    append_batch(plog, 1, timestamp=T0, epoch=0)
    append_batch(plog, 1, timestamp=T0, epoch=3)
    plog.close()
    os.unlink(os.path.join(plog.dir, "leader-epoch-checkpoint"))
    again = open_log(tmp_path, needs_recovery=True)
    assert again.epoch_cache.entries == [(0, 0), (3, 1)]
    again.close()


def test_reopen_after_clean_close_does_not_scan(tmp_path, monkeypatch):
    cfg = LogConfig(segment_bytes=2000, index_interval_bytes=300)
    plog = open_log(tmp_path, cfg)
    for i in range(40):
        append_batch(plog, 2, timestamp=T0 + i, value_size=50)
    files = {n: read_bytes(os.path.join(plog.dir, n)) for n in os.listdir(plog.dir)}
    plog.close()

    def no_recover(*a, **k):
        raise AssertionError("recover() must not run after a clean shutdown")

    monkeypatch.setattr(segment_mod.LogSegment, "recover", no_recover)
    again = open_log(tmp_path, cfg, recovery_point=0)
    assert again.log_end_offset == 80 and again.recovery_point == 80
    assert decode_log(bytes(again.read(77, 1000).records))[0]["base"] == 76
    assert again.offset_for_timestamp(T0 + 39) == (78, T0 + 39)
    append_batch(again, 1, timestamp=T0 + 100)
    again.close()
    for n, data in files.items():
        if n.endswith(".log"):
            now = read_bytes(os.path.join(again.dir, n))
            assert now[: len(data)] == data


def test_truncate_to_across_segments(tmp_path):
    plog = open_log(tmp_path, LogConfig(segment_bytes=500))
    for i in range(20):
        append_batch(plog, 1, timestamp=T0 + i, value_size=80)
    n_before = len(plog.segments)
    plog.truncate_to(7)
    assert plog.log_end_offset == 7 and len(plog.segments) < n_before
    assert plog.segments[-1].base_offset <= 7
    assert [b["base"] for b in decode_log(bytes(plog.read(0, 1 << 20).records))][:1] == [0]
    r = append_batch(plog, 1, timestamp=T0 + 100)
    assert r.first_offset == 7
    plog.truncate_to(0)
    assert plog.log_end_offset == 0
    plog.close()


def test_truncating_to_the_log_end_drops_an_epoch_started_there(tmp_path):
    """A replica that led epoch 1 without appending to it, then follows a leader of epoch 2: its
    truncation to the log end removes the empty epoch, as Kafka's truncateTo does, so the next
    fetch names the epoch the leader knows (otherwise the follower asks again forever)."""
    plog = open_log(tmp_path)
    append_batch(plog, 1, timestamp=T0)
    plog.assign_leader_epoch(1)  # led epoch 1 from offset 1, wrote nothing
    assert plog.epoch_cache.latest_epoch == 1
    assert plog.truncate_to(plog.log_end_offset) is False
    assert plog.epoch_cache.latest_epoch == 0 and plog.log_end_offset == 1
    plog.close()


def test_aborted_txn_index_and_committed_read(tmp_path):
    plog = open_log(tmp_path, LogConfig(segment_bytes=400))
    for _ in range(12):
        append_batch(plog, 1, timestamp=T0, value_size=60)
    seg_of = {s.base_offset: s for s in plog.segments}
    # markers at offsets 3 and 9; each aborted txn goes to the segment holding its marker
    plog.append_aborted_txn(AbortedTxn(11, 1, 3, 4))
    plog.append_aborted_txn(AbortedTxn(12, 2, 9, 10))
    assert plog.collect_aborted_txns(0, 5) == [(11, 1), (12, 2)]
    assert plog.collect_aborted_txns(4, 12) == [(12, 2)]
    assert plog.collect_aborted_txns(10, 12) == []
    txn_files = [n for n in os.listdir(plog.dir) if n.endswith(".txnindex")]
    assert len(txn_files) == 2 and len(seg_of) > 2
    res = plog.read(0, 1 << 20, upper_bound_offset=12, include_aborted_txns=True)
    # segment 0 holds offsets 0..2: the txn whose marker (3) sits in the next segment still overlaps
    assert res.next_offset == 3 and res.aborted_txns == [(11, 1)]
    plog.truncate_to(9)
    assert plog.collect_aborted_txns(0, 12) == [(11, 1)]
    plog.close()


class _Recorder:
    """Stands in for the log's producer state and records the points the log calls it at."""

    def __init__(self):
        self.events = []

    def before_append(self, buf, batches, origin, transaction_version, verify, guard):
        self.events.append(("before", batches[0].base_offset))
        if batches[0].producer_id == 99:  # a duplicate: answered with the original batch's offsets
            return SimpleNamespace(last_offset=0, offset_delta=0, timestamp=-1)
        return None

    def after_append(self, log, last_offset):
        self.events.append(("after", last_offset))

    def on_roll(self, log, new_base_offset):
        self.events.append(("roll", new_base_offset))

    def on_truncate(self, log, now_ms):
        self.events.append(("truncate", log.log_end_offset))

    def on_close(self, log):
        self.events.append(("close", log.log_end_offset))


def test_producer_state_hook_points(tmp_path):
    plog = open_log(tmp_path, LogConfig(segment_bytes=300))
    rec = _Recorder()
    plog.producer_state = rec
    append_batch(plog, 1, timestamp=T0, value_size=100)
    append_batch(plog, 1, timestamp=T0, value_size=100)
    dup = build_batch([(b"k", b"v")], timestamp=T0, producer_id=99, producer_epoch=0, base_sequence=0)
    assert append_buf(plog, dup) == AppendResult(0, 0, -1, 0, 0)
    assert plog.log_end_offset == 2
    plog.truncate_to(1)
    assert rec.events == [
        ("before", 0),
        ("after", 0),
        ("before", 1),
        ("roll", 1),
        ("after", 1),
        ("before", 2),
        ("truncate", 1),
    ]
    plog.close()


def test_flush_messages_and_recovery_point(tmp_path):
    plog = open_log(tmp_path, LogConfig(flush_messages=1))
    append_batch(plog, 2, timestamp=T0)
    assert plog.recovery_point == 2
    plog.close()
    lazy = open_log(tmp_path / "l", LogConfig(segment_bytes=300))
    for _ in range(3):
        append_batch(lazy, 1, timestamp=T0, value_size=100)
    assert lazy.recovery_point == 0
    assert lazy.flush_pending()
    assert lazy.recovery_point == lazy.segments[-1].base_offset
    lazy.flush()
    assert lazy.recovery_point == 3
    lazy.close()


def test_topic_id_partition_metadata(tmp_path):
    import uuid

    from storage.errors import InconsistentTopicId

    tid = uuid.uuid4()
    plog = open_log(tmp_path, topic_id=tid)
    plog.close()
    assert open_log(tmp_path).topic_id == tid
    with pytest.raises(InconsistentTopicId):
        open_log(tmp_path, topic_id=uuid.uuid4())
