"""A PartitionLog's producer state (LogProducerState): append, duplicates, markers, roll, close,
recovery after a crash, truncation."""

from __future__ import annotations

from pathlib import Path

import pytest

from protocol.records import build_batch, build_control_batch, validate_batches
from storage.log.partition_log import PartitionLog
from storage.log_config import LogConfig
from storage.producer.log_state import LogProducerState
from storage.producer.snapshot import snapshot_file_name
from storage.producer.types import TV_0, TV_2, AppendOrigin, InvalidProducerEpoch, OutOfOrderSequence

NOW = 1_700_000_000_000


def open_log(path: Path, **config) -> PartitionLog:
    return PartitionLog.open(str(path), "t", 0, LogConfig(**config), needs_recovery=False, now_ms=NOW)


def produce(plog: PartitionLog, pid: int, epoch: int, seq: int, n: int = 1, *, txn: bool = False):
    buf = build_batch(
        [(None, b"x" * 10)] * n,
        timestamp=NOW,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        transactional=txn,
    )
    return plog.append(buf, validate_batches(buf), now_ms=NOW)


def marker(plog: PartitionLog, pid: int, epoch: int, commit: bool, tv: int = TV_0):
    buf = build_control_batch(
        producer_id=pid, producer_epoch=epoch, commit=commit, coordinator_epoch=1, timestamp=NOW
    )
    return plog.append(buf, validate_batches(buf), now_ms=NOW, origin=AppendOrigin.COORDINATOR,
                       transaction_version=tv)


def state(listener: LogProducerState) -> list:
    m = listener.manager
    return [sorted(m.describe_producers()), m.ongoing_transactions(), m.map_end_offset]


def test_append_duplicates_and_errors(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    psl = plog.open_producer_state(NOW)
    r0 = produce(plog, 1, 0, 0, 3)
    r1 = produce(plog, 1, 0, 3, 2)
    assert (r0.first_offset, r0.last_offset, r1.first_offset, r1.last_offset) == (0, 2, 3, 4)
    dup = produce(plog, 1, 0, 0, 3)
    assert (dup.first_offset, dup.last_offset, dup.log_append_time_ms) == (0, 2, NOW)
    assert plog.log_end_offset == 5  # nothing written for the retry
    with pytest.raises(OutOfOrderSequence):
        produce(plog, 1, 0, 9)
    produce(plog, 2, 1, 0)
    with pytest.raises(InvalidProducerEpoch):
        produce(plog, 2, 0, 1)
    assert plog.log_end_offset == 6
    assert psl.manager.map_end_offset == 6
    plog.close()


def test_transactions_txnindex_and_lso(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    plog.open_producer_state(NOW)
    produce(plog, 1, 0, 0, 2, txn=True)  # 0-1
    produce(plog, 2, 0, 0, txn=True)  # 2
    produce(plog, 3, 0, 0)  # 3
    assert plog.last_stable_offset == 0
    assert plog.read(0, 1 << 20, plog.last_stable_offset).records.nbytes == 0
    marker(plog, 1, 0, commit=False)  # 4
    assert plog.last_stable_offset == 2
    assert plog.collect_aborted_txns(0, 5) == [(1, 0)]
    marker(plog, 2, 1, commit=True, tv=TV_2)  # 5
    assert plog.last_stable_offset == plog.high_watermark == 6
    with pytest.raises(ValueError):  # a marker must say which transaction version wrote it
        buf = build_control_batch(
            producer_id=2, producer_epoch=2, commit=True, coordinator_epoch=1, timestamp=NOW
        )
        plog.append(buf, validate_batches(buf), now_ms=NOW)
    assert plog.log_end_offset == 6
    plog.close()


def test_roll_close_and_recovery(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    plog = open_log(d)
    psl = plog.open_producer_state(NOW)
    produce(plog, 1, 0, 0, 2)
    produce(plog, 2, 0, 0, txn=True)
    plog.roll()
    assert (d / snapshot_file_name(3)).exists()
    produce(plog, 1, 0, 2)
    marker(plog, 2, 0, commit=False)
    produce(plog, 3, 0, 0, txn=True)
    plog.roll()
    produce(plog, 4, 5, 7)
    expected = state(psl)
    aborted = plog.collect_aborted_txns(0, plog.log_end_offset)
    plog.close()
    assert plog.log_end_offset == 7
    assert (d / snapshot_file_name(7)).exists()  # clean shutdown snapshot at the log end

    plog = open_log(d)
    assert state(plog.open_producer_state(NOW)) == expected
    plog.close_without_flush()

    # a crash: no shutdown snapshot, and the last roll's snapshot lost too
    (d / snapshot_file_name(7)).unlink()
    (d / snapshot_file_name(6)).unlink()
    plog = open_log(d)
    psl = plog.open_producer_state(NOW)
    assert state(psl) == expected
    assert plog.collect_aborted_txns(0, plog.log_end_offset) == aborted
    assert plog.last_stable_offset == 5  # pid 3's transaction is still open
    assert sorted(p.name for p in d.glob("*.snapshot")) == [snapshot_file_name(o) for o in (3, 6, 7)]

    # truncation rebuilds from the newest snapshot at or below the new end
    plog.truncate_to(4)
    assert sorted(psl.manager.describe_producers())[0].last_sequence == 2
    assert psl.manager.ongoing_transactions()[0].first_offset == 2
    assert psl.manager.map_end_offset == 4
    assert sorted(p.name for p in d.glob("*.snapshot")) == [snapshot_file_name(o) for o in (3, 4)]
    plog.close()


def test_a_replicated_log_holds_the_lso_until_the_marker_is_below_the_high_watermark(tmp_path: Path) -> None:
    """Kafka's unreplicated transactions: a follower may not have the marker yet, so a completed
    transaction keeps the LSO at its first offset until the high watermark passes its marker."""
    plog = open_log(tmp_path / "t-0")
    plog.open_producer_state(NOW)
    plog.track_high_watermark(0)
    produce(plog, 1, 0, 0, 3, txn=True)  # offsets 0-2
    assert plog.maybe_increment_high_watermark(3)
    assert plog.last_stable_offset == 0  # open
    marker(plog, 1, 0, commit=True)  # offset 3
    assert plog.last_stable_offset == 0  # complete on the leader, not yet replicated
    plog.maybe_increment_high_watermark(3)
    assert plog.last_stable_offset == 0
    plog.maybe_increment_high_watermark(4)  # the marker is committed
    assert plog.last_stable_offset == 4
    plog.close()


def test_a_single_replica_completes_a_transaction_with_its_marker(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    plog.open_producer_state(NOW)
    produce(plog, 1, 0, 0, 3, txn=True)
    marker(plog, 1, 0, commit=True)
    assert plog.last_stable_offset == plog.high_watermark == 4
    plog.close()
