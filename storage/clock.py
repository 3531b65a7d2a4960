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


async def sleep_on_timer(clock: Clock, delay_s: float) -> None:
    """Sleep ``delay_s`` of ``clock``'s time, woken by one of its timers (a clock that time jumps on
    wakes its sleepers as it fires their timers)."""
    if delay_s <= 0:
        await asyncio.sleep(0)
        return
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def wake() -> None:
        if not done.done():  # the sleeping task may have been cancelled meanwhile
            done.set_result(None)

    handle = clock.call_later(delay_s, wake)
    try:
        await done
    finally:
        handle.cancel()


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
        await sleep_on_timer(self, delay_s)

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


class _VirtualTimer:
    __slots__ = ("deadline", "done", "fn", "handle")

    def __init__(self, deadline: float, fn: Callable[[], object]) -> None:
        self.deadline = deadline
        self.fn = fn
        self.done = False  # fired or cancelled
        self.handle: asyncio.TimerHandle | None = None

    def cancel(self) -> None:
        self.done = True
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None


class VirtualClock:
    """Real time plus an offset that only grows: the broker runs in real time until told to
    ``advance``, and then every timer and sleeper that the jump made due fires, in deadline
    order, as if the time had passed (transaction timeouts, expiry scans, session timeouts,
    retention). The control endpoint's time control; off unless ``control.clock=virtual``.

    Unlike ``ManualClock`` time also passes on its own, so a broker on this clock behaves as on
    ``SystemClock`` between advances. An advance stops at each timer's deadline, and after each stop
    the loop runs what woke before time moves on, so what comes due first happens first (a
    transaction aborted at its timeout is old by the time the expiry scan runs). To stay fast
    however far time jumps, an advance stops at most ``MAX_STEPS`` times: after the first half
    of them, the remaining time is cut into equal steps and the timers due within a step fire at
    its end (periodic scans every 10 s over a week: a thousand wake-ups, not sixty thousand).
    """

    MAX_STEPS = 1000

    def __init__(self) -> None:
        self._offset = 0.0  # seconds ahead of real time
        self._timers: list[tuple[float, int, _VirtualTimer]] = []
        self._seq = itertools.count()
        self._pushes = 0
        self._lock: asyncio.Lock | None = None

    @property
    def offset_ms(self) -> int:
        return round(self._offset * 1000)

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000 + round(self._offset * 1000)

    def monotonic(self) -> float:
        return time.monotonic() + self._offset

    def call_later(self, delay_s: float, fn: Callable[[], object]) -> TimerHandle:
        delay_s = max(delay_s, 0.0)
        timer = _VirtualTimer(self.monotonic() + delay_s, fn)
        heapq.heappush(self._timers, (timer.deadline, next(self._seq), timer))
        timer.handle = asyncio.get_running_loop().call_later(delay_s, self._fire_one, timer)
        self._pushes += 1
        if self._pushes % 1024 == 0:  # cancelled timers (a session timeout reset on each heartbeat) go
            self._compact()
        return timer

    async def sleep(self, delay_s: float) -> None:
        await sleep_on_timer(self, delay_s)

    def _fire_one(self, timer: _VirtualTimer) -> None:
        """The real-time path: the event loop's timer for ``timer`` came due."""
        if not timer.done:
            timer.done = True
            timer.handle = None
            timer.fn()

    def _fire_due(self) -> int:
        now = self.monotonic()
        fired = 0
        while self._timers and self._timers[0][0] <= now:
            _, _, timer = heapq.heappop(self._timers)
            if not timer.done:
                timer.cancel()  # its real-time handle is no longer needed
                fired += 1
                timer.fn()
        return fired

    def _next_deadline(self) -> float | None:
        while self._timers and self._timers[0][2].done:
            heapq.heappop(self._timers)
        return self._timers[0][0] if self._timers else None

    def _compact(self) -> None:
        self._timers = [entry for entry in self._timers if not entry[2].done]
        heapq.heapify(self._timers)

    async def advance(self, ms: float) -> int:
        """Move time forward by ``ms``; returns how many timers fired. Advances run one at a time."""
        if ms < 0:
            raise ValueError("time only moves forward")
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            target = self._offset + ms / 1000
            fired = steps = 0
            while True:
                due = self._next_deadline()
                if due is None or due > time.monotonic() + target:
                    break
                offset = due - time.monotonic()  # the offset at which ``due`` is now
                if steps >= self.MAX_STEPS // 2:  # dense: equal steps through what is left
                    offset = max(offset, self._offset + (target - self._offset) / max(self.MAX_STEPS - steps, 1))
                self._offset = min(target, max(self._offset, offset))
                fired += self._fire_due()
                steps += 1
                await _settle()
            self._offset = target
            fired += self._fire_due()
            await _settle()
            return fired

    @property
    def pending(self) -> int:
        """Timers not yet fired nor cancelled."""
        return sum(1 for _, _, t in self._timers if not t.done)

    def __repr__(self) -> str:
        return f"VirtualClock(offset_ms={self.offset_ms})"


async def _settle() -> None:
    """Let what the fired timers woke run (a task woken now runs in the loop's next pass)."""
    for _ in range(3):
        await asyncio.sleep(0)
