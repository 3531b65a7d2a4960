"""I/O errors under a partition log (injected at the system call): no acknowledged record is lost,
no offset is given twice, a failed append leaves no trace, and a file changed under the broker
takes the partition offline (KAFKA_STORAGE_ERROR) instead of being read or written wrongly.
Segments hold one descriptor once inactive, as Kafka's do."""

from __future__ import annotations

import errno
import os

import pytest

from protocol.records import build_batch, validate_batches
from storage.errors import KafkaStorageError
from storage.log import index_file
from storage.log.partition_log import PartitionLog
from storage.log.txn_index import AbortedTxn
from storage.log_config import LogConfig
from tests.unit.storage.helpers import decode_log

T0 = 1_700_000_000_000


def open_log(tmp_path, **config) -> PartitionLog:
    return PartitionLog.open(str(tmp_path / "t-0"), "t", 0, LogConfig(**config), needs_recovery=True, now_ms=T0)


def append(plog: PartitionLog, n: int = 3, value: bytes = b"v" * 100):
    buf = build_batch([(b"k%d" % i, value) for i in range(n)], timestamp=T0)
    return plog.append(buf, validate_batches(buf), now_ms=T0)


def offsets_on_disk(plog: PartitionLog) -> list[int]:
    out = []
    for seg in plog.segments:
        with open(seg.log_path, "rb") as f:
            out += [o for b in decode_log(f.read()) for o in range(b["base"], b["last"] + 1)]
    return out


class FailingWrites:
    """os.write to files whose names end in ``suffixes`` fails with ENOSPC after ``allow`` bytes
    (a disk that fills up between the segment write and the index write)."""

    def __init__(self, monkeypatch, suffixes: tuple[str, ...], allow: int = 0) -> None:
        self.allow = allow
        self.suffixes = suffixes
        self.real = os.write
        self.failed = 0
        monkeypatch.setattr(os, "write", self.write)

    def write(self, fd: int, data) -> int:
        if not os.readlink(f"/proc/self/fd/{fd}").endswith(self.suffixes):
            return self.real(fd, data)
        if self.allow <= 0:
            self.failed += 1
            raise OSError(errno.ENOSPC, "No space left on device")
        n = self.real(fd, memoryview(data)[: self.allow])
        self.allow -= n
        return n


def test_index_write_failure_does_not_fail_the_append_nor_reuse_offsets(tmp_path, monkeypatch):
    """The issue's case: the .log write succeeds, the offset index write fails (ENOSPC). The
    append stands (the index is derived data), the next append gets the next offsets, the
    recovery point does not pass the unwritten entries, and a restart has every record."""
    plog = open_log(tmp_path, index_interval_bytes=0)
    append(plog)
    failing = FailingWrites(monkeypatch, (".index", ".timeindex"))
    monkeypatch.setattr(index_file, "PENDING_BYTES", 8)  # every entry is written at once
    results = [append(plog) for _ in range(5)]
    assert failing.failed > 0
    assert [r.first_offset for r in results] == [3, 6, 9, 12, 15]
    assert offsets_on_disk(plog) == list(range(18))
    assert plog.read(9, 1 << 20).records  # served from the in-memory entries
    with pytest.raises(KafkaStorageError):
        plog.flush()
    assert plog.recovery_point == 0
    monkeypatch.setattr(os, "write", failing.real)  # space again
    plog.flush()
    assert plog.recovery_point == 18
    plog.close()
    again = open_log(tmp_path, index_interval_bytes=0)
    assert again.log_end_offset == 18 and offsets_on_disk(again) == list(range(18))
    assert again.active_segment.offset_index.entries == 5  # every batch but the first (at position 0)
    again.close()


def test_a_partial_log_write_is_undone(tmp_path, monkeypatch):
    plog = open_log(tmp_path)
    append(plog)
    size = plog.active_segment.size
    failing = FailingWrites(monkeypatch, (".log",), allow=100)  # half a batch, then the disk is full
    with pytest.raises(KafkaStorageError, match="No space"):
        append(plog)
    assert failing.failed == 1
    assert os.path.getsize(plog.active_segment.log_path) == size and plog.log_end_offset == 3
    monkeypatch.setattr(os, "write", failing.real)
    assert append(plog).first_offset == 3  # the failed append was given no offsets
    assert offsets_on_disk(plog) == list(range(6)) and plog.offline is None
    plog.close()


def test_a_write_that_cannot_be_undone_takes_the_partition_offline(tmp_path, monkeypatch):
    plog = open_log(tmp_path)
    append(plog)
    FailingWrites(monkeypatch, (".log",), allow=100)

    def no_truncate(fd, length):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "ftruncate", no_truncate)
    with pytest.raises(KafkaStorageError, match="could not be removed"):
        append(plog)
    assert plog.offline is not None
    monkeypatch.undo()
    with pytest.raises(KafkaStorageError, match="offline"):
        append(plog)
    with pytest.raises(KafkaStorageError, match="offline"):
        plog.read(0, 1 << 20)
    plog.close_without_flush()
    again = open_log(tmp_path)  # recovery cuts the partial batch
    assert again.offline is None and offsets_on_disk(again) == [0, 1, 2]
    assert append(again).first_offset == 3
    again.close()


def test_an_active_segment_cut_under_the_broker_is_not_appended_to(tmp_path):
    """Kafka would find the file changed; appending at the file's new end (position 0) would
    put batches where the index does not expect them."""
    plog = open_log(tmp_path)
    for _ in range(3):
        append(plog)
    os.truncate(plog.active_segment.log_path, 0)
    with pytest.raises(KafkaStorageError, match="changed outside the broker"):
        append(plog)
    assert plog.offline is not None and os.path.getsize(plog.active_segment.log_path) == 0
    plog.close_without_flush()


def test_an_inactive_segment_cut_under_the_broker_is_reported_on_read(tmp_path):
    plog = open_log(tmp_path, internal_segment_bytes=1000)
    for _ in range(10):
        append(plog)
    first = plog.segments[0]
    assert len(plog.segments) > 2
    os.truncate(first.log_path, first.size // 2)
    with pytest.raises(KafkaStorageError, match="cut outside the broker"):
        plog.read(0, 1 << 20)
    assert plog.offline is not None
    plog.close_without_flush()


def test_txn_index_write_failure_keeps_the_aborted_range_for_readers(tmp_path, monkeypatch):
    plog = open_log(tmp_path)
    append(plog)
    FailingWrites(monkeypatch, (".txnindex",))
    plog.append_aborted_txn(AbortedTxn(7, 0, 2, 0))
    assert plog.collect_aborted_txns(0, 3) == [(7, 0)]
    with pytest.raises(KafkaStorageError):
        plog.flush()
    monkeypatch.undo()
    plog.flush()
    plog.close()
    again = open_log(tmp_path)
    assert again.collect_aborted_txns(0, 3) == [(7, 0)]
    again.close()


def test_inactive_segments_hold_one_descriptor(tmp_path):
    """Kafka memory-maps the indexes: one descriptor per segment. Here the indexes live in memory
    and their files are open only while written."""
    plog = open_log(tmp_path, internal_segment_bytes=600, index_interval_bytes=0)
    for i in range(40):
        append(plog, 2)
        if i % 5 == 0:
            plog.append_aborted_txn(AbortedTxn(i, plog.log_end_offset - 2, plog.log_end_offset - 1, 0))
    segments = plog.segments
    assert len(segments) > 10
    assert [s.open_descriptors for s in segments[:-1]] == [1] * (len(segments) - 1)
    assert segments[-1].open_descriptors <= 4
    plog.close()
    again = open_log(tmp_path, internal_segment_bytes=600, index_interval_bytes=0)  # recovery too
    assert sum(s.open_descriptors for s in again.segments) == len(again.segments)
    assert offsets_on_disk(again) == list(range(80))
    again.close()
