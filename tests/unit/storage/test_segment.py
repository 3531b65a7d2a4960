"""LogSegment: Kafka's index rule, reads at batch granularity, truncation, recovery."""

from __future__ import annotations

import os
import random
import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.records import validate_batches
from storage.log.file_region import FileRegion
from storage.log.segment import ZERO_COPY_MIN, LogSegment
from tests.unit.storage.helpers import (
    decode_log,
    decode_offset_index,
    decode_time_index,
    kafka_index_rule,
    make_batch,
    read_bytes,
)


def _segment(tmp_path, base=0, interval=4096, index_bytes=10 * 1024 * 1024, now=0):
    return LogSegment(
        str(tmp_path), base, index_interval_bytes=interval, max_index_size=index_bytes, now_ms=now
    )


def _append(seg, next_offset, batches_spec):
    """Append one produce payload of several batches (n_records, value_size, ts) with offsets assigned."""
    bufs = []
    for n, size, ts in batches_spec:
        b = make_batch(n, timestamp=ts, value_size=size)
        b[0:8] = next_offset.to_bytes(8, "big")
        next_offset += n
        bufs.append(b)
    buf = bytearray(b"".join(bufs))
    seg.append(buf, validate_batches(buf))
    return next_offset


def test_index_entries_follow_kafka_rule(tmp_path):
    rng = random.Random(7)
    seg = _segment(tmp_path, interval=1000)
    nxt = 0
    for _ in range(60):
        k = rng.randint(1, 3)  # several batches per append: the rule applies per batch
        spec = [(rng.randint(1, 5), rng.randint(10, 400), rng.randint(0, 10_000)) for _ in range(k)]
        nxt = _append(seg, nxt, spec)
    seg.close()
    base = str(tmp_path / "00000000000000000000")
    batches = decode_log(read_bytes(base + ".log"))
    want_index, want_time = kafka_index_rule(batches, 1000)
    assert decode_offset_index(read_bytes(base + ".index")) == want_index
    got_time = decode_time_index(read_bytes(base + ".timeindex"))
    # close() adds the final (max timestamp, offset) entry if it is larger than the last one
    max_b = max(batches, key=lambda b: b["max_ts"])
    first_max = next(b for b in batches if b["max_ts"] == max_b["max_ts"])
    if not want_time or first_max["max_ts"] > want_time[-1][0]:
        want_time.append((first_max["max_ts"], first_max["last"]))
    assert got_time == want_time
    assert len(want_index) > 5


def test_read_whole_batches_and_limits(tmp_path):
    seg = _segment(tmp_path, base=100, interval=0)
    nxt = 100
    for i in range(10):
        nxt = _append(seg, nxt, [(3, 50, 1000 + i)])  # offsets 100..129, 3 per batch
    batches = decode_log(read_bytes(seg.log_path))
    size = batches[0]["size"]
    r = seg.read(100, 10**6)
    assert bytes(r.records) == read_bytes(seg.log_path) and r.next_offset == 130
    # an offset inside a batch returns that whole batch
    r = seg.read(104, size)
    assert r.first_offset == 103 and r.position == batches[1]["pos"] and len(r.records) == size
    assert r.next_offset == 106
    # max_bytes cuts at a batch boundary
    r = seg.read(100, 2 * size + size // 2)
    assert len(r.records) == 2 * size and r.next_offset == 106
    # min_one_message returns the first batch even when larger than max_bytes
    assert len(seg.read(100, 10, min_one_message=True).records) == size
    assert len(seg.read(100, 10, min_one_message=False).records) == 0
    # max_offset (HW/LSO) stops before the batch holding it
    r = seg.read(100, 10**6, max_offset=109)
    assert r.next_offset == 109 and len(r.records) == 3 * size
    assert len(seg.read(109, 10**6, max_offset=109).records) == 0
    # past the end of the segment: None (the log moves on to the next segment)
    assert seg.read(130, 100) is None
    # sequential reads use the hint and agree with cold reads
    seg._read_hint = None
    offs = []
    off = 100
    while True:
        r = seg.read(off, size, min_one_message=True)
        if r is None:
            break
        offs.append(r.first_offset)
        off = r.next_offset
    assert offs == list(range(100, 130, 3))


def test_truncate_and_reopen(tmp_path):
    seg = _segment(tmp_path, interval=100)
    nxt = 0
    for i in range(20):
        nxt = _append(seg, nxt, [(2, 80, 5000 + i)])
    assert seg.next_offset == 40
    assert seg.truncate_to(21) > 0  # 21 is inside batch [20, 21]: that batch goes
    assert seg.next_offset == 20
    assert seg.max_timestamp_so_far == 5009
    assert all(e[0] < 20 for e in decode_offset_index(read_bytes(seg.offset_index.path)))
    nxt = _append(seg, 20, [(2, 80, 6000)])
    seg.close()
    again = _segment(tmp_path, interval=100)
    assert not again.needs_rebuild()
    assert again.next_offset == 22
    assert again.max_timestamp_so_far == 6000
    assert again.read(20, 1000).first_offset == 20
    again.close()


def test_recover_rebuilds_indexes_and_cuts_torn_tail(tmp_path):
    seg = _segment(tmp_path, interval=200)
    nxt = 0
    for i in range(30):
        nxt = _append(seg, nxt, [(1, 100, 100 + i)])
    seg.close()
    idx = read_bytes(seg.offset_index.path)
    tidx = read_bytes(seg.time_index.path)
    with open(seg.log_path, "ab") as f:
        f.write(b"\x00" * 30)  # torn header
    os.unlink(seg.offset_index.path)
    again = _segment(tmp_path, interval=200)
    assert again.needs_rebuild()
    assert again.recover() == 30
    again.close()
    assert read_bytes(seg.offset_index.path) == idx
    assert read_bytes(seg.time_index.path) == tidx


def test_roll_decisions(tmp_path):
    seg = _segment(tmp_path, now=1000)
    kw = dict(max_segment_bytes=10_000, max_segment_ms=500, max_offset_in_messages=0, now_ms=1000)
    assert not seg.should_roll(messages_size=100, max_timestamp_in_messages=0, **kw)
    _append(seg, 0, [(1, 100, 2000)])
    # segment.ms is measured from the first batch's timestamp to the new batch's
    assert not seg.should_roll(messages_size=100, max_timestamp_in_messages=2500, **kw)
    assert seg.should_roll(messages_size=100, max_timestamp_in_messages=2501, **kw)
    assert seg.should_roll(messages_size=10_000, max_timestamp_in_messages=2000, **kw)
    kw["max_offset_in_messages"] = 2**31
    assert seg.should_roll(messages_size=1, max_timestamp_in_messages=2000, **kw)


# --- zero-copy reads: the same cut as read(), found from headers and the index ------------------

@settings(max_examples=int(os.environ.get('REGION_EXAMPLES', '120')), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.lists(st.tuples(st.integers(1, 12), st.sampled_from([40, 900, 5000, 20000, 70000]), st.integers(0, 3)),
                   min_size=3, max_size=90),
    interval=st.sampled_from([0, 4096, 65536, 1 << 20]),
    reads=st.lists(st.tuples(st.floats(0, 1), st.integers(1, 3 << 20), st.booleans(), st.floats(0, 1.2)),
                   min_size=1, max_size=12),
)
def test_read_region_returns_what_read_returns(sizes, interval, reads):
    """Whatever the batch sizes, offset gaps (compaction), index density and limits: the same
    batches, positions and next offsets as ``read``, and a FileRegion only from ZERO_COPY_MIN up."""
    with tempfile.TemporaryDirectory() as d:
        seg = _segment(d, base=50, interval=interval)
        nxt = 50
        for n, size, gap in sizes:
            nxt = _append(seg, nxt + gap, [(n, size, 1000)])
        first, end = 50, seg.next_offset
        for at, max_bytes, min_one, bound in reads:
            start = first + int(at * (end - first))
            max_offset = None if bound > 1 else first + int(bound * (end - first))
            want = seg.read(start, max_bytes, None, min_one, max_offset)
            seg._read_hint = None if at < 0.5 else seg._read_hint  # cold and warm starts both
            got = seg.read_region(start, max_bytes, None, min_one, max_offset)
            if want is None:
                assert got is None
                continue
            records = got.records
            if isinstance(records, FileRegion):
                assert len(records) >= ZERO_COPY_MIN
                data = records.read()
                records.close()
            else:
                data = bytes(records)
            assert data == bytes(want.records)
            assert (got.position, got.first_offset, got.next_offset) == \
                (want.position, want.first_offset, want.next_offset)
        seg.close()
