"""Hand-written Fetch request decoder and Fetch response encoder (v4..v18).

The Fetch response carries large record slices read from segment files. The encoder never
copies them: it returns the body as a list of buffers, small metadata chunks joined into
``bytes`` alternating with the callers' record buffers, plus the total size, so the broker
can write its frame prefix and response header and then hand everything to
``transport.writelines`` / ``os.writev``. The request side is small but arrives on every
poll, so it gets the same one-pass ``struct`` walk as Produce.

Layouts (Kafka's FetchRequest.json / FetchResponse.json): v12+ is flexible, v13+ names
topics by topic id, v15+ moves ReplicaId into the ReplicaState tag, v18 only adds a tagged
HighWatermark to request partitions (the v18 response is laid out like v17).
Checked field by field against kafka-python's codec in tests/unit/protocol.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from typing import NamedTuple, Protocol

from protocol.primitives import (
    INT32,
    INT64,
    Buffer,
    MalformedRequest,
    NodeEndpoint,
    encode_compact_string,
    encode_leader_id_and_epoch,
    encode_node_endpoints,
    encode_string,
    read_compact_nullable_string,
    read_uvarint,
    tagged_section,
    uuid_at,
    uuid_bytes,
    uvarint,
)

__all__ = [
    "MIN_VERSION",
    "MAX_VERSION",
    "FIRST_FLEXIBLE_VERSION",
    "INLINE_RECORDS_MAX",
    "FetchPartitionView",
    "FetchTopicView",
    "ForgottenTopicView",
    "FetchRequestView",
    "FetchPartitionResponse",
    "FetchTopicResponse",
    "EncodedResponse",
    "NodeEndpoint",
    "decode_fetch_request",
    "encode_fetch_response",
]

MIN_VERSION = 4
MAX_VERSION = 18
FIRST_FLEXIBLE_VERSION = 12
FIRST_TOPIC_ID_VERSION = 13
FIRST_REPLICA_STATE_VERSION = 15
MAX_INT64 = 0x7FFFFFFFFFFFFFFF

# Record buffers up to this size are joined into the surrounding metadata chunk: copying a
# few hundred bytes is cheaper than another iovec/transport write.
INLINE_RECORDS_MAX = 1024


# ---------------------------------------------------------------------------------------------
# Request views


class FetchPartitionView(NamedTuple):
    """One partition of a Fetch request; fields absent at the version hold their defaults."""

    partition: int
    current_leader_epoch: int  # v9+, else -1
    fetch_offset: int
    last_fetched_epoch: int  # v12+, else -1
    log_start_offset: int  # v5+, else -1 (followers only)
    partition_max_bytes: int
    replica_directory_id: uuid.UUID | None = None  # v17+ tag 0 (followers only)
    high_watermark: int = MAX_INT64  # v18+ tag 1 (followers only)


class FetchTopicView(NamedTuple):
    """``name`` up to v12, ``topic_id`` from v13 (the other one is None)."""

    name: str | None
    topic_id: uuid.UUID | None
    partitions: list[FetchPartitionView]


class ForgottenTopicView(NamedTuple):
    """Partitions an incremental fetch session drops (v7+)."""

    name: str | None
    topic_id: uuid.UUID | None
    partitions: list[int]


class FetchRequestView(NamedTuple):
    """A decoded Fetch request body; fields absent at the version hold Kafka's defaults."""

    replica_id: int  # v4-14 field, v15+ ReplicaState tag; -1 for consumers
    replica_epoch: int  # v15+ ReplicaState tag, else -1
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: int  # 0 read_uncommitted, 1 read_committed
    session_id: int  # v7+, else 0
    session_epoch: int  # v7+, else -1
    topics: list[FetchTopicView]
    forgotten_topics: list[ForgottenTopicView]  # v7+, else []
    rack_id: str  # v11+, else ""
    cluster_id: str | None  # v12+ tag 0, else None


# ---------------------------------------------------------------------------------------------
# Response inputs


class RecordsRegion(Protocol):
    """A stretch of a segment file the connection sends with sendfile (storage's FileRegion, at
    least INLINE_RECORDS_MAX long): the codec needs its length and passes it on as its own buffer."""

    def __len__(self) -> int: ...


class FetchPartitionResponse(NamedTuple):
    """One partition's answer; defaults are those of Kafka's error partitions.

    ``aborted_transactions``: None (null) for read_uncommitted, a possibly empty list of
    ``(producer_id, first_offset)`` for read_committed. ``records``: a byte buffer (bytes,
    bytearray, or a 1-D byte memoryview of a segment file) or a ``RecordsRegion``, or None for null. The tagged
    v12+ fields are sent only when given and not all-default:
    ``diverging_epoch=(epoch, end_offset)``, ``current_leader=(leader_id, leader_epoch)``,
    ``snapshot_id=(end_offset, epoch)``.
    """

    partition_index: int
    error_code: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    aborted_transactions: Sequence[tuple[int, int]] | None = None
    preferred_read_replica: int = -1
    records: Buffer | RecordsRegion | None = b""
    diverging_epoch: tuple[int, int] | None = None
    current_leader: tuple[int, int] | None = None
    snapshot_id: tuple[int, int] | None = None


class FetchTopicResponse(NamedTuple):
    """``name`` up to v12, ``topic_id`` (UUID or 16 bytes) from v13."""

    name: str | None
    topic_id: uuid.UUID | bytes | None
    partitions: Sequence[FetchPartitionResponse]


class EncodedResponse(NamedTuple):
    """A body as buffers for ``writelines``/``writev``; ``size`` is their total byte count.

    ``buffers[0]`` is always a ``bytes`` chunk of metadata, so a caller that prefers fewer
    writes can prepend its frame prefix and header to it.
    """

    buffers: list[bytes | bytearray | memoryview | RecordsRegion]
    size: int


# ---------------------------------------------------------------------------------------------
# Request decoder

_V4_HEAD = struct.Struct(">iiiib")  # replica id, max wait, min bytes, max bytes, isolation
_V7_HEAD = struct.Struct(">iiiibii")  # ... + session id, session epoch
_V15_HEAD = struct.Struct(">iiibii")  # no replica id
# Partition layouts: partition, [current leader epoch], fetch offset, [last fetched epoch],
# [log start offset], partition max bytes.
_PART_V4 = struct.Struct(">iqi")
_PART_V5 = struct.Struct(">iqqi")
_PART_V9 = struct.Struct(">iiqqi")
_PART_V12 = struct.Struct(">iiqiqi")
_REPLICA_STATE = struct.Struct(">iq")
_new = tuple.__new__


def decode_fetch_request(body: Buffer, version: int) -> FetchRequestView:
    """Decode a Fetch request body (after the request header) at ``version``.

    Raises MalformedRequest on truncation, bad lengths, bad UTF-8 or trailing bytes (Kafka
    closes the connection), ValueError for a version outside 4..18 (the caller checks first).
    """
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ValueError(f"Fetch v{version} is not supported")
    mv = body if type(body) is memoryview else memoryview(body)
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B")
    try:
        return _decode_request(mv, version)
    except MalformedRequest:
        raise
    except (IndexError, struct.error, UnicodeDecodeError, ValueError) as exc:
        raise MalformedRequest(f"Fetch v{version}: {exc}") from None


def _read_count(mv: memoryview, pos: int, flexible: bool, end: int) -> tuple[int, int]:
    """A non-nullable array length, sanity-checked against the bytes left."""
    if flexible:
        n = mv[pos]
        if n < 0x80:
            pos += 1
        else:
            n, pos = read_uvarint(mv, pos)
        n -= 1
    else:
        (n,) = INT32.unpack_from(mv, pos)
        pos += 4
    if n < 0 or n > end - pos:
        raise MalformedRequest("bad array length")
    return n, pos


def _read_str(mv: memoryview, pos: int, flexible: bool, end: int) -> tuple[str, int]:
    """A non-nullable STRING / COMPACT_STRING."""
    if flexible:
        n = mv[pos]
        if n < 0x80:
            pos += 1
        else:
            n, pos = read_uvarint(mv, pos)
        n -= 1
    else:
        n = (mv[pos] << 8) | mv[pos + 1]
        if n & 0x8000:
            raise MalformedRequest("null or negative length for a non-nullable string")
        pos += 2
    stop = pos + n
    if n < 0 or stop > end:
        raise MalformedRequest("bad string length")
    return str(mv[pos:stop], "utf-8"), stop


def _read_topic_id(mv: memoryview, pos: int, end: int) -> uuid.UUID:
    stop = pos + 16
    if stop > end:
        raise MalformedRequest("truncated topic id")
    return uuid_at(mv, pos)


def _tags(mv: memoryview, pos: int, end: int) -> tuple[list[tuple[int, int, int]], int]:
    """Walk a non-empty tagged section: ``[(tag, value start, value end)]``."""
    count, pos = read_uvarint(mv, pos)
    found = []
    for _ in range(count):
        tag, pos = read_uvarint(mv, pos)
        size, pos = read_uvarint(mv, pos)
        stop = pos + size
        if stop > end:
            raise MalformedRequest("truncated tagged field")
        found.append((tag, pos, stop))
        pos = stop
    return found, pos


def _decode_request(mv: memoryview, version: int) -> FetchRequestView:
    end = len(mv)
    flexible = version >= FIRST_FLEXIBLE_VERSION
    topic_ids = version >= FIRST_TOPIC_ID_VERSION
    replica_epoch = -1
    if version >= FIRST_REPLICA_STATE_VERSION:
        replica_id = -1
        max_wait, min_bytes, max_bytes, isolation, session_id, session_epoch = _V15_HEAD.unpack_from(mv, 0)
        pos = _V15_HEAD.size
    elif version >= 7:
        replica_id, max_wait, min_bytes, max_bytes, isolation, session_id, session_epoch = (
            _V7_HEAD.unpack_from(mv, 0)
        )
        pos = _V7_HEAD.size
    else:
        replica_id, max_wait, min_bytes, max_bytes, isolation = _V4_HEAD.unpack_from(mv, 0)
        session_id, session_epoch = 0, -1
        pos = _V4_HEAD.size

    if version >= 12:
        part_struct = _PART_V12
    elif version >= 9:
        part_struct = _PART_V9
    elif version >= 5:
        part_struct = _PART_V5
    else:
        part_struct = _PART_V4
    part_size = part_struct.size
    unpack_part = part_struct.unpack_from

    n_topics, pos = _read_count(mv, pos, flexible, end)
    topics = []
    for _ in range(n_topics):
        if topic_ids:
            name = None
            topic_id = _read_topic_id(mv, pos, end)
            pos += 16
        else:
            name, pos = _read_str(mv, pos, flexible, end)
            topic_id = None
        n_parts, pos = _read_count(mv, pos, flexible, end)
        parts = []
        for _ in range(n_parts):
            fields = unpack_part(mv, pos)
            pos += part_size
            if version >= 12:
                partition, leader_epoch, offset, fetched_epoch, start_offset, max_part = fields
            elif version >= 9:
                partition, leader_epoch, offset, start_offset, max_part = fields
                fetched_epoch = -1
            elif version >= 5:
                partition, offset, start_offset, max_part = fields
                leader_epoch = fetched_epoch = -1
            else:
                partition, offset, max_part = fields
                leader_epoch = fetched_epoch = start_offset = -1
            directory_id = None
            high_watermark = MAX_INT64
            if flexible:
                if mv[pos] == 0:
                    pos += 1
                else:
                    found, pos = _tags(mv, pos, end)
                    for tag, start, stop in found:
                        if tag == 0 and version >= 17:
                            directory_id = _read_topic_id(mv, start, stop)
                        elif tag == 1 and version >= 18:
                            (high_watermark,) = INT64.unpack_from(mv[:stop], start)
            parts.append(
                _new(
                    FetchPartitionView,
                    (partition, leader_epoch, offset, fetched_epoch, start_offset, max_part,
                     directory_id, high_watermark),
                )
            )
        if flexible:
            if mv[pos] == 0:
                pos += 1
            else:
                _, pos = _tags(mv, pos, end)
        topics.append(_new(FetchTopicView, (name, topic_id, parts)))

    forgotten = []
    if version >= 7:
        n_forgotten, pos = _read_count(mv, pos, flexible, end)
        for _ in range(n_forgotten):
            if topic_ids:
                name = None
                topic_id = _read_topic_id(mv, pos, end)
                pos += 16
            else:
                name, pos = _read_str(mv, pos, flexible, end)
                topic_id = None
            n_parts, pos = _read_count(mv, pos, flexible, end)
            forgotten_parts = list(struct.unpack_from(f">{n_parts}i", mv, pos))
            pos += 4 * n_parts
            if flexible:
                if mv[pos] == 0:
                    pos += 1
                else:
                    _, pos = _tags(mv, pos, end)
            forgotten.append(_new(ForgottenTopicView, (name, topic_id, forgotten_parts)))

    rack_id = ""
    if version >= 11:
        rack_id, pos = _read_str(mv, pos, flexible, end)

    cluster_id = None
    if flexible:
        if mv[pos] == 0:
            pos += 1
        else:
            found, pos = _tags(mv, pos, end)
            for tag, start, stop in found:
                if tag == 0:
                    cluster_id, _ = read_compact_nullable_string(mv[:stop], start)
                elif tag == 1 and version >= FIRST_REPLICA_STATE_VERSION:
                    replica_id, replica_epoch = _REPLICA_STATE.unpack_from(mv[:stop], start)
    if pos != end:
        raise MalformedRequest("trailing bytes after the request")
    return _new(
        FetchRequestView,
        (replica_id, replica_epoch, max_wait, min_bytes, max_bytes, isolation, session_id,
         session_epoch, topics, forgotten, rack_id, cluster_id),
    )


# ---------------------------------------------------------------------------------------------
# Response encoder

_HEAD_V4 = INT32  # throttle time
_HEAD_V7 = struct.Struct(">ihi")  # throttle time, error code, session id
_RESP_PART_V4 = struct.Struct(">ihqq")  # index, error, high watermark, last stable offset
_RESP_PART_V5 = struct.Struct(">ihqqq")  # ... + log start offset
_ABORTED = struct.Struct(">qq")
_ABORTED_FLEXIBLE = struct.Struct(">qqb")
_EPOCH_END_OFFSET = struct.Struct(">iqb")  # DivergingEpoch: epoch, end offset, no tags
_SNAPSHOT_ID = struct.Struct(">qib")  # SnapshotId: end offset, epoch, no tags
_NULL_INT32 = b"\xff\xff\xff\xff"
_DEFAULT_PAIR = (-1, -1)


def _partition_tags(
    diverging: tuple[int, int] | None,
    leader: tuple[int, int] | None,
    snapshot: tuple[int, int] | None,
) -> bytes:
    fields = []
    if diverging is not None and tuple(diverging) != _DEFAULT_PAIR:
        fields.append((0, _EPOCH_END_OFFSET.pack(diverging[0], diverging[1], 0)))
    if leader is not None and tuple(leader) != _DEFAULT_PAIR:
        fields.append((1, encode_leader_id_and_epoch(leader)))
    if snapshot is not None and tuple(snapshot) != _DEFAULT_PAIR:
        fields.append((2, _SNAPSHOT_ID.pack(snapshot[0], snapshot[1], 0)))
    return tagged_section(fields)


def encode_fetch_response(
    version: int,
    *,
    topics: Sequence[FetchTopicResponse],
    throttle_time_ms: int = 0,
    error_code: int = 0,
    session_id: int = 0,
    node_endpoints: Sequence[NodeEndpoint] | None = None,
) -> EncodedResponse:
    """Encode a Fetch response body (no header) as buffers that alias the record slices.

    ``node_endpoints`` (v16+, top-level tag 0) is written only when non-empty.
    """
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ValueError(f"Fetch v{version} is not supported")
    flexible = version >= FIRST_FLEXIBLE_VERSION
    v5 = version >= 5
    v11 = version >= 11
    buffers: list[bytes | bytearray | memoryview | RecordsRegion] = []
    size = 0
    chunk: list[bytes | bytearray | memoryview] = []
    ap = chunk.append
    if version >= 7:
        ap(_HEAD_V7.pack(throttle_time_ms, error_code, session_id))
    else:
        ap(_HEAD_V4.pack(throttle_time_ms))
    ap(uvarint(len(topics) + 1) if flexible else INT32.pack(len(topics)))
    for name, topic_id, partitions in topics:
        if version >= FIRST_TOPIC_ID_VERSION:
            ap(uuid_bytes(topic_id))
            ap(uvarint(len(partitions) + 1))
        elif name is None:
            raise ValueError(f"Fetch v{version} names its topics: a topic name is None")
        elif flexible:
            ap(encode_compact_string(name))
            ap(uvarint(len(partitions) + 1))
        else:
            ap(encode_string(name))
            ap(INT32.pack(len(partitions)))
        for (index, error, high_watermark, last_stable, log_start, aborted, preferred, records,
             diverging, leader, snapshot) in partitions:
            if v5:
                ap(_RESP_PART_V5.pack(index, error, high_watermark, last_stable, log_start))
            else:
                ap(_RESP_PART_V4.pack(index, error, high_watermark, last_stable))
            if aborted is None:
                ap(b"\x00" if flexible else _NULL_INT32)
            elif flexible:
                ap(uvarint(len(aborted) + 1))
                for producer_id, first_offset in aborted:
                    ap(_ABORTED_FLEXIBLE.pack(producer_id, first_offset, 0))
            else:
                ap(INT32.pack(len(aborted)))
                for producer_id, first_offset in aborted:
                    ap(_ABORTED.pack(producer_id, first_offset))
            if v11:
                ap(INT32.pack(preferred))
            if records is None:
                ap(b"\x00" if flexible else _NULL_INT32)
            else:
                n = records.nbytes if type(records) is memoryview else len(records)
                ap(uvarint(n + 1) if flexible else INT32.pack(n))
                if n > INLINE_RECORDS_MAX or not isinstance(records, (bytes, bytearray, memoryview)):
                    head = b"".join(chunk)
                    buffers.append(head)
                    buffers.append(records)
                    size += len(head) + n
                    chunk.clear()
                elif n:
                    ap(records)
            if flexible:
                if diverging is None and leader is None and snapshot is None:
                    ap(b"\x00")
                else:
                    ap(_partition_tags(diverging, leader, snapshot))
        if flexible:
            ap(b"\x00")
    if flexible:
        if version >= 16 and node_endpoints:
            ap(tagged_section([(0, encode_node_endpoints(node_endpoints))]))
        else:
            ap(b"\x00")
    if chunk:
        tail = b"".join(chunk)
        buffers.append(tail)
        size += len(tail)
    return _new(EncodedResponse, (buffers, size))
