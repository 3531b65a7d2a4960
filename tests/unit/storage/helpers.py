"""Test helpers: batch builders and an independent decoder of Kafka's on-disk formats.

The decoders here are written from Kafka's format description (protocol-facts.md section 4),
not from storage/, so a test that round-trips through both checks the bytes, not our own code.
"""

from __future__ import annotations

import struct

from crc32c import crc32c

from protocol.records import build_batch, validate_batches


def make_batch(
    n_records: int, *, timestamp: int, value_size: int = 20, key: bytes | None = b"k"
) -> bytearray:
    return build_batch([(key, b"x" * value_size)] * n_records, timestamp=timestamp)


def append_batch(
    plog, n_records: int, *, timestamp: int, value_size: int = 20, now_ms: int | None = None, epoch=0
):
    buf = make_batch(n_records, timestamp=timestamp, value_size=value_size)
    return plog.append(
        buf, validate_batches(buf), leader_epoch=epoch, now_ms=now_ms if now_ms is not None else timestamp
    )


def decode_log(data: bytes) -> list[dict]:
    """Every batch of a .log file: base offset, last offset, position, size, max timestamp, PLE;
    asserts magic 2 and the CRC-32C over [21, end)."""
    out = []
    pos = 0
    while pos < len(data):
        base, length, ple, magic, crc = struct.unpack_from(">qiibI", data, pos)
        size = length + 12
        assert magic == 2
        assert crc32c(data[pos + 21 : pos + size]) == crc
        (lod,) = struct.unpack_from(">i", data, pos + 23)
        (max_ts,) = struct.unpack_from(">q", data, pos + 35)
        out.append(dict(base=base, last=base + lod, pos=pos, size=size, max_ts=max_ts, ple=ple))
        pos += size
    return out


def decode_offset_index(data: bytes) -> list[tuple[int, int]]:
    assert len(data) % 8 == 0
    return [struct.unpack_from(">ii", data, i) for i in range(0, len(data), 8)]


def decode_time_index(data: bytes) -> list[tuple[int, int]]:
    assert len(data) % 12 == 0
    return [struct.unpack_from(">qi", data, i) for i in range(0, len(data), 12)]


def decode_txn_index(data: bytes) -> list[tuple[int, int, int, int, int]]:
    assert len(data) % 34 == 0
    return [struct.unpack_from(">hqqqq", data, i) for i in range(0, len(data), 34)]


def kafka_index_rule(
    batches: list[dict], interval: int
) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Expected (.index, .timeindex) entries for batches appended one by one to a fresh segment
    (LogSegment.append), relative to base offset 0 of the first batch's segment."""
    base = batches[0]["base"]
    index, tindex = [], []
    since = 0
    max_ts, off_max = -1, base
    for b in batches:
        if b["max_ts"] > max_ts:
            max_ts, off_max = b["max_ts"], b["last"]
        if since > interval:
            index.append((b["last"] - base, b["pos"]))
            if not tindex or max_ts > tindex[-1][0]:
                tindex.append((max_ts, off_max - base))
            since = 0
        since += b["size"]
    return index, tindex


def read_bytes(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def read_text(path) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()
