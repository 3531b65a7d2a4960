"""Kafka's LogCleaner and LogCleanerManager: the loop that picks the filthiest log, runs a cleaning
in slices on the event loop with its I/O in the executor, throttles it and keeps the
``cleaner-offset-checkpoint`` files.
"""

from __future__ import annotations

import asyncio
import math
import os
import time
import weakref
from collections.abc import Callable, Generator, Set
from typing import TYPE_CHECKING, Any

import structlog

from storage import checkpoints
from storage.cleaner.cleaner import BlockingIO, Cleaner, CleanerStats, Step, run_sync
from storage.cleaner.config import CleanerConfig, CleaningAborted
from storage.cleaner.selection import LogToClean, cleanable_offsets, max_compaction_delay
from storage.clock import Clock

if TYPE_CHECKING:
    from storage.log.partition_log import PartitionLog
    from storage.log_manager import LogManager

log = structlog.get_logger(__name__)

CHECKPOINT_FILE = "cleaner-offset-checkpoint"  # LogCleanerManager.OFFSET_CHECKPOINT_FILE


def _nothing() -> None:
    pass


# --- the manager (LogCleaner + LogCleanerManager) -----------------------------------------------


class LogCleaner:
    """Chooses logs to clean, keeps the ``cleaner-offset-checkpoint`` files and drives the
    cleaning in slices on the event loop (``run``), or synchronously (``clean_all``)."""

    def __init__(
        self,
        log_manager: LogManager,
        config: CleanerConfig | None = None,
        *,
        clock: Clock | None = None,
    ) -> None:
        self.log_manager = log_manager
        self.config = config or CleanerConfig()
        self.cleaner = Cleaner(self.config)
        self.clock: Clock = clock or log_manager.clock
        self._checkpoints: dict[str, dict[tuple[str, int], int]] = {}
        for d in log_manager.log_dirs:
            path = os.path.join(d, CHECKPOINT_FILE)
            try:
                self._checkpoints[d] = checkpoints.read_offset_checkpoint(path)
            except Exception as e:  # noqa: BLE001 - a bad checkpoint means "clean from the start"
                log.warning("cleaner_checkpoint_unreadable", path=path, error=str(e))
                self._checkpoints[d] = {}
        self._owners: dict[tuple[str, int], weakref.ReferenceType] = {}
        self.uncleanable: set[tuple[str, int]] = set()
        self.in_progress: tuple[str, int] | None = None
        self.last_stats: CleanerStats | None = None
        self.dirtiest_ratio = 0.0
        self.max_slice_ms = 0.0  # the longest the cleaner held the loop in one go, since start
        self.cleanings = 0
        self._io_bytes = 0
        self._io_window_start = self.clock.monotonic()
        self._pending_config: CleanerConfig | None = None

    @classmethod
    def from_broker_config(cls, log_manager: LogManager, cfg: Any) -> LogCleaner:
        return cls(log_manager, CleanerConfig.from_broker_config(cfg))

    def reconfigure(self, config: CleanerConfig) -> None:
        """New ``log.cleaner.*`` values (dynamic broker configs). Kafka restarts its cleaner threads;
        here a cleaning in progress finishes with the old buffers and the next one uses these."""
        self._pending_config = config
        if self.in_progress is None:
            self._apply_pending_config()

    def _apply_pending_config(self) -> None:
        config, self._pending_config = self._pending_config, None
        if config is not None and config != self.config:
            self.config = config
            self.cleaner = Cleaner(config)

    # -- checkpoints

    def _dir_of(self, plog: PartitionLog) -> str | None:
        return self.log_manager.dir_of(plog.topic, plog.partition)

    def checkpoint_of(self, plog: PartitionLog) -> int | None:
        key = (plog.topic, plog.partition)
        owner = self._owners.get(key)
        d = self._dir_of(plog)
        if d is None:
            return None
        if owner is not None and owner() is not plog:
            # The partition was deleted and created again: its old checkpoint means nothing.
            self._checkpoints[d].pop(key, None)
        self._owners[key] = weakref.ref(plog)
        return self._checkpoints[d].get(key)

    def update_checkpoint(self, plog: PartitionLog, offset: int, *, write: bool = True) -> Callable[[], None]:
        """Record ``offset`` for the log (entries of partitions no longer in the dir are
        dropped, as Kafka's updateCheckpoints does) and write the dir's file now, or return the
        write (an fsynced atomic replace) for the caller to run off the loop."""
        d = self._dir_of(plog)
        if d is None:
            return _nothing
        live = {k for k in self.log_manager.partitions() if self.log_manager.dir_of(*k) == d}
        current = {k: v for k, v in self._checkpoints[d].items() if k in live}
        current[(plog.topic, plog.partition)] = offset
        self._checkpoints[d] = current
        path = os.path.join(d, CHECKPOINT_FILE)
        snapshot = dict(current)

        def persist() -> None:
            checkpoints.write_offset_checkpoint(path, snapshot)

        if write:
            persist()
        return persist

    def all_checkpoints(self) -> dict[tuple[str, int], int]:
        out: dict[tuple[str, int], int] = {}
        for entries in self._checkpoints.values():
            out.update(entries)
        return out

    # -- selection

    def log_to_clean(self, plog: PartitionLog, now: int) -> LogToClean:
        offsets = cleanable_offsets(plog, self.checkpoint_of(plog), now)
        if offsets.force_update_checkpoint:
            self.update_checkpoint(plog, offsets.first_dirty_offset)
        delay = max_compaction_delay(plog, offsets.first_dirty_offset, now)
        return LogToClean.of(
            plog, offsets.first_dirty_offset, offsets.first_uncleanable_dirty_offset, delay > 0
        )

    def grab_filthiest(
        self, now: int | None = None, exclude: Set[tuple[str, int]] = frozenset()
    ) -> LogToClean | None:
        """LogCleanerManager.grabFilthiestCompactedLog (``exclude``: logs already cleaned in
        this tick, so a log that cannot make progress is not retried in a loop)."""
        now = self.clock.now_ms() if now is None else now
        dirty: list[LogToClean] = []
        for plog in self.log_manager.logs():
            key = (plog.topic, plog.partition)
            if plog.closed or not plog.config.compact or key in self.uncleanable or key in exclude:
                continue
            try:
                ltc = self.log_to_clean(plog, now)
            except Exception:  # noqa: BLE001 - one bad log must not stop the others
                log.exception("cleaner_selection_failed", topic=plog.topic, partition=plog.partition)
                self.uncleanable.add((plog.topic, plog.partition))
                continue
            if ltc.total_bytes > 0:
                dirty.append(ltc)
        self.dirtiest_ratio = max((ltc.cleanable_ratio for ltc in dirty), default=0.0)
        cleanable = [
            ltc
            for ltc in dirty
            if (ltc.need_compaction_now and ltc.cleanable_bytes > 0)
            or ltc.cleanable_ratio > ltc.log.config.min_cleanable_dirty_ratio
        ]
        return max(cleanable, key=lambda ltc: ltc.cleanable_ratio, default=None)

    # -- cleaning

    def _start(self, ltc: LogToClean, now: int) -> Generator[Step, None, Any]:
        plog = ltc.log
        self.in_progress = (plog.topic, plog.partition)
        return self.cleaner.clean(ltc, now)

    def _done(
        self, ltc: LogToClean, end_offset: int, stats: CleanerStats, *, write: bool = True
    ) -> Callable[[], None]:
        """Kafka's doneCleaning; returns the checkpoint write when ``write`` is False."""
        plog = ltc.log
        self.in_progress = None
        persist: Callable[[], None] = _nothing
        if not plog.closed:
            persist = self.update_checkpoint(plog, end_offset, write=write)
        self.last_stats = stats
        self.cleanings += 1
        log.info(
            "log_cleaned",
            topic=plog.topic,
            partition=plog.partition,
            dirty_section=[ltc.first_dirty_offset, end_offset],
            **stats.summary(),
        )
        return persist

    def _failed(self, ltc: LogToClean, exc: BaseException) -> None:
        plog = ltc.log
        self.in_progress = None
        if isinstance(exc, CleaningAborted):
            log.info("log_cleaning_aborted", topic=plog.topic, partition=plog.partition, reason=str(exc))
            return
        log.error(
            "log_cleaning_failed",
            topic=plog.topic,
            partition=plog.partition,
            error=repr(exc),
            exc_info=exc,
        )
        self.uncleanable.add((plog.topic, plog.partition))

    def clean_log(self, ltc: LogToClean, now: int | None = None) -> tuple[int, CleanerStats] | None:
        """Clean one log to the end on the calling thread; None if it was aborted or failed."""
        now = self.clock.now_ms() if now is None else now
        gen = self._start(ltc, now)
        try:
            end_offset, stats = run_sync(gen)
        except Exception as e:  # noqa: BLE001
            self._failed(ltc, e)
            return None
        self._done(ltc, end_offset, stats)
        return end_offset, stats

    def clean_all(self, now: int | None = None, max_cleanings: int = 100) -> list[CleanerStats]:
        """Clean logs (filthiest first) until none is cleanable; synchronous (tests, tools)."""
        done = []
        seen: set[tuple[str, int]] = set()
        for _ in range(max_cleanings):
            ltc = self.grab_filthiest(now, seen)
            if ltc is None:
                break
            seen.add((ltc.log.topic, ltc.log.partition))
            result = self.clean_log(ltc, now)
            if result is not None:
                done.append(result[1])
        return done

    async def run(self) -> int:
        """One cleaner tick (schedule every ``log.cleaner.backoff.ms``): clean logs until none is
        cleanable, in slices of at most ``slice_ms`` of loop time. Returns the logs cleaned."""
        cleaned = 0
        seen: set[tuple[str, int]] = set()
        while True:
            self._apply_pending_config()
            now = self.clock.now_ms()
            ltc = self.grab_filthiest(now, seen)
            if ltc is None:
                return cleaned
            seen.add((ltc.log.topic, ltc.log.partition))
            gen = self._start(ltc, now)
            try:
                end_offset, stats = await self._drive(gen)
            except asyncio.CancelledError:
                self.in_progress = None
                raise
            except Exception as e:  # noqa: BLE001 - aborted, or the log is marked uncleanable
                self._failed(ltc, e)
                continue
            persist = self._done(ltc, end_offset, stats, write=False)
            # Written in order (one cleaner), off the loop: the write fsyncs file and dir.
            await asyncio.get_running_loop().run_in_executor(None, persist)
            cleaned += 1

    async def _drive(self, gen: Generator[Step, None, Any]) -> Any:
        """Run the generator, giving the loop back whenever a slice has used ``slice_ms``, and
        running its blocking file operations (BlockingIO) in the default executor."""
        loop = asyncio.get_running_loop()
        budget = self.config.slice_ms / 1000
        work_clock, cpu_clock = time.perf_counter, time.thread_time  # loop hold, not time (storage.clock)
        slices = 0
        longest = longest_cpu = busy = 0.0
        t0, c0 = work_clock(), cpu_clock()

        def end_slice() -> None:
            nonlocal slices, longest, longest_cpu, busy
            wall, cpu = work_clock() - t0, cpu_clock() - c0
            slices += 1
            busy += wall
            longest = max(longest, wall)
            longest_cpu = max(longest_cpu, cpu)

        try:
            item = next(gen)
            while True:
                if isinstance(item, BlockingIO):
                    end_slice()
                    job = loop.run_in_executor(None, item.run)
                    try:
                        await asyncio.shield(job)
                    except asyncio.CancelledError:
                        # The thread cannot be stopped: let it finish before the generator is
                        # closed (and closes the descriptors the thread is using).
                        await asyncio.wait([job])
                        raise
                    t0, c0 = work_clock(), cpu_clock()
                elif work_clock() - t0 >= budget:
                    end_slice()
                    await self._pause()
                    t0, c0 = work_clock(), cpu_clock()
                item = next(gen)
        except StopIteration as stop:
            end_slice()
            result = stop.value
            if isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], CleanerStats):
                stats = result[1]
                stats.slices = slices
                stats.max_slice_ms = longest * 1000
                stats.max_slice_cpu_ms = longest_cpu * 1000
                stats.busy_seconds = busy
                self.max_slice_ms = max(self.max_slice_ms, stats.max_slice_ms)
            return result
        finally:
            gen.close()

    async def _pause(self) -> None:
        """Give the loop back; honour log.cleaner.io.max.bytes.per.second (Kafka's Throttler:
        over each window of at least 100 ms, sleep long enough to bring the rate down)."""
        limit = self.config.io_max_bytes_per_second
        if math.isfinite(limit) and limit > 0:
            now = self.clock.monotonic()
            elapsed = now - self._io_window_start
            if elapsed >= 0.1:
                needed = (self.cleaner.io_bytes - self._io_bytes) / limit
                if needed > elapsed:
                    await self.clock.sleep(needed - elapsed)
                self._io_window_start = self.clock.monotonic()
                self._io_bytes = self.cleaner.io_bytes
        # Twice: after one sleep(0) this task is already first in the ready queue of the next
        # loop iteration, ahead of the timers and socket callbacks that iteration collects;
        # after the second, everything that became ready during the slice runs before the next.
        await asyncio.sleep(0)
        await asyncio.sleep(0)
