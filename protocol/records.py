"""RecordBatch v2 (magic 2) as bytes: header view, validation, control batches.

Batches stay opaque on the hot path. We read the fixed 61-byte header with one precompiled
``struct`` over a memoryview, check the CRC-32C with a C implementation, and patch the two
fields the CRC does not cover (base offset, partition leader epoch) in place. Per-record
work (decompression, key/value access) is only done on cold paths through kafka-python's
``DefaultRecordBatch``/``DefaultRecordBatchBuilder``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from crc32c import crc32c

from protocol.errors import ErrorCode, KafkaError

# baseOffset, length, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta,
# baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, recordsCount
HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + length: the bytes not counted by the length field
# The smallest legal v2 batch: the header (length counts 49 bytes after the length field).
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
CRC_START = 21  # the CRC covers attributes .. end of batch
MAGIC_OFFSET = 16
BASE_OFFSET = struct.Struct(">q")
LENGTH_MAGIC = struct.Struct(">qib")  # baseOffset, length, partitionLeaderEpoch-less peek
OFFSET_LENGTH = struct.Struct(">qi")
PLE = struct.Struct(">i")
CRC = struct.Struct(">I")
ATTRS = struct.Struct(">h")
MAX_TS = struct.Struct(">q")

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08  # LOG_APPEND_TIME when set
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
DELETE_HORIZON_FLAG = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

CONTROL_ABORT = 0
CONTROL_COMMIT = 1


class InvalidBatch(KafkaError):
    """A batch that fails structural or CRC validation (CORRUPT_MESSAGE on the wire)."""

    default_code = ErrorCode.CORRUPT_MESSAGE


class UnsupportedMagic(InvalidBatch):
    """A magic 0/1 message set, which Kafka 4 no longer accepts."""


class InvalidRecord(KafkaError):
    """Records that do not read back as the batch header declares them (INVALID_RECORD)."""

    default_code = ErrorCode.INVALID_RECORD


class InvalidInnerOffset(InvalidRecord):
    """A compressed batch whose records' offset deltas do not count 0, 1, 2, ... (Kafka fails the
    append with an unexpected error: UNKNOWN_SERVER_ERROR)."""

    default_code = ErrorCode.UNKNOWN_SERVER_ERROR


def check_offsets_and_count(info: BatchInfo) -> None:
    """LogValidator.validateBatch for magic 2: the offset range and the record count agree."""
    last = info.base_offset + info.last_offset_delta
    if info.last_offset_delta + 1 <= 0:
        raise InvalidRecord(f"Batch has an invalid offset range: [{info.base_offset}, {last}]")
    if info.records_count <= 0:
        raise InvalidRecord(f"Invalid reported count for record batch: {info.records_count}")
    if info.last_offset_delta + 1 != info.records_count:
        raise InvalidRecord(f"Inconsistent batch offset range [{info.base_offset}, {last}] and count of records "
                            f"{info.records_count}")


@dataclass(slots=True)
class BatchInfo:
    """The header fields the broker acts on; built once per appended batch."""

    position: int  # byte position inside the buffer it was read from
    size: int  # whole batch size, LOG_OVERHEAD included
    base_offset: int
    partition_leader_epoch: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        if self.base_sequence < 0:
            return NO_SEQUENCE
        return increment_sequence(self.base_sequence, self.last_offset_delta)


def increment_sequence(sequence: int, increment: int) -> int:
    """Sequence numbers are int32 and wrap to 0 after Int32.MAX (Kafka's DefaultRecordBatch)."""
    if sequence > 0x7FFFFFFF - increment:
        return increment - (0x7FFFFFFF - sequence) - 1
    return sequence + increment


def read_header(buf, position: int = 0) -> BatchInfo:
    (
        base_offset,
        length,
        ple,
        _magic,
        _crc,
        attributes,
        last_offset_delta,
        base_ts,
        max_ts,
        pid,
        epoch,
        base_seq,
        count,
    ) = HEADER.unpack_from(buf, position)
    return BatchInfo(
        position,
        length + LOG_OVERHEAD,
        base_offset,
        ple,
        attributes,
        last_offset_delta,
        base_ts,
        max_ts,
        pid,
        epoch,
        base_seq,
        count,
    )


def validate_batches(buf: memoryview | bytes | bytearray, max_batch_size: int | None = None) -> list[BatchInfo]:
    """Walk and fully validate the batches of a produce payload.

    Raises UnsupportedMagic for magic < 2 and InvalidBatch for anything short, torn or with a
    wrong CRC. Returns the header of every batch in order.
    """
    mv = memoryview(buf)
    end = len(mv)
    pos = 0
    out: list[BatchInfo] = []
    while pos < end:
        if end - pos < LOG_OVERHEAD + 5:
            raise InvalidBatch(f"truncated batch header at byte {pos}")
        _, length = OFFSET_LENGTH.unpack_from(mv, pos)
        magic = mv[pos + MAGIC_OFFSET]
        if magic < 2:
            raise UnsupportedMagic(f"record batch magic {magic} is not supported")
        if magic > 2:
            raise InvalidBatch(f"unknown record batch magic {magic}")
        if length < MIN_BATCH_LENGTH:
            raise InvalidBatch(f"batch length {length} below the minimum")
        size = length + LOG_OVERHEAD
        if pos + size > end:
            raise InvalidBatch(f"batch of {size} bytes runs past the end of the payload")
        info = read_header(mv, pos)
        if crc32c(mv[pos + CRC_START : pos + size]) != CRC.unpack_from(mv, pos + 17)[0]:
            raise InvalidBatch("record batch CRC mismatch")
        out.append(info)
        pos += size
    return out


def scan_valid_prefix(buf, start: int = 0) -> Iterator[BatchInfo]:
    """Yield batches from ``start`` until the first torn or corrupt one (recovery's walk)."""
    mv = memoryview(buf)
    end = len(mv)
    pos = start
    while end - pos >= HEADER_SIZE:
        _, length = OFFSET_LENGTH.unpack_from(mv, pos)
        if length < MIN_BATCH_LENGTH or mv[pos + MAGIC_OFFSET] != 2:
            return
        size = length + LOG_OVERHEAD
        if pos + size > end:
            return
        if crc32c(mv[pos + CRC_START : pos + size]) != CRC.unpack_from(mv, pos + 17)[0]:
            return
        yield read_header(mv, pos)
        pos += size


def iter_batch_positions(buf) -> Iterator[tuple[int, int]]:
    """Yield (position, size) of each whole batch in ``buf``, stopping at a partial tail."""
    end = len(buf)
    pos = 0
    while end - pos >= LOG_OVERHEAD:
        _, length = OFFSET_LENGTH.unpack_from(buf, pos)
        size = length + LOG_OVERHEAD
        if length < 0 or pos + size > end:
            return
        yield pos, size
        pos += size


def set_base_offset(buf: bytearray | memoryview, position: int, base_offset: int) -> None:
    BASE_OFFSET.pack_into(buf, position, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, position: int, epoch: int) -> None:
    PLE.pack_into(buf, position + 12, epoch)


def set_log_append_time(buf: bytearray | memoryview, info: BatchInfo, timestamp: int) -> None:
    """Stamp LOG_APPEND_TIME: set the attribute bit and max timestamp, then recompute the CRC."""
    pos = info.position
    attrs = info.attributes | TIMESTAMP_TYPE_MASK
    ATTRS.pack_into(buf, pos + 21, attrs)
    MAX_TS.pack_into(buf, pos + 35, timestamp)
    info.attributes = attrs
    info.max_timestamp = timestamp
    CRC.pack_into(buf, pos + 17, crc32c(memoryview(buf)[pos + CRC_START : pos + info.size]))


# --- records inside a batch (cold path) -------------------------------------------------------


def _zigzag_varint(value: int) -> bytes:
    v = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def encode_record(
    offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None, headers: Iterable = ()
) -> bytes:
    body = bytearray(b"\x00")  # attributes
    body += _zigzag_varint(timestamp_delta)
    body += _zigzag_varint(offset_delta)
    if key is None:
        body += _zigzag_varint(-1)
    else:
        body += _zigzag_varint(len(key)) + key
    if value is None:
        body += _zigzag_varint(-1)
    else:
        body += _zigzag_varint(len(value)) + value
    headers = list(headers)
    body += _zigzag_varint(len(headers))
    for hk, hv in headers:
        hkb = hk.encode() if isinstance(hk, str) else hk
        body += _zigzag_varint(len(hkb)) + hkb
        if hv is None:
            body += _zigzag_varint(-1)
        else:
            body += _zigzag_varint(len(hv)) + hv
    return _zigzag_varint(len(body)) + bytes(body)


def build_batch(
    records: Sequence[tuple[bytes | None, bytes | None]],
    *,
    base_offset: int = 0,
    timestamp: int,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    transactional: bool = False,
    control: bool = False,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytearray:
    """An uncompressed v2 batch of (key, value) records, all stamped ``timestamp``.

    Used for what the broker writes itself: control markers and internal-topic records.
    """
    body = b"".join(encode_record(i, 0, k, v) for i, (k, v) in enumerate(records))
    attrs = (TRANSACTIONAL_FLAG if transactional else 0) | (CONTROL_FLAG if control else 0)
    size = HEADER_SIZE + len(body)
    buf = bytearray(size)
    HEADER.pack_into(
        buf,
        0,
        base_offset,
        size - LOG_OVERHEAD,
        partition_leader_epoch,
        2,
        0,
        attrs,
        len(records) - 1,
        timestamp,
        timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    buf[HEADER_SIZE:] = body
    CRC.pack_into(buf, 17, crc32c(memoryview(buf)[CRC_START:]))
    return buf


CONTROL_KEY = struct.Struct(">hh")  # version, type
CONTROL_VALUE = struct.Struct(">hi")  # version, coordinatorEpoch


def build_control_batch(
    *,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    coordinator_epoch: int,
    timestamp: int,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytearray:
    """A COMMIT/ABORT transaction marker, as MemoryRecords.writeEndTransactionalMarker writes it."""
    key = CONTROL_KEY.pack(0, CONTROL_COMMIT if commit else CONTROL_ABORT)
    value = CONTROL_VALUE.pack(0, coordinator_epoch)
    return build_batch(
        [(key, value)],
        base_offset=base_offset,
        timestamp=timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transactional=True,
        control=True,
        partition_leader_epoch=partition_leader_epoch,
    )


