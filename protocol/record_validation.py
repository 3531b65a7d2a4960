"""Reading a produced batch's records back as Kafka's LogValidator reads them, without keeping them.

Kafka reads every record of a produced batch (``batch.skipKeyValueIterator`` /
``streamingIterator``): an uncompressed record must be exactly its declared length
(``DefaultRecord.readFrom``); from a decompressed stream the fields are read in sequence, a record
shorter than declared is refused (``readPartiallyFrom``) and the offset deltas must count 0, 1, 2...
After the declared count Kafka reads one more byte: anything left is an error.

A compressed payload is streamed: records are read from each decompressed chunk as it comes,
only the bytes of a record that spans chunks are kept, and decompression stops one chunk past the
declared count, or at ``limit`` decompressed bytes (``DecompressedTooLarge``), so a small
batch that inflates to gigabytes costs neither memory nor much time.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from protocol import compression
from protocol.records import InvalidInnerOffset, InvalidRecord

REMAINING = "Incorrect declared batch size, records still remaining in file"


def read_records(
    data: bytes | bytearray | memoryview,
    pos: int,
    end: int,
    first_index: int,
    count: int,
    compressed: bool,
    final: bool = True,
    keyless: list[int] | None = None,
    need: list[int] | None = None,
) -> tuple[int, int]:
    """Read records ``first_index`` .. ``count - 1`` from ``data[pos:end]`` (``end`` is the end
    of ``data``); raise InvalidRecord where they do not fit. Returns (position after the last
    whole record read, index of the next record). Unless ``final``, a record cut off by ``end``
    is not an error: reading stops before it, for the caller to come back with more bytes
    (``need`` then gets a position of ``data`` the record reaches at least).
    ``keyless`` collects the indexes of records without a key (LogValidator.validateKey).

    A hot path (every produced record): one- and two-byte varints are read inline."""
    index = first_index
    start = p = pos
    try:
        while index < count:
            start = pos
            b = data[pos]
            if b < 0x80:
                p, length = pos + 1, (b >> 1) ^ -(b & 1)
            elif data[pos + 1] < 0x80:
                v = (b & 0x7F) | (data[pos + 1] << 7)
                p, length = pos + 2, (v >> 1) ^ -(v & 1)
            else:
                p, length = _zigzag_at(data, pos)
            body_end = p + length
            if length < 0 or (not compressed and body_end > end):
                raise InvalidRecord("Found invalid record structure")
            p += 1  # attributes
            b = data[p]  # timestamp delta
            if b < 0x80:
                p += 1
            elif data[p + 1] < 0x80:
                p += 2
            else:
                p = _zigzag_at(data, p)[0]
            b = data[p]  # offset delta
            if b < 0x80:
                p, offset_delta = p + 1, (b >> 1) ^ -(b & 1)
            else:
                p, offset_delta = _zigzag_at(data, p)
            no_key = False
            for field in (0, 1):  # key and value lengths (negative: null, as Kafka reads it)
                b = data[p]
                if b < 0x80:
                    p, n = p + 1, (b >> 1) ^ -(b & 1)
                elif data[p + 1] < 0x80:
                    v = (b & 0x7F) | (data[p + 1] << 7)
                    p, n = p + 2, (v >> 1) ^ -(v & 1)
                else:
                    p, n = _zigzag_at(data, p)
                if n > 0:
                    p += n
                elif field == 0:
                    no_key = n < 0
            b = data[p]
            if b < 0x80:
                p, headers = p + 1, (b >> 1) ^ -(b & 1)
            else:
                p, headers = _zigzag_at(data, p)
            if headers < 0:
                raise InvalidRecord(f"Found invalid number of record headers {headers}")
            for _ in range(headers):
                p, n = _zigzag_at(data, p)
                if n < 0:
                    raise InvalidRecord(f"Invalid negative header key size {n}")
                p, v = _zigzag_at(data, p + n)
                if v > 0:
                    p += v
            if p > end:
                if not final:
                    if need is not None:
                        need.append(p)
                    return start, index
                raise InvalidRecord(f"Invalid record size: expected to read {length} bytes in record payload")
            if p != body_end if not compressed else p < body_end:
                raise InvalidRecord(f"Invalid record size: expected to read {length} bytes in record payload")
            if compressed and offset_delta != index:  # checked once the record has been read, as Kafka does
                raise InvalidInnerOffset(f"Inner record offset delta {offset_delta} at index {index} of a "
                                         "compressed batch")
            if no_key and keyless is not None:
                keyless.append(index)
            pos = p
            index += 1
    except IndexError:
        if not final:
            if need is not None:
                need.append(max(p, start))
            return start, index
        raise InvalidRecord("Found invalid record structure") from None
    if final and pos != end:
        raise InvalidRecord(REMAINING)
    return pos, index


def check_records(data: bytes | bytearray | memoryview, pos: int, end: int, count: int,
                  keyless: list[int] | None = None) -> None:
    """The ``count`` records of an uncompressed batch, ``data[pos:end]``."""
    read_records(data, pos, end, 0, count, compressed=False, keyless=keyless)


def check_compressed_records(codec: int, payload: bytes | bytearray | memoryview, count: int, limit: int,
                             keyless: list[int] | None = None) -> None:
    """The ``count`` records of a compressed batch's ``payload``, read while it is decompressed.
    Raises CompressionError (DecompressedTooLarge past ``limit``) or InvalidRecord."""
    if len(payload) == 0 and codec != compression.ZSTD:  # an empty zstd frame reads as no records
        raise compression.CompressionError("empty compressed payload")
    try:
        check_record_stream(compression.decompressed_chunks(codec, payload, limit), count, keyless, limit)
    except _RecordPastLimit:
        raise compression.DecompressedTooLarge(codec, limit) from None


class _RecordPastLimit(Exception):
    pass


def check_record_stream(chunks: Iterable[bytes | bytearray | memoryview], count: int,
                        keyless: list[int] | None = None, limit: int | None = None) -> None:
    """The ``count`` records of a decompressed stream that arrives in ``chunks`` of any size:
    the same answer as reading the whole stream at once, reading no chunk past the one after
    the last record. A record whose key or value alone would take the stream past ``limit``
    stops the reading at once (``_RecordPastLimit``), before its bytes are kept."""
    consumed = 0  # stream bytes before ``data``
    need: list[int] = []
    index = 0
    pending: list[bytes] = []  # copies of the bytes of a record cut by the end of a chunk
    pending_len = retry_at = 0
    for chunk in chunks:
        if index == count:  # Kafka reads one byte past the last record
            if len(chunk):
                raise InvalidRecord(REMAINING)
            continue
        if pending:
            pending.append(bytes(chunk))  # a chunk is only valid until the next one
            pending_len += len(chunk)
            if pending_len < retry_at:  # a record spanning chunks: wait until enough has come
                continue
            data: bytes | bytearray | memoryview = b"".join(pending)
        else:
            data = chunk
        need.clear()
        pos, index = read_records(data, 0, len(data), index, count, True, final=False, keyless=keyless, need=need)
        if index == count and pos != len(data):
            raise InvalidRecord(REMAINING)
        if limit is not None and need and consumed + need[0] > limit:
            raise _RecordPastLimit()
        consumed += pos
        rest = bytes(memoryview(data)[pos:])
        pending = [rest] if rest else []
        pending_len = len(rest)
        retry_at = 2 * pending_len  # re-read a cut record only once twice its bytes are here: linear
    if index < count:
        data = b"".join(pending)
        read_records(data, 0, len(data), index, count, True, final=True, keyless=keyless)


def _zigzag_at(data: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """(position after, value) of the zigzag varint at ``pos`` (IndexError past the data's end)."""
    value = shift = 0
    while True:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return pos, (value >> 1) ^ -(value & 1)
        shift += 7
        if shift > 63:
            raise InvalidRecord("Found invalid record structure")


def record_errors_message(errors: Sequence[tuple[int, str | None]]) -> str:
    """LogValidator.processRecordErrors' InvalidRecordException message."""
    shown = ", ".join(
        f"RecordError(batchIndex={i}, message={'null' if m is None else _quoted(m)})" for i, m in errors[:3]
    )
    return (
        f"One or more records have been rejected due to {len(errors)} record errors in total, and only "
        f"showing the first three errors at most: [{shown}]"
    )


def _quoted(message: str) -> str:
    return f"'{message}'"
