"""Per-partition producer state: idempotence, transactions, LSO bookkeeping and ``.snapshot`` files.

A port of Kafka 4.x ``ProducerStateManager``, ``ProducerAppendInfo``, ``ProducerStateEntry``,
``BatchMetadata``, ``TxnMetadata``, ``CompletedTxn`` and ``VerificationStateEntry``
(``storage/src/main/java/org/apache/kafka/storage/internals/log/``), kept close to the Java so
that behaviour can be checked line by line against it.

It is sans-IO except for the snapshot files: no sockets, no asyncio, no clocks (callers pass
``now_ms``). The partition log drives it in Kafka's order:

1. validate: ``prepare_update`` + ``ProducerAppendInfo.append*`` (or ``validate_append``) on the
   batches to be written, after offsets are assigned and before anything is written; a
   ``ProducerStateError`` rejects the whole append, a duplicate answers with the old offsets;
2. write the batches to the segment;
3. commit: ``update`` each append info, then for each completed transaction compute
   ``last_stable_offset`` (for the ``.txnindex`` entry of an ABORT) and ``complete_txn``, then
   ``update_map_end_offset(next offset)`` (``apply_append`` does all of step 3).

``LogProducerState`` is the log's side of it: ``storage.log.PartitionLog`` owns one and calls it
at these points (plus snapshots on roll/close, rebuild on truncation and at open), as Kafka's
UnifiedLog owns its ProducerStateManager.

Deliberate differences from Kafka:
- completed transactions are dropped at once instead of waiting in ``unreplicatedTxns`` for the
  high watermark to pass their marker: with one replica the high watermark is the log end
  right after the append, so ``first_unstable_offset`` is the first *undecided* offset;
- the retained batch metadata is packed into one ``bytes`` per producer (see ProducerStateEntry);
- snapshot files are written to a temporary name, fsynced and renamed, so a crash never
  leaves a torn ``.snapshot`` (Kafka writes in place and relies on the CRC).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import structlog

from protocol.errors import ErrorCode, KafkaError
from protocol.record_codec import decode_records
from protocol.records import (
    COMPRESSION_MASK,
    CONTROL_ABORT,
    CONTROL_COMMIT,
    CONTROL_KEY,
    CONTROL_VALUE,
    HEADER_SIZE,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    TIMESTAMP_TYPE_MASK,
    BatchInfo,
    InvalidBatch,
    increment_sequence,
    read_header,
)
from storage.log.txn_index import AbortedTxn
from storage.snapshot_format import (
    SNAPSHOT_SUFFIX,
    CorruptSnapshot,
    SnapshotRow,
    decode_snapshot,
    encode_snapshot,
    offset_from_file_name,
    snapshot_file_name,
)

if TYPE_CHECKING:
    from storage.log.partition_log import PartitionLog

log = structlog.get_logger(__name__)

INT32_MAX = 0x7FFFFFFF
INT16_MAX = 0x7FFF
NO_TIMESTAMP = -1
NUM_BATCHES_TO_RETAIN = 5  # ProducerStateEntry.NUM_BATCHES_TO_RETAIN
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000  # producer.id.expiration.ms
DEFAULT_MAX_TRANSACTION_TIMEOUT_MS = 900_000  # transaction.max.timeout.ms
LATE_TRANSACTION_BUFFER_MS = 5 * 60 * 1000
TMP_SUFFIX = ".tmp"

# TransactionVersion feature levels. TV_UNKNOWN is what a follower/recovery replay passes: the
# version is not stored in the log, and the leader already applied the strict TV2 check.
TV_UNKNOWN = -1
TV_0 = 0
TV_1 = 1
TV_2 = 2


class AppendOrigin(IntEnum):
    """How much validation an append gets (Kafka's AppendOrigin)."""

    REPLICATION = 0  # follower fetch and log recovery: trusted, epoch regressions only logged
    COORDINATOR = 1  # markers and coordinator writes: epoch checks, no sequence checks
    CLIENT = 2  # Produce: full validation


# --- errors ---------------------------------------------------------------------------------


class ProducerStateError(KafkaError):
    """An append the partition must refuse."""


class OutOfOrderSequence(ProducerStateError):
    default_code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidProducerEpoch(ProducerStateError):
    default_code = ErrorCode.INVALID_PRODUCER_EPOCH  # the broker maps it per request version


class InvalidTxnState(ProducerStateError):
    default_code = ErrorCode.INVALID_TXN_STATE


class TransactionCoordinatorFenced(ProducerStateError):
    default_code = ErrorCode.TRANSACTION_COORDINATOR_FENCED


# --- value types ----------------------------------------------------------------------------


def decrement_sequence(sequence: int, decrement: int) -> int:
    """DefaultRecordBatch.decrementSequence: the inverse of increment_sequence, with int32 wrap."""
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


class BatchMetadata(NamedTuple):
    """One retained batch of a producer. A plain tuple in memory (no per-instance dict)."""

    last_seq: int
    last_offset: int
    offset_delta: int  # last_offset - first_offset
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


class TxnMetadata(NamedTuple):
    producer_id: int
    first_offset: int


class CompletedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # offset of the COMMIT/ABORT marker
    is_aborted: bool


class ProducerDescription(NamedTuple):
    """One DescribeProducers ``ActiveProducers`` row (-1 = no open transaction)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int


class EndTxnMarker(NamedTuple):
    control_type: int  # CONTROL_ABORT / CONTROL_COMMIT
    coordinator_epoch: int
    timestamp: int  # the marker record's timestamp


# --- entries --------------------------------------------------------------------------------

# lastSeq, lastOffset, offsetDelta, timestamp: one retained batch, packed. 5 batches as tuples of
# Python ints cost ~900 B per producer; packed they cost ~150 B (measured in the tests).
_BATCH = struct.Struct("=iqiq")
_BATCH_SIZE = _BATCH.size
_RETAINED_BYTES = NUM_BATCHES_TO_RETAIN * _BATCH_SIZE


class ProducerStateEntry:
    """Kafka's ProducerStateEntry.

    The retained batches (oldest first, at most NUM_BATCHES_TO_RETAIN) live packed in one
    ``bytes`` object: idle producers are kept for a day (producer.id.expiration.ms) and every
    Java producer is idempotent by default, so this is the bulk of a busy broker's producer state.
    """

    __slots__ = (
        "producer_id",
        "producer_epoch",
        "coordinator_epoch",
        "last_timestamp",
        "current_txn_first_offset",
        "_batches",
    )

    def __init__(
        self,
        producer_id: int,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        coordinator_epoch: int = -1,
        last_timestamp: int = NO_TIMESTAMP,
        current_txn_first_offset: int | None = None,
        batch_metadata: Iterable[BatchMetadata] = (),
    ) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.coordinator_epoch = coordinator_epoch
        self.last_timestamp = last_timestamp
        self.current_txn_first_offset = current_txn_first_offset
        self._batches = (
            b"".join([_BATCH.pack(*b) for b in batch_metadata])[-_RETAINED_BYTES:] if batch_metadata else b""
        )

    @classmethod
    def empty(cls, producer_id: int) -> ProducerStateEntry:
        return cls(producer_id)

    @property
    def batch_metadata(self) -> list[BatchMetadata]:
        return [BatchMetadata._make(t) for t in _BATCH.iter_unpack(self._batches)]

    @property
    def last_batch(self) -> BatchMetadata | None:
        b = self._batches
        return BatchMetadata._make(_BATCH.unpack_from(b, len(b) - _BATCH_SIZE)) if b else None

    @property
    def is_empty(self) -> bool:
        return not self._batches

    @property
    def first_seq(self) -> int:
        b = self._batches
        return BatchMetadata._make(_BATCH.unpack_from(b, 0)).first_seq if b else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        b = self._batches
        return _BATCH.unpack_from(b, len(b) - _BATCH_SIZE)[0] if b else NO_SEQUENCE

    @property
    def first_data_offset(self) -> int:
        b = self._batches
        return BatchMetadata._make(_BATCH.unpack_from(b, 0)).first_offset if b else -1

    @property
    def last_data_offset(self) -> int:
        b = self._batches
        return _BATCH.unpack_from(b, len(b) - _BATCH_SIZE)[1] if b else -1

    @property
    def last_offset_delta(self) -> int:
        b = self._batches
        return _BATCH.unpack_from(b, len(b) - _BATCH_SIZE)[2] if b else 0

    def without_batches(self) -> ProducerStateEntry:
        """withProducerIdAndBatchMetadata(pid, empty): the scratch copy an append validates against."""
        return ProducerStateEntry(
            self.producer_id,
            self.producer_epoch,
            self.coordinator_epoch,
            self.last_timestamp,
            self.current_txn_first_offset,
        )

    def add_batch(
        self, producer_epoch: int, last_seq: int, last_offset: int, offset_delta: int, timestamp: int
    ) -> None:
        self.maybe_update_producer_epoch(producer_epoch)
        b = self._batches
        if len(b) >= _RETAINED_BYTES:
            b = b[_BATCH_SIZE:]
        self._batches = b + _BATCH.pack(last_seq, last_offset, offset_delta, timestamp)
        self.last_timestamp = timestamp

    def maybe_update_producer_epoch(self, producer_epoch: int) -> bool:
        """A new epoch restarts sequences, so the retained batches no longer mean anything."""
        if self.producer_epoch != producer_epoch:
            self._batches = b""
            self.producer_epoch = producer_epoch
            return True
        return False

    def update(self, next_entry: ProducerStateEntry) -> None:
        """Merge a validated append's scratch entry into this committed one."""
        self.maybe_update_producer_epoch(next_entry.producer_epoch)
        if next_entry._batches:
            self._batches = (self._batches + next_entry._batches)[-_RETAINED_BYTES:]
        self.coordinator_epoch = next_entry.coordinator_epoch
        self.current_txn_first_offset = next_entry.current_txn_first_offset
        self.last_timestamp = next_entry.last_timestamp

    def update_from_marker(self, producer_epoch: int, coordinator_epoch: int, last_timestamp: int) -> None:
        """Java's update(short, int, long): a marker ends the txn and adopts its epoch."""
        self.maybe_update_producer_epoch(producer_epoch)
        self.coordinator_epoch = coordinator_epoch
        self.current_txn_first_offset = None
        self.last_timestamp = last_timestamp

    def find_duplicate_batch(self, batch: BatchInfo) -> BatchMetadata | None:
        if batch.producer_epoch != self.producer_epoch:
            return None
        return self.batch_with_sequence_range(batch.base_sequence, batch.last_sequence)

    def batch_with_sequence_range(self, first_seq: int, last_seq: int) -> BatchMetadata | None:
        for t in _BATCH.iter_unpack(self._batches):
            if t[0] == last_seq and decrement_sequence(t[0], t[2]) == first_seq:
                return BatchMetadata._make(t)
        return None

    def __repr__(self) -> str:
        return (
            f"ProducerStateEntry(producer_id={self.producer_id}, producer_epoch={self.producer_epoch}, "
            f"current_txn_first_offset={self.current_txn_first_offset}, coordinator_epoch={self.coordinator_epoch}, "
            f"last_timestamp={self.last_timestamp}, batch_metadata={self.batch_metadata})"
        )


class VerificationStateEntry:
    """KIP-890 verification state of one producer id (Kafka's VerificationStateEntry).

    ``guard`` is the unique VerificationGuard token: the leader keeps it from the moment it asks
    the coordinator until the first transactional append, so an ABORT marker written in between
    cannot let a stale verification through (the ABA case).
    """

    __slots__ = ("timestamp", "guard", "lowest_sequence", "epoch", "supports_epoch_bump")

    def __init__(self, timestamp: int, sequence: int, epoch: int, supports_epoch_bump: bool) -> None:
        self.timestamp = timestamp
        self.guard = object()
        self.lowest_sequence = sequence
        self.epoch = epoch
        self.supports_epoch_bump = supports_epoch_bump

    def maybe_update_lowest_sequence_and_epoch(self, incoming_sequence: int, incoming_epoch: int) -> None:
        """Block sequences above the lowest one still awaiting verification (no OOS loop)."""
        if incoming_epoch == self.epoch and incoming_sequence < self.lowest_sequence:
            self.lowest_sequence = incoming_sequence
        if incoming_epoch > self.epoch:
            self.epoch = incoming_epoch
            self.lowest_sequence = incoming_sequence


# --- validation of one producer's batches ---------------------------------------------------


def _read_varint(mv: memoryview, pos: int, end: int) -> tuple[int, int]:
    """A zigzag varint/varlong of the record format."""
    raw = 0
    shift = 0
    while True:
        if pos >= end or shift > 63:
            raise InvalidBatch("malformed varint in control record")
        b = mv[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7


def read_end_txn_marker(buf: bytes | bytearray | memoryview, batch: BatchInfo) -> EndTxnMarker | None:
    """Type, coordinator epoch and timestamp of a COMMIT/ABORT batch; None for an empty one.

    An empty control batch is one whose transaction the cleaner removed entirely: Kafka skips it.
    Markers are written uncompressed, so the common case is parsed straight from the bytes.
    """
    if batch.records_count == 0:
        return None
    mv = memoryview(buf)
    start = batch.position
    end = start + batch.size
    if batch.attributes & COMPRESSION_MASK:
        rec = next(iter(decode_records(mv[start:end])), None)
        if rec is None:
            return None
        key, value, timestamp = rec.key, rec.value, rec.timestamp
    else:
        pos = start + HEADER_SIZE
        _length, pos = _read_varint(mv, pos, end)
        pos += 1  # record attributes
        ts_delta, pos = _read_varint(mv, pos, end)
        _offset_delta, pos = _read_varint(mv, pos, end)
        key_len, pos = _read_varint(mv, pos, end)
        key = bytes(mv[pos : pos + max(key_len, 0)]) if key_len >= 0 else None
        pos += max(key_len, 0)
        value_len, pos = _read_varint(mv, pos, end)
        value = bytes(mv[pos : pos + max(value_len, 0)]) if value_len >= 0 else None
        if pos + max(value_len, 0) > end:
            raise InvalidBatch("control record runs past the end of its batch")
        timestamp = (
            batch.max_timestamp if batch.attributes & TIMESTAMP_TYPE_MASK else batch.base_timestamp + ts_delta
        )
    if key is None or len(key) < 4:
        raise InvalidBatch("control record key shorter than 4 bytes")
    key_version, control_type = CONTROL_KEY.unpack_from(key, 0)
    if key_version < 0:
        raise InvalidBatch(f"invalid control record key version {key_version}")
    if control_type not in (CONTROL_ABORT, CONTROL_COMMIT):
        raise InvalidBatch(f"invalid control record type {control_type} for an end transaction marker")
    if value is None or len(value) < CONTROL_VALUE.size:
        raise InvalidBatch("end transaction marker value shorter than 6 bytes")
    value_version, coordinator_epoch = CONTROL_VALUE.unpack_from(value, 0)
    if value_version < 0:
        raise InvalidBatch(f"invalid version {value_version} for an end transaction marker")
    return EndTxnMarker(control_type, coordinator_epoch, timestamp)


class ProducerAppendInfo:
    """Validates one producer's batches of one append against its state, without touching it.

    ``updated_entry`` starts as the current entry minus its batches and accumulates the append;
    the manager merges it only once the log write succeeded (``ProducerStateManager.update``).
    """

    __slots__ = (
        "producer_id",
        "current_entry",
        "origin",
        "verification_state",
        "updated_entry",
        "started_transactions",
    )

    def __init__(
        self,
        producer_id: int,
        current_entry: ProducerStateEntry,
        origin: AppendOrigin,
        verification_state: VerificationStateEntry | None = None,
    ) -> None:
        self.producer_id = producer_id
        self.current_entry = current_entry
        self.origin = origin
        self.verification_state = verification_state
        self.updated_entry = current_entry.without_batches()
        self.started_transactions: list[TxnMetadata] = []

    # Kafka: maybeValidateDataBatch / checkProducerEpoch / checkSequence

    def _check_producer_epoch(self, producer_epoch: int, offset: int, transaction_version: int) -> None:
        current = self.updated_entry.producer_epoch
        # TV2 markers carry the coordinator's bumped epoch, so the same epoch means a stale marker.
        strict = transaction_version >= TV_2
        if (producer_epoch > current) if strict else (producer_epoch >= current):
            return
        message = (
            f"Epoch of producer {self.producer_id} at offset {offset} is {producer_epoch}, which is "
            f"{'<=' if strict else '<'} the last seen epoch {current} (TV{transaction_version})"
        )
        if (
            strict
            and producer_epoch == current
            and (self.updated_entry.current_txn_first_offset is None or producer_epoch == INT16_MAX)
        ):
            # KAFKA-19999: the coordinator re-sends a marker it already wrote (lost response,
            # coordinator failover). Kafka 4.3/4.4 accept and write it again rather than fence
            # the retry, which would leave the transaction stuck in PREPARE_*. At Short.MAX the
            # coordinator cannot bump any more, so the same epoch is all it can send.
            log.info("idempotent_txn_marker_retry", producer_id=self.producer_id, epoch=producer_epoch)
            return
        if self.origin is AppendOrigin.REPLICATION:
            log.warning("producer_epoch_regression", detail=message)
            return
        raise InvalidProducerEpoch(message)

    def _check_sequence(self, producer_epoch: int, append_first_seq: int, offset: int) -> None:
        current = self.current_entry
        updated = self.updated_entry
        verification = self.verification_state
        if (
            verification is not None
            and verification.supports_epoch_bump
            and append_first_seq != 0
            and current.is_empty
        ):
            raise OutOfOrderSequence(
                f"Invalid sequence number for producer {self.producer_id} at offset {offset}: {append_first_seq} "
                "(incoming seq. number). Expected sequence 0 for transactions v2 idempotent producer with no existing state."
            )
        if verification is not None and append_first_seq > verification.lowest_sequence:
            raise OutOfOrderSequence(
                f"Out of order sequence number for producer {self.producer_id} at offset {offset}: {append_first_seq} "
                f"(incoming seq. number), {verification.lowest_sequence} (earliest seen sequence)"
            )
        if producer_epoch != updated.producer_epoch:
            # A bumped epoch (or KIP-360 reset) starts again at 0; a producer the broker has no
            # epoch for (new, expired, or deleted by retention) may continue from anywhere.
            if append_first_seq != 0 and updated.producer_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequence(
                    f"Invalid sequence number for new epoch of producer {self.producer_id} at offset {offset}: "
                    f"{producer_epoch} (request epoch), {append_first_seq} (seq. number), "
                    f"{updated.producer_epoch} (current producer epoch)"
                )
            return
        if not updated.is_empty:
            current_last_seq = updated.last_seq
        elif producer_epoch == current.producer_epoch:
            current_last_seq = current.last_seq
        else:
            current_last_seq = NO_SEQUENCE
        if not (
            current.producer_epoch == NO_PRODUCER_EPOCH or _in_sequence(current_last_seq, append_first_seq)
        ):
            raise OutOfOrderSequence(
                f"Out of order sequence number for producer {self.producer_id} at offset {offset}: "
                f"{append_first_seq} (incoming seq. number), {current_last_seq} (current end sequence number)"
            )

    # Kafka: append / appendDataBatch / appendEndTxnMarker

    def append(
        self,
        batch: BatchInfo,
        buf: bytes | bytearray | memoryview | None = None,
        first_offset: int | None = None,
        transaction_version: int = TV_UNKNOWN,
        max_timestamp: int | None = None,
    ) -> CompletedTxn | None:
        """Any batch with this producer id; ``buf`` (holding the batch at ``batch.position``) is
        needed only for control batches. ``first_offset`` overrides ``batch.base_offset`` when the
        assigned offset has not been written into the BatchInfo; ``max_timestamp`` overrides the
        batch's when it will be stamped with LogAppendTime."""
        base = batch.base_offset if first_offset is None else first_offset
        if batch.is_control:
            if buf is None:
                raise ValueError("a control batch needs its bytes to read the marker")
            marker = read_end_txn_marker(buf, batch)
            if marker is None:
                return None
            return self.append_end_txn_marker(
                marker.control_type,
                batch.producer_epoch,
                base,
                marker.coordinator_epoch,
                marker.timestamp,
                transaction_version=transaction_version,
            )
        self.append_data_batch(batch, base, max_timestamp)
        return None

    def append_data_batch(
        self, batch: BatchInfo, first_offset: int | None = None, max_timestamp: int | None = None
    ) -> None:
        first = batch.base_offset if first_offset is None else first_offset
        self.append_data(
            batch.producer_epoch,
            batch.base_sequence,
            batch.last_sequence,
            batch.max_timestamp if max_timestamp is None else max_timestamp,
            first,
            first + batch.last_offset_delta,
            batch.is_transactional,
        )

    def append_data(
        self,
        epoch: int,
        first_seq: int,
        last_seq: int,
        last_timestamp: int,
        first_offset: int,
        last_offset: int,
        is_transactional: bool,
    ) -> None:
        """Kafka's appendDataBatch, field by field."""
        self._check_producer_epoch(epoch, first_offset, TV_UNKNOWN)
        if self.origin is AppendOrigin.CLIENT:
            self._check_sequence(epoch, first_seq, first_offset)
        updated = self.updated_entry
        updated.add_batch(epoch, last_seq, last_offset, last_offset - first_offset, last_timestamp)
        txn_first_offset = updated.current_txn_first_offset
        if txn_first_offset is not None and not is_transactional:
            raise InvalidTxnState(
                f"Expected transactional write from producer {self.producer_id} at offset {first_offset}"
            )
        if txn_first_offset is None and is_transactional:
            # The first transactional batch opens the transaction on this partition. Whether the
            # coordinator knows about it is the broker's check (KIP-890 verification), not ours.
            updated.current_txn_first_offset = first_offset
            self.started_transactions.append(TxnMetadata(self.producer_id, first_offset))

    def _check_coordinator_epoch(self, coordinator_epoch: int, offset: int) -> None:
        known = self.updated_entry.coordinator_epoch
        if known > coordinator_epoch:
            if self.origin is AppendOrigin.REPLICATION:
                log.info(
                    "stale_coordinator_epoch",
                    producer_id=self.producer_id,
                    offset=offset,
                    coordinator_epoch=coordinator_epoch,
                    known=known,
                )
                return
            raise TransactionCoordinatorFenced(
                f"Invalid coordinator epoch for producerId {self.producer_id} at offset {offset}: "
                f"{coordinator_epoch} (zombie), {known} (current)"
            )

    def append_end_txn_marker(
        self,
        control_type: int,
        producer_epoch: int,
        offset: int,
        coordinator_epoch: int,
        timestamp: int,
        transaction_version: int = TV_UNKNOWN,
    ) -> CompletedTxn | None:
        """A COMMIT/ABORT marker at ``offset``; the CompletedTxn is None for an empty transaction
        (nothing to index and no effect on the LSO).

        ``transaction_version`` is the WriteTxnMarkers one (0 for v<2) and is required unless
        replicating, because TV2 markers must carry a strictly higher epoch.
        """
        if transaction_version == TV_UNKNOWN and self.origin is not AppendOrigin.REPLICATION:
            raise ValueError(
                f"transaction_version must be given for a marker appended with origin {self.origin.name}"
            )
        effective = TV_0 if transaction_version == TV_UNKNOWN else transaction_version
        self._check_producer_epoch(producer_epoch, offset, effective)
        self._check_coordinator_epoch(coordinator_epoch, offset)
        updated = self.updated_entry
        txn_first_offset = updated.current_txn_first_offset
        completed = (
            CompletedTxn(self.producer_id, txn_first_offset, offset, control_type == CONTROL_ABORT)
            if txn_first_offset is not None
            else None
        )
        updated.update_from_marker(producer_epoch, coordinator_epoch, timestamp)
        return completed

    def to_entry(self) -> ProducerStateEntry:
        return self.updated_entry

    def __repr__(self) -> str:
        e = self.updated_entry
        return (
            f"ProducerAppendInfo(producer_id={self.producer_id}, producer_epoch={e.producer_epoch}, "
            f"first_sequence={e.first_seq}, last_sequence={e.last_seq}, "
            f"current_txn_first_offset={e.current_txn_first_offset}, coordinator_epoch={e.coordinator_epoch}, "
            f"last_timestamp={e.last_timestamp}, started_transactions={self.started_transactions})"
        )


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    # Same as Kafka's `next == last + 1L || (next == 0 && last == Integer.MAX_VALUE)`.
    return next_seq == increment_sequence(last_seq, 1)


@dataclass(slots=True)
class PendingAppend:
    """What ``validate_append`` found; ``apply_append`` commits it after the log write."""

    append_infos: dict[int, ProducerAppendInfo] = field(default_factory=dict)
    completed_txns: list[CompletedTxn] = field(default_factory=list)
    # Set for a CLIENT retry of a retained batch: append nothing, answer with these offsets.
    duplicate: BatchMetadata | None = None


OnCompletedTxn = Callable[[CompletedTxn, int], None]


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


# --- the partition log's side ----------------------------------------------------------------


class LogProducerState:
    """A partition log's producer state (Kafka's UnifiedLog holds its ProducerStateManager):
    ``PartitionLog`` creates it when it opens (``open``) and calls its hooks at Kafka's call
    points, with what the append says about itself (origin, transaction version, the KIP-890
    verification guard). All hooks run synchronously inside the log operation."""

    __slots__ = ("manager", "_pending")

    def __init__(self, manager: ProducerStateManager) -> None:
        self.manager = manager
        self._pending: PendingAppend | None = None

    @classmethod
    def open(cls, plog: PartitionLog, now_ms: int, **manager_config: int) -> LogProducerState:
        """Recovery after ``PartitionLog.open``: drop stray snapshots, load the newest usable one,
        replay the log after it, snapshot the result."""
        manager = ProducerStateManager(plog.dir, **manager_config)
        manager.remove_stray_snapshots(s.base_offset for s in plog.segments)
        state = cls(manager)
        state.rebuild(plog, now_ms)
        return state

    def last_stable_offset(self, plog: PartitionLog) -> int:
        """The LSO read_committed fetches stop at: the first open transaction, bounded by the
        high watermark above and the log start below (UnifiedLog.lastStableOffset)."""
        hw = plog.high_watermark
        first = self.manager.first_unstable_offset()
        if first is None or first >= hw:
            return hw
        return max(first, plog.log_start_offset)

    def rebuild(self, plog: PartitionLog, now_ms: int) -> None:
        """UnifiedLog.rebuildProducerState: snapshot + replay up to the log end.

        Snapshots are taken at the last two segment bases on the way, so a later truncation
        into the active segment needs no full replay.
        """
        manager = self.manager
        end = plog.log_end_offset
        start = manager.load(plog.log_start_offset, end, now_ms)
        if start < end:
            bases = [s.base_offset for s in plog.segments][-2:]
            segment = None
            for seg, info in plog.iter_batches(start):
                if info.base_offset >= end:
                    break
                if seg is not segment:
                    segment = seg
                    if seg.base_offset in bases and seg.base_offset >= manager.map_end_offset:
                        manager.take_snapshot(seg.base_offset, sync=False)
                buf = None
                if info.is_control:
                    buf = seg.read_at(info.position, info.size)
                    info = read_header(buf)
                manager.replay_batch(info, buf)
        manager.update_map_end_offset(end)
        manager.take_snapshot()

    # --- the log's call points -----------------------------------------------------------------

    def before_append(
        self, buf: bytearray | memoryview, batches: Sequence[BatchInfo], origin: AppendOrigin,
        transaction_version: int, verify_transactions: bool, verification_guard: object | None,
    ) -> BatchMetadata | None:
        """Offsets and LogAppendTime are already in ``batches``; nothing is written yet. Raises
        to refuse the append; returns the stored batch a retried duplicate is answered with."""
        self._pending = None
        pending = self.manager.validate_append(
            batches, buf, origin, transaction_version=transaction_version,
            verify_transactions=verify_transactions, verification_guard=verification_guard,
        )
        if pending.duplicate is not None:
            return pending.duplicate
        self._pending = pending
        return None

    def after_append(self, plog: PartitionLog, last_offset: int) -> None:
        pending, self._pending = self._pending, None
        if pending is None:
            return

        def index_aborted(txn: CompletedTxn, last_stable_offset: int) -> None:
            if txn.is_aborted:
                plog.append_aborted_txn(
                    AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, last_stable_offset)
                )

        self.manager.apply_append(pending, last_offset + 1, index_aborted)

    def on_roll(self, plog: PartitionLog, new_base_offset: int) -> None:
        # Kafka snapshots at every roll without fsync (a torn one fails its CRC and is skipped).
        self.manager.take_snapshot(new_base_offset, sync=False)
        self.manager.prune_snapshots(plog.log_start_offset)

    def on_truncate(self, plog: PartitionLog, now_ms: int) -> None:
        self._pending = None
        self.rebuild(plog, now_ms)

    def on_log_start_offset(self, log_start_offset: int) -> None:
        self.manager.on_log_start_offset_incremented(log_start_offset)

    def on_segments_deleted(self, plog: PartitionLog, base_offsets: list[int]) -> None:
        for base in base_offsets:
            self.manager.delete_snapshot(base)
        self.manager.delete_snapshots_before(plog.log_start_offset)

    def on_close(self, plog: PartitionLog) -> None:
        self.manager.take_snapshot(plog.log_end_offset)

    def on_delete(self) -> None:
        self.manager.truncate_fully_and_start_at(0)


# --- snapshot file I/O ----------------------------------------------------------------------


def _entry_row(entry: ProducerStateEntry) -> SnapshotRow:
    """Only the last batch is stored (lastOffset -1 / offsetDelta 0 when there is none)."""
    last = entry.last_batch
    if last is not None:
        last_seq, last_offset, offset_delta = last.last_seq, last.last_offset, last.offset_delta
    else:
        last_seq, last_offset, offset_delta = NO_SEQUENCE, -1, 0
    txn = entry.current_txn_first_offset
    return (
        entry.producer_id,
        entry.producer_epoch,
        last_seq,
        last_offset,
        offset_delta,
        entry.last_timestamp,
        entry.coordinator_epoch,
        -1 if txn is None else txn,
    )


def write_snapshot(path: Path, entries: Iterable[ProducerStateEntry], *, sync: bool = True) -> None:
    """Write atomically: a reader sees the old file, the new one, or none, never a torn one."""
    data = encode_snapshot(sorted((_entry_row(e) for e in entries), key=lambda row: row[0]))
    tmp = path.with_name(path.name + TMP_SUFFIX)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if sync:
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def read_snapshot(path: Path) -> list[ProducerStateEntry]:
    """Kafka's readSnapshot: batch metadata is restored only when lastOffset >= 0."""
    entries = []
    for pid, epoch, seq, offset, delta, timestamp, coordinator_epoch, txn in decode_snapshot(
        path.read_bytes()
    ):
        entries.append(
            ProducerStateEntry(
                pid,
                epoch,
                coordinator_epoch,
                timestamp,
                txn if txn >= 0 else None,
                [BatchMetadata(seq, offset, delta, timestamp)] if offset >= 0 else (),
            )
        )
    return entries
