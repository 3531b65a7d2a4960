"""ProducerStateManager: idempotence, transactions, LSO, expiry, snapshots and recovery replay.

Expected behaviour follows Kafka 4.3 ``ProducerAppendInfo``/``ProducerStateManager`` (checked
against the 4.3.1 jar's bytecode where the sources available disagreed).
"""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.record_codec import control_type
from protocol.records import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    BatchInfo,
    build_batch,
    build_control_batch,
    read_header,
    set_base_offset,
)
from storage.producer.append_info import read_end_txn_marker
from storage.producer.entry import ProducerStateEntry
from storage.producer.manager import ProducerStateManager
from storage.producer.snapshot import snapshot_file_name
from storage.producer.types import (
    INT32_MAX,
    TV_0,
    TV_2,
    AppendOrigin,
    BatchMetadata,
    CompletedTxn,
    InvalidProducerEpoch,
    InvalidTxnState,
    OutOfOrderSequence,
    ProducerDescription,
    TransactionCoordinatorFenced,
    decrement_sequence,
)

CLIENT = AppendOrigin.CLIENT
COORDINATOR = AppendOrigin.COORDINATOR
REPLICATION = AppendOrigin.REPLICATION


class FakeLog:
    """The calls a partition log makes, in Kafka's order, over an in-memory list of batches."""

    def __init__(self, psm: ProducerStateManager, start: int = 0) -> None:
        self.psm = psm
        self.next_offset = start
        self.batches: list[bytearray] = []
        self.txn_index: list[tuple[CompletedTxn, int]] = []  # aborted txns with their LSO

    def append(
        self, buf: bytearray, origin: AppendOrigin = CLIENT, tv: int = -1
    ) -> tuple[int, int] | BatchMetadata:
        info = read_header(buf)
        base = self.next_offset
        set_base_offset(buf, 0, base)
        info.base_offset = base
        pending = self.psm.validate_append([info], buf, origin, transaction_version=tv)
        if pending.duplicate is not None:
            return pending.duplicate
        self.batches.append(buf)
        self.next_offset = info.next_offset
        self.psm.apply_append(pending, self.next_offset, self._on_completed)
        return base, info.last_offset

    def _on_completed(self, txn: CompletedTxn, lso: int) -> None:
        if txn.is_aborted:
            self.txn_index.append((txn, lso))

    def data(
        self, pid: int, epoch: int, seq: int, n: int = 1, *, txn: bool = False, ts: int = 1_000, origin=CLIENT
    ):
        return self.append(batch(pid, epoch, seq, n, txn=txn, ts=ts), origin)

    def marker(
        self,
        pid: int,
        epoch: int,
        commit: bool,
        *,
        coordinator_epoch: int = 0,
        ts: int = 2_000,
        tv: int = TV_0,
    ):
        buf = build_control_batch(
            producer_id=pid,
            producer_epoch=epoch,
            commit=commit,
            coordinator_epoch=coordinator_epoch,
            timestamp=ts,
        )
        return self.append(buf, COORDINATOR, tv)

    def infos(self, start: int = 0):
        for buf in self.batches:
            info = read_header(buf)
            if info.next_offset > start:
                yield info, buf


def batch(pid: int, epoch: int, seq: int, n: int = 1, *, txn: bool = False, ts: int = 1_000) -> bytearray:
    return build_batch(
        [(None, b"v%d" % i) for i in range(n)],
        timestamp=ts,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        transactional=txn,
    )


def info_of(buf: bytearray) -> BatchInfo:
    return read_header(buf)


@pytest.fixture
def psm(tmp_path: Path) -> ProducerStateManager:
    return ProducerStateManager(tmp_path)


@pytest.fixture
def log(psm: ProducerStateManager) -> FakeLog:
    return FakeLog(psm)


# --- idempotence ----------------------------------------------------------------------------


def test_duplicate_of_each_of_last_five_batches_detected(log: FakeLog, psm: ProducerStateManager) -> None:
    offsets = [log.data(7, 0, seq=2 * i, n=2) for i in range(6)]
    assert offsets[0] == (0, 1) and offsets[5] == (10, 11)
    end = log.next_offset
    for i in range(1, 6):
        retry = batch(7, 0, seq=2 * i, n=2)
        dup = psm.find_duplicate_batch(info_of(retry))
        assert dup is not None and (dup.first_offset, dup.last_offset) == offsets[i]
        assert (dup.first_seq, dup.last_seq) == (2 * i, 2 * i + 1)
        assert log.append(retry) == dup  # answered with the original offsets, nothing appended
    assert log.next_offset == end
    # the 6th most recent batch is no longer retained: a retry is just out of order
    oldest = batch(7, 0, seq=0, n=2)
    assert psm.find_duplicate_batch(info_of(oldest)) is None
    with pytest.raises(OutOfOrderSequence) as e:
        log.append(oldest)
    assert e.value.code == 45
    # same range but another epoch, or a different range overlapping a retained one: no duplicate
    assert psm.find_duplicate_batch(info_of(batch(7, 1, seq=10, n=2))) is None
    assert psm.find_duplicate_batch(info_of(batch(7, 0, seq=10, n=1))) is None


def test_sequence_gap_and_regression_rejected(log: FakeLog, psm: ProducerStateManager) -> None:
    log.data(1, 0, seq=0, n=3)
    before = psm.describe_producers()
    for seq in (4, 2, 1):  # gap, overlap, regression
        with pytest.raises(OutOfOrderSequence) as e:
            log.data(1, 0, seq=seq)
        assert e.value.code == 45
    assert psm.describe_producers() == before  # a rejected append leaves no trace
    assert log.data(1, 0, seq=3) == (3, 3)


def test_sequence_wraps_to_zero_after_int32_max(log: FakeLog, psm: ProducerStateManager) -> None:
    log.data(1, 0, seq=INT32_MAX - 2, n=3)  # a producer unknown here may start anywhere
    assert psm.last_entry(1).last_seq == INT32_MAX
    with pytest.raises(OutOfOrderSequence):
        log.data(1, 0, seq=INT32_MAX)
    log.data(1, 0, seq=0, n=2)
    # a batch spanning the wrap: its first sequence is recovered through decrement_sequence
    log.data(2, 0, seq=INT32_MAX - 1, n=4)
    entry = psm.last_entry(2)
    assert (entry.first_seq, entry.last_seq) == (INT32_MAX - 1, 1)
    dup = psm.find_duplicate_batch(info_of(batch(2, 0, seq=INT32_MAX - 1, n=4)))
    assert dup is not None and dup.first_seq == INT32_MAX - 1
    log.data(2, 0, seq=2)
    assert decrement_sequence(0, 1) == INT32_MAX and decrement_sequence(5, 2) == 3


def test_stale_epoch_rejected_47(log: FakeLog, psm: ProducerStateManager) -> None:
    log.data(1, 3, seq=0)
    with pytest.raises(InvalidProducerEpoch) as e:
        log.data(1, 2, seq=1)
    assert e.value.code == 47
    # replication only logs the regression (the leader already decided)
    log.data(1, 2, seq=7, origin=REPLICATION)
    assert psm.last_entry(1).producer_epoch == 2


def test_epoch_bump_restarts_sequence(log: FakeLog, psm: ProducerStateManager) -> None:
    for i in range(3):
        log.data(1, 0, seq=i)
    with pytest.raises(OutOfOrderSequence):
        log.data(1, 1, seq=3)
    log.data(1, 1, seq=0)
    entry = psm.last_entry(1)
    assert entry.producer_epoch == 1 and len(entry.batch_metadata) == 1  # old batches dropped
    assert psm.find_duplicate_batch(info_of(batch(1, 0, seq=2))) is None


def test_unknown_producer_rules(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path)
    log = FakeLog(psm)
    # Kafka 4 (since KIP-360) never answers UNKNOWN_PRODUCER_ID from the log: a producer with no
    # state (new, expired, or removed by retention) continues with whatever sequence it has.
    log.data(10, 4, seq=1234)
    log.data(10, 4, seq=1235)
    # ...but a TV2 producer that went through verification must start at 0 (KIP-890)
    psm.maybe_create_verification_state_entry(11, 5, 0, supports_epoch_bump=True, now_ms=0)
    with pytest.raises(OutOfOrderSequence):
        log.data(11, 0, seq=5, txn=True)
    psm.clear_verification_state_entry(11)
    # and a verified TV1 producer may not skip past the lowest sequence awaiting verification
    psm.maybe_create_verification_state_entry(12, 3, 0, supports_epoch_bump=False, now_ms=0)
    psm.maybe_create_verification_state_entry(12, 2, 0, supports_epoch_bump=False, now_ms=0)
    assert psm.verification_state_entry(12).lowest_sequence == 2
    with pytest.raises(OutOfOrderSequence):
        log.data(12, 0, seq=3, txn=True)
    log.data(12, 0, seq=2, txn=True)
    assert psm.verification_state_entry(12) is None  # a transactional append spends the guard
    # replication and coordinator appends are not sequence-checked
    log.data(13, 0, seq=50, origin=REPLICATION)
    log.data(13, 0, seq=90, origin=REPLICATION)
    log.data(14, 0, seq=-1, origin=COORDINATOR)
    log.data(14, 0, seq=-1, origin=COORDINATOR)


def test_batches_without_producer_id_are_ignored(log: FakeLog, psm: ProducerStateManager) -> None:
    log.append(build_batch([(None, b"x")], timestamp=1))
    assert psm.is_empty() and psm.map_end_offset == 1


# --- transactions and LSO -------------------------------------------------------------------


def test_txn_open_commit_abort_and_lso_with_interleaved_producers(
    log: FakeLog, psm: ProducerStateManager
) -> None:
    A, B, C = 1, 2, 3
    assert log.data(A, 0, 0, n=2, txn=True) == (0, 1)
    assert psm.first_unstable_offset() == 0
    assert log.data(B, 0, 0, txn=True) == (2, 2)
    assert log.data(C, 0, 0) == (3, 3)  # idempotent, not transactional
    assert log.data(A, 0, 2, txn=True) == (4, 4)
    assert [t.first_offset for t in psm.ongoing_transactions()] == [0, 2]
    assert psm.has_ongoing_transaction(A, 0) and not psm.has_ongoing_transaction(A, 1)
    assert not psm.has_ongoing_transaction(C, 0)

    # ABORT of A at 5: the LSO recorded is B's first offset, which still bounds reads
    assert log.marker(A, 0, commit=False, coordinator_epoch=3) == (5, 5)
    assert log.txn_index == [(CompletedTxn(A, 0, 5, True), 2)]
    assert psm.first_unstable_offset() == 2
    assert psm.last_entry(A).current_txn_first_offset is None
    assert psm.last_entry(A).coordinator_epoch == 3

    # A starts a new transaction after B's: LSO stays at B's first offset
    assert log.data(A, 0, 3, txn=True) == (6, 6)
    assert psm.first_unstable_offset() == 2
    # validation alone changes nothing (the marker's offset is whatever the caller assigned)
    marker = build_control_batch(
        producer_id=B, producer_epoch=0, commit=True, coordinator_epoch=3, timestamp=9
    )
    pending = psm.validate_append([info_of(marker)], marker, COORDINATOR, transaction_version=TV_0)
    assert pending.completed_txns == [CompletedTxn(B, 2, 0, False)]
    assert psm.first_unstable_offset() == 2 and psm.has_ongoing_transaction(B, 0)
    assert log.marker(B, 0, commit=True, coordinator_epoch=3) == (7, 7)
    assert psm.first_unstable_offset() == 6
    assert log.marker(A, 0, commit=True, coordinator_epoch=3) == (8, 8)
    assert psm.first_unstable_offset() is None
    # the commits produce no txnindex entries, and the LSO of a lone txn is its marker + 1
    assert len(log.txn_index) == 1
    assert psm.last_stable_offset(CompletedTxn(A, 6, 8, False)) == 9


def test_ongoing_transactions_stay_ordered_by_first_offset(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path)
    FakeLog(psm, 10).data(1, 0, 0, txn=True)
    buf = batch(2, 0, 0, txn=True)
    set_base_offset(buf, 0, 5)
    psm.replay_batch(info_of(buf), buf)  # out of order only if a caller replays oddly; still sorted
    assert [t.first_offset for t in psm.ongoing_transactions()] == [5, 10]
    assert psm.first_unstable_offset() == 5


def test_non_transactional_batch_during_txn_rejected_48(log: FakeLog, psm: ProducerStateManager) -> None:
    log.data(1, 0, 0, txn=True)
    with pytest.raises(InvalidTxnState) as e:
        log.data(1, 0, 1)
    assert e.value.code == 48
    assert psm.first_unstable_offset() == 0


def test_marker_checks_tv0(log: FakeLog, psm: ProducerStateManager) -> None:
    log.data(1, 5, 0, txn=True)
    with pytest.raises(InvalidProducerEpoch):
        log.marker(1, 4, commit=True, coordinator_epoch=2)
    log.marker(1, 5, commit=True, coordinator_epoch=2)  # TV0/1: same epoch is the normal case
    assert psm.first_unstable_offset() is None
    with pytest.raises(TransactionCoordinatorFenced) as e:
        log.marker(1, 5, commit=False, coordinator_epoch=1)
    assert e.value.code == 52
    # a marker with no open txn is written but completes nothing (no index entry, no LSO move)
    end = log.next_offset
    log.marker(1, 5, commit=False, coordinator_epoch=2)
    assert log.next_offset == end + 1 and log.txn_index == []
    # replication accepts an older coordinator epoch (only logged)
    log.append(
        build_control_batch(producer_id=1, producer_epoch=5, commit=True, coordinator_epoch=0, timestamp=1),
        REPLICATION,
    )
    assert psm.last_entry(1).coordinator_epoch == 0


def test_marker_checks_tv2(log: FakeLog, psm: ProducerStateManager) -> None:
    for i in range(3):
        log.data(1, 5, i, txn=True)
    with pytest.raises(InvalidProducerEpoch):  # TV2 markers must carry a bumped epoch
        log.marker(1, 5, commit=True, tv=TV_2)
    log.marker(1, 6, commit=True, tv=TV_2)
    entry = psm.last_entry(1)
    assert entry.producer_epoch == 6 and entry.is_empty and entry.current_txn_first_offset is None
    # KAFKA-19999: a retried marker (same epoch, txn already complete) is accepted and written
    end = log.next_offset
    log.marker(1, 6, commit=True, tv=TV_2)
    assert log.next_offset == end + 1
    with pytest.raises(InvalidProducerEpoch):
        log.marker(1, 5, commit=True, tv=TV_2)
    # the next transaction must start again at sequence 0
    with pytest.raises(OutOfOrderSequence):
        log.data(1, 6, 3, txn=True)
    log.data(1, 6, 0, txn=True)
    with pytest.raises(InvalidProducerEpoch):  # same epoch with the txn open: stale
        log.marker(1, 6, commit=False, tv=TV_2)
    log.marker(1, 7, commit=False, tv=TV_2)
    assert psm.first_unstable_offset() is None and len(log.txn_index) == 1


def test_marker_at_exhausted_epoch_tv2(log: FakeLog, psm: ProducerStateManager) -> None:
    log.data(1, 0x7FFF, 0, txn=True)
    log.marker(1, 0x7FFF, commit=True, tv=TV_2)  # cannot bump past Short.MAX
    assert psm.first_unstable_offset() is None


def test_coordinator_marker_needs_transaction_version(log: FakeLog) -> None:
    log.data(1, 0, 0, txn=True)
    with pytest.raises(ValueError):
        log.marker(1, 0, commit=True, tv=-1)


def test_transaction_verification_guard(log: FakeLog, psm: ProducerStateManager) -> None:
    def append_txn(epoch: int, seq: int, guard: object | None) -> None:
        buf = batch(1, epoch, seq, txn=True)
        info = info_of(buf)
        info.base_offset = log.next_offset
        pending = psm.validate_append([info], buf, CLIENT, verify_transactions=True, verification_guard=guard)
        log.next_offset = info.next_offset
        psm.apply_append(pending, log.next_offset)

    with pytest.raises(InvalidTxnState):  # no verification at all
        append_txn(0, 0, None)
    state = psm.maybe_create_verification_state_entry(1, 0, 0, supports_epoch_bump=True, now_ms=0)
    with pytest.raises(InvalidTxnState):  # a guard from another verification
        append_txn(0, 0, object())
    append_txn(0, 0, state.guard)
    assert psm.verification_state_entry(1) is None
    append_txn(0, 1, None)  # the transaction is ongoing: nothing to verify

    # the next TV2 transaction is verified (epoch 1) before the previous one's marker lands
    state = psm.maybe_create_verification_state_entry(1, 0, 1, supports_epoch_bump=True, now_ms=0)
    log.marker(1, 1, commit=True, tv=TV_2)
    assert psm.verification_state_entry(1) is state  # the marker did not spend the new guard
    with pytest.raises(InvalidProducerEpoch):  # a zombie gets the epoch error, not 48
        append_txn(0, 2, None)
    append_txn(1, 0, state.guard)
    assert psm.first_unstable_offset() == log.next_offset - 1


def test_marker_parsing_matches_records_module() -> None:
    for commit in (True, False):
        buf = build_control_batch(
            producer_id=9, producer_epoch=2, commit=commit, coordinator_epoch=77, timestamp=123
        )
        marker = read_end_txn_marker(buf, info_of(buf))
        assert marker is not None
        assert marker.control_type == control_type(buf) == (CONTROL_COMMIT if commit else CONTROL_ABORT)
        assert (marker.coordinator_epoch, marker.timestamp) == (77, 123)


# --- expiry, describe -----------------------------------------------------------------------


def test_remove_expired_producers(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path, producer_id_expiration_ms=1_000)
    log = FakeLog(psm)
    log.data(1, 0, 0, ts=100)
    log.data(2, 0, 0, ts=100, txn=True)
    log.data(3, 0, 0, ts=900)
    psm.maybe_create_verification_state_entry(4, 0, 0, False, now_ms=100)
    assert psm.remove_expired_producers(1_099) == []
    assert psm.remove_expired_producers(1_100) == [1]  # idle >= expiration
    assert psm.verification_state_entry(4) is None
    assert sorted(psm.producers) == [2, 3]  # 2 has an open transaction
    assert psm.has_late_transaction(100 + 900_000 + 300_000 + 1) and not psm.has_late_transaction(1_000)


def test_describe_producers(log: FakeLog, psm: ProducerStateManager) -> None:
    log.data(1, 2, 0, n=3, ts=55)
    log.data(2, 0, 0, txn=True, ts=66)
    log.marker(2, 0, commit=False, coordinator_epoch=4, ts=77)
    log.data(3, 0, 0, txn=True, ts=88)
    assert sorted(psm.describe_producers()) == [
        ProducerDescription(1, 2, 2, 55, -1, -1),
        ProducerDescription(2, 0, 0, 77, 4, -1),
        ProducerDescription(3, 0, 0, 88, -1, 5),
    ]


# --- snapshots and recovery -----------------------------------------------------------------


def _state(psm: ProducerStateManager) -> list[tuple]:
    return sorted(
        (
            e.producer_id,
            e.producer_epoch,
            e.coordinator_epoch,
            e.last_timestamp,
            e.current_txn_first_offset,
            e.last_batch,
        )
        for e in psm.producers.values()
    )


def _populate(log: FakeLog) -> None:
    log.data(1, 0, 0, n=3, ts=10)
    log.data(2, 1, 5, txn=True, ts=20)
    log.data(3, 0, 0, txn=True, ts=30)
    log.marker(3, 1, commit=True, coordinator_epoch=2, ts=40, tv=TV_2)  # entry left with no batches
    log.data(1, 0, 3, n=2, ts=50)
    log.data(4, 0, 0, txn=True, ts=60)
    log.data(2, 1, 6, txn=True, ts=70)


def test_snapshot_round_trip(tmp_path: Path) -> None:
    live = ProducerStateManager(tmp_path)
    log = FakeLog(live)
    _populate(log)
    path = live.take_snapshot()
    assert path == tmp_path / snapshot_file_name(log.next_offset)
    assert live.take_snapshot() is None  # nothing new since
    assert not list(tmp_path.glob("*.tmp"))

    loaded = ProducerStateManager(tmp_path)
    assert loaded.load(0, log.next_offset, now_ms=100) == log.next_offset
    assert _state(loaded) == _state(live)
    assert loaded.ongoing_transactions() == live.ongoing_transactions()
    assert loaded.first_unstable_offset() == live.first_unstable_offset() == 3
    assert sorted(loaded.describe_producers()) == sorted(live.describe_producers())
    # only the last batch survives a snapshot: still enough to continue and to dedupe it
    entry = loaded.last_entry(1)
    assert len(entry.batch_metadata) == 1
    assert loaded.find_duplicate_batch(info_of(batch(1, 0, 3, n=2))) is not None
    FakeLog(loaded, log.next_offset).data(1, 0, 5)


def test_recovery_replays_tail_after_snapshot(tmp_path: Path) -> None:
    live = ProducerStateManager(tmp_path)
    log = FakeLog(live)
    _populate(log)
    snap_offset = log.next_offset
    live.take_snapshot()
    # the tail: more data, an abort, a commit, an epoch bump, a new txn
    log.data(1, 0, 5, n=4, ts=80)
    log.marker(2, 1, commit=False, coordinator_epoch=2, ts=90)
    log.marker(4, 1, commit=True, coordinator_epoch=2, ts=95, tv=TV_2)
    log.data(5, 0, 0, txn=True, ts=99)
    log.data(1, 1, 0, ts=100)
    end = log.next_offset

    recovered = ProducerStateManager(tmp_path)
    start = recovered.load(0, end, now_ms=200)
    assert start == snap_offset
    rebuilt: list[tuple[CompletedTxn, int]] = []
    for info, buf in log.infos(start):
        recovered.replay_batch(info, buf, lambda t, lso: rebuilt.append((t, lso)))
    assert recovered.map_end_offset == end
    assert _state(recovered) == _state(live)
    assert recovered.ongoing_transactions() == live.ongoing_transactions()
    assert recovered.first_unstable_offset() == live.first_unstable_offset()
    assert [r for r in rebuilt if r[0].is_aborted] == log.txn_index
    assert recovered.take_snapshot() == tmp_path / snapshot_file_name(end)

    # without any snapshot the whole log is replayed, with the same result
    cold = ProducerStateManager(tmp_path / "none")
    assert cold.load(0, end, now_ms=200) == 0
    for info, buf in log.infos(0):
        cold.replay_batch(info, buf)
    assert _state(cold) == _state(live)


def test_load_skips_corrupt_snapshots_and_falls_back(tmp_path: Path) -> None:
    live = ProducerStateManager(tmp_path)
    log = FakeLog(live)
    log.data(1, 0, 0)
    first = log.next_offset
    live.take_snapshot()
    log.data(1, 0, 1)
    log.data(2, 0, 0)
    second = live.take_snapshot()
    log.data(2, 0, 1)
    third = live.take_snapshot()
    raw = bytearray(third.read_bytes())
    raw[20] ^= 0xFF  # flip a byte inside an entry: CRC mismatch
    third.write_bytes(raw)
    second.write_bytes(b"\x00\x02" + second.read_bytes()[2:])  # unknown version

    loaded = ProducerStateManager(tmp_path)
    assert loaded.load(0, log.next_offset, now_ms=0) == first
    assert not third.exists() and not second.exists()
    assert loaded.snapshot_offsets() == [first]
    assert sorted(loaded.producers) == [1] and loaded.last_entry(1).last_seq == 0

    # a truncated file is corrupt too; with nothing left, replay starts at the log start
    (tmp_path / snapshot_file_name(first)).write_bytes(b"\x00\x01\x00")
    again = ProducerStateManager(tmp_path)
    assert again.load(0, log.next_offset, now_ms=0) == 0
    assert again.snapshot_offsets() == [] and again.is_empty()


def test_load_bounds_and_snapshot_housekeeping(tmp_path: Path) -> None:
    live = ProducerStateManager(tmp_path)
    log = FakeLog(live)
    offsets = []
    for i in range(5):
        log.data(1, 0, i)
        live.take_snapshot()
        offsets.append(log.next_offset)
    assert offsets == [1, 2, 3, 4, 5]
    assert (live.oldest_snapshot_offset(), live.latest_snapshot_offset()) == (1, 5)
    (tmp_path / (snapshot_file_name(9) + ".tmp")).write_bytes(b"torn")

    # recovery after truncation to 3 with log start 1: 4 and 5 describe truncated data, 1 is at
    # the log start (its producers' batches are gone, Kafka lets them expire)
    loaded = ProducerStateManager(tmp_path)
    assert not (tmp_path / (snapshot_file_name(9) + ".tmp")).exists()
    assert loaded.load(1, 3, now_ms=0) == 3
    assert loaded.snapshot_offsets() == [2, 3]
    assert loaded.last_entry(1).last_seq == 2

    live = ProducerStateManager(tmp_path)
    log = FakeLog(live, 3)
    for i in range(3, 8):
        log.data(1, 0, i)
        live.take_snapshot(log.next_offset)
    assert live.snapshot_offsets() == [2, 3, 4, 5, 6, 7, 8]
    live.delete_snapshots_after(7)
    live.delete_snapshots_before(3)
    assert live.snapshot_offsets() == [3, 4, 5, 6, 7]
    live.prune_snapshots(log_start_offset=4, keep=2)
    assert live.snapshot_offsets() == [6, 7]
    assert sorted(p.name for p in tmp_path.iterdir()) == [snapshot_file_name(6), snapshot_file_name(7)]
    live.delete_snapshot(6)
    assert live.fetch_snapshot(6) is None and live.fetch_snapshot(7) is not None

    # remove_stray_snapshots keeps per-segment snapshots and the newest one past every segment
    for o in (10, 20, 25, 30):
        live.take_snapshot(o)
    live.remove_stray_snapshots([10, 20])
    assert live.snapshot_offsets() == [10, 20, 30]


def test_truncate_fully_and_start_at(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path)
    log = FakeLog(psm)
    log.data(1, 0, 0, txn=True)
    psm.take_snapshot()
    psm.truncate_fully_and_start_at(100)
    assert psm.is_empty() and psm.first_unstable_offset() is None
    assert psm.snapshot_offsets() == [] and not list(tmp_path.iterdir())
    assert psm.map_end_offset == 100
    assert psm.take_snapshot() == tmp_path / snapshot_file_name(100)


def test_truncate_and_reload_without_change_keeps_state(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path)
    log = FakeLog(psm)
    log.data(1, 0, 0)
    psm.truncate_and_reload(0, log.next_offset, now_ms=0)  # log end == map end: nothing to reload
    assert psm.last_entry(1) is not None


def test_expired_producers_not_loaded_from_snapshot(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path, producer_id_expiration_ms=1_000)
    log = FakeLog(psm)
    log.data(1, 0, 0, ts=0)
    log.data(2, 0, 0, ts=5_000)
    log.data(3, 0, 0, ts=0, txn=True)
    psm.take_snapshot()
    loaded = ProducerStateManager(tmp_path, producer_id_expiration_ms=1_000)
    loaded.load(0, log.next_offset, now_ms=5_500)
    assert sorted(loaded.producers) == [2, 3]


# --- properties -----------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    start=st.one_of(st.integers(0, 1000), st.integers(INT32_MAX - 40, INT32_MAX)),
    sizes=st.lists(st.integers(1, 7), min_size=1, max_size=12),
)
def test_retained_window_property(tmp_path_factory, start: int, sizes: list[int]) -> None:
    """Any of the last five batches is a duplicate with its own offsets; older ones are not."""
    psm = ProducerStateManager(tmp_path_factory.mktemp("p"))
    log = FakeLog(psm)
    seq = start
    sent = []
    for n in sizes:
        sent.append((seq, n, log.data(1, 0, seq, n)))
        seq = (seq + n) % (INT32_MAX + 1)
    for i, (s, n, offsets) in enumerate(sent):
        dup = psm.find_duplicate_batch(info_of(batch(1, 0, s, n)))
        if i >= len(sent) - 5:
            assert dup is not None and (dup.first_offset, dup.last_offset) == offsets
        else:
            assert dup is None
    log.data(1, 0, seq)  # and the next sequence, wrapped or not, is in order


# --- memory ---------------------------------------------------------------------------------


def _bytes_per_entry(n_batches: int, count: int = 20_000) -> float:
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    producers: dict[int, ProducerStateEntry] = {}
    base = 10**12
    for i in range(count):
        pid = base + i
        e = ProducerStateEntry(pid, 3, 7, 1_700_000_000_000 + i)
        for b in range(n_batches):
            off = 10**9 + i * 10 + b
            e.add_batch(3, 100_000 + b, off, 0, 1_700_000_000_000 + i)
        producers[pid] = e
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert len(producers) == count
    return (after - before) / count


def test_memory_per_idle_producer(capsys: pytest.CaptureFixture[str]) -> None:
    per = {n: _bytes_per_entry(n) for n in (0, 1, 5)}
    with capsys.disabled():
        print(
            "\nproducer state memory (tracemalloc, incl. dict slot and pid int): "
            + ", ".join(f"{n} batches retained: {v:.0f} B/producer" for n, v in per.items())
        )
    # tuples of ints cost ~1.2 kB with 5 batches, an empty collections.deque alone 760 B
    assert per[5] < 500
