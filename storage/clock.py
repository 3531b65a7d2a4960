"""The one clock (Kafka's ``org.apache.kafka.common.utils.Time``): every timestamp and every timer of
the broker, the coordinators and the logs comes from a ``Clock`` handed down from the composition
root, so a test or an operator can move time and fire timeouts on demand (``ManualClock``).

It lives in ``storage`` because that is the lowest layer that reads time; ``protocol`` never does.
Two things stay on the event loop's own clock on purpose: measuring how long a piece of work held
the loop (``time.perf_counter``, which is about CPU, not time in Kafka's sense) and the process's
own I/O guards (the metrics endpoint's socket timeouts, the shutdown grace).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from typing import Protocol


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def now_ms(self) -> int:
        """Wall-clock milliseconds since the epoch: record timestamps, expiry, retention."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back: deadlines, idle times, throttles."""
        ...

    def call_later(self, delay_s: float, fn: Callable[[], object]) -> TimerHandle:
        """Run ``fn`` once, ``delay_s`` seconds from now, on the event loop."""
        ...

    async def sleep(self, delay_s: float) -> None:
        """Suspend the caller for ``delay_s`` seconds of this clock."""
        ...


class SystemClock:
    """Real time, with asyncio's timers."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()

    def call_later(self, delay_s: float, fn: Callable[[], object]) -> TimerHandle:
        return asyncio.get_running_loop().call_later(max(delay_s, 0.0), fn)

    async def sleep(self, delay_s: float) -> None:
        await asyncio.sleep(max(delay_s, 0.0))

    def __repr__(self) -> str:
        return "SystemClock()"


SYSTEM_CLOCK = SystemClock()


class _ManualTimer:
    __slots__ = ("cancelled", "deadline", "fn")

    def __init__(self, deadline: float, fn: Callable[[], object]) -> None:
        self.deadline = deadline
        self.fn = fn
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    """Time that moves only when told to (Kafka's MockTime): ``advance(ms)`` moves both clocks
    and runs, in deadline order, every timer and sleeper that came due."""

    def __init__(self, now_ms: int = 1_700_000_000_000, monotonic: float = 1_000.0) -> None:
        self._wall0, self._mono0 = now_ms, monotonic
        self._mono = monotonic
        self._timers: list[tuple[float, int, _ManualTimer]] = []
        self._seq = itertools.count()

    def now_ms(self) -> int:
        return self._wall0 + round((self._mono - self._mono0) * 1000)

    def monotonic(self) -> float:
        return self._mono

    def call_later(self, delay_s: float, fn: Callable[[], object]) -> TimerHandle:
        timer = _ManualTimer(self._mono + max(delay_s, 0.0), fn)
        heapq.heappush(self._timers, (timer.deadline, next(self._seq), timer))
        return timer

    async def sleep(self, delay_s: float) -> None:
        if delay_s <= 0:
            await asyncio.sleep(0)
            return
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def wake() -> None:
            if not done.done():  # the sleeping task may have been cancelled meanwhile
                done.set_result(None)

        handle = self.call_later(delay_s, wake)
        try:
            await done
        finally:
            handle.cancel()

    def advance(self, ms: float) -> None:
        """Move time forward by ``ms`` and fire what came due (a callback may schedule more)."""
        target = self._mono + ms / 1000
        while self._timers and self._timers[0][0] <= target:
            deadline, _, timer = heapq.heappop(self._timers)
            self._mono = max(self._mono, deadline)
            if not timer.cancelled:
                timer.fn()
        self._mono = target

    @property
    def pending(self) -> int:
        """Timers not yet fired nor cancelled."""
        return sum(1 for _, _, t in self._timers if not t.cancelled)

    def __repr__(self) -> str:
        return f"ManualClock(now_ms={self.now_ms()})"
