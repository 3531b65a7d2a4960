"""Reading produced records back as LogValidator does (protocol/record_validation.py): a stream
read in chunks of any size answers exactly as the whole stream read at once; keyless records are
found; a batch that inflates far past its records is stopped one chunk after them."""

from __future__ import annotations

import time
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import compression
from protocol.record_validation import (
    REMAINING,
    check_compressed_records,
    check_record_stream,
    read_records,
    record_errors_message,
)
from protocol.records import InvalidRecord


def _uvar(n: int) -> bytes:
    out = bytearray()
    while True:
        x, n = n & 0x7F, n >> 7
        if n:
            out.append(x | 0x80)
        else:
            out.append(x)
            return bytes(out)


def _zz(n: int) -> bytes:
    return _uvar((n << 1) ^ (n >> 63))


def record(i: int, key: bytes | None, value: bytes | None, headers: list[tuple[bytes, bytes]] = ()) -> bytes:
    body = b"\x00" + _zz(i * 3) + _zz(i)
    body += _zz(-1) if key is None else _zz(len(key)) + key
    body += _zz(-1) if value is None else _zz(len(value)) + value
    body += _zz(len(headers)) + b"".join(_zz(len(k)) + k + _zz(len(v)) + v for k, v in headers)
    return _zz(len(body)) + body


records = st.lists(
    st.tuples(st.none() | st.binary(max_size=20), st.none() | st.binary(max_size=300),
              st.lists(st.tuples(st.binary(max_size=5), st.binary(max_size=5)), max_size=2)),
    min_size=1, max_size=12,
)


def _outcome(fn):
    try:
        fn()
        return "ok"
    except InvalidRecord as e:
        return f"{type(e).__name__}: {e}"


def _chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(c, len(data)) for c in cuts})
    out, prev = [], 0
    for p in points + [len(data)]:
        out.append(data[prev:p])
        prev = p
    return out


@settings(max_examples=300, deadline=None)
@given(recs=records, count_delta=st.integers(-2, 2), garbage=st.binary(max_size=6),
       flip=st.none() | st.tuples(st.integers(0, 10_000), st.integers(1, 255)),
       cuts=st.lists(st.integers(0, 5000), max_size=8))
def test_chunked_reading_answers_as_whole_reading(recs, count_delta, garbage, flip, cuts):
    data = bytearray(b"".join(record(i, k, v, h) for i, (k, v, h) in enumerate(recs)) + garbage)
    if flip is not None:
        data[flip[0] % len(data)] ^= flip[1]
    data = bytes(data)
    count = max(1, len(recs) + count_delta)
    whole_keyless: list[int] = []
    chunk_keyless: list[int] = []
    whole = _outcome(lambda: read_records(data, 0, len(data), 0, count, compressed=True, keyless=whole_keyless))
    chunked = _outcome(lambda: check_record_stream(_chunks(data, cuts), count, chunk_keyless))
    assert chunked == whole
    if whole == "ok":
        assert chunk_keyless == whole_keyless
        if flip is None:
            assert whole_keyless == [i for i, (k, _v, _h) in enumerate(recs) if k is None][:count]


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_every_codec_streams_valid_records(codec):
    recs = [record(i, b"k%d" % i if i % 3 else None, b"v" * (i * 1000)) for i in range(200)]
    keyless: list[int] = []
    check_compressed_records(codec, compression.compress(codec, b"".join(recs)), 200, 1 << 30, keyless)
    assert keyless == list(range(0, 200, 3))


@pytest.mark.parametrize("codec", [1, 3])
def test_a_bomb_after_the_records_stops_one_chunk_later(codec):
    """Three real records followed by 1 GiB of zeros: Kafka reads one byte past the declared count
    and refuses the batch; so do we, without inflating the rest."""
    payload = b"".join(record(i, b"k", b"v") for i in range(3)) + bytes(1 << 30)
    bomb = compression.compress(codec, payload)
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(InvalidRecord, match=REMAINING):
            check_compressed_records(codec, bomb, 3, 1 << 31)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - started < 1.0
    assert peak < 16 * 1024 * 1024, peak


def test_one_huge_record_stops_at_the_limit_without_keeping_it():
    """A record whose value alone goes past the bound is refused from its first chunk."""
    bomb = compression.compress(compression.GZIP, record(0, b"k", bytes(300 * 1024 * 1024)))
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(compression.DecompressedTooLarge):
            check_compressed_records(compression.GZIP, bomb, 1, 64 * 1024 * 1024)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * 1024 * 1024 and time.perf_counter() - started < 0.5


def test_record_errors_message_as_kafka_words_it():
    msg = "Compacted topic cannot accept message without key in topic partition topic-3"
    assert record_errors_message([(1, msg), (2, msg)]) == (
        "One or more records have been rejected due to 2 record errors in total, and only showing the first "
        f"three errors at most: [RecordError(batchIndex=1, message='{msg}'), "
        f"RecordError(batchIndex=2, message='{msg}')]"
    )
