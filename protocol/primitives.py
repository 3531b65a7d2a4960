"""Wire primitives shared by the hand-written Produce/Fetch codecs.

The hot codecs inline the common cases (one-byte varints, empty tagged-field sections) and
call these helpers only for the rare ones. Readers take ``(buf, pos)`` and return
``(value, new_pos)``; they let ``IndexError``/``struct.error`` escape on truncation and the
message decoders turn every such failure into one :class:`MalformedRequest`, so the broker
has a single exception to catch before it closes the connection.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from typing import NamedTuple, TypeAlias

__all__ = [
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "INT32_INT64",
    "UUID_ZERO",
    "Buffer",
    "MalformedRequest",
    "read_uvarint",
    "skip_tagged_fields",
    "read_string",
    "read_nullable_string",
    "read_compact_string",
    "read_compact_nullable_string",
    "read_uuid",
    "uuid_at",
    "uvarint",
    "encode_string",
    "encode_nullable_string",
    "encode_compact_string",
    "encode_compact_nullable_string",
    "uuid_bytes",
    "tagged_section",
    "NodeEndpoint",
    "encode_node_endpoints",
    "encode_leader_id_and_epoch",
]


class MalformedRequest(ValueError):
    """A request body that does not parse at the version it claims: close the connection.

    Kafka's SocketServer answers a request it cannot parse by closing the connection, with no
    response, so this carries no error code.
    """


INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
INT32_INT64 = struct.Struct(">iq")
UUID_ZERO = uuid.UUID(int=0)

Buffer: TypeAlias = bytes | bytearray | memoryview

_MAX_UVARINT_BYTES = 5  # Java's readUnsignedVarint rejects longer encodings


# ---------------------------------------------------------------------------------------------
# Readers


def read_uvarint(buf: Buffer, pos: int) -> tuple[int, int]:
    """Decode an unsigned LEB128 varint of at most 5 bytes (Kafka's UNSIGNED_VARINT)."""
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    value = b & 0x7F
    shift = 7
    for i in range(1, _MAX_UVARINT_BYTES):
        b = buf[pos + i]
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos + i + 1
        shift += 7
    raise MalformedRequest("unsigned varint longer than 5 bytes")


def skip_tagged_fields(buf: Buffer, pos: int) -> int:
    """Skip a tagged-field section (count, then tag/size/bytes per field) no caller reads."""
    count, pos = read_uvarint(buf, pos)
    end = len(buf)
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
        if pos > end:
            raise MalformedRequest("truncated tagged field")
    return pos


def _utf8(buf: Buffer, pos: int, end: int) -> str:
    if end > len(buf):
        raise MalformedRequest("truncated string")
    return str(buf[pos:end], "utf-8")


def read_string(buf: Buffer, pos: int) -> tuple[str, int]:
    """Non-nullable int16-length STRING."""
    (n,) = INT16.unpack_from(buf, pos)
    if n < 0:
        raise MalformedRequest("null or negative length for a non-nullable string")
    pos += 2
    return _utf8(buf, pos, pos + n), pos + n


def read_nullable_string(buf: Buffer, pos: int) -> tuple[str | None, int]:
    """int16-length NULLABLE_STRING (-1 is null)."""
    (n,) = INT16.unpack_from(buf, pos)
    pos += 2
    if n < 0:
        if n == -1:
            return None, pos
        raise MalformedRequest("negative string length")
    return _utf8(buf, pos, pos + n), pos + n


def read_compact_string(buf: Buffer, pos: int) -> tuple[str, int]:
    """Non-nullable COMPACT_STRING (uvarint length + 1)."""
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        raise MalformedRequest("null for a non-nullable compact string")
    n -= 1
    return _utf8(buf, pos, pos + n), pos + n


def read_compact_nullable_string(buf: Buffer, pos: int) -> tuple[str | None, int]:
    """COMPACT_NULLABLE_STRING (0 is null)."""
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    n -= 1
    return _utf8(buf, pos, pos + n), pos + n


# Topic ids repeat on every request and building a uuid.UUID costs ~1 µs: memoise them.
_UUID_CACHE: dict[bytes, uuid.UUID] = {}
_UUID_CACHE_MAX = 4096


def uuid_at(buf: Buffer, pos: int) -> uuid.UUID:
    """The 16 bytes at ``pos`` as a ``uuid.UUID`` (the type kafka-python's codecs use)."""
    raw = bytes(buf[pos : pos + 16])
    found = _UUID_CACHE.get(raw)
    if found is None:
        if len(raw) != 16:
            raise MalformedRequest("truncated uuid")
        found = uuid.UUID(bytes=raw)
        if len(_UUID_CACHE) >= _UUID_CACHE_MAX:
            _UUID_CACHE.clear()
        _UUID_CACHE[raw] = found
    return found


def read_uuid(buf: Buffer, pos: int) -> tuple[uuid.UUID, int]:
    """A UUID field."""
    return uuid_at(buf, pos), pos + 16


# ---------------------------------------------------------------------------------------------
# Writers


def _uvarint_slow(value: int) -> bytes:
    if value < 0 or value > 0xFFFFFFFF:
        raise ValueError(f"unsigned varint out of range: {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_UVARINT_CACHE: tuple[bytes, ...] = tuple(_uvarint_slow(i) for i in range(1024))


def uvarint(value: int) -> bytes:
    """Encode an unsigned varint; small values (array/string lengths) come from a table."""
    if 0 <= value < 1024:
        return _UVARINT_CACHE[value]
    if 0 < value < 0x200000:  # 2-3 bytes: record-set sizes up to 2 MiB
        if value < 0x4000:
            return bytes(((value & 0x7F) | 0x80, value >> 7))
        return bytes(((value & 0x7F) | 0x80, ((value >> 7) & 0x7F) | 0x80, value >> 14))
    return _uvarint_slow(value)


# Topic names repeat on every request: memoise their encodings (bounded, cleared when full).
_STR_CACHE: dict[str, bytes] = {}
_COMPACT_STR_CACHE: dict[str, bytes] = {}
_STR_CACHE_MAX = 4096


def encode_string(s: str) -> bytes:
    """int16-length STRING."""
    out = _STR_CACHE.get(s)
    if out is None:
        raw = s.encode("utf-8")
        if len(raw) > 0x7FFF:
            raise ValueError("string longer than 32767 bytes")
        out = INT16.pack(len(raw)) + raw
        if len(_STR_CACHE) >= _STR_CACHE_MAX:
            _STR_CACHE.clear()
        _STR_CACHE[s] = out
    return out


def encode_nullable_string(s: str | None) -> bytes:
    """int16-length NULLABLE_STRING."""
    return b"\xff\xff" if s is None else encode_string(s)


def encode_compact_string(s: str) -> bytes:
    """COMPACT_STRING (uvarint length + 1)."""
    out = _COMPACT_STR_CACHE.get(s)
    if out is None:
        raw = s.encode("utf-8")
        if len(raw) > 0x7FFF:
            raise ValueError("string longer than 32767 bytes")
        out = uvarint(len(raw) + 1) + raw
        if len(_COMPACT_STR_CACHE) >= _STR_CACHE_MAX:
            _COMPACT_STR_CACHE.clear()
        _COMPACT_STR_CACHE[s] = out
    return out


def encode_compact_nullable_string(s: str | None) -> bytes:
    """COMPACT_NULLABLE_STRING."""
    return b"\x00" if s is None else encode_compact_string(s)


def uuid_bytes(topic_id: uuid.UUID | bytes | None) -> bytes:
    """16 wire bytes from a ``uuid.UUID`` or raw bytes; None is Kafka's zero UUID."""
    if topic_id is None:
        return bytes(16)
    if isinstance(topic_id, uuid.UUID):
        return topic_id.bytes
    raw = bytes(topic_id)
    if len(raw) != 16:
        raise ValueError("a topic id is 16 bytes")
    return raw


def tagged_section(fields: list[tuple[int, bytes]]) -> bytes:
    """A tagged-field section from ``(tag, encoded value)`` pairs in ascending tag order."""
    if not fields:
        return b"\x00"
    parts = [uvarint(len(fields))]
    for tag, value in fields:
        parts.append(uvarint(tag))
        parts.append(uvarint(len(value)))
        parts.append(value)
    return b"".join(parts)


class NodeEndpoint(NamedTuple):
    """A broker address for the NodeEndpoints tagged field of Produce (v10+) and Fetch (v16+)."""

    node_id: int
    host: str
    port: int
    rack: str | None = None


def encode_node_endpoints(endpoints: Sequence[NodeEndpoint]) -> bytes:
    """The compact ``[]NodeEndpoint`` array (every element is a flexible struct)."""
    parts = [uvarint(len(endpoints) + 1)]
    for node_id, host, port, rack in endpoints:
        parts.append(INT32.pack(node_id))
        parts.append(encode_compact_string(host))
        parts.append(INT32.pack(port))
        parts.append(encode_compact_nullable_string(rack))
        parts.append(b"\x00")
    return b"".join(parts)


_TWO_INT32_TAGS = struct.Struct(">iib")


def encode_leader_id_and_epoch(leader: tuple[int, int]) -> bytes:
    """LeaderIdAndEpoch as a tagged value: leader id, leader epoch, empty tag section."""
    return _TWO_INT32_TAGS.pack(leader[0], leader[1], 0)
