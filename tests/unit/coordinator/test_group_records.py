"""__consumer_offsets records, checked with an independent decoder written from
protocol-facts §4.9 (Kafka's OffsetCommitKey/Value, GroupMetadataKey/Value JSON), not with the
encoder under test."""

from __future__ import annotations

import struct

from coordinator.group import records as rec
from coordinator.group.manager import CommitPartition
from tests.unit.coordinator.helpers import join, join_result, make_manager, subscription, sync


class Buf:
    """Big-endian, non-flexible Kafka primitives: int16-length strings, int32-length bytes/arrays."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, fmt: str):
        (v,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return v

    def string(self, nullable: bool = False):
        n = self.take(">h")
        if n == -1:
            assert nullable
            return None
        s = self.data[self.pos:self.pos + n].decode()
        self.pos += n
        return s

    def blob(self) -> bytes:
        n = self.take(">i")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def done(self) -> bool:
        return self.pos == len(self.data)


def parse_key(key: bytes):
    b = Buf(key)
    kind = b.take(">h")
    if kind in (0, 1):
        out = ("offset", b.string(), b.string(), b.take(">i"))
    else:
        assert kind == 2
        out = ("group", b.string())
    assert b.done()
    return out


def parse_offset_value(value: bytes) -> dict:
    b = Buf(value)
    version = b.take(">h")
    out = {"version": version, "offset": b.take(">q")}
    if version >= 3:
        out["leader_epoch"] = b.take(">i")
    out["metadata"] = b.string()
    out["commit_timestamp"] = b.take(">q")
    if version == 1:
        out["expire_timestamp"] = b.take(">q")
    assert b.done()
    return out


def parse_group_value(value: bytes) -> dict:
    b = Buf(value)
    version = b.take(">h")
    out = {
        "version": version,
        "protocol_type": b.string(),
        "generation": b.take(">i"),
        "protocol": b.string(nullable=True),
        "leader": b.string(nullable=True),
    }
    if version >= 2:
        out["current_state_timestamp"] = b.take(">q")
    members = []
    for _ in range(b.take(">i")):
        m = {"member_id": b.string()}
        if version >= 3:
            m["group_instance_id"] = b.string(nullable=True)
        m["client_id"] = b.string()
        m["client_host"] = b.string()
        if version >= 1:
            m["rebalance_timeout"] = b.take(">i")
        m["session_timeout"] = b.take(">i")
        m["subscription"] = b.blob()
        m["assignment"] = b.blob()
        members.append(m)
    out["members"] = members
    assert b.done()
    return out


def test_offset_commit_records_v3_and_v1():
    mgr, timer, writer = make_manager()
    mgr.commit_offsets("grp", -1, "", None, -1, [("topic", [CommitPartition(3, 42, 7, "meta")])], 8)
    _, group, key, value = writer.log[-1]
    assert parse_key(key) == ("offset", "grp", "topic", 3)
    assert parse_offset_value(value) == {"version": 3, "offset": 42, "leader_epoch": 7, "metadata": "meta",
                                         "commit_timestamp": timer.now}
    mgr.commit_offsets("grp", -1, "", None, 5000, [("topic", [CommitPartition(3, 43, -1, None)])], 2)
    assert parse_offset_value(writer.log[-1][3]) == {"version": 1, "offset": 43, "metadata": "",
                                                     "commit_timestamp": timer.now,
                                                     "expire_timestamp": timer.now + 5000}


def test_group_metadata_record_v3():
    mgr, timer, writer = make_manager()
    box = join(mgr, "grp", instance_id="inst", version=5, session=7000, rebalance=9000, client_id="cid",
               protocols=[("range", subscription("a", "b"))])
    timer.advance(0)
    member = join_result(box).member_id
    sync(mgr, "grp", 1, member, [(member, b"ASSIGN")], instance_id="inst")
    first = parse_group_value(writer.log[0][3])
    assert parse_key(writer.log[0][2]) == ("group", "grp")
    assert first["version"] == 3 and first["generation"] == 0 and first["members"] == []
    assert first["protocol"] is None and first["leader"] is None and first["protocol_type"] == ""
    last = parse_group_value(writer.log[-1][3])
    assert {k: last[k] for k in ("version", "protocol_type", "generation", "protocol", "leader")} == {
        "version": 3, "protocol_type": "consumer", "generation": 1, "protocol": "range", "leader": member}
    assert last["current_state_timestamp"] == timer.now
    assert last["members"] == [{
        "member_id": member, "group_instance_id": "inst", "client_id": "cid", "client_host": "/127.0.0.1",
        "rebalance_timeout": 9000, "session_timeout": 7000, "subscription": subscription("a", "b"),
        "assignment": b"ASSIGN",
    }]


def test_tombstones_have_null_values():
    mgr, _, writer = make_manager()
    mgr.commit_offsets("grp", -1, "", None, -1, [("t", [CommitPartition(0, 1)])], 8)
    mgr.delete_groups(["grp"])
    assert [(parse_key(k), v) for _, _, k, v in writer.log[-2:]] == [
        (("offset", "grp", "t", 0), None), (("group", "grp"), None)]


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _cstr(s: str | None) -> bytes:
    if s is None:
        return _uvarint(0)
    return _uvarint(len(s.encode()) + 1) + s.encode()


def test_reads_flexible_v4_values_written_by_newer_kafka():
    topic_id_tag = _uvarint(1) + _uvarint(0) + _uvarint(16) + bytes(range(16))
    v4 = struct.pack(">hqi", 4, 99, 3) + _cstr("m") + struct.pack(">q", 1234) + topic_id_tag
    value = rec.decode_offset_commit_value(v4)
    assert (value.offset, value.leader_epoch, value.metadata, value.commit_timestamp) == (99, 3, "m", 1234)
    member = (_cstr("mid") + _cstr(None) + _cstr("cid") + _cstr("/h") + struct.pack(">ii", 10, 20)
              + _uvarint(3) + b"ab" + _uvarint(2) + b"x" + _uvarint(0))
    g4 = (struct.pack(">h", 4) + _cstr("consumer") + struct.pack(">i", 5) + _cstr("range") + _cstr("mid")
          + struct.pack(">q", 77) + _uvarint(2) + member + _uvarint(0))
    group = rec.decode_group_metadata_value(g4)
    assert (group.protocol_type, group.generation, group.protocol, group.leader) == ("consumer", 5, "range", "mid")
    [m] = group.members
    assert (m.member_id, m.group_instance_id, m.session_timeout, m.subscription, m.assignment) == (
        "mid", None, 20, b"ab", b"x")


def test_reads_old_versions():
    v0 = struct.pack(">hq", 0, 5) + struct.pack(">h", 1) + b"m" + struct.pack(">q", 9)
    assert rec.decode_offset_commit_value(v0).offset == 5
    g0 = (struct.pack(">h", 0) + struct.pack(">h", 8) + b"consumer" + struct.pack(">i", 2) + struct.pack(">h", -1)
          + struct.pack(">h", -1) + struct.pack(">i", 0))
    assert rec.decode_group_metadata_value(g0).generation == 2
    legacy_key = struct.pack(">h", 0) + struct.pack(">h", 1) + b"g" + struct.pack(">h", 1) + b"t" + struct.pack(">i", 4)
    assert rec.decode_key(legacy_key) == rec.OffsetCommitKey("g", "t", 4)
    assert rec.decode_key(struct.pack(">h", 3) + b"whatever") is None  # KIP-848 records are not ours
