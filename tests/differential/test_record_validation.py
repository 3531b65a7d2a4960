"""Produce payloads whose batch header and CRC are right but whose records are not: Kafka's
LogValidator reads every record (decompressing compressed batches) and refuses the batch, so neither
broker stores what a consumer could not read. Compared error code by error code with Apache Kafka, for
an uncompressed batch and every codec.

Normalised: error messages (free text), log start offsets (per cluster).
"""

from __future__ import annotations

import gzip
import random
import struct
import time

import pytest

from tests.differential.harness import unique

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def _uvar(n: int) -> bytes:
    out = b""
    while True:
        x, n = n & 0x7F, n >> 7
        if n:
            out += bytes([x | 0x80])
        else:
            return out + bytes([x])


def _zz(n: int) -> bytes:
    return _uvar((n << 1) ^ (n >> 63))


def record(i: int, key: bytes | None = b"k", value: bytes | None = b"value", headers: int | None = 0,
           key_len: int | None = None, length_delta: int = 0) -> bytes:
    body = b"\x00" + _zz(0) + _zz(i)
    body += _zz(-1 if key is None else len(key) if key_len is None else key_len) + (key or b"")
    body += _zz(-1 if value is None else len(value)) + (value or b"")
    body += _zz(headers if headers is not None else 0)
    return _zz(len(body) + length_delta) + body


def compress(codec: int, data: bytes) -> bytes:
    if codec == 1:
        return gzip.compress(data)
    if codec == 2:
        from kafka.codec import snappy_encode

        return snappy_encode(data)
    if codec == 3:
        import lz4.frame

        return lz4.frame.compress(data)
    if codec == 4:
        import zstandard

        return zstandard.ZstdCompressor().compress(data)
    return data


def batch(records: bytes, count: int, codec: int = 0, last_offset_delta: int | None = None,
          compressed: bytes | None = None) -> bytes:
    import crc32c

    payload = compressed if compressed is not None else compress(codec, records)
    now = int(time.time() * 1000)
    head = bytearray(61)
    struct.pack_into(">qiib", head, 0, 0, 49 + len(payload), -1, 2)
    struct.pack_into(">hiqqqhii", head, 21, codec, count - 1 if last_offset_delta is None else last_offset_delta,
                     now, now, -1, -1, -1, count)
    out = head + payload
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


THREE = record(0) + record(1) + record(2)


def cases(codec: int) -> dict[str, bytes]:
    c = codec
    out = {
        "valid": batch(THREE, 3, c),
        "count-above-records": batch(THREE, 4, c),
        "count-below-records": batch(THREE, 2, c),
        "offset-range-beyond-count": batch(THREE, 3, c, last_offset_delta=5),
        "huge-count": batch(THREE, 0x7FFFFFFF, c),
        "trailing-garbage": batch(THREE + b"\x07\x07\x07", 3, c),
        "truncated-last-record": batch(THREE[:-3], 3, c),
        "record-length-too-long": batch(record(0) + record(1) + record(2, length_delta=2) + b"\x00\x00", 3, c),
        "record-length-too-short": batch(record(0) + record(1) + record(2, length_delta=-1), 3, c),
        "key-length-past-record": batch(record(0) + record(1, key_len=1000) + record(2), 3, c),
        "negative-header-count": batch(record(0) + record(1, headers=-1) + record(2), 3, c),
        "null-key-and-value": batch(record(0, key=None, value=None) + record(1) + record(2), 3, c),
        "headers": batch(record(0, headers=0) + record(1) + record(2), 3, c),
        "zero-count": batch(THREE, 0, c, last_offset_delta=2),
        "negative-count": batch(THREE, -1, c, last_offset_delta=2),
        "negative-offset-delta": batch(THREE, 3, c, last_offset_delta=-1),
        "offset-deltas-not-sequential": batch(record(0) + record(5) + record(2), 3, c),
        "random-records": batch(random.Random(7).randbytes(len(THREE)), 3, c),
    }
    if codec:
        out["garbage-compressed"] = batch(b"", 3, c, compressed=random.Random(8).randbytes(40))
        out["empty-compressed"] = batch(b"", 3, c, compressed=b"")
        out["truncated-compressed"] = batch(b"", 3, c, compressed=compress(c, THREE * 50)[:-7])
    if codec == 3:
        out.update(lz4_cases())
    return out


def lz4_cases() -> dict[str, bytes]:
    """LZ4 frames Kafka's Lz4BlockInputStream refuses or reads in its own way."""
    import lz4.frame

    def frame(**kw) -> bytearray:
        return bytearray(lz4.frame.compress(THREE, **{"block_linked": False, **kw}))

    corrupt_block = frame(store_size=False)
    corrupt_block[11:13] = b"\xff\xff"  # inside the one compressed block: a bad match offset
    bad_descriptor = frame()
    bad_descriptor[4 + 2 + 8] ^= 0xFF  # the header checksum byte after FLG, BD and the content size
    bad_block_checksum = frame(block_checksum=True, store_size=False)
    bad_block_checksum[-5] ^= 0xFF  # the block checksum before the end mark
    big = b"".join(record(i, value=b"v" * 250) for i in range(400))  # more than one 64 KiB block
    return {
        "lz4-corrupt-block": batch(b"", 3, 3, compressed=bytes(corrupt_block)),
        "lz4-bad-descriptor-checksum": batch(b"", 3, 3, compressed=bytes(bad_descriptor)),
        "lz4-bad-block-checksum": batch(b"", 3, 3, compressed=bytes(bad_block_checksum)),
        "lz4-block-checksums": batch(b"", 3, 3, compressed=bytes(frame(block_checksum=True))),
        "lz4-content-checksum": batch(b"", 3, 3, compressed=bytes(frame(content_checksum=True))),
        "lz4-dependent-blocks": batch(b"", 400, 3, compressed=lz4.frame.compress(
            big, block_linked=True, block_size=lz4.frame.BLOCKSIZE_MAX64KB)),
        "lz4-4mb-blocks": batch(b"", 400, 3, compressed=lz4.frame.compress(
            big, block_linked=False, block_size=lz4.frame.BLOCKSIZE_MAX4MB)),
        "lz4-trailing-after-end-mark": batch(b"", 3, 3, compressed=bytes(frame()) + b"junk"),
    }


CASE_IDS = [(name, codec) for codec in CODECS for name in cases(CODECS[codec])]


@pytest.fixture(scope="module")
def topic(pair) -> str:
    return pair.create_topic(unique("recval"), 1)


@pytest.mark.parametrize("name,codec", CASE_IDS, ids=[f"{c}-{n}" for n, c in CASE_IDS])
def test_record_validation(pair, topic, name, codec):
    payload = cases(CODECS[codec])[name]

    def scenario(t):
        return t.produce_one(topic, 0, payload, version=9, acks=-1)["error_code"]

    k, o = pair.run(scenario)
    if name in ("valid", "null-key-and-value"):
        assert k == 0
    assert o == k, f"Kafka {k}, ours {o}"


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unknown_codec_id(pair, topic, codec_id):
    """A compression id Kafka does not know (5-7 in the three attribute bits)."""
    payload = batch(THREE, 3, codec_id)

    def scenario(t):
        return t.produce_one(topic, 0, payload, version=9, acks=-1)["error_code"]

    k, o = pair.run(scenario)
    assert o == k, f"Kafka {k}, ours {o}"


def _fetched_batches(t, topic: str) -> list[tuple]:
    """(codec, count, record timestamps, keys, values, headers) of every batch fetched from offset 0."""
    from protocol.record_codec import decode_records
    from protocol.records import iter_batch_positions, read_header

    (topic_resp,) = t.fetch(topic, 0, 0).responses
    (part,) = topic_resp.partitions
    data = bytes(part.records or b"")
    out = []
    for pos, size in iter_batch_positions(data):
        info = read_header(data, pos)
        recs = decode_records(data[pos:pos + size])
        out.append((info.compression, info.records_count, info.producer_id >= 0, info.base_sequence,
                    [(r.timestamp, r.key, r.value, r.headers) for r in recs]))
    return out


TOPIC_CODECS = ["uncompressed", "gzip", "snappy", "lz4", "zstd"]


@pytest.mark.parametrize("topic_codec", TOPIC_CODECS)
def test_topic_compression_type_recompresses(pair, topic_codec):
    """A topic whose compression.type is not ``producer`` stores every batch in its own codec
    (LogValidator rebuilds the batch): the stored codec, records, timestamps and headers match."""
    topic = pair.create_topic(unique(f"tcodec-{topic_codec}"), 1, {"compression.type": topic_codec})
    def hrec(i: int) -> bytes:
        body = b"\x00" + _zz(i * 7) + _zz(i) + _zz(1) + b"k" + _zz(5) + b"v%04d" % i
        body += _zz(1) + _zz(1) + b"h" + _zz(2) + b"hv"
        return _zz(len(body)) + body

    payloads = [batch(b"".join(hrec(i) for i in range(4)), 4, codec) for codec in (0, 1, 3, 4)]

    def scenario(t):
        errors = [t.produce_one(topic, 0, p, version=9, acks=-1)["error_code"] for p in payloads]
        return errors, _fetched_batches(t, topic)

    k, o = pair.run(scenario)
    assert k[0] == [0, 0, 0, 0]
    assert {b[0] for b in k[1]} == {TOPIC_CODECS.index(topic_codec)}
    assert o == k
