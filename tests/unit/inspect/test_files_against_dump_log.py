"""``python -m broker.inspect files`` against Kafka 4.3.1's DumpLogSegments on files written by
hand to reach what a workload rarely does: sequence wrap-around, a delete horizon, an unknown
control type, LogAppendTime, zstd/snappy batches with headers, an offset gap, a bad CRC, a torn
tail, index entries that do not match the log, a corrupt snapshot, an unknown file; and
coordinator records of every shape: Transactions V2 values with all their tagged fields, v0
values, tombstones, unknown versions and types, truncated values, text that JSON escapes,
legacy and flexible offset commits, classic groups of the consumer protocol and of another
protocol, undecodable member bytes, KIP-848 records.

Both tools read the same files; stdout and stderr must be the same, field by field.
"""

from __future__ import annotations

import struct
import uuid
from pathlib import Path

import pytest

from coordinator.group import consumer_records as crec
from coordinator.group.records import (
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitValue,
    group_metadata_key,
    group_metadata_value,
    offset_commit_key,
    offset_commit_value,
)
from coordinator.txn.records import TransactionLogValue, encode_key, encode_log_value
from protocol import compression
from protocol.record_codec import DecodedRecord, rebuild_batch_with_codec
from protocol.records import (
    CONTROL_KEY,
    CRC,
    CRC_START,
    build_batch,
    build_control_batch,
    read_header,
    set_base_offset,
    set_log_append_time,
)
from storage.producer.snapshot import encode_snapshot
from tests.support.dump_log import compare, inspect, needs_dump_log

pytestmark = [pytest.mark.java, needs_dump_log]

T0 = 1_700_000_000_000
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def _recrc(buf: bytearray) -> bytearray:
    CRC.pack_into(buf, 17, __import__("crc32c").crc32c(bytes(buf[CRC_START:])))
    return buf


def _log(path: Path, batches: list[bytearray], tail: bytes = b"") -> list[int]:
    """Write the batches (base offsets as they are) and return each one's position."""
    positions, pos = [], 0
    for b in batches:
        positions.append(pos)
        pos += len(b)
    path.write_bytes(b"".join(bytes(b) for b in batches) + tail)
    return positions


def _records(base: int, *records: tuple[bytes | None, bytes | None], ts: int = T0, **kw) -> bytearray:
    return build_batch(list(records), base_offset=base, timestamp=ts, **kw)


def _compressed(base: int, codec: int, n: int, ts: int) -> bytearray:
    recs = [DecodedRecord(i, ts + i, b"ck%d" % i, b"cv" * (i + 1), [("h1", b"x"), ("h2", None)]) for i in range(n)]
    info = read_header(_records(0, (b"k", b"v"), ts=ts), 0)
    buf = rebuild_batch_with_codec(info, recs, codec)
    set_base_offset(buf, 0, base)
    return buf


@pytest.fixture(scope="module")
def user_partition(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("files") / "t-0"
    d.mkdir()
    batches = [
        # sequences wrap at Int32.MAX; a null key and a null value
        _records(0, (None, b"v0"), (b"k1", None), (b"k2", b"v2"), producer_id=7, producer_epoch=1,
                 base_sequence=2147483646),
        # a COMMIT marker the cleaner gave a delete horizon
        _recrc(bytearray(_with_attrs(build_control_batch(producer_id=7, producer_epoch=1, commit=True,
                                                         coordinator_epoch=5, timestamp=T0 + 1, base_offset=3),
                                     0x40))),
        # a control record of a type Kafka does not know
        _records(4, (CONTROL_KEY.pack(0, 9), b"\x00\x00\x00\x00\x00\x01"), control=True, transactional=True,
                 producer_id=7, producer_epoch=1),
        _records(5, (b"lat", b"appended"), ts=T0 + 2),
        _compressed(6, compression.ZSTD, 4, T0 + 3),
        _compressed(12, compression.SNAPPY, 2, T0 + 4),  # after a gap: non-consecutive offsets
        _records(14, (b"crc", b"will be flipped"), ts=T0 + 5),
        build_control_batch(producer_id=7, producer_epoch=1, commit=False, coordinator_epoch=5, timestamp=T0 + 6,
                            base_offset=15),
    ]
    set_log_append_time(batches[3], read_header(batches[3], 0), T0 + 100)
    batches[6][-3] ^= 0x20  # a value byte: the CRC no longer matches
    torn = bytes(_records(16, (b"torn", b"x" * 40)))[:40]
    pos = _log(d / "00000000000000000000.log", batches, tail=torn)
    # offset index: two right entries and one that points at the batch before its offset
    (d / "00000000000000000000.index").write_bytes(
        struct.pack(">iiiiii", 2, pos[0], 4, pos[2], 6, pos[3]))
    # time index: right; a wrong timestamp; an offset inside a batch; a timestamp going back
    (d / "00000000000000000000.timeindex").write_bytes(
        struct.pack(">qiqiqiqi", T0, 2, T0 + 5, 5, T0 + 50, 7, T0 + 6, 9))
    (d / "00000000000000000000.txnindex").write_bytes(
        struct.pack(">hqqqq", 0, 7, 0, 15, 16) + struct.pack(">hqqqq", 0, 8, 20, 22, 20))
    (d / "00000000000000000016.snapshot").write_bytes(encode_snapshot([
        (7, 1, 1, 15, 5, T0 + 6, 3, 0),  # first sequence wraps backwards
        (8, 0, -1, -1, 0, T0, -1, -1),   # no batch kept: no batch fields
        (9, 2, 40, 30, 9, T0 + 7, 0, 25),
    ]))
    corrupt = bytearray(encode_snapshot([(1, 0, 0, 0, 0, T0, 0, -1)]))
    corrupt[-1] ^= 1
    (d / "00000000000000000020.snapshot").write_bytes(bytes(corrupt))
    # a second, empty segment
    for suffix in (".log", ".index", ".timeindex"):
        (d / f"00000000000000000100{suffix}").write_bytes(b"")
    (d / "00000000000000000000.log.bak").write_bytes(b"ignored")
    return d


def _with_attrs(buf: bytearray, flag: int) -> bytearray:
    attrs = struct.unpack_from(">h", buf, 21)[0] | flag
    struct.pack_into(">h", buf, 21, attrs)
    return buf


def _files(d: Path, *names: str) -> list[str]:
    return [str(d / n) for n in names]


def test_user_segment_files(user_partition):
    names = ["00000000000000000000.log", "00000000000000000000.index", "00000000000000000000.timeindex",
             "00000000000000000000.txnindex", "00000000000000000016.snapshot", "00000000000000000020.snapshot",
             "00000000000000000100.log", "00000000000000000100.index", "00000000000000000100.timeindex",
             "00000000000000000000.log.bak"]
    text = compare(_files(user_partition, *names), "--print-data-log")
    assert "deleteHorizonMs: OptionalLong[" in text and "controlType: UNKNOWN(9)" in text
    assert "isvalid: false" in text and "Found 40 invalid bytes" in text and "compresscodec: zstd" in text
    compare(_files(user_partition, *names), "--deep-iteration")
    compare(_files(user_partition, *names[:4]))
    compare(_files(user_partition, *names[:4]), "--verify-index-only")
    compare(_files(user_partition, names[0]), "--print-data-log", "--skip-record-metadata")
    compare(_files(user_partition, names[0]), "--max-bytes", "200")
    compare(_files(user_partition, names[1], names[2], names[7], names[8]), "--index-sanity-check")


def test_a_directory_stands_for_its_segment_files(user_partition):
    out = inspect("files", str(user_partition))
    assert out.returncode == 0
    dumped = [line[len("Dumping "):] for line in out.stdout.splitlines() if line.startswith("Dumping ")]
    assert dumped == sorted(dumped) and len(dumped) == 9 and not any(p.endswith(".bak") for p in dumped)


# --- coordinator records ----------------------------------------------------------------------


def _txn_value(version: int, status: int, partitions, **tags) -> bytes:
    return encode_log_value(TransactionLogValue(
        producer_id=42, producer_epoch=3, transaction_timeout_ms=60000, transaction_status=status,
        partitions=partitions, last_update_timestamp_ms=T0 + 9, start_timestamp_ms=T0, version=version, **tags))


def test_transaction_state_records(tmp_path):
    d = tmp_path / "__transaction_state-3"
    d.mkdir()
    v1 = _txn_value(1, 1, [("orders", [0, 1]), ("out", [0])], previous_producer_id=41, next_producer_id=43,
                    client_transaction_version=2, next_producer_epoch=0)
    odd_id = 'tx\x01\n"quoted"\\é/ü'
    records = [
        (encode_key("tx-a"), _txn_value(0, 0, None)),
        (encode_key("tx-a"), v1),
        (encode_key(odd_id), _txn_value(1, 2, [("a", [])], client_transaction_version=2)),
        (encode_key("tx-a"), None),
        (encode_key("tx-b"), _I16.pack(5) + v1[2:]),  # an unknown value version
        (_I16.pack(9) + encode_key("tx-c")[2:], v1),  # an unknown record type
        (b"\x00", v1),  # no room for the record type
        (encode_key("tx-d"), v1[:6]),  # cut inside the producer id
    ]
    _log(d / "00000000000000000000.log", [_records(i, r, ts=T0 + i) for i, r in enumerate(records)])
    text = compare([str(d / "00000000000000000000.log")], "--transaction-log-decoder")
    assert '"nextProducerId":43' in text and '"clientTransactionVersion":2' in text and "<DELETE>" in text


def _subscription_v1(topics: list[str], owned: list[tuple[str, list[int]]]) -> bytes:
    out = _I16.pack(1) + _I32.pack(len(topics))
    for t in topics:
        out += _I16.pack(len(t)) + t.encode()
    out += _I32.pack(-1)  # no user data
    out += _I32.pack(len(owned))
    for t, parts in owned:
        out += _I16.pack(len(t)) + t.encode() + _I32.pack(len(parts)) + b"".join(_I32.pack(p) for p in parts)
    return out


def test_consumer_offsets_records(tmp_path):
    d = tmp_path / "__consumer_offsets-7"
    d.mkdir()
    member = MemberMetadata("m-1", "static-1", "client", "/10.0.0.1", 300000, 45000,
                            _subscription_v1(["orders", "out"], [("orders", [0])]), b"\x00")
    other = MemberMetadata("w-1", None, "connect", "/10.0.0.2", 60000, 10000, b"abc", b"")
    topic_id = uuid.UUID("0c4d3f0e-7b1a-4f4e-9d55-3f1c2a8b9e10")
    flexible_commit = (_I16.pack(4) + struct.pack(">qi", 77, 2) + bytes([len("meta") + 1]) + b"meta"
                       + struct.pack(">q", T0) + bytes([1, 0, 16]) + topic_id.bytes)
    records = [
        (offset_commit_key("g", "orders", 0), offset_commit_value(OffsetCommitValue(12, 0, "", T0))),
        (offset_commit_key("g", "orders", 1), offset_commit_value(OffsetCommitValue(8, -1, "m", T0, T0 + 99))),
        (_I16.pack(0) + offset_commit_key("old", "t", 3)[2:], _I16.pack(0) + struct.pack(">q", 5) + _I16.pack(0)
         + struct.pack(">q", T0)),
        (offset_commit_key("g", "orders", 2), flexible_commit),
        (group_metadata_key("g"), group_metadata_value(GroupMetadataValue("consumer", 4, "range", "m-1", T0,
                                                                          [member]))),
        (group_metadata_key("c"), group_metadata_value(GroupMetadataValue("connect", 1, "default", "w-1", T0,
                                                                          [other]))),
        (offset_commit_key("g", "orders", 0), None),
        (group_metadata_key("c"), None),
        (crec.key(crec.GROUP_METADATA, "k848"), crec.value(crec.GROUP_METADATA, epoch=3, metadata_hash=-5)),
        (crec.key(crec.TARGET_ASSIGNMENT_MEMBER, "k848", "mem"),
         crec.value(crec.TARGET_ASSIGNMENT_MEMBER, topic_partitions=[{"topic_id": topic_id, "partitions": [2, 0]}])),
        (_I16.pack(99) + b"\x00\x01g", b"\x00\x00"),
    ]
    _log(d / "00000000000000000000.log", [_records(i, r, ts=T0 + i) for i, r in enumerate(records)])
    text = compare([str(d / "00000000000000000000.log")], "--offsets-decoder")
    assert '"subscription":{"topics":["orders","out"]' in text and '"assignment":"AA=="' in text
    assert '"subscription":"YWJj"' in text and "Unknown record type 99" in text
