"""Hand-written Produce request decoder and Produce response encoder (v3..v13).

Produce is the hottest request: the generic kafka-python codec builds an object per field
and copies every batch out of the frame. Here the request walk is one pass of precompiled
``struct`` reads over a memoryview, and each partition's records come back as a *slice of
the request body* (no copy), ready to be validated and appended as opaque bytes.

Layouts (Kafka's ProduceRequest.json / ProduceResponse.json): v9+ is flexible (compact
strings and arrays, tagged-field sections), v13 names topics by a 16-byte topic id.
Checked field by field against kafka-python's codec in tests/unit/protocol.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from typing import NamedTuple

from protocol.primitives import (
    INT16,
    INT32,
    Buffer,
    MalformedRequest,
    NodeEndpoint,
    encode_compact_nullable_string,
    encode_compact_string,
    encode_leader_id_and_epoch,
    encode_node_endpoints,
    encode_nullable_string,
    encode_string,
    read_uvarint,
    skip_tagged_fields,
    tagged_section,
    uuid_at,
    uuid_bytes,
    uvarint,
)

__all__ = [
    "MIN_VERSION",
    "MAX_VERSION",
    "FIRST_FLEXIBLE_VERSION",
    "ProducePartitionView",
    "ProduceTopicView",
    "ProduceRequestView",
    "ProducePartitionResponse",
    "ProduceTopicResponse",
    "NodeEndpoint",
    "decode_produce_request",
    "encode_produce_response",
]

MIN_VERSION = 3
MAX_VERSION = 13
FIRST_FLEXIBLE_VERSION = 9
FIRST_TOPIC_ID_VERSION = 13


class ProducePartitionView(NamedTuple):
    """One partition of a Produce request; ``records`` aliases the request buffer."""

    index: int  # type: ignore[assignment]  # Kafka's field name; shadows tuple.index, callers read .index
    records: memoryview | None


class ProduceTopicView(NamedTuple):
    """One topic: ``name`` up to v12, ``topic_id`` from v13 (the other one is None)."""

    name: str | None
    topic_id: uuid.UUID | None
    partitions: list[ProducePartitionView]


class ProduceRequestView(NamedTuple):
    """A decoded Produce request body."""

    transactional_id: str | None
    acks: int
    timeout_ms: int
    topics: list[ProduceTopicView]


class ProducePartitionResponse(NamedTuple):
    """One partition's result. Defaults are Kafka's schema defaults.

    ``record_errors`` holds ``(batch_index, message or None)`` pairs (v8+);
    ``current_leader`` is ``(leader_id, leader_epoch)``, sent (v10+, tag 0) only with
    NOT_LEADER_OR_FOLLOWER, and only when it is not the default ``(-1, -1)``.
    """

    index: int  # type: ignore[assignment]  # Kafka's field name; shadows tuple.index, callers read .index
    error_code: int = 0
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    record_errors: Sequence[tuple[int, str | None]] = ()
    error_message: str | None = None
    current_leader: tuple[int, int] | None = None


class ProduceTopicResponse(NamedTuple):
    """One topic's results: ``name`` up to v12, ``topic_id`` (UUID or 16 bytes) from v13."""

    name: str | None
    topic_id: uuid.UUID | bytes | None
    partitions: Sequence[ProducePartitionResponse]


_ACKS_TIMEOUT = struct.Struct(">hi")
_INDEX_LENGTH = struct.Struct(">ii")
_INDEX_VARINT = struct.Struct(">iBBB")
_PART_V3 = struct.Struct(">ihqq")  # index, error, base offset, log append time
_PART_V5 = struct.Struct(">ihqqq")  # ... + log start offset
_RECORD_ERROR_INDEX = INT32
_new = tuple.__new__


# ---------------------------------------------------------------------------------------------
# Request


def decode_produce_request(body: Buffer, version: int) -> ProduceRequestView:
    """Decode a Produce request body (after the request header) at ``version``.

    Raises MalformedRequest on truncation, bad lengths, bad UTF-8 or trailing bytes (Kafka
    closes the connection), ValueError for a version outside 3..13 (the caller checks first).
    """
    mv = body if type(body) is memoryview else memoryview(body)
    if mv.format != "B":
        mv = mv.cast("B")
    try:
        if FIRST_FLEXIBLE_VERSION <= version <= MAX_VERSION:
            return _decode_flexible(mv, version >= FIRST_TOPIC_ID_VERSION)
        if MIN_VERSION <= version < FIRST_FLEXIBLE_VERSION:
            return _decode_classic(mv)
    except MalformedRequest:
        raise
    except (IndexError, struct.error, UnicodeDecodeError, ValueError) as exc:
        raise MalformedRequest(f"Produce v{version}: {exc}") from None
    raise ValueError(f"Produce v{version} is not supported")


def _decode_classic(mv: memoryview) -> ProduceRequestView:
    end = len(mv)
    (n,) = INT16.unpack_from(mv, 0)
    if n < 0:
        if n != -1:
            raise MalformedRequest("negative transactional id length")
        txn_id = None
        pos = 2
    else:
        pos = 2 + n
        if pos > end:
            raise MalformedRequest("truncated transactional id")
        txn_id = str(mv[2:pos], "utf-8")
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(mv, pos)
    (n_topics,) = INT32.unpack_from(mv, pos + 6)
    pos += 10
    if n_topics < 0 or n_topics > end - pos:
        raise MalformedRequest("bad topic count")
    topics = []
    for _ in range(n_topics):
        (n,) = INT16.unpack_from(mv, pos)
        pos += 2
        stop = pos + n
        if n < 0 or stop > end:
            raise MalformedRequest("bad topic name")
        name = str(mv[pos:stop], "utf-8")
        (n_parts,) = INT32.unpack_from(mv, stop)
        pos = stop + 4
        if n_parts < 0 or n_parts > end - pos:
            raise MalformedRequest("bad partition count")
        parts = []
        for _ in range(n_parts):
            index, n = _INDEX_LENGTH.unpack_from(mv, pos)
            pos += 8
            if n < 0:
                if n != -1:
                    raise MalformedRequest("negative records length")
                records = None
            else:
                stop = pos + n
                if stop > end:
                    raise MalformedRequest("truncated records")
                records = mv[pos:stop]
                pos = stop
            parts.append(_new(ProducePartitionView, (index, records)))
        topics.append(_new(ProduceTopicView, (name, None, parts)))
    if pos != end:
        raise MalformedRequest("trailing bytes after the request")
    return _new(ProduceRequestView, (txn_id, acks, timeout_ms, topics))


def _decode_flexible(mv: memoryview, topic_ids: bool) -> ProduceRequestView:
    end = len(mv)
    n = mv[0]
    if n < 0x80:
        pos = 1
    else:
        n, pos = read_uvarint(mv, 0)
    if n == 0:
        txn_id = None
    else:
        stop = pos + n - 1
        if stop > end:
            raise MalformedRequest("truncated transactional id")
        txn_id = str(mv[pos:stop], "utf-8")
        pos = stop
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(mv, pos)
    pos += 6
    n_topics = mv[pos]
    if n_topics < 0x80:
        pos += 1
    else:
        n_topics, pos = read_uvarint(mv, pos)
    n_topics -= 1
    if n_topics < 0 or n_topics > end - pos:
        raise MalformedRequest("bad topic count")
    topics = []
    for _ in range(n_topics):
        if topic_ids:
            stop = pos + 16
            if stop > end:
                raise MalformedRequest("truncated topic id")
            name = None
            topic_id = uuid_at(mv, pos)
            pos = stop
        else:
            n = mv[pos]
            if n < 0x80:
                pos += 1
            else:
                n, pos = read_uvarint(mv, pos)
            stop = pos + n - 1
            if n == 0 or stop > end:
                raise MalformedRequest("bad topic name")
            name = str(mv[pos:stop], "utf-8")
            topic_id = None
            pos = stop
        n_parts = mv[pos]
        if n_parts < 0x80:
            pos += 1
        else:
            n_parts, pos = read_uvarint(mv, pos)
        n_parts -= 1
        if n_parts < 0 or n_parts > end - pos:
            raise MalformedRequest("bad partition count")
        parts = []
        for _ in range(n_parts):
            # Index and the records length's first 3 varint bytes in one read (a valid body
            # always has >= 4 bytes after an index); batches usually need 2 or 3.
            index, b0, b1, b2 = _INDEX_VARINT.unpack_from(mv, pos)
            if b0 < 0x80:
                n = b0
                pos += 5
            elif b1 < 0x80:
                n = (b0 & 0x7F) | (b1 << 7)
                pos += 6
            elif b2 < 0x80:
                n = (b0 & 0x7F) | ((b1 & 0x7F) << 7) | (b2 << 14)
                pos += 7
            else:
                n, pos = read_uvarint(mv, pos + 4)
            if n == 0:
                records = None
            else:
                stop = pos + n - 1
                if stop > end:
                    raise MalformedRequest("truncated records")
                records = mv[pos:stop]
                pos = stop
            if mv[pos] == 0:
                pos += 1
            else:
                pos = skip_tagged_fields(mv, pos)
            parts.append(_new(ProducePartitionView, (index, records)))
        if mv[pos] == 0:
            pos += 1
        else:
            pos = skip_tagged_fields(mv, pos)
        topics.append(_new(ProduceTopicView, (name, topic_id, parts)))
    if mv[pos] == 0:
        pos += 1
    else:
        pos = skip_tagged_fields(mv, pos)
    if pos != end:
        raise MalformedRequest("trailing bytes after the request")
    return _new(ProduceRequestView, (txn_id, acks, timeout_ms, topics))


# ---------------------------------------------------------------------------------------------
# Response

_NO_ERRORS_CLASSIC = b"\x00\x00\x00\x00\xff\xff"  # empty RecordErrors, null ErrorMessage
_NO_ERRORS_FLEXIBLE = b"\x01\x00"
_DEFAULT_LEADER = (-1, -1)


def encode_produce_response(
    version: int,
    topics: Sequence[ProduceTopicResponse],
    throttle_time_ms: int = 0,
    node_endpoints: Sequence[NodeEndpoint] | None = None,
) -> bytes:
    """Encode a Produce response body (no response header) at ``version``.

    ``node_endpoints`` (v10+, top-level tag 0) should list the leaders named by the
    partitions' ``current_leader``; both are written only when given and non-default.
    """
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ValueError(f"Produce v{version} is not supported")
    flexible = version >= FIRST_FLEXIBLE_VERSION
    tagged = version >= 10
    out: list[bytes] = []
    ap = out.append
    ap(uvarint(len(topics) + 1) if flexible else INT32.pack(len(topics)))
    for name, topic_id, partitions in topics:
        if version >= FIRST_TOPIC_ID_VERSION:
            ap(uuid_bytes(topic_id))
            ap(uvarint(len(partitions) + 1))
        elif name is None:
            raise ValueError(f"Produce v{version} names its topics: a topic name is None")
        elif flexible:
            ap(encode_compact_string(name))
            ap(uvarint(len(partitions) + 1))
        else:
            ap(encode_string(name))
            ap(INT32.pack(len(partitions)))
        for index, error_code, base_offset, append_time, start_offset, record_errors, message, leader in (
            partitions
        ):
            if version >= 5:
                ap(_PART_V5.pack(index, error_code, base_offset, append_time, start_offset))
            else:
                ap(_PART_V3.pack(index, error_code, base_offset, append_time))
            if version < 8:
                continue
            if not flexible:
                if not record_errors and message is None:
                    ap(_NO_ERRORS_CLASSIC)
                    continue
                ap(INT32.pack(len(record_errors)))
                for batch_index, batch_message in record_errors:
                    ap(_RECORD_ERROR_INDEX.pack(batch_index))
                    ap(encode_nullable_string(batch_message))
                ap(encode_nullable_string(message))
                continue
            if not record_errors and message is None:
                ap(_NO_ERRORS_FLEXIBLE)
            else:
                ap(uvarint(len(record_errors) + 1))
                for batch_index, batch_message in record_errors:
                    ap(_RECORD_ERROR_INDEX.pack(batch_index))
                    ap(encode_compact_nullable_string(batch_message))
                    ap(b"\x00")
                ap(encode_compact_nullable_string(message))
            if tagged and leader is not None and tuple(leader) != _DEFAULT_LEADER:
                ap(b"\x01\x00\x09")  # one tagged field: tag 0, 9 bytes
                ap(encode_leader_id_and_epoch(leader))
            else:
                ap(b"\x00")
        if flexible:
            ap(b"\x00")
    ap(INT32.pack(throttle_time_ms))
    if flexible:
        if tagged and node_endpoints:
            ap(tagged_section([(0, encode_node_endpoints(node_endpoints))]))
        else:
            ap(b"\x00")
    return b"".join(out)
