"""The record-batch compression codecs (Kafka's ``org.apache.kafka.common.compress``), with the
runtime dependencies alone: the standard library's zlib for gzip and cramjam for snappy, lz4 and
zstd. Both release the GIL while they work.

Each codec reads what Kafka's input stream for it reads:

- gzip (1): one or more gzip members; bytes after the last member that do not start another
  member are ignored, as ``GZIPInputStream`` ignores them.
- snappy (2): snappy-java's xerial framing (a 16-byte header, then length-prefixed raw blocks),
  which the Java producer writes, or one raw snappy block (librdkafka), as ``SnappyInputStream``.
- lz4 (3): the LZ4 frame format as ``Lz4BlockInputStream`` reads it: independent blocks only,
  the descriptor checksum verified, block checksums verified when flagged, the content checksum
  skipped; nothing after the end mark is read.
- zstd (4): one or more zstd frames; an empty payload holds no data.

Decompression streams (``decompressed_chunks``) wherever the format allows it (gzip, xerial
snappy, lz4: one bounded chunk at a time), and every codec stops at ``limit`` decompressed bytes
with ``DecompressedTooLarge``, so no batch can make the broker allocate more than that.
Compression writes what Kafka's output streams write (lz4: 64 KiB independent blocks, no
checksums; snappy: xerial framing with 32 KiB blocks).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator

import cramjam

from protocol.errors import ErrorCode, KafkaError

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
BY_NAME = {"none": NONE, "uncompressed": NONE, "gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}

CHUNK = 256 * 1024  # decompressed bytes per streamed gzip chunk (zlib is fastest around here)
DEFAULT_LIMIT = 1 << 30  # for batches already in a log: validated when they were appended


class CompressionError(KafkaError):
    """A payload its codec cannot read (Kafka's IOException / KafkaException from the stream: an
    unexpected error, UNKNOWN_SERVER_ERROR)."""


class DecompressedTooLarge(CompressionError):
    """A payload that decompresses to more than the caller's limit (MESSAGE_TOO_LARGE: a bound of
    this broker's, see ``broker.replica.produce_validation.decompressed_limit``)."""

    default_code = ErrorCode.MESSAGE_TOO_LARGE

    def __init__(self, codec: int, limit: int) -> None:
        super().__init__(f"{NAMES.get(codec, codec)} payload decompresses to more than {limit} bytes")
        self.limit = limit


def decompressed_chunks(codec: int, payload: bytes | bytearray | memoryview,
                        limit: int = DEFAULT_LIMIT) -> Iterator[bytes | bytearray | memoryview]:
    """The decompressed bytes of ``payload``, in order, one chunk at a time (each indexable as
    bytes, and only valid until the next one is asked for: copy what you keep). Raises
    CompressionError for a payload the codec cannot read (possibly after some chunks) and
    DecompressedTooLarge past ``limit`` bytes."""
    if codec == GZIP:
        return _gzip_chunks(payload, limit)
    if codec == SNAPPY:
        return _snappy_chunks(payload, limit)
    if codec == LZ4:
        return _lz4_chunks(payload, limit)
    if codec == ZSTD:
        return iter((_zstd_decompress(payload, limit),))
    raise CompressionError(f"unknown compression codec {codec}")


def decompress(codec: int, payload: bytes | bytearray | memoryview, limit: int = DEFAULT_LIMIT) -> bytes:
    """All of ``payload`` decompressed (see ``decompressed_chunks``), as bytes."""
    if codec == ZSTD:
        return bytes(_zstd_decompress(payload, limit))
    return b"".join([bytes(chunk) for chunk in decompressed_chunks(codec, payload, limit)])


def compress(codec: int, data: bytes | bytearray | memoryview, level: int | None = None) -> bytes:
    """``data`` compressed as Kafka's output stream for ``codec`` writes it (``level`` as Kafka's
    ``compression.<codec>.level``; None or -1: the codec's default)."""
    if level is not None and level < 0 and codec != ZSTD:
        level = None
    if codec == GZIP:
        return _gzip_compress(data, 6 if level is None else level)
    if codec == SNAPPY:
        return _snappy_compress(data)
    if codec == LZ4:
        return _lz4_compress(data, 9 if level is None else level)
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data, level=3 if level is None else level))
    raise CompressionError(f"unknown compression codec {codec}")


# --- gzip ------------------------------------------------------------------------------------


def _gzip_chunks(payload: bytes | bytearray | memoryview, limit: int) -> Iterator[bytes]:
    data = memoryview(payload)
    total = 0
    first = True
    while first or (len(data) >= 10 and data[0] == 0x1F and data[1] == 0x8B):
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        pending: bytes | memoryview = data
        try:
            while True:
                out = d.decompress(pending, CHUNK)
                total += len(out)
                if total > limit:
                    raise DecompressedTooLarge(GZIP, limit)
                if out:
                    yield out
                if d.eof:
                    break
                pending = d.unconsumed_tail
                if not pending and not out:
                    raise CompressionError("Unexpected end of ZLIB input stream")
        except zlib.error as e:
            if first:
                raise CompressionError(f"gzip: {e}") from None
            return  # GZIPInputStream: a malformed member after a complete one ends the stream
        first = False
        data = memoryview(d.unused_data)


def _gzip_compress(data: bytes | bytearray | memoryview, level: int) -> bytes:
    c = zlib.compressobj(level, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return c.compress(data) + c.flush()


# --- snappy ----------------------------------------------------------------------------------

# snappy-java's SnappyCodec header: -126 'SNAPPY' 0, then version 1 and compatible version 1.
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024  # SnappyOutputStream's default block size
_I32_BE = struct.Struct(">i")


def _snappy_raw(block: bytes | memoryview, total: int, limit: int) -> tuple[memoryview, int]:
    try:
        size = cramjam.snappy.decompress_raw_len(block)
    except cramjam.DecompressionError as e:
        raise CompressionError(f"snappy: {e}") from None
    if total + size > limit:
        raise DecompressedTooLarge(SNAPPY, limit)
    try:
        return memoryview(cramjam.snappy.decompress_raw(block)), total + size
    except cramjam.DecompressionError as e:
        raise CompressionError(f"snappy: {e}") from None


def _snappy_chunks(payload: bytes | bytearray | memoryview, limit: int) -> Iterator[memoryview]:
    data = memoryview(payload)
    if len(data) < len(_XERIAL_HEADER) or data[:8] != _XERIAL_MAGIC:
        out, _ = _snappy_raw(data, 0, limit)  # no xerial header: one raw block (SnappyInputStream)
        yield out
        return
    pos, end, total = len(_XERIAL_HEADER), len(data), 0
    while pos < end:
        if end - pos < 4:
            raise CompressionError("snappy: truncated xerial block length")
        (size,) = _I32_BE.unpack_from(data, pos)
        pos += 4
        if size < 0 or pos + size > end:
            raise CompressionError(f"snappy: xerial block of {size} bytes does not fit the payload")
        out, total = _snappy_raw(data[pos:pos + size], total, limit)
        pos += size
        yield out


def _snappy_compress(data: bytes | bytearray | memoryview) -> bytes:
    mv = memoryview(data)
    parts = [_XERIAL_HEADER]
    for pos in range(0, len(mv), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(mv[pos:pos + _XERIAL_BLOCK]))
        parts.append(_I32_BE.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


# --- lz4 -------------------------------------------------------------------------------------

_LZ4_MAGIC = 0x184D2204
_LZ4_UNCOMPRESSED = 0x80000000
_U32_LE = struct.Struct("<I")


def _lz4_chunks(payload: bytes | bytearray | memoryview, limit: int) -> Iterator[bytes | memoryview]:
    data = memoryview(payload)
    end = len(data)
    if end < 6:
        raise CompressionError("Stream ended prematurely")
    if _U32_LE.unpack_from(data, 0)[0] != _LZ4_MAGIC:
        raise CompressionError("Stream unsupported (invalid magic bytes)")
    flg, bd = data[4], data[5]
    if flg & 0x03:
        raise CompressionError("Reserved bits must be 0")
    if not flg & 0x20:
        raise CompressionError("Dependent block stream is unsupported")
    if flg >> 6 != 1:
        raise CompressionError(f"Version {flg >> 6} is unsupported")
    if bd & 0x8F or not 4 <= (bd >> 4) & 7 <= 7:
        raise CompressionError("Block size value must be between 4 and 7")
    max_block = 1 << (2 * ((bd >> 4) & 7) + 8)
    block_checksum, content_checksum = flg & 0x10, flg & 0x04
    pos = 6
    if flg & 0x08:  # content size: skipped, as Kafka skips it
        if end - pos < 8:
            raise CompressionError("Stream ended prematurely")
        pos += 8
    if pos >= end:
        raise CompressionError("Stream ended prematurely")
    if data[pos] != _descriptor_checksum(data[4:pos].tobytes()):
        raise CompressionError("Stream frame descriptor corrupted")
    pos += 1
    total = 0
    out: bytearray | None = None  # one buffer for every block: a chunk lives until the next
    while True:
        if end - pos < 4:
            raise CompressionError("Stream ended prematurely")
        size = _U32_LE.unpack_from(data, pos)[0]
        pos += 4
        compressed = not size & _LZ4_UNCOMPRESSED
        size &= ~_LZ4_UNCOMPRESSED
        if size == 0:  # the end mark (the content checksum after it is not verified, as in Kafka)
            if content_checksum and end - pos < 4:
                raise CompressionError("Stream ended prematurely")
            return
        if size > max_block:
            raise CompressionError(f"Block size {size} exceeded max: {max_block}")
        if end - pos < size:
            raise CompressionError("Stream ended prematurely")
        block = data[pos:pos + size]
        if compressed:
            if out is None:
                out = bytearray(max_block)
            try:
                n = cramjam.lz4.decompress_block_into(block, out)
            except cramjam.DecompressionError as e:
                raise CompressionError(f"lz4: {e}") from None
            chunk: bytes | memoryview = memoryview(out)[:n]
        else:
            n, chunk = size, block
        if block_checksum:
            if end - pos - size < 4:
                raise CompressionError("Stream ended prematurely")
            if xxh32(block) != _U32_LE.unpack_from(data, pos + size)[0]:
                raise CompressionError("Block checksum mismatch")
            pos += 4
        pos += size
        total += n
        if total > limit:
            raise DecompressedTooLarge(LZ4, limit)
        yield chunk


_DESCRIPTOR_CHECKSUMS: dict[bytes, int] = {}


def _descriptor_checksum(descriptor: bytes) -> int:
    """The HC byte of an LZ4 frame descriptor; the few descriptors producers write are cached."""
    hc = _DESCRIPTOR_CHECKSUMS.get(descriptor)
    if hc is None:
        hc = (xxh32(descriptor) >> 8) & 0xFF
        if len(descriptor) == 2:  # FLG and BD only (no content size): at most 256 * 256 of them
            _DESCRIPTOR_CHECKSUMS[descriptor] = hc
    return hc


_LZ4_BLOCK = 64 * 1024  # Lz4BlockOutputStream.BLOCKSIZE_64KB
_LZ4_FLG, _LZ4_BD = 0x60, 0x40  # version 1, independent blocks, no checksums; 64 KiB blocks


def _lz4_compress(data: bytes | bytearray | memoryview, level: int) -> bytes:
    mv = memoryview(data)
    parts = [_U32_LE.pack(_LZ4_MAGIC), bytes((_LZ4_FLG, _LZ4_BD, _descriptor_checksum(bytes((_LZ4_FLG, _LZ4_BD)))))]
    for pos in range(0, len(mv), _LZ4_BLOCK):
        raw = mv[pos:pos + _LZ4_BLOCK]
        block = bytes(cramjam.lz4.compress_block(raw, mode="high_compression", compression=level, store_size=False)) \
            if level > 2 else bytes(cramjam.lz4.compress_block(raw, store_size=False))
        if len(block) >= len(raw):
            parts += (_U32_LE.pack(len(raw) | _LZ4_UNCOMPRESSED), bytes(raw))
        else:
            parts += (_U32_LE.pack(len(block)), block)
    parts.append(_U32_LE.pack(0))
    return b"".join(parts)


# --- zstd ------------------------------------------------------------------------------------


def _zstd_decompress(payload: bytes | bytearray | memoryview, limit: int) -> bytes | memoryview:
    """zstd has no bounded streaming API here: decompress into a buffer sized from the frame's
    content size when it declares one (else a guess), growing it fourfold up to ``limit`` when
    it is too small (never more memory than ``limit``, at most about twice the work)."""
    if len(payload) == 0:
        return b""
    declared = _zstd_content_size(payload)
    if declared is not None and declared > limit:
        raise DecompressedTooLarge(ZSTD, limit)
    size = min(limit, declared if declared is not None else max(64 * 1024, 8 * len(payload)))
    while True:
        out = bytearray(max(size, 1))
        try:
            n = cramjam.zstd.decompress_into(payload, out)
        except cramjam.DecompressionError as e:
            if "whole buffer" not in str(e):
                raise CompressionError(f"zstd: {e}") from None
            if size >= limit:
                raise DecompressedTooLarge(ZSTD, limit) from None
            size = min(limit, size * 4)
            continue
        return memoryview(out)[:n]


_ZSTD_MAGIC = 0xFD2FB528
_FCS_BYTES = (0, 2, 4, 8)


def _zstd_content_size(payload: bytes | bytearray | memoryview) -> int | None:
    """Frame_Content_Size of the first frame's header, when it has one (RFC 8878 3.1.1.1)."""
    if len(payload) < 6 or _U32_LE.unpack_from(payload, 0)[0] != _ZSTD_MAGIC:
        return None
    fhd = payload[4]
    single_segment = fhd & 0x20
    fcs_bytes = _FCS_BYTES[fhd >> 6] or (1 if single_segment else 0)
    if not fcs_bytes:
        return None
    pos = 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[fhd & 0x03]
    if len(payload) < pos + fcs_bytes:
        return None
    value = int.from_bytes(payload[pos:pos + fcs_bytes], "little")
    return value + 256 if fcs_bytes == 2 else value


# --- xxHash32 (the LZ4 frame checksums) --------------------------------------------------------

_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def xxh32(data: bytes | bytearray | memoryview, seed: int = 0) -> int:
    """XXH32 (a pure-Python port: only frame descriptors and rare block checksums use it)."""
    n = len(data)
    if n < 16:  # a frame descriptor: the common case, kept short
        h = (seed + _P5 + n) & _M32
        p = 0
        while p + 4 <= n:
            h = (h + int.from_bytes(data[p:p + 4], "little") * _P3) & _M32
            h = (((h << 17) | (h >> 15)) & _M32) * _P4 & _M32
            p += 4
        for b in data[p:]:
            h = (h + b * _P5) & _M32
            h = (((h << 11) | (h >> 21)) & _M32) * _P1 & _M32
        h ^= h >> 15
        h = (h * _P2) & _M32
        h ^= h >> 13
        h = (h * _P3) & _M32
        return h ^ (h >> 16)
    mv = memoryview(data).cast("B")
    p = 0
    if n >= 16:
        v1, v2, v3, v4 = (seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed & _M32, (seed - _P1) & _M32
        stripes = (n // 16) * 4
        lanes = struct.unpack_from(f"<{stripes}I", mv, 0)
        for i in range(0, stripes, 4):
            v1 = (v1 + lanes[i] * _P2) & _M32
            v1 = (((v1 << 13) | (v1 >> 19)) & _M32) * _P1 & _M32
            v2 = (v2 + lanes[i + 1] * _P2) & _M32
            v2 = (((v2 << 13) | (v2 >> 19)) & _M32) * _P1 & _M32
            v3 = (v3 + lanes[i + 2] * _P2) & _M32
            v3 = (((v3 << 13) | (v3 >> 19)) & _M32) * _P1 & _M32
            v4 = (v4 + lanes[i + 3] * _P2) & _M32
            v4 = (((v4 << 13) | (v4 >> 19)) & _M32) * _P1 & _M32
        p = stripes * 4
        h = (((v1 << 1) | (v1 >> 31)) + ((v2 << 7) | (v2 >> 25)) + ((v3 << 12) | (v3 >> 20))
             + ((v4 << 18) | (v4 >> 14))) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while p + 4 <= n:
        h = (h + _U32_LE.unpack_from(mv, p)[0] * _P3) & _M32
        h = (((h << 17) | (h >> 15)) & _M32) * _P4 & _M32
        p += 4
    while p < n:
        h = (h + mv[p] * _P5) & _M32
        h = (((h << 11) | (h >> 21)) & _M32) * _P1 & _M32
        p += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h
