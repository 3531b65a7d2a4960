"""Storage exceptions, each carrying the Kafka error code the broker puts on the wire.

The broker maps an exception to a response with ``exc.error_code`` and never needs to know which
layer raised it, mirroring how Kafka's ApiException subclasses map to ``Errors``.
"""

from __future__ import annotations


class StorageError(Exception):
    """Base class; UNKNOWN_SERVER_ERROR (-1) unless a subclass says otherwise."""

    error_code: int = -1


class OffsetOutOfRange(StorageError):
    """A fetch/list offset outside [log start offset, log end offset] (OFFSET_OUT_OF_RANGE)."""

    error_code = 1


class CorruptRecord(StorageError):
    """A batch failing CRC or structural checks (CORRUPT_MESSAGE)."""

    error_code = 2


class RecordTooLarge(StorageError):
    """One batch above max.message.bytes (MESSAGE_TOO_LARGE)."""

    error_code = 10


class RecordBatchTooLarge(StorageError):
    """A produce payload larger than segment.bytes (RECORD_LIST_TOO_LARGE)."""

    error_code = 18


class InvalidTimestamp(StorageError):
    """A CreateTime timestamp outside message.timestamp.before/after.max.ms (INVALID_TIMESTAMP)."""

    error_code = 32


class InvalidConfig(StorageError):
    """An unknown topic config name or a value that fails its validator (INVALID_CONFIG)."""

    error_code = 40


class PolicyViolation(StorageError):
    """DeleteRecords on a topic whose cleanup.policy has no 'delete' (POLICY_VIOLATION)."""

    error_code = 44


class KafkaStorageError(StorageError):
    """An I/O failure on a log directory (KAFKA_STORAGE_ERROR)."""

    error_code = 56


class SegmentInconsistent(KafkaStorageError):
    """A segment file that no longer matches what the broker wrote (cut or grown from outside, or a
    failed write that could not be undone): the partition goes offline until recovery."""


class InconsistentTopicId(StorageError):
    """partition.metadata names a different topic id than the caller (INCONSISTENT_TOPIC_ID)."""

    error_code = 103


class InvalidRecord(StorageError):
    """A batch that is well formed but illegal to append (INVALID_RECORD)."""

    error_code = 87


class LogSegmentOffsetOverflow(StorageError):
    """An offset that cannot be stored relative to its segment's base offset (a bug if it escapes)."""


class CorruptCheckpoint(KafkaStorageError):
    """A checkpoint file whose version, count or lines do not parse."""
