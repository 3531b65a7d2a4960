"""The producer state's vocabulary: limits, transaction versions, who appends (``AppendOrigin``),
the refusals (``ProducerStateError`` and its kinds) and the small value types (batch metadata,
transactions, markers, producer descriptions).
"""

from __future__ import annotations

from enum import IntEnum
from typing import NamedTuple

from protocol.errors import ErrorCode, KafkaError

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
