"""Kafka's ProducerStateManager: every producer of one partition, the ongoing transactions and
the first unstable offset, snapshots by offset, expiry.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import structlog

from protocol.records import (
    NO_PRODUCER_ID,
    BatchInfo,
)
from storage.producer.append_info import OnCompletedTxn, PendingAppend, ProducerAppendInfo
from storage.producer.entry import ProducerStateEntry, VerificationStateEntry
from storage.producer.snapshot import (
    SNAPSHOT_SUFFIX,
    CorruptSnapshot,
    offset_from_file_name,
    read_snapshot,
    snapshot_file_name,
    write_snapshot,
)
from storage.producer.types import (
    DEFAULT_MAX_TRANSACTION_TIMEOUT_MS,
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    LATE_TRANSACTION_BUFFER_MS,
    TMP_SUFFIX,
    TV_UNKNOWN,
    AppendOrigin,
    BatchMetadata,
    CompletedTxn,
    InvalidProducerEpoch,
    InvalidTxnState,
    ProducerDescription,
    TxnMetadata,
)

log = structlog.get_logger(__name__)


# --- the manager ----------------------------------------------------------------------------


class ProducerStateManager:
    """Producer ids of one partition, its open transactions and its snapshot files.

    State only changes through ``update``/``complete_txn`` (after a successful write), the
    truncation/load calls, and expiry; validation never mutates it.
    """

    def __init__(
        self,
        log_dir: str | os.PathLike[str],
        *,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        max_transaction_timeout_ms: int = DEFAULT_MAX_TRANSACTION_TIMEOUT_MS,
    ) -> None:
        self.log_dir = Path(log_dir)
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.max_transaction_timeout_ms = max_transaction_timeout_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        self._verification: dict[int, VerificationStateEntry] = {}
        # first offset -> txn; insertion order is kept equal to offset order (new transactions
        # always start at the log end), so the first key is the first unstable offset.
        self._ongoing: dict[int, TxnMetadata] = {}
        self._oldest_txn_last_timestamp = -1
        self._last_map_offset = 0
        self._last_snap_offset = 0
        self._snapshots: dict[int, Path] = self._scan_snapshots()

    # ---- lookups

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    @property
    def producer_id_count(self) -> int:
        return len(self.producers)

    def is_empty(self) -> bool:
        return not self.producers

    @property
    def map_end_offset(self) -> int:
        """The offset up to which the state reflects the log (the next snapshot's name)."""
        return self._last_map_offset

    def update_map_end_offset(self, offset: int) -> None:
        self._last_map_offset = offset

    def find_duplicate_batch(self, batch: BatchInfo) -> BatchMetadata | None:
        """The retained batch a CLIENT retry duplicates; check before validating the append."""
        entry = self.producers.get(batch.producer_id)
        return entry.find_duplicate_batch(batch) if entry is not None else None

    def has_ongoing_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        """UnifiedLog.hasOngoingTransaction: whether a transactional batch needs no verification."""
        entry = self.producers.get(producer_id)
        return (
            entry is not None
            and entry.current_txn_first_offset is not None
            and entry.producer_epoch == producer_epoch
        )

    def first_unstable_offset(self) -> int | None:
        """First offset of the earliest open transaction; the LSO is this (else the high
        watermark), bounded below by the log start offset."""
        return next(iter(self._ongoing), None)

    first_undecided_offset = first_unstable_offset

    def ongoing_transactions(self) -> list[TxnMetadata]:
        return list(self._ongoing.values())

    def has_late_transaction(self, now_ms: int) -> bool:
        """A transaction open far longer than any coordinator allows: a hanging transaction."""
        ts = self._oldest_txn_last_timestamp
        return ts > 0 and now_ms - ts > self.max_transaction_timeout_ms + LATE_TRANSACTION_BUFFER_MS

    def describe_producers(self) -> list[ProducerDescription]:
        return [
            ProducerDescription(
                pid,
                e.producer_epoch,
                e.last_seq,
                e.last_timestamp,
                e.coordinator_epoch,
                -1 if e.current_txn_first_offset is None else e.current_txn_first_offset,
            )
            for pid, e in self.producers.items()
        ]

    # ---- KIP-890 verification state

    def maybe_create_verification_state_entry(
        self, producer_id: int, sequence: int, epoch: int, supports_epoch_bump: bool, now_ms: int
    ) -> VerificationStateEntry:
        entry = self._verification.get(producer_id)
        if entry is None:
            entry = self._verification[producer_id] = VerificationStateEntry(
                now_ms, sequence, epoch, supports_epoch_bump
            )
        entry.maybe_update_lowest_sequence_and_epoch(sequence, epoch)
        return entry

    def verification_state_entry(self, producer_id: int) -> VerificationStateEntry | None:
        return self._verification.get(producer_id)

    def clear_verification_state_entry(self, producer_id: int) -> None:
        self._verification.pop(producer_id, None)

    # ---- appends

    def prepare_update(self, producer_id: int, origin: AppendOrigin) -> ProducerAppendInfo:
        current = self.producers.get(producer_id)
        if current is None:
            current = ProducerStateEntry.empty(producer_id)
        return ProducerAppendInfo(producer_id, current, origin, self._verification.get(producer_id))

    def update(self, append_info: ProducerAppendInfo) -> None:
        """Commit a validated append; only after the batches are in the log."""
        producer_id = append_info.producer_id
        if producer_id == NO_PRODUCER_ID:
            raise ValueError(f"invalid producer id {producer_id} passed to update")
        updated = append_info.updated_entry
        current = self.producers.get(producer_id)
        if current is not None:
            current.update(updated)
        else:
            self.producers[producer_id] = updated
        for txn in append_info.started_transactions:
            self._add_ongoing(txn)
        self._update_oldest_txn_timestamp()

    def _add_ongoing(self, txn: TxnMetadata) -> None:
        ongoing = self._ongoing
        if ongoing and txn.first_offset <= next(reversed(ongoing)):
            ongoing[txn.first_offset] = txn
            self._ongoing = dict(sorted(ongoing.items()))
        else:
            ongoing[txn.first_offset] = txn

    def last_stable_offset(self, completed_txn: CompletedTxn) -> int:
        """The LSO stored in the ``.txnindex`` entry; call before ``complete_txn``."""
        for txn in self._ongoing.values():
            if txn.producer_id != completed_txn.producer_id:
                return txn.first_offset
        return completed_txn.last_offset + 1

    def complete_txn(self, completed_txn: CompletedTxn) -> None:
        if self._ongoing.pop(completed_txn.first_offset, None) is None:
            raise ValueError(f"attempted to complete transaction {completed_txn} which was not started")
        self._update_oldest_txn_timestamp()

    def _update_oldest_txn_timestamp(self) -> None:
        first = next(iter(self._ongoing.values()), None)
        if first is None:
            self._oldest_txn_last_timestamp = -1
        else:
            entry = self.producers.get(first.producer_id)
            self._oldest_txn_last_timestamp = entry.last_timestamp if entry is not None else -1

    def validate_append(
        self,
        batches: Iterable[BatchInfo],
        buf: bytes | bytearray | memoryview | None,
        origin: AppendOrigin,
        *,
        transaction_version: int = TV_UNKNOWN,
        verify_transactions: bool = False,
        verification_guard: object | None = None,
        first_offset: int | None = None,
        log_append_time_ms: int | None = None,
    ) -> PendingAppend:
        """UnifiedLog.analyzeAndValidateProducerState (Kafka 4.3).

        ``buf`` holds the batches at their ``position`` (needed for markers). Offsets are the
        batches' ``base_offset`` unless ``first_offset`` says where the log will put the first
        one (the rest follow contiguously); ``log_append_time_ms`` is the time the log will
        stamp, if it will. Raises ProducerStateError to reject the whole append.

        ``verify_transactions`` is transaction.partition.verification.enable (KIP-890): then a
        transactional CLIENT/COORDINATOR data batch of a producer with no ongoing transaction
        must come with the ``verification_guard`` of its ``VerificationStateEntry`` (the one the
        broker created before asking the coordinator), else INVALID_TXN_STATE.
        """
        pending = PendingAppend()
        infos = pending.append_infos
        next_offset = first_offset
        for batch in batches:
            base = batch.base_offset
            if next_offset is not None:
                base = next_offset
                next_offset += batch.last_offset_delta + 1
            producer_id = batch.producer_id
            if producer_id < 0:
                continue
            if origin is AppendOrigin.CLIENT:
                entry = self.producers.get(producer_id)
                if entry is not None:
                    duplicate = entry.find_duplicate_batch(batch)
                    if duplicate is not None:
                        pending.duplicate = duplicate
                        return pending
            if (
                origin is not AppendOrigin.REPLICATION
                and batch.is_transactional
                and not self.has_ongoing_transaction(producer_id, batch.producer_epoch)
            ):
                # Fence a zombie before blaming verification: its answer must be the epoch error.
                entry = self.producers.get(producer_id)
                if entry is not None and batch.producer_epoch < entry.producer_epoch:
                    raise InvalidProducerEpoch(
                        f"Epoch of producer {producer_id} is {batch.producer_epoch}, "
                        f"which is smaller than the last seen epoch {entry.producer_epoch}"
                    )
                if verify_transactions and not batch.is_control:
                    state = self._verification.get(producer_id)
                    if verification_guard is None or state is None or state.guard is not verification_guard:
                        raise InvalidTxnState("Record was not part of an ongoing transaction")
            info = infos.get(producer_id)
            if info is None:
                info = infos[producer_id] = self.prepare_update(producer_id, origin)
            completed = info.append(batch, buf, base, transaction_version, log_append_time_ms)
            if batch.is_transactional:
                # The transaction now has a first offset, or just ended: the guard is spent. A TV2
                # marker at the verified epoch belongs to the previous transaction, so a guard
                # for the next one survives it.
                state = self._verification.get(producer_id)
                if not (
                    state is not None
                    and state.supports_epoch_bump
                    and batch.is_control
                    and batch.producer_epoch == state.epoch
                ):
                    self._verification.pop(producer_id, None)
            if completed is not None:
                pending.completed_txns.append(completed)
        return pending

    def apply_append(
        self, pending: PendingAppend, next_offset: int, on_completed_txn: OnCompletedTxn | None = None
    ) -> None:
        """Commit ``validate_append``'s result after the write; ``next_offset`` is the new log end.

        ``on_completed_txn(txn, last_stable_offset)`` runs before each transaction is completed:
        the log appends a ``.txnindex`` entry there when ``txn.is_aborted``.
        """
        for info in pending.append_infos.values():
            self.update(info)
        for txn in pending.completed_txns:
            if on_completed_txn is not None:
                on_completed_txn(txn, self.last_stable_offset(txn))
            self.complete_txn(txn)
        self._last_map_offset = next_offset

    def replay_batch(
        self,
        batch: BatchInfo,
        buf: bytes | bytearray | memoryview | None,
        on_completed_txn: OnCompletedTxn | None = None,
    ) -> CompletedTxn | None:
        """Rebuild state from a batch already in the log (recovery, follower): no sequence
        checks, markers included. ``on_completed_txn`` lets segment recovery rebuild the
        ``.txnindex`` (LogSegment.updateProducerState)."""
        completed = None
        if batch.producer_id >= 0:
            info = self.prepare_update(batch.producer_id, AppendOrigin.REPLICATION)
            completed = info.append(batch, buf)
            self.update(info)
            if completed is not None:
                if on_completed_txn is not None:
                    on_completed_txn(completed, self.last_stable_offset(completed))
                self.complete_txn(completed)
        self._last_map_offset = batch.next_offset
        return completed

    # ---- expiry

    def _is_expired(self, now_ms: int, entry: ProducerStateEntry) -> bool:
        return (
            entry.current_txn_first_offset is None
            and now_ms - entry.last_timestamp >= self.producer_id_expiration_ms
        )

    def remove_expired_producers(self, now_ms: int) -> list[int]:
        """Drop producers idle for producer.id.expiration.ms with no open txn, and stale
        verification entries. Returns the expired producer ids."""
        expired = [pid for pid, entry in self.producers.items() if self._is_expired(now_ms, entry)]
        for pid in expired:
            del self.producers[pid]
        stale = [
            pid
            for pid, v in self._verification.items()
            if now_ms - v.timestamp >= self.producer_id_expiration_ms
        ]
        for pid in stale:
            del self._verification[pid]
        return expired

    # ---- truncation and recovery

    def load(self, log_start_offset: int, log_end_offset: int, now_ms: int) -> int:
        """Recovery: load the newest usable snapshot in (log start, log end] and return the offset
        the log must replay from (``replay_batch``) up to its end, then ``take_snapshot``."""
        self.truncate_and_reload(log_start_offset, log_end_offset, now_ms)
        return self._last_map_offset

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int, now_ms: int) -> None:
        """Kafka's truncateAndReload; after it, replay the log from ``map_end_offset``.

        Snapshots above the log end describe truncated data; those at or below the log start
        only know producers whose batches are gone, which Kafka lets expire.
        """
        for offset in sorted(self._snapshots):
            if offset > log_end_offset or offset <= log_start_offset:
                self._remove_and_delete_snapshot(offset)
        if log_end_offset != self._last_map_offset:
            self.producers.clear()
            self._ongoing.clear()
            self._update_oldest_txn_timestamp()
            self._load_from_snapshot(log_start_offset, now_ms)
        else:
            self.on_log_start_offset_incremented(log_start_offset)

    def _load_from_snapshot(self, log_start_offset: int, now_ms: int) -> None:
        while True:
            latest = self.latest_snapshot_offset()
            if latest is None:
                self._last_snap_offset = log_start_offset
                self._last_map_offset = log_start_offset
                return
            path = self._snapshots[latest]
            try:
                entries = read_snapshot(path)
            except CorruptSnapshot as e:
                log.warning("corrupt_producer_snapshot", path=str(path), error=str(e))
                self._remove_and_delete_snapshot(latest)
                continue
            except FileNotFoundError:
                del self._snapshots[latest]
                continue
            loaded = [e for e in entries if not self._is_expired(now_ms, e)]
            for entry in loaded:
                self.producers[entry.producer_id] = entry
            open_txns = sorted(
                (e.current_txn_first_offset, e.producer_id)
                for e in loaded
                if e.current_txn_first_offset is not None
            )
            for first, pid in open_txns:
                self._ongoing[first] = TxnMetadata(pid, first)
            self._last_snap_offset = latest
            self._last_map_offset = latest
            self._update_oldest_txn_timestamp()
            log.info("loaded_producer_snapshot", path=str(path), producers=len(loaded))
            return

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        if self._last_map_offset < log_start_offset:
            self._last_map_offset = log_start_offset
        latest = self.latest_snapshot_offset()
        self._last_snap_offset = log_start_offset if latest is None else latest

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Forget everything (delete-all truncation, replica reset): the log restarts at ``offset``."""
        self.producers.clear()
        self._ongoing.clear()
        for snap in list(self._snapshots):
            self._remove_and_delete_snapshot(snap)
        self._last_snap_offset = 0
        self._last_map_offset = offset
        self._update_oldest_txn_timestamp()

    def truncate_fully_and_reload_snapshots(self) -> None:
        self.truncate_fully_and_start_at(0)
        self._snapshots = self._scan_snapshots()

    # ---- snapshot files

    def _scan_snapshots(self) -> dict[int, Path]:
        """Index ``*.snapshot`` files; a leftover ``*.snapshot.tmp`` is a write a crash cut short."""
        found: dict[int, Path] = {}
        if not self.log_dir.is_dir():
            return found
        for path in self.log_dir.iterdir():
            name = path.name
            if name.endswith(SNAPSHOT_SUFFIX + TMP_SUFFIX):
                path.unlink(missing_ok=True)
            elif name.endswith(SNAPSHOT_SUFFIX) and path.is_file():
                try:
                    found[offset_from_file_name(name)] = path
                except ValueError:
                    log.warning("unparsable_snapshot_name", path=str(path))
        return dict(sorted(found.items()))

    def take_snapshot(self, next_offset: int | None = None, *, sync: bool = True) -> Path | None:
        """Write ``<map end offset>.snapshot`` unless one is already there; returns its path.

        On roll Kafka calls it with the new segment's base offset (the state then matches the
        segment start); at clean shutdown and after recovery, with the log end.
        """
        if next_offset is not None:
            self._last_map_offset = next_offset
        offset = self._last_map_offset
        if offset <= self._last_snap_offset:
            return None
        path = self.log_dir / snapshot_file_name(offset)
        write_snapshot(path, self.producers.values(), sync=sync)
        newest = self.latest_snapshot_offset()
        self._snapshots[offset] = path
        if newest is not None and offset < newest:
            self._snapshots = dict(sorted(self._snapshots.items()))
        self._last_snap_offset = offset
        log.info("wrote_producer_snapshot", offset=offset, producers=len(self.producers))
        return path

    def snapshot_offsets(self) -> list[int]:
        return list(self._snapshots)

    def latest_snapshot_offset(self) -> int | None:
        return next(reversed(self._snapshots), None)

    def oldest_snapshot_offset(self) -> int | None:
        return next(iter(self._snapshots), None)

    def fetch_snapshot(self, offset: int) -> Path | None:
        return self._snapshots.get(offset)

    def _remove_and_delete_snapshot(self, offset: int) -> None:
        path = self._snapshots.pop(offset, None)
        if path is not None:
            path.unlink(missing_ok=True)

    def delete_snapshot(self, offset: int) -> None:
        """When the segment with this base offset is deleted (its snapshot goes with it)."""
        self._remove_and_delete_snapshot(offset)

    def delete_snapshots_before(self, offset: int) -> None:
        for snap in [o for o in self._snapshots if o < offset]:
            self._remove_and_delete_snapshot(snap)

    def delete_snapshots_after(self, offset: int) -> None:
        for snap in [o for o in self._snapshots if o > offset]:
            self._remove_and_delete_snapshot(snap)

    def prune_snapshots(self, log_start_offset: int, keep: int = 2) -> None:
        """Bound the files: the newest ``keep`` above the log start survive.

        The one at/below the log start is not kept: ``truncate_and_reload`` would delete it
        before loading anyway (Kafka does the same).
        """
        usable = [o for o in self._snapshots if o > log_start_offset]
        doomed = [o for o in self._snapshots if o <= log_start_offset] + usable[: max(len(usable) - keep, 0)]
        for snap in doomed:
            self._remove_and_delete_snapshot(snap)

    def remove_stray_snapshots(self, segment_base_offsets: Iterable[int]) -> None:
        """At load: drop snapshots matching no segment, except the newest one above every
        segment base (the clean-shutdown snapshot at the log end)."""
        bases = set(segment_base_offsets)
        snapshots = self._scan_snapshots()
        latest_stray: int | None = None
        for offset in list(snapshots):
            if offset not in bases:
                if latest_stray is not None:
                    snapshots.pop(latest_stray).unlink(missing_ok=True)
                latest_stray = offset
        if latest_stray is not None and bases and latest_stray < max(bases):
            snapshots.pop(latest_stray).unlink(missing_ok=True)
        self._snapshots = snapshots

    def update_parent_dir(self, parent_dir: str | os.PathLike[str]) -> None:
        self.log_dir = Path(parent_dir)
        self._snapshots = {o: self.log_dir / p.name for o, p in self._snapshots.items()}
