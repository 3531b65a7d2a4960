"""Which log to clean and how far (Kafka's LogCleanerManager selection: cleanable offsets, dirty
ratio, max compaction lag, the filthiest log).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import structlog

from storage.log.segment import LogSegment

if TYPE_CHECKING:
    from storage.log.partition_log import PartitionLog


log = structlog.get_logger(__name__)


# --- selection (LogCleanerManager) --------------------------------------------------------------


def segments_overlapping(segments: Sequence[LogSegment], start: int, end: int) -> list[LogSegment]:
    """Kafka's LogSegments.values(from, to): the floor segment of ``start`` and every later one
    whose base offset is below ``end``."""
    if start == end:
        return []
    out = []
    for i, seg in enumerate(segments):
        nxt = segments[i + 1].base_offset if i + 1 < len(segments) else None
        if nxt is not None and nxt <= start:
            continue
        if seg.base_offset >= end:
            break
        out.append(seg)
    return out


def non_active_segments_from(plog: PartitionLog, start: int) -> list[LogSegment]:
    segs = plog.segments
    active = segs[-1]
    if start > active.base_offset:
        return []
    return segments_overlapping(segs, start, active.base_offset)


def last_records_of_active_producers(plog: PartitionLog) -> dict[int, tuple[int, int]]:
    """UnifiedLog.lastRecordsOfActiveProducers: pid -> (last data offset or -1, epoch)."""
    if plog.producer_state is None:
        return {}
    manager = plog.producer_state.manager
    return {pid: (e.last_data_offset, e.producer_epoch) for pid, e in manager.producers.items()}


@dataclass(slots=True)
class OffsetsToClean:
    first_dirty_offset: int
    first_uncleanable_dirty_offset: int
    force_update_checkpoint: bool


def cleanable_offsets(plog: PartitionLog, last_clean_offset: int | None, now: int) -> OffsetsToClean:
    """LogCleanerManager.cleanableOffsets."""
    log_start = plog.log_start_offset
    checkpoint = log_start if last_clean_offset is None else last_clean_offset
    force = False
    if checkpoint < log_start:
        first_dirty, force = log_start, True
    elif checkpoint > plog.log_end_offset:
        log.warning(
            "cleaner_checkpoint_reset",
            topic=plog.topic,
            partition=plog.partition,
            checkpoint=checkpoint,
            log_end_offset=plog.log_end_offset,
        )
        first_dirty, force = log_start, True
    else:
        first_dirty = checkpoint
    candidates = [plog.last_stable_offset, plog.active_segment.base_offset]
    lag = max(plog.config.min_compaction_lag_ms, 0)
    if lag > 0:
        for seg in non_active_segments_from(plog, first_dirty):
            if seg.largest_timestamp > now - lag:
                candidates.append(seg.base_offset)
                break
    return OffsetsToClean(first_dirty, max(first_dirty, min(candidates)), force)


def max_compaction_delay(plog: PartitionLog, first_dirty: int, now: int) -> int:
    """LogCleanerManager.maxCompactionDelay: how far past max.compaction.lag.ms the oldest dirty
    segment is (0 when none is)."""
    stamps = [
        ts
        for ts in (s.rolling_based_timestamp for s in non_active_segments_from(plog, first_dirty))
        if ts is not None and ts > 0
    ]
    if not stamps:
        return 0
    clean_until = now - max(plog.config.max_compaction_lag_ms, 0)
    earliest = min(stamps)
    return clean_until - earliest if earliest < clean_until else 0


@dataclass(slots=True)
class LogToClean:
    """Kafka's LogToClean: a log, its dirty range and its cleanable ratio."""

    log: PartitionLog
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    need_compaction_now: bool

    @classmethod
    def of(cls, plog: PartitionLog, first_dirty: int, uncleanable: int, need_now: bool) -> LogToClean:
        segs = plog.segments
        clean_bytes = sum(s.size for s in segs if s.base_offset < first_dirty)
        non_active = non_active_segments_from(plog, uncleanable)
        first_uncleanable = (non_active[0] if non_active else segs[-1]).base_offset
        cleanable = sum(
            s.size for s in segments_overlapping(segs, min(first_dirty, first_uncleanable), first_uncleanable)
        )
        return cls(plog, first_dirty, first_uncleanable, clean_bytes, cleanable, need_now)

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0
