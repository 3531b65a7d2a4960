"""Validation of one producer's batches in one append (Kafka's ProducerAppendInfo): sequence,
epoch and transaction checks, and reading an end-transaction marker.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import structlog

from protocol.record_codec import decode_records
from protocol.records import (
    COMPRESSION_MASK,
    CONTROL_ABORT,
    CONTROL_COMMIT,
    CONTROL_KEY,
    CONTROL_VALUE,
    HEADER_SIZE,
    NO_PRODUCER_EPOCH,
    NO_SEQUENCE,
    TIMESTAMP_TYPE_MASK,
    BatchInfo,
    InvalidBatch,
    increment_sequence,
)
from storage.producer.entry import ProducerStateEntry, VerificationStateEntry
from storage.producer.types import (
    INT16_MAX,
    TV_0,
    TV_2,
    TV_UNKNOWN,
    AppendOrigin,
    BatchMetadata,
    CompletedTxn,
    EndTxnMarker,
    InvalidProducerEpoch,
    InvalidTxnState,
    OutOfOrderSequence,
    TransactionCoordinatorFenced,
    TxnMetadata,
)

log = structlog.get_logger(__name__)


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
