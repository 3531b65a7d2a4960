"""The checks a produced batch passes before it touches a log, as pure functions of its bytes and
the topic's limits: ProduceRequest.validateRecords (request level), then UnifiedLog's size and CRC
checks and LogValidator's reading of every record. Nothing here touches shared state, so a large
compressed batch can be validated off the event loop (``broker.handlers.produce``).
"""

from __future__ import annotations

from protocol import records as rec
from protocol.compression import CompressionError, DecompressedTooLarge
from protocol.errors import ErrorCode, KafkaError
from protocol.record_validation import check_compressed_records, check_records, record_errors_message

MIN_DECOMPRESSED_LIMIT = 64 * 1024 * 1024
DECOMPRESSED_LIMIT_FACTOR = 16  # x max.message.bytes
# A compressed batch above either is validated in a worker thread: reading millions of records or
# inflating tens of MiB would otherwise hold the event loop every client shares.
OFFLOAD_COMPRESSED_BYTES = 64 * 1024
OFFLOAD_RECORDS = 20_000


class RequestLevelError(KafkaError):
    """A refusal of ProduceRequest.validateRecords: answered without log information."""


class InvalidRecords(KafkaError):
    """INVALID_RECORD naming each refused record (ProduceResponse v8+ ``record_errors``)."""

    default_code = ErrorCode.INVALID_RECORD

    def __init__(self, record_errors: list[tuple[int, str | None]]) -> None:
        super().__init__(record_errors_message(record_errors))
        self.record_errors = record_errors

def validate_request_records(records: bytes | memoryview | None, api_version: int) -> bytearray | memoryview:
    """ProduceRequest.validateRecords: exactly one complete magic-2 batch (a trailing partial
    batch is ignored, as Kafka's batch iterator stops there), zstd only from v7."""
    if records is None or len(records) == 0:
        raise KafkaError(ErrorCode.INVALID_RECORD, "Produce request has no records for the partition")
    complete = []
    for pos, size in rec.iter_batch_positions(records):
        if size - rec.LOG_OVERHEAD < 14:  # LegacyRecord.RECORD_OVERHEAD_V0
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"Record size {size - rec.LOG_OVERHEAD} is less than the "
                                                        "minimum record overhead (14)")
        complete.append((pos, size))
    if complete and records[complete[0][0] + rec.MAGIC_OFFSET] != 2:
        raise KafkaError(
            ErrorCode.INVALID_RECORD,
            f"Produce requests with version {api_version} are only allowed to contain record batches with magic version 2",
        )
    if len(complete) != 1:
        raise KafkaError(
            ErrorCode.INVALID_RECORD,
            f"Produce requests with version {api_version} are only allowed to contain exactly one record batch",
        )
    size = complete[0][1]
    if size >= rec.HEADER_SIZE and api_version < 7 and \
            rec.ATTRS.unpack_from(records, 21)[0] & rec.COMPRESSION_MASK == 4:
        raise KafkaError(
            ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
            "Produce requests with version below 7 are not allowed to use ZStandard compression",
        )
    if isinstance(records, memoryview) and not records.readonly:
        return records[:size]  # a slice of the request frame: offsets are patched in place
    return bytearray(records[:size])


def validate_batch(buf: bytearray | memoryview, max_size: int, compact: bool, topic: str,
                   partition: int) -> list[rec.BatchInfo]:
    """UnifiedLog.analyzeAndValidateRecords (size, then structure and CRC) and LogValidator
    (offsets and count, control records, every record read back, keys on compacted topics)."""
    if len(buf) > max_size:
        raise KafkaError(
            ErrorCode.MESSAGE_TOO_LARGE,
            f"The record batch size in the append to {topic}-{partition} is {len(buf)} bytes "
            f"which exceeds the maximum configured value of {max_size}.",
        )
    try:
        batches = rec.validate_batches(buf)
    except rec.InvalidBatch as e:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, str(e)) from None
    batch = batches[0]
    if batch.compression > 4:  # CompressionType.forId's IllegalArgumentException: unexpected in Kafka
        raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"Unknown compression type id: {batch.compression}")
    try:
        rec.check_offsets_and_count(batch)
    except rec.InvalidRecord as e:
        raise KafkaError(ErrorCode.INVALID_RECORD, str(e)) from None
    if batch.is_control:
        raise KafkaError(ErrorCode.INVALID_RECORD, "Clients are not allowed to write control records")
    keyless: list[int] | None = [] if compact else None
    _check_records(buf, batch, decompressed_limit(max_size), keyless)
    if keyless:  # LogValidator.validateKey
        message = (f"Compacted topic cannot accept message without key in topic partition "
                   f"{topic}-{partition}")
        raise InvalidRecords([(i, message) for i in keyless])
    return batches


def decompressed_limit(max_message_bytes: int) -> int:
    """The most a produced batch may decompress to: Kafka has no such bound (its validator streams
    records on one of many request threads); here one event loop serves every client, so a batch
    that inflates past this is refused (MESSAGE_TOO_LARGE) rather than read for seconds."""
    return max(MIN_DECOMPRESSED_LIMIT, DECOMPRESSED_LIMIT_FACTOR * max_message_bytes)


def _check_records(buf: bytearray | memoryview, batch: rec.BatchInfo, limit: int, keyless: list[int] | None) -> None:
    """Every record read back as LogValidator reads it (streaming a compressed batch through its
    codec), so that nothing a consumer could not read is stored. A codec that cannot decompress
    the payload is an unexpected error in Kafka (UNKNOWN_SERVER_ERROR); records that do not fit
    are INVALID_RECORD."""
    try:
        if batch.compression == 0:
            check_records(buf, rec.HEADER_SIZE, len(buf), batch.records_count, keyless)
        else:
            payload = memoryview(buf)[rec.HEADER_SIZE:]
            check_compressed_records(batch.compression, payload, batch.records_count, limit, keyless)
    except DecompressedTooLarge as e:
        raise KafkaError(ErrorCode.MESSAGE_TOO_LARGE, f"The record batch {e}") from None
    except CompressionError as e:
        raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"cannot decompress the record batch: {e}") from None
    except rec.InvalidInnerOffset as e:
        raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, str(e)) from None
    except rec.InvalidRecord as e:
        raise KafkaError(ErrorCode.INVALID_RECORD, str(e)) from None


def needs_offload(records: bytes | memoryview | None) -> bool:
    """Whether a partition's payload is a compressed batch worth validating off the event loop."""
    if records is None or len(records) < rec.HEADER_SIZE or records[rec.MAGIC_OFFSET] != 2:
        return False
    info = rec.read_header(records, 0)
    return info.compression != 0 and (len(records) > OFFLOAD_COMPRESSED_BYTES or info.records_count > OFFLOAD_RECORDS)


def validate_payload(records: bytes | memoryview | None, api_version: int, max_size: int, compact: bool,
                     topic: str, partition: int) -> tuple[bytearray | memoryview, list[rec.BatchInfo]]:
    """Both levels at once (what a worker thread runs); request-level refusals raise RequestLevelError."""
    try:
        buf = validate_request_records(records, api_version)
    except KafkaError as e:
        raise RequestLevelError(e.code, e.message) from None
    return buf, validate_batch(buf, max_size, compact, topic, partition)
