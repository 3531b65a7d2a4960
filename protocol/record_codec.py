"""Records inside a v2 batch (Kafka's DefaultRecord): parsing without copies for the cleaner,
full decoding for cold paths (coordinator loading, timestamp lookups, control markers), and the
varints they are made of. Compressed batches are decompressed through ``protocol.compression``.

A record: Length varint | Attributes int8 | TimestampDelta varlong | OffsetDelta varint |
KeyLength varint | Key | ValueLength varint | Value | HeaderCount varint | Headers
(zigzag varints throughout).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Final, NamedTuple

from crc32c import crc32c

from protocol import compression
from protocol.records import (
    COMPRESSION_MASK,
    CONTROL_ABORT,
    CONTROL_COMMIT,
    CONTROL_KEY,
    CRC,
    CRC_START,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    BatchInfo,
    InvalidBatch,
    encode_record,
    read_header,
)

# Parsed record: (length start, attributes position, position after the timestamp delta, end,
# timestamp delta, offset delta, key or None, has value). A plain tuple, cheapest to build; the
# indexes are Final literals so ``r[R_KEY]`` has its own element's type, not the union of all.
Record = tuple[int, int, int, int, int, int, "bytes | None", bool]
R_START: Final = 0
R_ATTRS: Final = 1
R_AFTER_TS: Final = 2
R_END: Final = 3
R_TS_DELTA: Final = 4
R_OFFSET_DELTA: Final = 5
R_KEY: Final = 6
R_HAS_VALUE: Final = 7


class CorruptRecords(InvalidBatch):
    """Records inside a batch that cannot be parsed or decompressed (CORRUPT_MESSAGE)."""


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    raw = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
        if shift > 63:
            raise CorruptRecords("varint too long")


def parse_records(buf: bytes, pos: int, end: int) -> list[Record]:
    """Every record of an uncompressed records section ``buf[pos:end]`` (no copies but keys).

    Varints of one and two bytes (values below 8192: record and value lengths, offset deltas)
    are decoded inline; that is nearly all of them and most of the cost of a record."""
    out: list[Record] = []
    append = out.append
    try:
        while pos < end:
            b = buf[pos]
            if b < 0x80:
                length, p = (b >> 1) ^ -(b & 1), pos + 1
            elif buf[pos + 1] < 0x80:
                raw = (b & 0x7F) | (buf[pos + 1] << 7)
                length, p = (raw >> 1) ^ -(raw & 1), pos + 2
            else:
                length, p = _varint(buf, pos)
            rec_end = p + length
            if length < 6 or rec_end > end:
                raise CorruptRecords(f"record of length {length} at {pos} does not fit in its batch")
            q = p + 1
            b = buf[q]
            if b < 0x80:
                ts_delta, q = (b >> 1) ^ -(b & 1), q + 1
            elif buf[q + 1] < 0x80:
                raw = (b & 0x7F) | (buf[q + 1] << 7)
                ts_delta, q = (raw >> 1) ^ -(raw & 1), q + 2
            else:
                ts_delta, q = _varint(buf, q)
            after_ts = q
            b = buf[q]
            if b < 0x80:
                offset_delta, q = (b >> 1) ^ -(b & 1), q + 1
            elif buf[q + 1] < 0x80:
                raw = (b & 0x7F) | (buf[q + 1] << 7)
                offset_delta, q = (raw >> 1) ^ -(raw & 1), q + 2
            else:
                offset_delta, q = _varint(buf, q)
            b = buf[q]
            if b < 0x80:
                key_len, q = (b >> 1) ^ -(b & 1), q + 1
            else:
                key_len, q = _varint(buf, q)
            if key_len >= 0:
                key = buf[q : q + key_len]
                q += key_len
            else:
                key = None
            if q >= rec_end:
                raise CorruptRecords(f"record at {pos} runs past its length")
            # A value length of -1 (zigzag 1) is a null value: a tombstone. Longer varints are
            # lengths >= 64, never -1.
            append((pos, p, after_ts, rec_end, ts_delta, offset_delta, key, buf[q] != 1))
            pos = rec_end
    except IndexError:
        raise CorruptRecords("truncated record") from None
    return out


def zigzag(value: int) -> bytes:
    v = (value << 1) ^ (value >> 63)
    if v < 0x80:
        return bytes((v,))
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def records_of(data: bytes, off: int, info: BatchInfo) -> tuple[bytes, list[Record]]:
    """(buffer, parsed records) of the batch at ``data[off:]``, decompressing when needed."""
    codec = info.attributes & COMPRESSION_MASK
    if codec:
        try:
            buf = compression.decompress(codec, memoryview(data)[off + HEADER_SIZE : off + info.size])
        except compression.CompressionError as e:
            raise CorruptRecords(f"cannot decompress the record batch: {e}") from None
        return buf, parse_records(buf, 0, len(buf))
    return data, parse_records(data, off + HEADER_SIZE, off + info.size)


def control_type_of(data: bytes, off: int, info: BatchInfo) -> int | None:
    """COMMIT/ABORT/other type of a control batch; None for an empty (already cleaned) one."""
    if info.records_count == 0 or info.size == HEADER_SIZE:
        return None
    buf, recs = records_of(data, off, info)
    if not recs:
        return None
    key = recs[0][R_KEY]
    if key is None or len(key) < 4:
        raise CorruptRecords("control record key shorter than 4 bytes")
    return struct.unpack_from(">h", key, 2)[0]


class DecodedRecord(NamedTuple):
    """One record with its absolute offset and timestamp (a LOG_APPEND_TIME batch's records all
    carry the batch's max timestamp, as DefaultRecordBatch reports them)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


def decode_records(batch: bytes | bytearray | memoryview) -> list[DecodedRecord]:
    """Every record of the one batch ``batch`` holds, keys, values and headers copied out."""
    data = bytes(batch)
    info = read_header(data, 0)
    codec = info.attributes & COMPRESSION_MASK
    if codec:
        try:
            buf = compression.decompress(codec, memoryview(data)[HEADER_SIZE:info.size])
        except compression.CompressionError as e:
            raise CorruptRecords(f"cannot decompress the record batch: {e}") from None
        pos, end = 0, len(buf)
    else:
        buf, pos, end = data, HEADER_SIZE, info.size
    append_time = info.max_timestamp if info.attributes & TIMESTAMP_TYPE_MASK else None
    out: list[DecodedRecord] = []
    try:
        for _ in range(info.records_count):
            if pos >= end:
                break
            length, pos = _varint(buf, pos)
            rec_end = pos + length
            if length < 0 or rec_end > end:
                raise CorruptRecords(f"record of length {length} does not fit in its batch")
            pos += 1  # attributes
            ts_delta, pos = _varint(buf, pos)
            offset_delta, pos = _varint(buf, pos)
            key, pos = _bytes_at(buf, pos)
            value, pos = _bytes_at(buf, pos)
            count, pos = _varint(buf, pos)
            headers: list[tuple[str, bytes | None]] = []
            for _h in range(count):
                name, pos = _bytes_at(buf, pos)
                hvalue, pos = _bytes_at(buf, pos)
                headers.append(((name or b"").decode("utf-8", "replace"), hvalue))
            if pos > rec_end:
                raise CorruptRecords("record runs past its length")
            out.append(DecodedRecord(info.base_offset + offset_delta,
                                     append_time if append_time is not None else info.base_timestamp + ts_delta,
                                     key, value, headers))
            pos = rec_end
    except IndexError:
        raise CorruptRecords("truncated record") from None
    return out


def _bytes_at(buf: bytes, pos: int) -> tuple[bytes | None, int]:
    n, pos = _varint(buf, pos)
    if n < 0:
        return None, pos
    if pos + n > len(buf):
        raise CorruptRecords("record field runs past the batch")
    return buf[pos:pos + n], pos + n


def control_type(batch: bytes | bytearray | memoryview) -> int:
    """COMMIT (1) / ABORT (0) of a control batch; -1 for an unknown or KRaft control type."""
    for rec in decode_records(batch):
        key = rec.key
        if key is None or len(key) < 4:
            raise CorruptRecords("control record key shorter than 4 bytes")
        _version, ctype = CONTROL_KEY.unpack_from(key, 0)
        return ctype if ctype in (CONTROL_ABORT, CONTROL_COMMIT) else -1
    return -1


def rebuild_batch_with_codec(info: BatchInfo, records: Sequence[DecodedRecord], codec: int,
                             level: int | None = None) -> bytearray:
    """A produced batch rebuilt in another codec, as LogValidator.buildRecordsAndAssignOffsets does
    when the topic's ``compression.type`` is not the producer's: same producer id, epoch, base
    sequence, transactional flag and timestamp type; records renumbered 0..n-1 with their own
    timestamps against the first one's; offsets are assigned by the append, as for any batch."""
    base_ts = records[0].timestamp if records else info.base_timestamp
    body = b"".join(encode_record(i, r.timestamp - base_ts, r.key, r.value, r.headers)
                    for i, r in enumerate(records))
    payload = compression.compress(codec, body, level) if codec else body
    attrs = (info.attributes & ~COMPRESSION_MASK) | codec
    size = HEADER_SIZE + len(payload)
    buf = bytearray(size)
    HEADER.pack_into(buf, 0, 0, size - LOG_OVERHEAD, info.partition_leader_epoch, 2, 0, attrs, len(records) - 1,
                     base_ts, max((r.timestamp for r in records), default=info.max_timestamp), info.producer_id,
                     info.producer_epoch, info.base_sequence, len(records))
    buf[HEADER_SIZE:] = payload
    CRC.pack_into(buf, 17, crc32c(memoryview(buf)[CRC_START:]))
    return buf
