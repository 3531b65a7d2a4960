"""storage.clock: the one clock, and time moved from outside (ManualClock, VirtualClock)."""

from __future__ import annotations

import asyncio
import time

import pytest

from coordinator.group.coordinator import ClockTimer
from protocol.records import build_batch, validate_batches
from storage.clock import SYSTEM_CLOCK, ManualClock, VirtualClock
from storage.log.partition_log import PartitionLog
from storage.log_config import LogConfig


def test_manual_clock_fires_timers_in_deadline_order_as_time_moves() -> None:
    clock = ManualClock(now_ms=1_000_000)
    fired: list[tuple[str, int]] = []
    clock.call_later(2.0, lambda: fired.append(("b", clock.now_ms())))
    clock.call_later(1.0, lambda: fired.append(("a", clock.now_ms())))
    cancelled = clock.call_later(1.5, lambda: fired.append(("never", clock.now_ms())))
    cancelled.cancel()
    clock.advance(999)
    assert fired == [] and clock.now_ms() == 1_000_999
    clock.advance(1)
    assert fired == [("a", 1_001_000)]
    clock.advance(5_000)
    # each timer runs at its own deadline, not at the end of the advance
    assert fired == [("a", 1_001_000), ("b", 1_002_000)]
    assert clock.now_ms() == 1_006_000 and clock.pending == 0


def test_a_timer_scheduled_by_a_timer_fires_within_the_same_advance() -> None:
    clock = ManualClock()
    fired: list[float] = []
    clock.call_later(1.0, lambda: clock.call_later(1.0, lambda: fired.append(clock.monotonic())))
    start = clock.monotonic()
    clock.advance(2_500)
    assert fired == [start + 2.0]


async def test_sleep_returns_when_the_clock_is_advanced_not_before() -> None:
    clock = ManualClock()
    task = asyncio.create_task(clock.sleep(30))
    await asyncio.sleep(0)
    clock.advance(29_999)
    await asyncio.sleep(0)
    assert not task.done()
    clock.advance(1)
    await asyncio.sleep(0)
    assert task.done()


async def test_the_group_coordinators_timer_runs_on_the_injected_clock() -> None:
    """A session timeout (a keyed coordinator timer) fires when the clock says so, and a
    rescheduled key replaces its old deadline, as Kafka's CoordinatorTimer does."""
    clock = ManualClock()
    timer = ClockTimer(clock)
    expired: list[str] = []
    timer.schedule("heartbeat-m1", 45_000, lambda: expired.append("m1"))
    clock.advance(30_000)
    timer.schedule("heartbeat-m1", 45_000, lambda: expired.append("m1"))  # a heartbeat came in
    clock.advance(44_999)
    assert expired == []
    clock.advance(1)
    assert expired == ["m1"] and len(timer) == 0


def test_a_log_takes_its_time_from_its_clock(tmp_path) -> None:
    """segment.ms rolls by the log's clock: moving the clock rolls the segment on the next append."""
    clock = ManualClock(now_ms=1_700_000_000_000)
    plog = PartitionLog.open(str(tmp_path / "t-0"), "t", 0, LogConfig(segment_ms=60_000, segment_jitter_ms=0),
                             needs_recovery=False, clock=clock)
    ts = clock.now_ms()
    buf = build_batch([(b"k", b"v")], timestamp=ts)
    plog.append(buf, validate_batches(buf))
    assert len(plog.segments) == 1
    clock.advance(60_001)
    buf = build_batch([(b"k", b"v")], timestamp=clock.now_ms())
    plog.append(buf, validate_batches(buf))
    assert len(plog.segments) == 2 and plog.segments[-1].base_offset == 1
    plog.close()


def test_the_system_clock_is_wall_time() -> None:
    assert abs(SYSTEM_CLOCK.now_ms() - time.time() * 1000) < 1_000


# --- VirtualClock: real time plus what the control endpoint adds ---------------------------------

async def test_a_virtual_clock_runs_in_real_time_between_advances() -> None:
    clock = VirtualClock()
    fired: list[float] = []
    clock.call_later(0.02, lambda: fired.append(clock.monotonic()))
    await asyncio.sleep(0.05)
    assert len(fired) == 1
    assert abs(clock.now_ms() - time.time() * 1000) < 50


async def test_an_advance_fires_what_came_due_in_deadline_order_at_its_deadline() -> None:
    clock = VirtualClock()
    start = clock.now_ms()
    seen: list[tuple[str, int]] = []
    clock.call_later(3600, lambda: seen.append(("hour", clock.now_ms() - start)))
    clock.call_later(60, lambda: seen.append(("minute", clock.now_ms() - start)))
    clock.call_later(86_400 * 2, lambda: seen.append(("two days", clock.now_ms() - start)))
    fired = await clock.advance(86_400_000)
    assert [name for name, _ in seen] == ["minute", "hour"]
    assert abs(seen[0][1] - 60_000) < 100 and abs(seen[1][1] - 3_600_000) < 100
    assert fired == 2 and clock.pending == 1
    assert abs(clock.offset_ms - 86_400_000) < 1


async def test_sleepers_wake_and_periodic_tasks_run_as_often_as_the_advance_allows() -> None:
    clock = VirtualClock()
    ticks: list[int] = []

    async def every_ten_seconds() -> None:
        while True:
            await clock.sleep(10)
            ticks.append(clock.now_ms())

    task = asyncio.create_task(every_ten_seconds())
    await asyncio.sleep(0)
    try:
        await clock.advance(100_000)  # 100 s: sparse timers stop at each deadline
        assert len(ticks) == 10
        started = time.perf_counter()
        await clock.advance(7 * 86_400_000)  # a week of 10 s ticks: at most MAX_STEPS stops
        assert len(ticks) <= 10 + VirtualClock.MAX_STEPS + 1
        assert time.perf_counter() - started < 2.0
    finally:
        task.cancel()


async def test_what_happens_at_a_deadline_happens_before_later_deadlines() -> None:
    """A transaction aborted at its timeout is already old when the id's expiry scan runs a week
    later: both come due in one advance, in order."""
    clock = VirtualClock()
    events: list[str] = []
    state = {"last_update": clock.now_ms()}

    def abort() -> None:
        state["last_update"] = clock.now_ms()
        events.append("aborted")

    def expire() -> None:
        if clock.now_ms() - state["last_update"] >= 7 * 86_400_000:
            events.append("expired")

    clock.call_later(60, abort)
    clock.call_later(7 * 86_400 + 3600, expire)
    await clock.advance(8 * 86_400_000)
    assert events == ["aborted", "expired"]


async def test_time_only_moves_forward() -> None:
    with pytest.raises(ValueError):
        await VirtualClock().advance(-1)
