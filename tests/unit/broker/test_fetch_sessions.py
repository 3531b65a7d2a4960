"""broker.replica.fetch_sessions without a broker: contexts, epochs, incremental selection, eviction."""

from __future__ import annotations

import itertools

from broker.replica.fetch_sessions import (
    FINAL_EPOCH,
    FetchSessionCache,
    PartitionFetch,
    next_epoch,
)
from protocol.errors import ErrorCode


def pf(partition: int, offset: int = 0, topic: str = "t") -> PartitionFetch:
    return PartitionFetch(topic, None, partition, offset, 1 << 20, -1)


def ids() -> itertools.count:
    return itertools.count(1)


def cache(**kw) -> FetchSessionCache:
    counter = ids()
    return FetchSessionCache(rng=lambda _lo, _hi: next(counter), **kw)


def open_session(c: FetchSessionCache, parts: list[PartitionFetch], now: int = 0) -> int:
    ctx = c.new_context(12, 0, 0, parts, [], now)
    assert ctx.create_session and ctx.session is None
    return c.maybe_create_session(ctx, [(p, 0, 10, 0) for p in parts], now)


def test_next_epoch_wraps_to_one_and_final_stays_final() -> None:
    assert next_epoch(0) == 1 and next_epoch(2**31 - 1) == 1 and next_epoch(FINAL_EPOCH) == FINAL_EPOCH


def test_incremental_reads_every_session_partition_with_cached_offsets() -> None:
    c = cache()
    sid = open_session(c, [pf(0, 5), pf(1, 7)])
    ctx = c.new_context(12, sid, 1, [pf(1, 9)], [], 1)
    assert [(p.partition, p.fetch_offset) for p in ctx.partitions] == [(0, 5), (1, 9)]
    assert ctx.session.epoch == 2


def test_select_incremental_sends_changes_and_rotates_partitions_with_data() -> None:
    c = cache()
    sid = open_session(c, [pf(0), pf(1), pf(2)])
    ctx = c.new_context(12, sid, 1, [], [], 1)
    results = [(ctx.partitions[0], 0, 10, 0, True),  # records
               (ctx.partitions[1], 0, 10, 0, False),  # unchanged
               (ctx.partitions[2], 0, 11, 0, False)]  # new high watermark
    assert c.select_incremental(ctx, results) == (ErrorCode.NONE, [0, 2])
    assert [k[1] for k in ctx.session.partitions] == [1, 2, 0]  # p0 had data: served last next time
    ctx2 = c.new_context(12, sid, 2, [], [], 2)
    assert c.select_incremental(ctx2, [(p, 6, -1, 0, False) for p in ctx2.partitions])[1] == [0, 1, 2]


def test_session_errors() -> None:
    c = cache()
    sid = open_session(c, [pf(0)])
    assert c.new_context(12, sid + 1, 1, [], [], 1).error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert c.new_context(12, sid, 2, [], [], 1).error == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    assert c.new_context(13, sid, 1, [], [], 1).error == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    ok = c.new_context(12, sid, 1, [], [], 1)
    assert not ok.error and ok.session.epoch == 2


def test_forgetting_everything_closes_the_session_and_final_epoch_is_sessionless() -> None:
    c = cache()
    sid = open_session(c, [pf(0)])
    ctx = c.new_context(12, sid, 1, [], [("t", None, 0)], 1)
    assert ctx.session is None and not ctx.create_session and len(c) == 0
    sid = open_session(c, [pf(0)])
    final = c.new_context(12, sid, FINAL_EPOCH, [pf(0)], [], 2)
    assert final.session is None and not final.create_session and len(c) == 0


def test_full_cache_evicts_stale_then_older_smaller_sessions_only() -> None:
    c = cache(max_entries=2, eviction_ms=100)
    a = open_session(c, [pf(0)], now=0)
    b = open_session(c, [pf(0), pf(1)], now=50)
    assert open_session(c, [pf(0)], now=60) == 0  # nothing stale, nothing old enough: no session
    c.sessions[b].last_used_ms = 150
    assert open_session(c, [pf(0), pf(1), pf(2)], now=150) != 0 and a not in c.sessions  # a was stale (unused 150 ms)
    c.sessions[b].last_used_ms = 200
    newest = max(c.sessions)
    c.sessions[newest].last_used_ms = 200
    assert open_session(c, [pf(0), pf(1)], now=210) == 0  # b is older than 100 ms but not smaller
    assert open_session(c, [pf(0), pf(1), pf(2)], now=210) != 0 and b not in c.sessions
