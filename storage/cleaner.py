"""Log compaction: Kafka's LogCleaner, LogCleanerManager, Cleaner and CleanedTransactionMetadata
(``storage/src/main/java/org/apache/kafka/storage/internals/log/`` in Kafka 4.x), on the event loop.

What a cleaning does (Kafka's algorithm, kept step for step):

1. Choose the filthiest compacted log (``grab_filthiest``): the dirty section runs from the
   ``cleaner-offset-checkpoint`` offset (Kafka's file and format, one per log dir) to the first
   uncleanable offset: the least of the active segment's base, the last stable offset and the
   first segment younger than ``min.compaction.lag.ms``, rounded down to a segment base. A log
   is cleaned when dirty/(clean + dirty) bytes exceeds ``min.cleanable.dirty.ratio`` or when a
   dirty segment is older than ``max.compaction.lag.ms``.
2. Build the key -> latest offset map over the dirty section (records of aborted transactions
   and control batches are not mapped); the map may fill up and stop early.
3. Rewrite every segment from the log start to the end of the map, in groups whose total size
   stays within ``segment.bytes`` (and the index limits), each group into one ``.cleaned``
   segment that keeps a record only if it is the latest for its key (or beyond the map), drops
   keyless records, drops tombstones and COMMIT/ABORT markers once their KIP-534 delete horizon
   (stamped in the batch header the first time they survive a cleaning) has passed, drops the
   data of aborted transactions and keeps their ABORT marker (and ``.txnindex`` entry) until no
   batch of the transaction is left. The last batch of every live producer is kept (emptied if
   need be) so idempotence and fencing survive; offsets are never reassigned.
4. ``PartitionLog.replace_segments`` swaps each group in with the crash-safe rename protocol,
   and the checkpoint moves to the end of the map.

Deliberate differences:

- The cleaning runs on the event loop in slices (a generator that yields after every batch
  and every few hundred records; ``LogCleaner.run`` gives the loop back whenever a slice has
  used ``slice_ms``), not in a thread: the work is pure Python, so a thread would hold the GIL
  just as long (and the loop would wait up to the 5 ms switch interval for it each time), and
  staying on the loop keeps the broker's rule of one owner for every log and segment. What
  blocks without being CPU work goes to the default executor as BlockingIO requests, on files
  nothing else writes: reads of the old segments (through a descriptor of the cleaner's own),
  appends to the ``.cleaned`` segment, its fsync, unlinking the replaced files, the directory
  fsync and the checkpoint write. The renames of the swap stay on the loop: they are the
  atomic steps. Between slices the log may change: appends and rolls do not matter (only
  non-active segments below the LSO are read), anything that removes segments (retention,
  DeleteRecords, truncation, deletion) bumps ``PartitionLog.segments_generation`` and the
  cleaning is abandoned and retried later.
- The old segments at the end of a group that a cleaning emptied entirely are not part of the
  swap; they are deleted one by one right after it. The swap then covers exactly
  [group base, end of the cleaned segment), which is what recovery reads from the ``.swap``
  file, so a crash at any point leaves the log before or after one atomic step (Kafka can be
  left with such an old segment beside the new one after a crash).
- A rewritten batch keeps its base timestamp unless a delete horizon is stamped into it (then
  the record timestamp deltas are re-encoded against the horizon, as Kafka does); Kafka re-bases
  every rewritten batch on its first remaining record. Record timestamps are the same either way.
- The offset map is a dict of exact keys (see ``storage.offset_map``), not MD5 digests.
"""

from __future__ import annotations

import asyncio
import heapq
import math
import os
import struct
import time
import weakref
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog
from crc32c import crc32c

from protocol.compression import compress
from protocol.record_codec import (
    R_AFTER_TS,
    R_ATTRS,
    R_END,
    R_HAS_VALUE,
    R_KEY,
    R_OFFSET_DELTA,
    R_START,
    R_TS_DELTA,
    Record,
    control_type_of,
    records_of,
    zigzag,
)
from protocol.records import (
    COMPRESSION_MASK,
    CONTROL_ABORT,
    CONTROL_COMMIT,
    CONTROL_FLAG,
    CRC,
    CRC_START,
    DELETE_HORIZON_FLAG,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG,
    BatchInfo,
    read_header,
)
from storage import checkpoints
from storage.errors import KafkaStorageError
from storage.log.segment import CLEANED_SUFFIX, LogSegment
from storage.log.txn_index import AbortedTxn, TransactionIndex
from storage.offset_map import OffsetMap

if TYPE_CHECKING:
    from storage.log.partition_log import PartitionLog
    from storage.log_manager import LogManager

log = structlog.get_logger(__name__)

CHECKPOINT_FILE = "cleaner-offset-checkpoint"  # LogCleanerManager.OFFSET_CHECKPOINT_FILE
INT32_MAX = 2147483647
YIELD_EVERY_RECORDS = 512  # cooperative pause points inside large batches


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


def _nothing() -> None:
    pass


# --- configuration ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    """Kafka's CleanerConfig (``log.cleaner.*``), plus the slice length of this broker."""

    enable: bool = True
    threads: int = 1  # accepted for compatibility; there is one cooperative cleaner
    dedupe_buffer_size: int = 128 * 1024 * 1024
    dedupe_buffer_load_factor: float = 0.9
    io_buffer_size: int = 512 * 1024
    io_max_bytes_per_second: float = math.inf
    backoff_ms: int = 15_000
    max_message_size: int = 1048588
    slice_ms: float = 5.0  # not Kafka's: how long the cleaner runs before giving the loop back

    @classmethod
    def from_broker_config(cls, cfg: Any) -> CleanerConfig:
        def get(name: str, default: Any) -> Any:
            value = cfg.get(name)
            return default if value is None else value

        return cls(
            enable=bool(get("log.cleaner.enable", True)),
            threads=int(get("log.cleaner.threads", 1)),
            dedupe_buffer_size=int(get("log.cleaner.dedupe.buffer.size", cls.dedupe_buffer_size)),
            dedupe_buffer_load_factor=float(get("log.cleaner.io.buffer.load.factor", 0.9)),
            io_buffer_size=int(get("log.cleaner.io.buffer.size", cls.io_buffer_size)),
            io_max_bytes_per_second=float(get("log.cleaner.io.max.bytes.per.second", math.inf)),
            backoff_ms=int(get("log.cleaner.backoff.ms", cls.backoff_ms)),
            max_message_size=int(get("message.max.bytes", cls.max_message_size)),
        )


class CleaningAborted(Exception):
    """The log changed under a cleaning (segments removed, log closed, no longer compacted)."""




# --- batch building -----------------------------------------------------------------------------


def empty_batch(info: BatchInfo) -> bytearray:
    """DefaultRecordBatch.writeEmptyHeader: the header alone, keeping offsets, producer id, epoch
    and base sequence (RETAIN_EMPTY)."""
    attrs = info.attributes & (TIMESTAMP_TYPE_MASK | TRANSACTIONAL_FLAG | CONTROL_FLAG)
    buf = bytearray(HEADER_SIZE)
    HEADER.pack_into(
        buf,
        0,
        info.base_offset,
        HEADER_SIZE - LOG_OVERHEAD,
        info.partition_leader_epoch,
        2,
        0,
        attrs,
        info.last_offset_delta,
        info.max_timestamp,
        info.max_timestamp,
        info.producer_id,
        info.producer_epoch,
        info.base_sequence,
        0,
    )
    CRC.pack_into(buf, 17, crc32c(memoryview(buf)[CRC_START:]))
    return buf


def rebuild_batch(info: BatchInfo, buf: bytes, kept: Sequence[Record], horizon: int | None) -> bytearray:
    """The retained records of a batch as a new batch (MemoryRecords.buildRetainedRecordsInto):
    same base offset, last offset delta, producer fields, leader epoch, timestamp type and codec;
    with ``horizon`` the delete-horizon flag is set and the base timestamp holds it (KIP-534)."""
    orig_base_ts = info.base_timestamp
    had_horizon = bool(info.attributes & DELETE_HORIZON_FLAG)
    base_ts = orig_base_ts if horizon is None else horizon
    if horizon is None and had_horizon:
        raise ValueError("a batch cannot lose its delete horizon")
    reencode = base_ts != orig_base_ts
    parts: list[bytes | memoryview] = []
    mv = memoryview(buf)
    max_ts = -1
    for r in kept:
        ts = orig_base_ts + r[R_TS_DELTA]
        if ts > max_ts:
            max_ts = ts
        if reencode:
            body_rest = mv[r[R_AFTER_TS] : r[R_END]]
            body_len = 1 + len(zigzag(ts - base_ts)) + len(body_rest)
            parts.append(zigzag(body_len))
            parts.append(mv[r[R_ATTRS] : r[R_ATTRS] + 1])
            parts.append(zigzag(ts - base_ts))
            parts.append(body_rest)
        else:
            parts.append(mv[r[R_START] : r[R_END]])
    records = b"".join(parts)
    codec = info.attributes & COMPRESSION_MASK
    if codec:
        records = compress(codec, records)
    attrs = info.attributes & ~DELETE_HORIZON_FLAG
    if horizon is not None:
        attrs |= DELETE_HORIZON_FLAG
    if info.attributes & TIMESTAMP_TYPE_MASK:
        max_ts = info.max_timestamp  # LOG_APPEND_TIME: the batch's append time
    size = HEADER_SIZE + len(records)
    out = bytearray(size)
    HEADER.pack_into(
        out,
        0,
        info.base_offset,
        size - LOG_OVERHEAD,
        info.partition_leader_epoch,
        2,
        0,
        attrs,
        info.last_offset_delta,
        base_ts,
        max_ts,
        info.producer_id,
        info.producer_epoch,
        info.base_sequence,
        len(kept),
    )
    out[HEADER_SIZE:] = records
    CRC.pack_into(out, 17, crc32c(memoryview(out)[CRC_START:]))
    return out


# --- transactions -------------------------------------------------------------------------------


class CleanedTransactionMetadata:
    """Kafka's CleanedTransactionMetadata: which transactions are aborted or committed while the
    cleaner walks the log, whether a marker may go, and the cleaned segment's ``.txnindex``."""

    def __init__(self) -> None:
        self.ongoing_committed: set[int] = set()
        self.ongoing_aborted: dict[int, list] = {}  # pid -> [AbortedTxn, last observed batch offset]
        self._heap: list[tuple[int, int, AbortedTxn]] = []
        self._seen: set[AbortedTxn] = set()
        self._seq = 0
        self.cleaned_index: TransactionIndex | None = None

    def add_aborted_transactions(self, txns: Sequence[AbortedTxn]) -> None:
        for txn in txns:
            if txn not in self._seen:
                self._seen.add(txn)
                self._seq += 1
                heapq.heappush(self._heap, (txn.first_offset, self._seq, txn))

    def _consume_aborted_up_to(self, offset: int) -> None:
        heap = self._heap
        while heap and heap[0][0] <= offset:
            txn = heapq.heappop(heap)[2]
            self.ongoing_aborted.setdefault(txn.producer_id, [txn, None])

    def on_control_batch_read(self, info: BatchInfo, control_type: int | None) -> bool:
        """True if the marker may be discarded."""
        self._consume_aborted_up_to(info.last_offset)
        if control_type is None:
            return True  # an empty control batch was already cleaned
        pid = info.producer_id
        if control_type == CONTROL_ABORT:
            meta = self.ongoing_aborted.pop(pid, None)
            if meta is not None and meta[1] is not None:
                # Retain the marker until all batches of the transaction are gone.
                if self.cleaned_index is not None:
                    self.cleaned_index.append(meta[0])
                return False
            return True
        if control_type == CONTROL_COMMIT:
            if pid in self.ongoing_committed:
                self.ongoing_committed.discard(pid)
                return False
            return True
        return False

    def on_batch_read(self, info: BatchInfo) -> bool:
        """True if the (data) batch belongs to an aborted transaction."""
        self._consume_aborted_up_to(info.last_offset)
        if info.attributes & TRANSACTIONAL_FLAG:
            meta = self.ongoing_aborted.get(info.producer_id)
            if meta is not None:
                meta[1] = info.last_offset
                return True
            self.ongoing_committed.add(info.producer_id)
        return False


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
    ) -> Iterator[ReadRequest | tuple[bytes, int, BatchInfo]]:
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


# --- the manager (LogCleaner + LogCleanerManager) -----------------------------------------------


class LogCleaner:
    """Chooses logs to clean, keeps the ``cleaner-offset-checkpoint`` files and drives the
    cleaning in slices on the event loop (``run``), or synchronously (``clean_all``)."""

    def __init__(
        self,
        log_manager: LogManager,
        config: CleanerConfig | None = None,
        *,
        clock_ms: Callable[[], int] = _wall_ms,
    ) -> None:
        self.log_manager = log_manager
        self.config = config or CleanerConfig()
        self.cleaner = Cleaner(self.config)
        self.clock_ms = clock_ms
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
        self._io_window_start = time.monotonic()
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
        self, now: int | None = None, exclude: set[tuple[str, int]] = frozenset()
    ) -> LogToClean | None:
        """LogCleanerManager.grabFilthiestCompactedLog (``exclude``: logs already cleaned in
        this tick, so a log that cannot make progress is not retried in a loop)."""
        now = self.clock_ms() if now is None else now
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
        now = self.clock_ms() if now is None else now
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
            now = self.clock_ms()
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
        clock, cpu_clock = time.perf_counter, time.thread_time
        slices = 0
        longest = longest_cpu = busy = 0.0
        t0, c0 = clock(), cpu_clock()

        def end_slice() -> None:
            nonlocal slices, longest, longest_cpu, busy
            wall, cpu = clock() - t0, cpu_clock() - c0
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
                    t0, c0 = clock(), cpu_clock()
                elif clock() - t0 >= budget:
                    end_slice()
                    await self._pause()
                    t0, c0 = clock(), cpu_clock()
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
            now = time.monotonic()
            elapsed = now - self._io_window_start
            if elapsed >= 0.1:
                needed = (self.cleaner.io_bytes - self._io_bytes) / limit
                if needed > elapsed:
                    await asyncio.sleep(needed - elapsed)
                self._io_window_start = time.monotonic()
                self._io_bytes = self.cleaner.io_bytes
        # Twice: after one sleep(0) this task is already first in the ready queue of the next
        # loop iteration, ahead of the timers and socket callbacks that iteration collects;
        # after the second, everything that became ready during the slice runs before the next.
        await asyncio.sleep(0)
        await asyncio.sleep(0)
