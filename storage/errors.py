"""Storage exceptions: ``protocol.errors.KafkaError`` subclasses, each with the code the broker
puts on the wire (``error_code_of``), as Kafka's ApiException subclasses map to ``Errors``.
"""

from __future__ import annotations

from protocol.errors import ErrorCode, KafkaError


class StorageError(KafkaError):
    """Base class; UNKNOWN_SERVER_ERROR unless a subclass says otherwise."""


class OffsetOutOfRange(StorageError):
    """A fetch/list offset outside [log start offset, log end offset] (OFFSET_OUT_OF_RANGE)."""

    default_code = ErrorCode.OFFSET_OUT_OF_RANGE


class CorruptRecord(StorageError):
    """A batch failing CRC or structural checks (CORRUPT_MESSAGE)."""

    default_code = ErrorCode.CORRUPT_MESSAGE


class RecordTooLarge(StorageError):
    """One batch above max.message.bytes (MESSAGE_TOO_LARGE)."""

    default_code = ErrorCode.MESSAGE_TOO_LARGE


class RecordBatchTooLarge(StorageError):
    """A produce payload larger than segment.bytes (RECORD_LIST_TOO_LARGE)."""

    default_code = ErrorCode.RECORD_LIST_TOO_LARGE


class InvalidTimestamp(StorageError):
    """A CreateTime timestamp outside message.timestamp.before/after.max.ms (INVALID_TIMESTAMP)."""

    default_code = ErrorCode.INVALID_TIMESTAMP


class InvalidConfig(StorageError):
    """An unknown topic config name or a value that fails its validator (INVALID_CONFIG)."""

    default_code = ErrorCode.INVALID_CONFIG


class PolicyViolation(StorageError):
    """DeleteRecords on a topic whose cleanup.policy has no 'delete' (POLICY_VIOLATION)."""

    default_code = ErrorCode.POLICY_VIOLATION


class KafkaStorageError(StorageError):
    """An I/O failure on a log directory (KAFKA_STORAGE_ERROR)."""

    default_code = ErrorCode.KAFKA_STORAGE_ERROR


class SegmentInconsistent(KafkaStorageError):
    """A segment file that no longer matches what the broker wrote (cut or grown from outside, or a
    failed write that could not be undone): the partition goes offline until recovery."""


class InconsistentTopicId(StorageError):
    """partition.metadata names a different topic id than the caller (INCONSISTENT_TOPIC_ID)."""

    default_code = ErrorCode.INCONSISTENT_TOPIC_ID


class InvalidRecord(StorageError):
    """A batch that is well formed but illegal to append (INVALID_RECORD)."""

    default_code = ErrorCode.INVALID_RECORD


class LogSegmentOffsetOverflow(StorageError):
    """An offset that cannot be stored relative to its segment's base offset (a bug if it escapes)."""


class CorruptCheckpoint(KafkaStorageError):
    """A checkpoint file whose version, count or lines do not parse."""
