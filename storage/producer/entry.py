"""One producer's state (Kafka's ProducerStateEntry, with its last five batches packed in one
``bytes``) and the KIP-890 verification entry of a transactional producer.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from protocol.records import (
    NO_PRODUCER_EPOCH,
    NO_SEQUENCE,
    BatchInfo,
)
from storage.producer.types import NO_TIMESTAMP, NUM_BATCHES_TO_RETAIN, BatchMetadata, decrement_sequence

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
