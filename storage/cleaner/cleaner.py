"""The cleaning itself (Kafka's Cleaner): build the offset map over the dirty section and rewrite
the segments in groups, as a generator that yields at every batch and hands its blocking I/O out
as ``BlockingIO`` requests; plus its statistics.
"""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, final

import structlog
from crc32c import crc32c

from protocol.record_codec import (
    R_HAS_VALUE,
    R_KEY,
    R_OFFSET_DELTA,
    Record,
    control_type_of,
    records_of,
)
from protocol.records import (
    CONTROL_FLAG,
    CRC,
    CRC_START,
    DELETE_HORIZON_FLAG,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    BatchInfo,
    read_header,
)
from storage.errors import KafkaStorageError
from storage.log.segment import CLEANED_SUFFIX, LogSegment
from storage.log.txn_index import AbortedTxn
from storage.offset_map import OffsetMap

if TYPE_CHECKING:
    from storage.log.partition_log import PartitionLog

from storage.cleaner.batches import CleanedTransactionMetadata, empty_batch, rebuild_batch
from storage.cleaner.config import CleanerConfig, CleaningAborted
from storage.cleaner.selection import (
    LogToClean,
    last_records_of_active_producers,
    segments_overlapping,
)

log = structlog.get_logger(__name__)

INT32_MAX = 2147483647
YIELD_EVERY_RECORDS = 512  # cooperative pause points inside large batches


# --- statistics ---------------------------------------------------------------------------------


@dataclass(slots=True)
class CleanerStats:
    start: float = field(default_factory=time.perf_counter)
    map_done: float = 0.0
    end: float = 0.0
    map_bytes_read: int = 0
    map_messages_read: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    messages_read: int = 0
    messages_written: int = 0
    invalid_messages: int = 0
    buffer_utilization: float = 0.0
    groups: int = 0
    slices: int = 0
    max_slice_ms: float = 0.0  # wall clock, so it includes the process being descheduled
    max_slice_cpu_ms: float = 0.0  # CPU time of the thread: what the cleaner itself held the loop for
    busy_seconds: float = 0.0  # time spent cleaning, excluding pauses for the rest of the loop

    @property
    def elapsed(self) -> float:
        return (self.end or time.perf_counter()) - self.start

    def summary(self) -> dict[str, Any]:
        mb = 1024 * 1024
        busy = self.busy_seconds or self.elapsed
        return dict(
            read_mb=round(self.bytes_read / mb, 3),
            written_mb=round(self.bytes_written / mb, 3),
            messages_read=self.messages_read,
            messages_written=self.messages_written,
            map_mb=round(self.map_bytes_read / mb, 3),
            seconds=round(self.elapsed, 3),
            busy_seconds=round(busy, 3),
            mb_per_sec=round((self.bytes_read + self.map_bytes_read) / mb / busy, 1) if busy > 0 else 0.0,
            buffer_utilization=round(self.buffer_utilization, 3),
            groups=self.groups,
            slices=self.slices,
            max_slice_ms=round(self.max_slice_ms, 2),
            max_slice_cpu_ms=round(self.max_slice_cpu_ms, 2),
            invalid_messages=self.invalid_messages,
        )


# --- the cleaning itself (Cleaner) ---------------------------------------------------------------


class BlockingIO:
    """A blocking file operation the cleaning generator hands to its driver, which runs it off
    the event loop (``LogCleaner.run``) or inline (``run_sync``). It only ever touches files
    that no other part of the broker writes: the cleaner's own output, or a segment read
    through a descriptor the cleaner opened itself (so the loop closing that segment meanwhile
    cannot make it read a reused descriptor)."""

    __slots__ = ()

    def run(self) -> None:
        raise NotImplementedError


@final  # the readers tell it from a batch with ``type(item) is ReadRequest``
class ReadRequest(BlockingIO):
    __slots__ = ("fd", "position", "size", "result")

    def __init__(self, fd: int, position: int, size: int) -> None:
        self.fd, self.position, self.size = fd, position, size
        self.result = b""

    def run(self) -> None:
        self.result = os.pread(self.fd, self.size, self.position)


class AppendRequest(BlockingIO):
    """Append batches to the cleaned segment, which nothing else sees before the swap."""

    __slots__ = ("segment", "data", "batches")

    def __init__(self, segment: LogSegment, data: bytearray, batches: list[BatchInfo]) -> None:
        self.segment, self.data, self.batches = segment, data, batches

    def run(self) -> None:
        self.segment.append(self.data, self.batches)


class FsyncRequest(BlockingIO):
    """Unlink ``unlink`` (the replaced segments' ``.deleted`` files), then fsync ``paths``
    (files or directories) by path."""

    __slots__ = ("paths", "unlink")

    def __init__(self, paths: Sequence[str], unlink: Sequence[str] = ()) -> None:
        self.paths = list(paths)
        self.unlink = list(unlink)

    def run(self) -> None:
        for path in self.unlink:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
        for path in self.paths:
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                continue
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


Step = BlockingIO | None
_RETAIN_EMPTY, _DELETE, _DELETE_EMPTY = 0, 1, 2


class Cleaner:
    """Kafka's Cleaner. ``clean`` is a generator: drive it with ``run_sync`` or ``LogCleaner.run``."""

    def __init__(self, config: CleanerConfig | None = None) -> None:
        self.config = config or CleanerConfig()
        self.offset_map = OffsetMap(self.config.dedupe_buffer_size, self.config.dedupe_buffer_load_factor)
        self.read_chunk = max(self.config.io_buffer_size // 2, 64 * 1024)
        self.on_swap_step: Callable[[str], None] | None = None  # crash-point tests
        self.io_bytes = 0  # bytes read and written so far (the driver's I/O throttle)

    # -- helpers

    @staticmethod
    def _check(plog: PartitionLog, generation: int) -> None:
        if plog.closed:
            raise CleaningAborted(f"{plog} was closed")
        if plog.segments_generation != generation:
            raise CleaningAborted(f"segments of {plog} changed")
        if not plog.config.compact:
            raise CleaningAborted(f"{plog} is no longer compacted")

    def _batches(
        self, seg: LogSegment, position: int
    ) -> Generator[ReadRequest | tuple[bytes, int, BatchInfo], None, None]:
        """(chunk, offset in chunk, header) of every batch from ``position``, CRCs checked. Reads
        are ReadRequests on a descriptor of our own, to be passed on to the driver: consumers
        ``yield`` them and go on with the loop (the request then holds its result)."""
        end = seg.size
        try:
            fd = os.open(seg.log_path, os.O_RDONLY)
        except FileNotFoundError:
            raise CleaningAborted(f"{seg.log_path} is gone") from None
        try:
            chunk = self.read_chunk
            pos = position
            while end - pos >= HEADER_SIZE:
                req = ReadRequest(fd, pos, min(chunk, end - pos))
                yield req
                data = req.result
                n = len(data)
                off = 0
                while n - off >= HEADER_SIZE:
                    length = struct.unpack_from(">i", data, off + 8)[0]
                    size = length + LOG_OVERHEAD
                    if length < MIN_BATCH_LENGTH or data[off + 16] != 2:
                        raise KafkaStorageError(f"corrupt batch at position {pos + off} of {seg.log_path}")
                    if off + size > n:
                        break
                    if CRC.unpack_from(data, off + 17)[0] != crc32c(
                        memoryview(data)[off + CRC_START : off + size]
                    ):
                        raise KafkaStorageError(
                            f"CRC mismatch of the batch at position {pos + off} of {seg.log_path}"
                        )
                    info = read_header(data, off)
                    info.position = pos + off
                    self.io_bytes += size
                    yield data, off, info
                    off += size
                if off == 0:
                    # One batch larger than the read chunk: read it alone.
                    if n < HEADER_SIZE:
                        raise KafkaStorageError(f"short read at position {pos} of {seg.log_path}")
                    length = struct.unpack_from(">i", data, 8)[0]
                    if pos + length + LOG_OVERHEAD > end:
                        raise KafkaStorageError(f"torn batch at position {pos} of {seg.log_path}")
                    chunk = max(chunk, length + LOG_OVERHEAD)
                    continue
                pos += off
                chunk = self.read_chunk
        finally:
            os.close(fd)

    @staticmethod
    def collect_aborted(plog: PartitionLog, start: int, upper: int) -> list[AbortedTxn]:
        """UnifiedLog.collectAbortedTransactions: aborted transactions overlapping [start, upper)."""
        out: list[AbortedTxn] = []
        segs = plog.segments
        first = max((i for i, s in enumerate(segs) if s.base_offset <= start), default=0)
        for seg in segs[first:]:
            txns, complete = seg.collect_aborted_txns(start, upper)
            out.extend(txns)
            if complete:
                break
        return out

    @staticmethod
    def group_segments_by_size(
        segments: Sequence[LogSegment], max_size: int, max_index_size: int, first_uncleanable: int
    ) -> list[list[LogSegment]]:
        """Cleaner.groupSegmentsBySize."""
        groups: list[list[LogSegment]] = []
        segs = list(segments)
        i = 0
        while i < len(segs):
            group = [segs[i]]
            log_size = segs[i].size
            index_size = segs[i].offset_index.entries * 8
            time_index_size = segs[i].time_index.entries * 12
            i += 1
            while i < len(segs):
                seg = segs[i]
                last = segs[i + 1].base_offset - 1 if i + 1 < len(segs) else first_uncleanable - 1
                if not (
                    log_size + seg.size <= max_size
                    and index_size + seg.offset_index.entries * 8 <= max_index_size
                    and time_index_size + seg.time_index.entries * 12 <= max_index_size
                    and (seg.size == 0 or last - group[0].base_offset <= INT32_MAX)
                ):
                    break
                group.append(seg)
                log_size += seg.size
                index_size += seg.offset_index.entries * 8
                time_index_size += seg.time_index.entries * 12
                i += 1
            groups.append(group)
        return groups

    # -- the offset map

    def build_offset_map(
        self, plog: PartitionLog, start: int, end: int, stats: CleanerStats, generation: int
    ) -> Generator[Step, None, None]:
        """Cleaner.buildOffsetMap over the dirty segments [start, end)."""
        omap = self.offset_map
        yield from omap.clear_steps()
        dirty = segments_overlapping(plog.segments, start, end)
        txn = CleanedTransactionMetadata()
        txn.add_aborted_transactions(self.collect_aborted(plog, start, end))
        for i, seg in enumerate(dirty):
            nxt = dirty[i + 1].base_offset if i + 1 < len(dirty) else end
            full = yield from self._map_segment(plog, seg, start, nxt, txn, stats, generation)
            if full:
                log.info(
                    "cleaner_offset_map_full",
                    topic=plog.topic,
                    partition=plog.partition,
                    base_offset=seg.base_offset,
                    latest_offset=omap.latest_offset,
                )
                break

    def _map_segment(
        self,
        plog: PartitionLog,
        seg: LogSegment,
        start: int,
        next_segment_start: int,
        txn: CleanedTransactionMetadata,
        stats: CleanerStats,
        generation: int,
    ) -> Generator[Step, None, bool]:
        omap = self.offset_map
        position = seg.offset_index.lookup(start).position
        batches = self._batches(seg, position)
        try:
            for item in batches:
                if type(item) is ReadRequest:
                    yield item
                    self._check(plog, generation)
                    continue
                data, off, info = item
                stats.map_bytes_read += info.size
                if info.attributes & CONTROL_FLAG:
                    txn.on_control_batch_read(info, control_type_of(data, off, info))
                    stats.map_messages_read += 1
                elif txn.on_batch_read(info):
                    stats.map_messages_read += info.records_count
                else:
                    _buf, recs = records_of(data, off, info)
                    for i in range(0, len(recs), YIELD_EVERY_RECORDS):
                        if i:
                            yield None
                            self._check(plog, generation)
                        if omap.put_records(recs, i, i + YIELD_EVERY_RECORDS, info.base_offset, start):
                            return True
                    stats.map_messages_read += len(recs)
                if info.last_offset >= start:
                    omap.latest_offset = info.last_offset
                yield None
                self._check(plog, generation)
        finally:
            batches.close()
        # Offset gaps at the end of the segment: fast forward to the next segment's start.
        omap.latest_offset = next_segment_start - 1
        return False

    # -- cleaning

    def clean(self, ltc: LogToClean, now_ms: int) -> Generator[Step, None, tuple[int, CleanerStats]]:
        """Cleaner.doClean; returns (first offset not cleaned, stats)."""
        plog = ltc.log
        generation = plog.segments_generation
        self._check(plog, generation)
        stats = CleanerStats()
        upper = ltc.first_uncleanable_offset
        yield from self.build_offset_map(plog, ltc.first_dirty_offset, upper, stats, generation)
        stats.map_done = time.perf_counter()
        end_offset = self.offset_map.latest_offset + 1
        if end_offset <= ltc.first_dirty_offset:
            stats.end = time.perf_counter()
            return ltc.first_dirty_offset, stats
        segments = [
            s for s in segments_overlapping(plog.segments, 0, end_offset) if s is not plog.active_segment
        ]
        cfg = plog.config
        groups = self.group_segments_by_size(segments, cfg.segment_size, cfg.segment_index_bytes, upper)
        log.info(
            "cleaning_log",
            topic=plog.topic,
            partition=plog.partition,
            first_dirty_offset=ltc.first_dirty_offset,
            end_offset=end_offset,
            groups=len(groups),
            keys=len(self.offset_map),
        )
        txn = CleanedTransactionMetadata()
        for group in groups:
            generation = yield from self.clean_segments(plog, group, now_ms, stats, txn, upper, generation)
            stats.groups += 1
        stats.buffer_utilization = self.offset_map.utilization
        yield from self.offset_map.clear_steps()  # give the memory back between cleanings
        stats.end = time.perf_counter()
        return end_offset, stats

    def clean_segments(
        self,
        plog: PartitionLog,
        group: list[LogSegment],
        now_ms: int,
        stats: CleanerStats,
        txn: CleanedTransactionMetadata,
        upper_bound_of_round: int,
        generation: int,
    ) -> Generator[Step, None, int]:
        """Cleaner.cleanSegments: one group into one ``.cleaned`` segment, then the swap.
        Returns the log's segment generation after the swap."""
        cfg = plog.config
        interval = max(cfg.index_interval_bytes, 1)
        worst_case_entries = sum(s.size for s in group) // interval + 2 * len(group) + 2
        cleaned = LogSegment.create(
            plog.dir,
            group[0].base_offset,
            index_interval_bytes=cfg.index_interval_bytes,
            max_index_size=max(cfg.segment_index_bytes, worst_case_entries * 12),
            now_ms=now_ms,
            suffix=CLEANED_SUFFIX,
        )
        swapping = False
        try:
            txn.cleaned_index = cleaned.txn_index
            last_records = last_records_of_active_producers(plog)
            for i, seg in enumerate(group):
                upper = group[i + 1].base_offset if i + 1 < len(group) else seg.next_offset
                txn.add_aborted_transactions(self.collect_aborted(plog, seg.base_offset, upper))
                yield from self._clean_into(
                    plog, seg, cleaned, now_ms, txn, last_records, upper_bound_of_round, stats, generation
                )
            cleaned.on_become_inactive()
            yield FsyncRequest(
                [cleaned.log_path, cleaned.offset_index.path, cleaned.time_index.path, cleaned.txn_index.path]
            )
            self._check(plog, generation)
            cleaned.set_last_modified(group[-1].last_modified_ms)
            # The swap covers [base, end of the cleaned segment); trailing old segments all of
            # whose records went are deleted after it, each on its own.
            end = max(cleaned.next_offset, cleaned.base_offset + 1)
            covered = [s for s in group if s.base_offset < end]
            emptied = group[len(covered) :]
            swapping = True
            doomed = plog.replace_segments(cleaned, covered, on_step=self.on_swap_step, defer_delete=True)
            if emptied:
                doomed += plog.remove_cleaned_segments(emptied, on_step=self.on_swap_step, defer_delete=True)
            generation = plog.segments_generation
            # Unlinking the replaced files and the directory fsync block: off the loop.
            yield FsyncRequest([plog.dir], unlink=doomed)
            return generation
        except BaseException:
            if not swapping:
                cleaned.delete()
            raise
        finally:
            txn.cleaned_index = None

    def _clean_into(
        self,
        plog: PartitionLog,
        seg: LogSegment,
        dest: LogSegment,
        now_ms: int,
        txn: CleanedTransactionMetadata,
        last_records: dict[int, tuple[int, int]],
        upper_bound_of_round: int,
        stats: CleanerStats,
        generation: int,
    ) -> Generator[Step, None, None]:
        """Cleaner.cleanInto + MemoryRecords.filterTo for one source segment."""
        omap = self.offset_map
        latest = omap.latest_offset
        get = omap.lookup_function()
        delete_retention_ms = plog.config.delete_retention_ms
        out = bytearray()
        out_infos: list[BatchInfo] = []
        flush_at = self.read_chunk

        def emit(batch: bytes | bytearray | memoryview) -> None:
            info = read_header(batch, 0)
            info.position = len(out)
            out.extend(batch)
            out_infos.append(info)
            stats.bytes_written += info.size
            stats.messages_written += info.records_count
            self.io_bytes += info.size

        batches = self._batches(seg, 0)
        try:
            for item in batches:
                if type(item) is ReadRequest:
                    yield item
                    self._check(plog, generation)
                    continue
                data, off, info = item
                attrs = info.attributes
                size = info.size
                stats.bytes_read += size
                is_control = bool(attrs & CONTROL_FLAG)
                horizon = info.base_timestamp if attrs & DELETE_HORIZON_FLAG else None
                # checkBatchRetention
                if is_control:
                    ctype = control_type_of(data, off, info)
                    can_discard = txn.on_control_batch_read(info, ctype)
                    discard_records = can_discard and horizon is not None and horizon <= now_ms
                else:
                    can_discard = txn.on_batch_read(info)
                    discard_records = can_discard
                pid = info.producer_id
                last_of_producer = False
                if pid >= 0:
                    last = last_records.get(pid)
                    if last is not None:
                        if last[0] >= 0:
                            last_of_producer = info.last_offset == last[0]
                        else:
                            last_of_producer = is_control and info.producer_epoch == last[1]
                # The last batch of a producer keeps its sequence/epoch; the last batch of the round
                # keeps the offset the cleaning reached.
                if last_of_producer or info.next_offset == upper_bound_of_round:
                    retention = _RETAIN_EMPTY
                elif discard_records:
                    retention = _DELETE
                else:
                    retention = _DELETE_EMPTY
                marker_for_empty_txn = can_discard and is_control
                stats.messages_read += info.records_count
                if retention != _DELETE:
                    # filterBatch
                    buf: bytes = data
                    kept: list[Record] = []
                    write_original = False
                    tombstones = False
                    if discard_records or info.records_count == 0:
                        pass
                    elif is_control:
                        write_original = True
                        if marker_for_empty_txn and horizon is None:
                            buf, kept = records_of(data, off, info)
                    else:
                        buf, recs = records_of(data, off, info)
                        base = info.base_offset
                        retain_deletes = horizon is None or now_ms < horizon
                        for n, r in enumerate(recs, 1):
                            if not n % YIELD_EVERY_RECORDS:
                                yield None
                                self._check(plog, generation)
                            offset = base + r[R_OFFSET_DELTA]
                            if offset > latest:
                                keep = True
                            else:
                                key = r[R_KEY]
                                if key is None:
                                    stats.invalid_messages += 1
                                    keep = False
                                else:
                                    keep = offset >= get(key) and (r[R_HAS_VALUE] or retain_deletes)
                            if keep:
                                kept.append(r)
                                if not r[R_HAS_VALUE]:
                                    tombstones = True
                        write_original = len(kept) == len(recs)
                    has_records = write_original or bool(kept)
                    if has_records:
                        need_horizon = (tombstones or marker_for_empty_txn) and horizon is None
                        if write_original and not need_horizon:
                            emit(memoryview(data)[off : off + size])
                        else:
                            if write_original and not kept:
                                buf, kept = records_of(data, off, info)
                            new_horizon = now_ms + delete_retention_ms if need_horizon else horizon
                            emit(rebuild_batch(info, buf, kept, new_horizon))
                    elif retention == _RETAIN_EMPTY:
                        emit(empty_batch(info))
                if len(out) >= flush_at:
                    yield AppendRequest(dest, out, out_infos)
                    out = bytearray()
                    out_infos = []
                yield None
                self._check(plog, generation)
        finally:
            batches.close()
        if out_infos:
            yield AppendRequest(dest, out, out_infos)


def run_sync(gen: Generator[Step, None, Any]) -> Any:
    """Drive a cleaning generator to the end on the calling thread (tests, tools)."""
    try:
        item = next(gen)
        while True:
            if isinstance(item, BlockingIO):
                item.run()
            item = next(gen)
    except StopIteration as stop:
        return stop.value
    finally:
        gen.close()
