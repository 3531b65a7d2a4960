"""PartitionLog: one replica's log (Kafka's UnifiedLog + LocalLog), sans-IO w.r.t. networking.

Owns the segments of ``<log dir>/<topic>-<partition>``, the leader epoch cache
(``leader-epoch-checkpoint``) and ``partition.metadata``. Appends assign offsets in place in the
produce buffer and write it with one ``os.write``; reads return whole batches from one ``pread``,
or for a client Fetch of 64 KiB or more (``zero_copy``) a FileRegion of the file to sendfile.
Nothing here blocks except the write itself, unless flush.messages asks for an fsync.

The log owns its producer state (idempotence, transactions, the LSO), as UnifiedLog owns its
ProducerStateManager: ``append`` says who appends (``origin``) and carries the KIP-890
verification guard, checks the batches against ``producer_state`` before writing and updates it
after; ``last_stable_offset`` is read from it. Opening and recovery are ``storage.log.loader``'s,
the epoch cache ``storage.log.leader_epoch``'s; every timestamp it takes without being given one
comes from its ``clock``.
"""

from __future__ import annotations

import os
import shutil
import uuid
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import structlog

from protocol.records import (
    BatchInfo,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
)
from storage import checkpoints
from storage.clock import SYSTEM_CLOCK, Clock
from storage.errors import (
    InvalidTimestamp,
    KafkaStorageError,
    OffsetOutOfRange,
    PolicyViolation,
    RecordBatchTooLarge,
    RecordTooLarge,
    SegmentInconsistent,
)
from storage.log import loader
from storage.log.file_region import FileRegion
from storage.log.leader_epoch import LeaderEpochCache
from storage.log.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    SWAP_SUFFIX,
    LogSegment,
    TimestampAndOffset,
)
from storage.log.time_index import TimestampOffset
from storage.log.txn_index import AbortedTxn
from storage.log_config import LogConfig
from storage.producer.log_state import LogProducerState
from storage.producer.types import TV_UNKNOWN, AppendOrigin

log = structlog.get_logger(__name__)

NO_TIMESTAMP = -1
EMPTY = memoryview(b"")


# --- results ------------------------------------------------------------------------------------


@dataclass(slots=True)
class AppendResult:
    first_offset: int
    last_offset: int
    log_append_time_ms: int  # -1 unless the batches were stamped with LogAppendTime
    log_start_offset: int
    num_messages: int


@dataclass(slots=True)
class ReadResult:
    """Whole batches; ``next_offset`` follows the last returned batch (== fetch_offset if empty)."""

    records: memoryview | FileRegion
    fetch_offset: int
    next_offset: int
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    aborted_txns: list[tuple[int, int]] | None = None  # (producer_id, first_offset), when asked for


class OffsetAndTimestamp(NamedTuple):
    offset: int
    timestamp: int


# --- the log ------------------------------------------------------------------------------------


class PartitionLog:
    """One partition replica's log. Construct with ``PartitionLog.open``."""

    def __init__(
        self,
        directory: str,
        topic: str,
        partition: int,
        config: LogConfig,
        segments: list[LogSegment],
        *,
        topic_id: uuid.UUID | None,
        log_start_offset: int,
        recovery_point: int,
        epoch_cache: LeaderEpochCache,
        now_ms: int,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.clock = clock
        self.dir = directory
        self.topic = topic
        self.partition = partition
        self.config = config
        self.topic_id = topic_id
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self._active = segments[-1]
        self._leo = self._active.next_offset
        # None: the high watermark follows the log end (one replica: whatever is appended is
        # committed). A replicated partition's leader and followers set it (track_high_watermark).
        self._hw: int | None = None
        self._log_start_offset = log_start_offset
        self._recovery_point = recovery_point
        self.epoch_cache = epoch_cache
        self.last_flush_ms = now_ms
        self._pending_flush_offset: int | None = None  # set on roll; LogManager.flush_dirty honours it
        self._dir_dirty = False  # a segment file was created since the last flush
        # The partition's producer state (Kafka's UnifiedLog holds its ProducerStateManager):
        # set by ``open_producer_state``; None only for a log opened bare (tools, some tests).
        self.producer_state: LogProducerState | None = None
        self.closed = False
        # Why the partition is offline (an I/O error left it in a state the broker cannot trust, as
        # Kafka takes a failed log dir offline): appends and reads answer KAFKA_STORAGE_ERROR until
        # a restart recovers it from its files.
        self.offline: str | None = None
        # Bumped whenever segments leave the list (retention, truncation, a cleaner swap), so a
        # cleaning that runs in slices between other work can tell its segments are still there.
        self.segments_generation = 0

    def go_offline(self, reason: str) -> None:
        if self.offline is None:
            self.offline = reason
            log.error("partition_offline", topic=self.topic, partition=self.partition, reason=reason)

    def check_online(self) -> None:
        if self.offline is not None:
            raise KafkaStorageError(f"{self.topic}-{self.partition} is offline after an I/O error: {self.offline}")

    # --- opening -------------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        directory: str,
        topic: str,
        partition: int,
        config: LogConfig,
        *,
        topic_id: uuid.UUID | bytes | str | None = None,
        recovery_point: int = 0,
        needs_recovery: bool = True,
        now_ms: int | None = None,
        log_start_offset: int = 0,
        leader_epoch: int | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> PartitionLog:
        """Load (or create) the partition directory (``storage.log.loader.load``) and open the log."""
        now = now_ms if now_ms is not None else clock.now_ms()
        loaded = loader.load(directory, topic, partition, config, topic_id=topic_id, recovery_point=recovery_point,
                             needs_recovery=needs_recovery, now=now, log_start_offset=log_start_offset,
                             leader_epoch=leader_epoch)
        plog = cls(directory, topic, partition, config, loaded.segments, topic_id=loaded.topic_id,
                   log_start_offset=loaded.log_start_offset, recovery_point=loaded.recovery_point,
                   epoch_cache=loaded.epoch_cache, now_ms=now, clock=clock)
        plog._active.roll_jitter_ms = config.random_segment_jitter()
        log.info(
            "log_loaded",
            topic=topic,
            partition=partition,
            segments=len(loaded.segments),
            log_start_offset=loaded.log_start_offset,
            log_end_offset=plog.log_end_offset,
            recovered=needs_recovery,
        )
        return plog

    # --- properties ----------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._leo

    @property
    def high_watermark(self) -> int:
        """The offset below which every record is on every in-sync replica (the log end offset
        while the log is not replicated)."""
        return self._leo if self._hw is None else self._hw

    @property
    def replicated(self) -> bool:
        return self._hw is not None

    def track_high_watermark(self, offset: int) -> None:
        """From now on the high watermark is set by replication, starting at ``offset`` (the
        checkpointed one), never above the log end or below the log start."""
        self._hw = max(min(offset, self._leo), self._log_start_offset)

    def follow_high_watermark(self) -> None:
        """Back to one replica: the high watermark follows the log end again."""
        self._hw = None

    def maybe_increment_high_watermark(self, offset: int) -> bool:
        """UnifiedLog.maybeIncrementHighWatermark (the leader): only forward, never past the end."""
        offset = min(offset, self._leo)
        if self._hw is None or offset <= self._hw:
            return False
        self._hw = offset
        return True

    def update_follower_high_watermark(self, leader_hw: int) -> None:
        """A follower takes min(leader's high watermark, its own log end) after each fetch."""
        if self._hw is not None:
            self._hw = max(min(leader_hw, self._leo), self._log_start_offset)

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def leader_epoch(self) -> int:
        """The latest epoch in the cache (0 for a log that has none yet: single broker)."""
        latest = self.epoch_cache.latest_epoch
        return 0 if latest is None else latest

    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._active

    @property
    def size(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def unflushed_messages(self) -> int:
        return self._leo - self._recovery_point

    def __repr__(self) -> str:
        return f"PartitionLog({self.topic}-{self.partition}, start={self._log_start_offset}, end={self._leo})"

    # --- append --------------------------------------------------------------------------------

    def validate_batches(self, batches: Sequence[BatchInfo], total_size: int, now_ms: int) -> None:
        """Kafka's size and CreateTime timestamp checks (before anything is assigned)."""
        cfg = self.config
        if total_size > cfg.segment_size:
            raise RecordBatchTooLarge(
                f"The request included message batch larger than the configured segment size "
                f"on the server: {total_size} > {cfg.segment_size}"
            )
        limit = cfg.max_message_bytes
        for b in batches:
            if b.size > limit:
                raise RecordTooLarge(
                    f"The record batch size in the append to {self.topic}-{self.partition} is {b.size} bytes "
                    f"which exceeds the maximum configured value of {limit}."
                )
        if cfg.message_timestamp_type == "CreateTime":
            before, after = cfg.message_timestamp_before_max_ms, cfg.message_timestamp_after_max_ms
            for b in batches:
                # Base and max timestamps bound the records in practice; checking them avoids
                # decoding every record (Kafka checks each record).
                for ts in (b.base_timestamp, b.max_timestamp):
                    if ts != NO_TIMESTAMP and (now_ms - ts > before or ts - now_ms > after):
                        raise InvalidTimestamp(
                            f"Timestamp {ts} of message with offset {b.base_offset} is out of range. The "
                            f"timestamp should be within [{now_ms - before}, {now_ms + after}]"
                        )

    def append(
        self,
        buf: bytearray | memoryview,
        batches: Sequence[BatchInfo],
        *,
        leader_epoch: int = 0,
        now_ms: int | None = None,
        log_append_time: bool | None = None,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        transaction_version: int = TV_UNKNOWN,
        verify_transactions: bool = False,
        verification_guard: object | None = None,
    ) -> AppendResult:
        """Append validated batches (``protocol.records.validate_batches`` output) as the leader
        (UnifiedLog.appendAsLeader).

        Assigns offsets and the partition leader epoch in place in ``buf`` (and LogAppendTime
        when asked or configured), checks them against the producer state, rolls first if
        needed, writes once, then honours flush.messages. ``batches`` must be contiguous in
        ``buf`` (positions relative to ``buf``). ``origin`` says who appends (a client, the
        coordinator's markers and records); ``transaction_version`` is the markers' (WriteTxnMarkers);
        ``verify_transactions`` and ``verification_guard`` are KIP-890's check that a
        transactional batch's partition is in its transaction. A retried duplicate is answered
        with its original offsets and nothing is written.
        """
        now, first_pos, end_pos = self._span(batches, now_ms)
        total = end_pos - first_pos
        self.validate_batches(batches, total, now)
        append_time = self.config.log_append_time if log_append_time is None else log_append_time
        first_offset = next_offset = self._leo
        num = 0
        max_ts = NO_TIMESTAMP
        for b in batches:
            pos = b.position
            set_base_offset(buf, pos, next_offset)
            set_partition_leader_epoch(buf, pos, leader_epoch)
            b.base_offset = next_offset
            b.partition_leader_epoch = leader_epoch
            if append_time:
                set_log_append_time(buf, b, now)
            next_offset += b.last_offset_delta + 1
            num += b.records_count
            if b.max_timestamp > max_ts:
                max_ts = b.max_timestamp
        if self.producer_state is not None:
            dup = self.producer_state.before_append(buf, batches, origin, transaction_version, verify_transactions,
                                                    verification_guard)
            if dup is not None:  # Kafka answers a retried batch with its original offsets and timestamp
                return AppendResult(dup.last_offset - dup.offset_delta, dup.last_offset, dup.timestamp,
                                    self._log_start_offset, 0)
        last_offset = next_offset - 1
        self._write(buf, batches, first_pos, end_pos, max_ts, last_offset, now)
        self._after_write([(leader_epoch, first_offset)], last_offset, "an append")
        return AppendResult(first_offset, last_offset, now if append_time else -1, self._log_start_offset, num)

    def _span(self, batches: Sequence[BatchInfo], now_ms: int | None) -> tuple[int, int, int]:
        """(now, first position, end position) of batches about to be appended to an online log;
        they must be contiguous in their buffer."""
        if not batches:
            raise ValueError("append of no batches")
        self.check_online()
        first_pos = batches[0].position
        end_pos = batches[-1].position + batches[-1].size
        if len(batches) > 1 and sum(b.size for b in batches) != end_pos - first_pos:
            raise ValueError("batches must be contiguous in the append buffer")
        return (now_ms if now_ms is not None else self.clock.now_ms()), first_pos, end_pos

    def _write(self, buf: bytearray | memoryview, batches: Sequence[BatchInfo], first_pos: int, end_pos: int,
               max_ts: int, last_offset: int, now: int, roll_at: int | None = None) -> None:
        """Roll when due, then write the batches in one go (all or nothing: a failed write leaves no
        trace); once written their offsets are taken and never given again."""
        seg = self._active
        if seg.should_roll(max_segment_bytes=self.config.segment_size, max_segment_ms=self.config.max_segment_ms,
                           messages_size=end_pos - first_pos, max_timestamp_in_messages=max_ts,
                           max_offset_in_messages=last_offset, now_ms=now):
            seg = self.roll(expected_next_offset=roll_at, now_ms=now)
        data = memoryview(buf)[first_pos:end_pos] if (first_pos or end_pos != len(buf)) else buf
        try:
            seg.append(data, batches)
        except SegmentInconsistent as e:
            self.go_offline(str(e))
            raise
        self._leo = last_offset + 1

    def _after_write(self, epochs: Iterable[tuple[int, int]], last_offset: int, what: str) -> None:
        """The state derived from written batches (leader epochs, producer state), then
        flush.messages. If that update fails the log holds batches its state may not know: trust
        nothing until recovery rebuilds it from the files."""
        try:
            for epoch, start in epochs:
                if epoch >= 0 and self.epoch_cache.latest_epoch != epoch:
                    self.epoch_cache.assign(epoch, start)
            if self.producer_state is not None:
                self.producer_state.after_append(self, last_offset)
        except Exception as e:
            self.go_offline(f"state update after {what} failed: {e}")
            raise KafkaStorageError(str(e)) from e
        if self._leo - self._recovery_point >= self.config.flush_messages:
            self.flush()

    def append_as_follower(self, buf: bytearray | memoryview, batches: Sequence[BatchInfo],
                           now_ms: int | None = None) -> AppendResult:
        """Batches fetched from the leader (UnifiedLog.appendAsFollower): offsets, leader epochs and
        timestamps are the leader's and kept; they must start at this log's end. The producer state,
        the aborted-transaction index and the epoch cache follow what the leader wrote."""
        now, first_pos, end_pos = self._span(batches, now_ms)
        first_offset = batches[0].base_offset
        if first_offset != self._leo:
            raise ValueError(f"follower append to {self.topic}-{self.partition} at offset {first_offset}, "
                             f"log end offset {self._leo}")
        next_offset = first_offset
        max_ts = NO_TIMESTAMP
        num = 0
        for b in batches:
            if b.base_offset != next_offset:
                raise ValueError(f"out of order offsets from the leader: {b.base_offset}, expected {next_offset}")
            next_offset = b.base_offset + b.last_offset_delta + 1
            num += b.records_count
            max_ts = max(max_ts, b.max_timestamp)
        if self.producer_state is not None:
            self.producer_state.before_append(buf, batches, AppendOrigin.REPLICATION, TV_UNKNOWN, False, None)
        last_offset = next_offset - 1
        self._write(buf, batches, first_pos, end_pos, max_ts, last_offset, now, roll_at=first_offset)
        # the epoch cache follows the leader's epochs
        self._after_write([(b.partition_leader_epoch, b.base_offset) for b in batches], last_offset,
                          "a follower append")
        return AppendResult(first_offset, last_offset, -1, self._log_start_offset, num)

    def _segments_deleted(self, base_offsets: list[int]) -> None:
        if self.producer_state is not None:
            self.producer_state.on_segments_deleted(self, base_offsets)

    def open_producer_state(self, now_ms: int, **manager_config: int) -> LogProducerState:
        """Load (recover) this log's producer state; its hooks then run with every operation."""
        self.producer_state = LogProducerState.open(self, now_ms, **manager_config)
        return self.producer_state

    @property
    def last_stable_offset(self) -> int:
        """UnifiedLog.lastStableOffset: the first offset of the earliest open transaction, else the
        high watermark."""
        if self.producer_state is None:
            return self.high_watermark
        return self.producer_state.last_stable_offset(self)

    def assign_leader_epoch(self, epoch: int, start_offset: int | None = None) -> None:
        """Kafka's maybeAssignEpochStartOffset (becoming leader): epoch starts at the log end."""
        self.epoch_cache.assign(epoch, self._leo if start_offset is None else start_offset)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (epoch, end offset), (-1, -1) when unknown."""
        return self.epoch_cache.end_offset_for(epoch, self._leo)

    def epoch_for_offset(self, offset: int) -> int | None:
        return self.epoch_cache.epoch_for_offset(offset)

    # --- rolling / flushing --------------------------------------------------------------------

    def roll(self, expected_next_offset: int | None = None, now_ms: int | None = None) -> LogSegment:
        """Start a new active segment at max(expected_next_offset, log end offset).

        No fsync here (Kafka schedules the old segment's flush asynchronously): the pending flush
        is recorded and done by ``flush_pending()`` (LogManager.flush_dirty).
        """
        now = now_ms if now_ms is not None else self.clock.now_ms()
        new_offset = max(expected_next_offset or 0, self._leo)
        old = self._active
        if old.base_offset == new_offset and old.size == 0:
            return old
        if new_offset < old.base_offset:
            raise KafkaStorageError(
                f"Trying to roll a new log segment for {self.topic}-{self.partition} with start offset "
                f"{new_offset} lower than start offset of the active segment {old}"
            )
        old.on_become_inactive()
        seg = LogSegment.create(
            self.dir,
            new_offset,
            index_interval_bytes=self.config.index_interval_bytes,
            max_index_size=self.config.segment_index_bytes,
            now_ms=now,
            roll_jitter_ms=self.config.random_segment_jitter(),
        )
        self._segments.append(seg)
        self._bases.append(new_offset)
        self._active = seg
        self._dir_dirty = True
        self._pending_flush_offset = new_offset
        log.info(
            "segment_rolled",
            topic=self.topic,
            partition=self.partition,
            new_base_offset=new_offset,
            previous_base_offset=old.base_offset,
            previous_size=old.size,
        )
        if self.producer_state is not None:
            self.producer_state.on_roll(self, new_offset)
        return seg

    def flush(self, up_to: int | None = None, now_ms: int | None = None) -> None:
        """fsync segments holding offsets in [recovery point, up_to) and advance the recovery point."""
        offset = self._leo if up_to is None else min(up_to, self._leo)
        if offset > self._recovery_point:
            for seg in self._segments_overlapping(self._recovery_point, offset):
                seg.flush()
            if self._dir_dirty:
                checkpoints.fsync_dir(self.dir)
                self._dir_dirty = False
            self._recovery_point = offset
        if self._pending_flush_offset is not None and self._pending_flush_offset <= self._recovery_point:
            self._pending_flush_offset = None
        self.last_flush_ms = now_ms if now_ms is not None else self.clock.now_ms()

    def flush_pending(self, now_ms: int | None = None) -> bool:
        """Flush up to the last roll point, as Kafka's post-roll background flush; True if it did."""
        if self._pending_flush_offset is None:
            return False
        self.flush(self._pending_flush_offset, now_ms)
        return True

    def _segments_overlapping(self, start: int, end: int) -> list[LogSegment]:
        """Segments holding offsets in [start, end)."""
        i = max(bisect_right(self._bases, start) - 1, 0)
        out = []
        for seg in self._segments[i:]:
            if seg.base_offset >= end:
                break
            out.append(seg)
        return out

    # --- read ----------------------------------------------------------------------------------

    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        upper_bound_offset: int | None = None,
        min_one_message: bool = True,
        *,
        include_aborted_txns: bool = False,
        zero_copy: bool = False,
    ) -> ReadResult:
        """Whole batches from ``fetch_offset`` whose last offset < ``upper_bound_offset``.

        The upper bound is the high watermark (read_uncommitted, the default) or the LSO
        (read_committed). Reads one segment, moving to the next only if the first holds nothing at
        or after ``fetch_offset``. OffsetOutOfRange outside [log start, log end]. ``zero_copy``:
        large results are a FileRegion (for a socket), not bytes.
        """
        self.check_online()
        leo = self._leo
        upper = leo if upper_bound_offset is None else min(upper_bound_offset, leo)
        if fetch_offset < self._log_start_offset or fetch_offset > leo:
            raise OffsetOutOfRange(
                f"Received request for offset {fetch_offset} for partition {self.topic}-{self.partition}, "
                f"but we only have log segments from offset {self._log_start_offset} up to {leo}."
            )
        result = ReadResult(EMPTY, fetch_offset, fetch_offset, leo, self._log_start_offset, leo)
        if fetch_offset >= upper:
            if include_aborted_txns:
                result.aborted_txns = []
            return result
        i = max(bisect_right(self._bases, fetch_offset) - 1, 0)
        segments = self._segments
        while i < len(segments):
            seg = segments[i]
            try:
                r = (seg.read_region if zero_copy else seg.read)(fetch_offset, max_bytes, None, min_one_message,
                                                                 upper)
            except SegmentInconsistent as e:
                self.go_offline(str(e))
                raise
            if r is not None:
                result.records = r.records
                result.next_offset = r.next_offset
                break
            i += 1
        if include_aborted_txns:
            result.aborted_txns = (
                self.collect_aborted_txns(fetch_offset, result.next_offset) if result.records else []
            )
        return result

    def iter_batches(self, start_offset: int = 0) -> Iterator[tuple[LogSegment, BatchInfo]]:
        """(segment, header) of every batch whose last offset >= ``start_offset``, in offset order.

        For replaying the log tail (producer state rebuild); ``segment.read_at(info.position,
        info.size)`` gives a batch's bytes when needed (control batches).
        """
        i = max(bisect_right(self._bases, start_offset) - 1, 0)
        for seg in list(self._segments[i:]):
            loc = seg.translate_offset(start_offset)
            if loc is None:
                continue
            for info in seg.iter_batches(loc.position):
                yield seg, info

    # --- transactions --------------------------------------------------------------------------

    def append_aborted_txn(self, txn: AbortedTxn) -> None:
        """Record an aborted transaction in the segment holding its marker (the active one)."""
        i = max(bisect_right(self._bases, txn.last_offset) - 1, 0)
        self._segments[i].append_aborted_txn(txn)

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> list[tuple[int, int]]:
        """(producer_id, first_offset) of aborted txns overlapping [fetch_offset, upper_bound_offset)."""
        out: list[tuple[int, int]] = []
        i = max(bisect_right(self._bases, fetch_offset) - 1, 0)
        for seg in self._segments[i:]:
            txns, complete = seg.collect_aborted_txns(fetch_offset, upper_bound_offset)
            out.extend(t.as_aborted_transaction() for t in txns)
            if complete:
                break
        return out

    # --- timestamps ----------------------------------------------------------------------------

    def offset_for_timestamp(self, timestamp: int) -> OffsetAndTimestamp | None:
        """ListOffsets by time: the first record with timestamp >= ``timestamp`` (Kafka's
        fetchOffsetByTimestamp); None when there is none. Use ``epoch_for_offset`` for the epoch."""
        found = self.find_offset_by_timestamp(timestamp)
        return None if found is None else OffsetAndTimestamp(found.offset, found.timestamp)

    def find_offset_by_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """As ``offset_for_timestamp`` with the batch's partition leader epoch."""
        if timestamp < 0:
            raise ValueError("special timestamps (-1 latest, -2 earliest, -3 max) are resolved by the caller")
        for seg in self._segments:
            if seg.largest_timestamp >= timestamp:
                return seg.find_offset_by_timestamp(timestamp, self._log_start_offset)
        return None

    def max_timestamp_and_offset(self) -> TimestampOffset | None:
        """ListOffsets MAX_TIMESTAMP (-3): (timestamp, offset) of the first record carrying the
        largest timestamp; note the order follows the name (offset_for_timestamp's is reversed)."""
        best = None
        for seg in self._segments:
            if best is None or seg.max_timestamp_so_far > best.max_timestamp_so_far:
                best = seg
        if best is None or best.max_timestamp_so_far < 0:
            return None
        found = best.find_max_timestamp()
        return None if found is None else TimestampOffset(found.timestamp, found.offset)

    # --- truncation / start offset / retention -------------------------------------------------

    def truncate_to(self, offset: int, now_ms: int | None = None) -> bool:
        """Remove everything at or after ``offset`` (Kafka's UnifiedLog.truncateTo); True if changed."""
        if offset < 0:
            raise ValueError(f"Cannot truncate partition {self.topic}-{self.partition} to a negative offset")
        if offset >= self._leo:
            # Nothing to cut, but an epoch this replica started as leader without appending to it
            # (its start offset is the log end) must go, or the leader's and ours never agree and
            # the follower asks again and again (Kafka's truncateTo truncates the cache here too).
            self.epoch_cache.truncate_from_end(self._leo)
            return False
        now = now_ms if now_ms is not None else self.clock.now_ms()
        if offset < self._log_start_offset:
            self.truncate_fully_and_start_at(offset, now)
            return True
        doomed = [s for s in self._segments if s.base_offset > offset]
        if doomed:
            self._remove_segments(doomed, "truncation")
        self._active = self._segments[-1]
        self._active.truncate_to(offset, now)
        self._leo = self._active.next_offset
        self.epoch_cache.truncate_from_end(self._leo)
        if self._hw is not None:
            self._hw = min(self._hw, self._leo)
        self._log_start_offset = min(self._log_start_offset, self._leo)
        self._recovery_point = min(self._recovery_point, self._leo)
        log.info("log_truncated", topic=self.topic, partition=self.partition, log_end_offset=self._leo)
        if self.producer_state is not None:
            self.producer_state.on_truncate(self, now_ms if now_ms is not None else self.clock.now_ms())
        return True

    def truncate_fully_and_start_at(self, new_offset: int, now_ms: int | None = None) -> None:
        """Drop every segment and restart the log empty at ``new_offset``."""
        now = now_ms if now_ms is not None else self.clock.now_ms()
        self._remove_segments(list(self._segments), "truncation")
        seg = LogSegment.create(
            self.dir,
            new_offset,
            index_interval_bytes=self.config.index_interval_bytes,
            max_index_size=self.config.segment_index_bytes,
            now_ms=now,
            roll_jitter_ms=self.config.random_segment_jitter(),
        )
        self._segments = [seg]
        self._bases = [new_offset]
        self._active = seg
        self._leo = new_offset
        self._log_start_offset = new_offset
        self._recovery_point = new_offset
        if self._hw is not None:
            self._hw = new_offset
        self._dir_dirty = True
        self.epoch_cache.clear()
        log.info("log_truncated_fully", topic=self.topic, partition=self.partition, new_offset=new_offset)
        if self.producer_state is not None:
            self.producer_state.on_truncate(self, now_ms if now_ms is not None else self.clock.now_ms())

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: advance the log start offset to ``offset`` (-1 = the high watermark) and
        drop the segments wholly below it. Returns the new log start offset (the low watermark).

        As Kafka's Partition.deleteRecordsOnLeader: POLICY_VIOLATION unless cleanup.policy has
        'delete'; OFFSET_OUT_OF_RANGE beyond the high watermark."""
        if not self.config.delete:
            raise PolicyViolation(
                f"Records of partition {self.topic}-{self.partition} can not be deleted due to the configured policy"
            )
        if offset == -1:
            offset = self.high_watermark
        if offset > self.high_watermark or offset < 0:
            raise OffsetOutOfRange(
                f"Cannot increment the log start offset to {offset} of partition {self.topic}-{self.partition} "
                f"since it is larger than the high watermark {self.high_watermark}"
            )
        self._maybe_increment_log_start_offset(offset)
        self._delete_old_segments(
            lambda seg, nxt: nxt is not None and nxt.base_offset <= self._log_start_offset,
            "log_start_offset_breach",
        )
        return self._log_start_offset

    def _maybe_increment_log_start_offset(self, offset: int) -> None:
        if offset > self._log_start_offset:
            self._log_start_offset = offset
            self.epoch_cache.truncate_from_start(offset)
            log.info(
                "log_start_offset_advanced",
                topic=self.topic,
                partition=self.partition,
                log_start_offset=offset,
            )
            if self.producer_state is not None:
                self.producer_state.on_log_start_offset(offset)

    def apply_retention(self, now_ms: int | None = None) -> int:
        """Delete whole segments breaching the log start offset, retention.bytes and retention.ms
        (the last two only with cleanup.policy=delete); returns the number deleted.

        As Kafka, the active segment goes too once all its data is expired: a new empty segment is
        rolled first so the log always has one.
        """
        now = now_ms if now_ms is not None else self.clock.now_ms()
        deleted = self._delete_old_segments(
            lambda seg, nxt: nxt is not None and nxt.base_offset <= self._log_start_offset,
            "log_start_offset_breach",
            now,
        )
        if not self.config.delete:
            return deleted
        retention_bytes = self.config.retention_bytes
        if retention_bytes >= 0:
            diff = self.size - retention_bytes
            if diff > 0:

                def over_size(seg: LogSegment, nxt: LogSegment | None) -> bool:
                    nonlocal diff
                    if diff - seg.size >= 0:
                        diff -= seg.size
                        return True
                    return False

                deleted += self._delete_old_segments(over_size, "retention_bytes_breach", now)
        retention_ms = self.config.retention_ms
        if retention_ms >= 0:
            deleted += self._delete_old_segments(
                lambda seg, nxt: now - seg.largest_timestamp > retention_ms, "retention_ms_breach", now
            )
        return deleted

    def _delete_old_segments(self, predicate, reason: str, now_ms: int | None = None) -> int:
        """Kafka's deleteOldSegments: the longest prefix of segments matching ``predicate``, never
        the last segment when it is empty, never data at or above the high watermark."""
        deletable: list[LogSegment] = []
        segs = self._segments
        hw = self.high_watermark
        for i, seg in enumerate(segs):
            nxt = segs[i + 1] if i + 1 < len(segs) else None
            upper = nxt.base_offset if nxt is not None else self._leo
            if nxt is None and seg.size == 0:
                break
            if not (hw >= upper and predicate(seg, nxt)):
                break
            deletable.append(seg)
        if not deletable:
            return 0
        if len(deletable) == len(segs):
            self.roll(now_ms=now_ms)  # the log must keep a segment: roll an empty one at the end
        self._remove_segments(deletable, reason)
        self._maybe_increment_log_start_offset(self._segments[0].base_offset)
        return len(deletable)

    def _remove_segments(self, doomed: list[LogSegment], reason: str) -> None:
        """Unlink segments: rename to .deleted first (as Kafka), then delete the files."""
        ids = {id(s) for s in doomed}
        self._segments = [s for s in self._segments if id(s) not in ids]
        self._bases = [s.base_offset for s in self._segments]
        self.segments_generation += 1
        for seg in doomed:
            size = seg.size
            try:
                seg.change_suffix("", DELETED_SUFFIX)
            except OSError:
                pass
            seg.delete()
            log.info(
                "segment_deleted",
                topic=self.topic,
                partition=self.partition,
                base_offset=seg.base_offset,
                size=size,
                reason=reason,
            )
        if doomed:
            self._segments_deleted([s.base_offset for s in doomed])

    def replace_segments(
        self,
        cleaned: LogSegment,
        old: Sequence[LogSegment],
        *,
        on_step: Callable[[str], None] | None = None,
        defer_delete: bool = False,
    ) -> list[str]:
        """Swap a cleaned segment in for the contiguous non-active segments ``old`` (Kafka's
        replaceSegments). ``cleaned`` has the base offset of ``old[0]``, its files are named
        ``*.cleaned`` and are complete and fsynced.

        Crash safety comes from the order of the renames:

        1. ``.cleaned`` -> ``.swap``, indexes first and the ``.log`` last. The ``.log.swap`` rename
           is the commit point: before it recovery deletes every ``.cleaned``/``.swap`` file of
           that base (the old segments are intact); after it recovery completes the swap.
        2. The old segments are renamed to ``.deleted`` (``.log`` first).
        3. ``.swap`` -> no suffix, ``.log`` first, then the indexes.

        So while ``<base>.log.swap`` exists every unsuffixed file with a base offset in
        [base, next offset of the swap file) belongs to the old segments, and an index ``.swap``
        without a ``.log.swap`` or ``.log.cleaned`` is the new segment's (``loader.clean_directory``).
        As in Kafka, the directory is fsynced once at the end, not between the phases: journaling
        file systems persist these metadata operations in order, so a crash leaves a prefix of
        them, and every prefix recovers.

        The ``.deleted`` files are unlinked and the directory fsynced here, unless
        ``defer_delete``: then their paths are returned for the caller to unlink and fsync off the
        event loop (Kafka deletes them asynchronously too; recovery removes any left over).
        ``on_step(description)`` runs after every file operation (crash-point tests).
        """
        if not old:
            raise ValueError("replace_segments needs at least one old segment")
        step = on_step or (lambda _desc: None)
        try:
            i = next(k for k, seg in enumerate(self._segments) if seg is old[0])
        except StopIteration:
            raise KafkaStorageError(f"segment {old[0]} is not in {self}") from None
        if (
            any(a is not b for a, b in zip(self._segments[i : i + len(old)], old, strict=False))
            or i + len(old) > len(self._segments) - 1
        ):
            raise KafkaStorageError(f"segments {list(old)} are not contiguous non-active segments of {self}")
        if cleaned.base_offset != old[0].base_offset or not cleaned.log_path.endswith(CLEANED_SUFFIX):
            raise ValueError(f"{cleaned.log_path} cannot replace the segment at {old[0].base_offset}")
        cleaned.change_suffix(
            CLEANED_SUFFIX, SWAP_SUFFIX, log_last=True, on_rename=lambda p: step(f"swap {p}")
        )
        step("committed")
        self._segments[i : i + len(old)] = [cleaned]
        self._bases = [s.base_offset for s in self._segments]
        self.segments_generation += 1
        doomed = self._retire(old, step, defer_delete, "deleted")
        cleaned.change_suffix(SWAP_SUFFIX, "", on_rename=lambda p: step(f"rename {p}"))
        if not defer_delete:
            checkpoints.fsync_dir(self.dir)
        step("done")
        log.info(
            "segments_replaced",
            topic=self.topic,
            partition=self.partition,
            base_offset=cleaned.base_offset,
            size=cleaned.size,
            replaced=[(s.base_offset, s.size) for s in old],
        )
        gone = [s.base_offset for s in old if s.base_offset != cleaned.base_offset]
        if gone:
            self._segments_deleted(gone)
        return doomed

    def remove_cleaned_segments(
        self,
        segments: Sequence[LogSegment],
        *,
        on_step: Callable[[str], None] | None = None,
        defer_delete: bool = False,
    ) -> list[str]:
        """Delete non-active segments that a cleaning emptied entirely, each one atomically (its
        .log is renamed to .deleted first). The log keeps an offset gap where they were, which
        reads step over as over offsets removed inside a segment. ``defer_delete`` as in
        ``replace_segments``."""
        present = {id(s) for s in self._segments[:-1]}
        if any(id(s) not in present for s in segments):
            raise KafkaStorageError(f"segments {list(segments)} are not non-active segments of {self}")
        ids = {id(s) for s in segments}
        self._segments = [s for s in self._segments if id(s) not in ids]
        self._bases = [s.base_offset for s in self._segments]
        self.segments_generation += 1
        doomed = self._retire(segments, on_step or (lambda _desc: None), defer_delete, "removed")
        if not defer_delete:
            checkpoints.fsync_dir(self.dir)
        for seg in segments:
            log.info(
                "segment_deleted",
                topic=self.topic,
                partition=self.partition,
                base_offset=seg.base_offset,
                reason="cleaned",
            )
        if segments:
            self._segments_deleted([s.base_offset for s in segments])
        return doomed

    @staticmethod
    def _retire(
        segments: Sequence[LogSegment], step: Callable[[str], None], defer_delete: bool, label: str
    ) -> list[str]:
        """Rename segments to .deleted (.log first), one after the other, and close them; unlink
        their files now, or return the paths when ``defer_delete``."""
        doomed: list[str] = []
        for seg in segments:
            try:
                seg.change_suffix("", DELETED_SUFFIX, on_rename=lambda p: step(f"delete {p}"))
            except OSError:
                pass
            if defer_delete:
                seg.close(final_time_entry=False)
                doomed.extend(seg.file_paths())
            else:
                seg.delete()
            step(f"{label} {seg.base_offset}")
        return doomed

    # --- config / lifecycle --------------------------------------------------------------------

    def update_config(self, config: LogConfig) -> None:
        """New topic config (AlterConfigs); applies to later appends, rolls and retention runs."""
        self.config = config

    def close(self) -> None:
        """Clean close: producer state snapshot, everything flushed, files closed."""
        if self.closed:
            return
        if self.producer_state is not None:
            self.producer_state.on_close(self)
        self.flush()
        for seg in self._segments:
            seg.close()
        self.closed = True

    def close_without_flush(self) -> None:
        """Close the files as they are (no flush, no final time index entry): crash-like."""
        for seg in self._segments:
            try:
                seg.close(final_time_entry=False)
            except KafkaStorageError:
                pass  # index entries not written: recovery rebuilds the index
        self.closed = True

    def delete(self) -> None:
        """Remove the partition: close the files and delete the directory."""
        if self.producer_state is not None:
            self.producer_state.on_delete()
        for seg in self._segments:
            seg.delete()
        self.closed = True
        shutil.rmtree(self.dir, ignore_errors=True)

    def rename_dir(self, new_dir: str) -> None:
        """Move the partition directory (used by topic deletion); files must be closed."""
        os.rename(self.dir, new_dir)
        self.dir = new_dir
