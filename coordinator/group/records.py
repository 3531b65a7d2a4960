"""``__consumer_offsets`` record layouts, byte-compatible with Kafka's (CoordinatorRecordSerde).

Key: ``int16 recordType`` then the key body at version 0 (non-flexible strings):
  0, 1 -> OffsetCommitKey {group, topic, partition int32}  (0 is the legacy type, read only)
  2    -> GroupMetadataKey {group}
  3+   -> KIP-848 / share / streams records: not ours, skipped when loading.
Value: ``int16 version`` then the body; a null value is a tombstone.

We write OffsetCommitValue v3 (v1 when the commit carries an expire timestamp, the only
version with that field) and GroupMetadataValue v3, as Kafka 4.0 does, and read every version
0-4 (v4 is flexible: compact strings/bytes/arrays and tagged fields) so logs written by newer
Kafka brokers load too.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

OFFSET_COMMIT_KEY_TYPE = 1
LEGACY_OFFSET_COMMIT_KEY_TYPE = 0
GROUP_METADATA_KEY_TYPE = 2

OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class RecordFormatError(ValueError):
    """A key or value that does not parse: the loader logs and skips it."""


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(slots=True)
class OffsetCommitValue:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1  # only carried by v1


@dataclass(slots=True)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: list[MemberMetadata] = field(default_factory=list)


# --- writing -------------------------------------------------------------------------------


def _str(s: str) -> bytes:
    b = s.encode()
    return _I16.pack(len(b)) + b


def _nstr(s: str | None) -> bytes:
    return _I16.pack(-1) if s is None else _str(s)


def _bytes(b: bytes) -> bytes:
    return _I32.pack(len(b)) + bytes(b)


def offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    return _I16.pack(OFFSET_COMMIT_KEY_TYPE) + _str(group) + _str(topic) + _I32.pack(partition)


def group_metadata_key(group: str) -> bytes:
    return _I16.pack(GROUP_METADATA_KEY_TYPE) + _str(group)


def offset_commit_value(value: OffsetCommitValue) -> bytes:
    """v1 if an expire timestamp is set (the only version that stores it), else v3."""
    if value.expire_timestamp >= 0:
        return (_I16.pack(1) + _I64.pack(value.offset) + _str(value.metadata) + _I64.pack(value.commit_timestamp)
                + _I64.pack(value.expire_timestamp))
    return (_I16.pack(OFFSET_COMMIT_VALUE_VERSION) + _I64.pack(value.offset) + _I32.pack(value.leader_epoch)
            + _str(value.metadata) + _I64.pack(value.commit_timestamp))


def group_metadata_value(value: GroupMetadataValue) -> bytes:
    out = bytearray(_I16.pack(GROUP_METADATA_VALUE_VERSION))
    out += _str(value.protocol_type)
    out += _I32.pack(value.generation)
    out += _nstr(value.protocol)
    out += _nstr(value.leader)
    out += _I64.pack(value.current_state_timestamp)
    out += _I32.pack(len(value.members))
    for m in value.members:
        out += _str(m.member_id)
        out += _nstr(m.group_instance_id)
        out += _str(m.client_id)
        out += _str(m.client_host)
        out += _I32.pack(m.rebalance_timeout)
        out += _I32.pack(m.session_timeout)
        out += _bytes(m.subscription)
        out += _bytes(m.assignment)
    return bytes(out)


# --- reading -------------------------------------------------------------------------------


class _Reader:
    __slots__ = ("buf", "pos", "flexible")

    def __init__(self, buf: bytes | memoryview, pos: int = 0, flexible: bool = False) -> None:
        self.buf = memoryview(buf)
        self.pos = pos
        self.flexible = flexible

    def _need(self, n: int) -> None:
        if n < 0 or self.pos + n > len(self.buf):
            raise RecordFormatError(f"record truncated at byte {self.pos} (need {n})")

    def i16(self) -> int:
        self._need(2)
        (v,) = _I16.unpack_from(self.buf, self.pos)
        self.pos += 2
        return v

    def i32(self) -> int:
        self._need(4)
        (v,) = _I32.unpack_from(self.buf, self.pos)
        self.pos += 4
        return v

    def i64(self) -> int:
        self._need(8)
        (v,) = _I64.unpack_from(self.buf, self.pos)
        self.pos += 8
        return v

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            self._need(1)
            b = self.buf[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 35:
                raise RecordFormatError("varint too long")

    def _length(self, wide: bool) -> int:
        if self.flexible:
            return self.uvarint() - 1
        return self.i32() if wide else self.i16()

    def nstr(self) -> str | None:
        n = self._length(False)
        if n < 0:
            return None
        self._need(n)
        s = bytes(self.buf[self.pos:self.pos + n]).decode()
        self.pos += n
        return s

    def str(self) -> str:
        s = self.nstr()
        if s is None:
            raise RecordFormatError("null string in a non-nullable field")
        return s

    def bytes(self) -> bytes:
        n = self._length(True)
        if n < 0:
            raise RecordFormatError("null bytes in a non-nullable field")
        self._need(n)
        b = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return b

    def array_len(self) -> int:
        n = self._length(True)
        if n < 0:
            raise RecordFormatError("null array in a non-nullable field")
        return n

    def skip_tagged_fields(self) -> None:
        if not self.flexible:
            return
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            size = self.uvarint()
            self._need(size)
            self.pos += size


def decode_key(key: bytes | memoryview | None) -> OffsetCommitKey | GroupMetadataKey | None:
    """The typed key, or None for record types this coordinator does not own (KIP-848 etc.)."""
    if key is None:
        raise RecordFormatError("record without a key")
    try:
        r = _Reader(key)
        record_type = r.i16()
        if record_type in (LEGACY_OFFSET_COMMIT_KEY_TYPE, OFFSET_COMMIT_KEY_TYPE):
            return OffsetCommitKey(r.str(), r.str(), r.i32())
        if record_type == GROUP_METADATA_KEY_TYPE:
            return GroupMetadataKey(r.str())
    except UnicodeDecodeError as e:
        raise RecordFormatError(str(e)) from None
    return None


def decode_offset_commit_value(value: bytes | memoryview) -> OffsetCommitValue:
    try:
        r = _Reader(value)
        version = r.i16()
        if version < 0 or version > 4:
            raise RecordFormatError(f"unknown OffsetCommitValue version {version}")
        r.flexible = version >= 4
        offset = r.i64()
        leader_epoch = r.i32() if version >= 3 else -1
        metadata = r.str()
        commit_ts = r.i64()
        expire_ts = r.i64() if version == 1 else -1
        r.skip_tagged_fields()
        return OffsetCommitValue(offset, leader_epoch, metadata, commit_ts, expire_ts)
    except UnicodeDecodeError as e:
        raise RecordFormatError(str(e)) from None


def decode_group_metadata_value(value: bytes | memoryview) -> GroupMetadataValue:
    try:
        r = _Reader(value)
        version = r.i16()
        if version < 0 or version > 4:
            raise RecordFormatError(f"unknown GroupMetadataValue version {version}")
        r.flexible = version >= 4
        protocol_type = r.str()
        generation = r.i32()
        protocol = r.nstr()
        leader = r.nstr()
        state_ts = r.i64() if version >= 2 else -1
        members = []
        for _ in range(r.array_len()):
            member_id = r.str()
            instance_id = r.nstr() if version >= 3 else None
            client_id = r.str()
            client_host = r.str()
            rebalance_timeout = r.i32() if version >= 1 else -1
            session_timeout = r.i32()
            subscription = r.bytes()
            assignment = r.bytes()
            r.skip_tagged_fields()
            members.append(MemberMetadata(member_id, instance_id, client_id, client_host, rebalance_timeout,
                                          session_timeout, subscription, assignment))
        r.skip_tagged_fields()
        return GroupMetadataValue(protocol_type, generation, protocol, leader, state_ts, members)
    except UnicodeDecodeError as e:
        raise RecordFormatError(str(e)) from None
