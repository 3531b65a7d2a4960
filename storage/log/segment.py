"""One log segment: ``<base>.log`` plus its ``.index``, ``.timeindex`` and (lazy) ``.txnindex``.

Mirrors Kafka's LogSegment. The ``.log`` holds record batches exactly as the broker appended them
(offsets assigned), so Kafka's own tools can read it. Appends are one ``os.write`` of the whole
produce payload; reads are one ``os.pread`` of a contiguous byte range cut at a batch boundary by
walking the 12-byte (offset, length) prefixes in memory, or (``read_region``, for large Fetch
answers) a FileRegion cut the same way from the first header, the offset index and the last few
headers, as Kafka cuts its FileRecords slices, so the bytes go to the socket with sendfile
without being read here. Index entries follow Kafka's rule:
when more than ``index.interval.bytes`` were written since the last entry, the next batch gets an
entry (batch last offset, batch start position).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterator, Sequence
from typing import NamedTuple

import structlog
from crc32c import crc32c

from protocol.record_codec import decode_records
from protocol.records import (
    CRC,
    CRC_START,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MIN_BATCH_LENGTH,
    BatchInfo,
    read_header,
)
from storage.errors import KafkaStorageError, LogSegmentOffsetOverflow, SegmentInconsistent
from storage.log.file_region import FileRegion, SharedFd
from storage.log.offset_index import OffsetIndex
from storage.log.time_index import NO_TIMESTAMP, TimeIndex
from storage.log.txn_index import AbortedTxn, TransactionIndex

log = structlog.get_logger(__name__)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"

_BASE_LEN = struct.Struct(">qi")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_LAST_DELTA_AT = 23
_MAX_TS_AT = 35
_PLE_AT = 12
# baseOffset, batchLength, lastOffsetDelta: the header fields a read walks, in one unpack
_WALK = struct.Struct(">qi11xi")
_NO_BOUND = 1 << 63

WALK_CHUNK = 16384  # bytes read per pread while walking batch headers
# Reads of at least this many bytes come back as a FileRegion (sent with sendfile); smaller ones
# are copied: one pread costs less than the header walk and the region's file descriptor.
ZERO_COPY_MIN = 64 * 1024
RECOVERY_CHUNK = 8 << 20  # bytes read per pread while validating during recovery
EMPTY = memoryview(b"")


def filename_prefix(offset: int) -> str:
    """Kafka's LogFileUtils.filenamePrefixFromOffset: 20 digits, zero padded."""
    return f"{offset:020d}"


def offset_from_filename(name: str) -> int:
    return int(name.split(".", 1)[0])


class BatchLocation(NamedTuple):
    position: int
    base_offset: int
    last_offset: int
    size: int


class SegmentRead(NamedTuple):
    """Whole batches read from one segment. ``next_offset`` follows the last returned batch
    (== the requested offset when ``records`` is empty)."""

    records: memoryview | FileRegion
    position: int
    first_offset: int
    next_offset: int


class TimestampAndOffset(NamedTuple):
    timestamp: int
    offset: int
    leader_epoch: int  # -1 when the batch carries none


def _write_all(fd: int, data: memoryview) -> None:
    while data:
        data = data[os.write(fd, data) :]


class LogSegment:
    """A segment of a partition log. Not thread-safe: owned by the event loop like everything else."""

    def __init__(
        self,
        directory: str,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_size: int,
        now_ms: int,
        roll_jitter_ms: int = 0,
        suffix: str = "",
    ) -> None:
        """Open (or create) the files of the segment at ``base_offset``. Indexes are loaded, not
        checked against the log: call ``needs_rebuild()`` and ``recover()`` for that.

        ``suffix`` is appended to every file name (Kafka's fileSuffix): the cleaner writes its
        output as ``<base>.log.cleaned`` etc. until ``PartitionLog.replace_segments`` swaps it in."""
        self.dir = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.roll_jitter_ms = roll_jitter_ms
        self.created_ms = now_ms
        prefix = os.path.join(directory, filename_prefix(base_offset))
        self.log_path = prefix + LOG_SUFFIX + suffix
        self._index_missing = not os.path.exists(prefix + INDEX_SUFFIX + suffix) or not os.path.exists(
            prefix + TIME_INDEX_SUFFIX + suffix
        )
        try:
            self._fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
            self._shared_fd = SharedFd(self._fd)  # file regions of Fetch answers share it
            self._size = os.fstat(self._fd).st_size
        except OSError as e:
            raise KafkaStorageError(f"cannot open segment {self.log_path}: {e}") from e
        self._index_missing = self._index_missing and self._size > 0
        self.offset_index = OffsetIndex(prefix + INDEX_SUFFIX + suffix, base_offset, max_index_size)
        self.time_index = TimeIndex(prefix + TIME_INDEX_SUFFIX + suffix, base_offset, max_index_size)
        self.txn_index = TransactionIndex(prefix + TXN_INDEX_SUFFIX + suffix, base_offset)
        self._bytes_since_last_index_entry = self._size - self._last_index_position()
        self._max_ts: int | None = None  # None: not loaded yet (Kafka's TimestampOffset.UNKNOWN)
        self._offset_of_max_ts = base_offset
        self._rolling_ts: int | None = None  # max timestamp of the first batch, loaded lazily
        self._rolling_ts_loaded = False
        self._next_offset: int | None = None  # loaded lazily by scanning from the last index entry
        self._valid_tail_end: int | None = None
        # (offset, position): every batch before ``position`` has last offset < ``offset``.
        # Set by read() so a consumer's next fetch skips the index lookup and header walk.
        self._read_hint: tuple[int, int] | None = None

    @classmethod
    def create(
        cls,
        directory: str,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_size: int,
        now_ms: int,
        roll_jitter_ms: int = 0,
        suffix: str = "",
    ) -> LogSegment:
        """A new empty segment; stale index files left at that offset are removed first (as Kafka's roll)."""
        prefix = os.path.join(directory, filename_prefix(base_offset))
        log_file = prefix + LOG_SUFFIX + suffix
        if os.path.exists(log_file) and os.path.getsize(log_file) > 0:
            raise KafkaStorageError(
                f"Trying to roll a new log segment with base offset {base_offset} but it exists"
            )
        for kind in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            try:
                os.unlink(prefix + kind + suffix)
            except FileNotFoundError:
                pass
        return cls(
            directory,
            base_offset,
            index_interval_bytes=index_interval_bytes,
            max_index_size=max_index_size,
            now_ms=now_ms,
            roll_jitter_ms=roll_jitter_ms,
            suffix=suffix,
        )

    # --- basic properties ----------------------------------------------------------------------

    @property
    def size(self) -> int:
        return self._size

    def _last_index_position(self) -> int:
        n = self.offset_index.entries
        return self.offset_index.entry(n - 1).position if n else 0

    def needs_rebuild(self) -> bool:
        """True when an index is missing, torn, or points past the end of the log."""
        if self._size == 0:
            return False
        return (
            self._index_missing
            or not self.offset_index.sanity_ok()
            or not self.time_index.sanity_ok()
            or not self.txn_index.sanity_ok()
            or self._last_index_position() >= self._size
        )

    @property
    def next_offset(self) -> int:
        """Last offset + 1, or the base offset when empty (Kafka's readNextOffset)."""
        if self._next_offset is None:
            self._scan_tail()
        return self._next_offset  # type: ignore[return-value]

    @property
    def valid_tail_end(self) -> int:
        """Byte position after the last whole batch found by the tail scan (== size unless torn)."""
        if self._valid_tail_end is None:
            self._scan_tail()
        return self._valid_tail_end  # type: ignore[return-value]

    def _ensure_max_ts(self) -> int:
        if self._max_ts is None:
            ts, off = self.time_index.last_entry()
            self._max_ts, self._offset_of_max_ts = ts, off
        return self._max_ts

    def _scan_tail(self) -> None:
        """Find the next offset (and refresh the max timestamp) from the last index entry on."""
        max_ts = self._ensure_max_ts()
        off_max = self._offset_of_max_ts
        start = self._last_index_position()
        nxt = self.base_offset
        end = start if start <= self._size else 0
        for pos, size, data, off in self._walk(start):
            base, _ = _BASE_LEN.unpack_from(data, off)
            last = base + _I32.unpack_from(data, off + _LAST_DELTA_AT)[0]
            ts = _I64.unpack_from(data, off + _MAX_TS_AT)[0]
            if ts > max_ts:
                max_ts, off_max = ts, last
            nxt = last + 1
            end = pos + size
        self._max_ts, self._offset_of_max_ts = max_ts, off_max
        self._next_offset = nxt
        self._valid_tail_end = end

    @property
    def max_timestamp_so_far(self) -> int:
        return self._ensure_max_ts()

    @property
    def offset_of_max_timestamp(self) -> int:
        self._ensure_max_ts()
        return self._offset_of_max_ts

    @property
    def last_modified_ms(self) -> int:
        return os.fstat(self._fd).st_mtime_ns // 1_000_000

    @property
    def largest_timestamp(self) -> int:
        """Max record timestamp, or the file's mtime when no batch has one (Kafka's largestTimestamp)."""
        ts = self._ensure_max_ts()
        return ts if ts >= 0 else self.last_modified_ms

    @property
    def rolling_based_timestamp(self) -> int | None:
        """Max timestamp of the first batch: what segment.ms is measured from (Kafka's rule)."""
        if not self._rolling_ts_loaded:
            if self._size >= HEADER_SIZE:
                self._rolling_ts = _I64.unpack(os.pread(self._fd, 8, _MAX_TS_AT))[0]
            self._rolling_ts_loaded = True
        return self._rolling_ts

    def _pread(self, n: int, pos: int) -> bytes:
        """``n`` bytes at ``pos``, which the broker wrote: fewer means the file was cut under us."""
        try:
            data = os.pread(self._fd, n, pos)
        except OSError as e:
            raise KafkaStorageError(f"read of {self.log_path} failed: {e}") from e
        if len(data) < n:
            raise SegmentInconsistent(
                f"{self.log_path} ends before byte {pos + n} that the broker wrote: cut outside the broker"
            )
        return data

    # --- header walking ------------------------------------------------------------------------

    def _walk(self, pos: int, end: int | None = None) -> Iterator[tuple[int, int, bytes, int]]:
        """Yield (file position, size, buffer, offset in buffer) for each whole batch from ``pos``.

        Reads WALK_CHUNK at a time and only looks at the 61-byte headers; stops at a torn batch or
        an impossible length. No CRC check: that is recovery's job.
        """
        end = self._size if end is None else end
        fd = self._fd
        while end - pos >= HEADER_SIZE:
            data = os.pread(fd, min(WALK_CHUNK, end - pos), pos)
            if len(data) < min(WALK_CHUNK, end - pos) and end <= self._size:
                self._pread(min(WALK_CHUNK, end - pos), pos)  # raises: the file is shorter than written
            n = len(data)
            off = 0
            while n - off >= HEADER_SIZE:
                length = _I32.unpack_from(data, off + 8)[0]
                size = length + LOG_OVERHEAD
                if length < MIN_BATCH_LENGTH or pos + off + size > end:
                    return
                yield pos + off, size, data, off
                off += size
            if off == 0:
                return
            pos += off

    def iter_batches(self, start_position: int = 0) -> Iterator[BatchInfo]:
        """Headers of the batches from ``start_position`` (positions are file positions)."""
        for pos, _size, data, off in self._walk(start_position):
            info = read_header(data, off)
            info.position = pos
            yield info

    def read_at(self, position: int, size: int) -> bytes:
        return self._pread(size, position)

    def translate_offset(self, offset: int) -> BatchLocation | None:
        """The first batch whose last offset >= ``offset`` (Kafka's translateOffset), or None."""
        start = self.offset_index.lookup(offset).position
        hint = self._read_hint
        if hint is not None and hint[0] <= offset and hint[1] > start:
            start = hint[1]
        for pos, size, data, off in self._walk(start):
            base = _I64.unpack_from(data, off)[0]
            last = base + _I32.unpack_from(data, off + _LAST_DELTA_AT)[0]
            if last >= offset:
                return BatchLocation(pos, base, last, size)
        return None

    # --- append / read -------------------------------------------------------------------------

    def append(self, data: memoryview | bytes | bytearray, batches: Sequence[BatchInfo]) -> None:
        """Append ``data`` (exactly ``batches``, contiguous, offsets assigned) with one write.

        Updates the max timestamp and adds index entries per Kafka's LogSegment.append rule.
        """
        if not batches:
            return
        last = batches[-1]
        largest_offset = last.base_offset + last.last_offset_delta
        if (
            not self.offset_index.can_append_offset(largest_offset)
            or batches[0].base_offset < self.base_offset
        ):
            raise LogSegmentOffsetOverflow(
                f"offset {largest_offset} cannot be stored in segment with base offset {self.base_offset}"
            )
        physical = self._size
        max_ts = self._ensure_max_ts()
        view = memoryview(data)
        try:
            actual = os.fstat(self._fd).st_size
        except OSError as e:
            raise KafkaStorageError(f"stat of {self.log_path} failed: {e}") from e
        if actual != physical:  # cut or grown by someone else: appending now would corrupt it
            raise SegmentInconsistent(
                f"{self.log_path} is {actual} bytes, the broker wrote {physical}: changed outside the broker"
            )
        try:
            _write_all(self._fd, view)
        except OSError as e:
            try:
                os.ftruncate(self._fd, physical)  # leave no trace of a partial write
            except OSError as e2:
                raise SegmentInconsistent(
                    f"write to {self.log_path} failed ({e}) and its partial data could not be removed ({e2})"
                ) from e
            raise KafkaStorageError(f"write to {self.log_path} failed: {e}") from e
        if physical == 0:
            self._rolling_ts = max(b.max_timestamp for b in batches)
            self._rolling_ts_loaded = True
        self._size = physical + len(view)
        off_max = self._offset_of_max_ts
        bsl = self._bytes_since_last_index_entry
        interval = self.index_interval_bytes
        pos = physical
        for b in batches:
            blast = b.base_offset + b.last_offset_delta
            if b.max_timestamp > max_ts:
                max_ts, off_max = b.max_timestamp, blast
            if bsl > interval:
                self.offset_index.append(blast, pos)
                self.time_index.maybe_append(max_ts, off_max)
                bsl = 0
            pos += b.size
            bsl += b.size
        self._bytes_since_last_index_entry = bsl
        self._max_ts, self._offset_of_max_ts = max_ts, off_max
        self._next_offset = largest_offset + 1
        self._valid_tail_end = self._size

    def _start(self, start_offset: int, max_position: int | None, remember: bool) -> tuple[int, int, int] | None:
        """(position of the batch holding ``start_offset``, read limit, size now) for a read, None
        when the offset is past this segment. The position of the last read's end is kept
        (``_read_hint``), so a consumer reading on skips the index lookup."""
        size_now = self._size
        limit = size_now if max_position is None else min(max_position, size_now)
        hint = self._read_hint
        if hint is not None and hint[0] == start_offset:
            pos = hint[1]
            if pos >= size_now:
                return None
        else:
            loc = self.translate_offset(start_offset)
            if loc is None:
                return None
            pos = loc.position
            if remember:
                self._read_hint = (start_offset, pos)
        return pos, limit, size_now

    def read(
        self,
        start_offset: int,
        max_bytes: int,
        max_position: int | None = None,
        min_one_message: bool = False,
        max_offset: int | None = None,
    ) -> SegmentRead | None:
        """Whole batches from the one containing ``start_offset``; None if that is past this segment.

        Stops before ``max_bytes`` would be exceeded (the first batch is returned whole anyway when
        ``min_one_message``), before ``max_position`` and before the first batch whose last offset
        is >= ``max_offset`` (the HW or LSO). A fetch offset inside a batch returns that batch.
        """
        start = self._start(start_offset, max_position, remember=False)
        if start is None:
            return None
        pos, limit, size_now = start
        want = min(max(min(limit - pos, max_bytes), HEADER_SIZE), size_now - pos)
        data = self._pread(want, pos)
        if len(data) < HEADER_SIZE:
            return SegmentRead(EMPTY, pos, start_offset, start_offset)
        bound = _NO_BOUND if max_offset is None else max_offset
        first_base, length, delta = _WALK.unpack_from(data, 0)
        first_size = length + LOG_OVERHEAD
        first_last = first_base + delta
        if first_last < start_offset:  # stale hint (cannot happen unless the file changed under us)
            self._read_hint = None
            return self.read(start_offset, max_bytes, max_position, min_one_message, max_offset)
        empty = SegmentRead(EMPTY, pos, first_base, start_offset)
        if first_last >= bound or pos + first_size > limit:
            return empty
        if first_size > len(data):
            if not min_one_message or first_size > size_now - pos:
                return empty
            data = self._pread(first_size, pos)
        n = len(data)
        off = first_size
        nxt = first_last + 1
        unpack = _WALK.unpack_from
        stop = n - HEADER_SIZE
        while off <= stop:
            base, length, delta = unpack(data, off)
            size = length + LOG_OVERHEAD
            last = base + delta
            if length < MIN_BATCH_LENGTH or off + size > n or last >= bound:
                break
            off += size
            nxt = last + 1
        self._read_hint = (nxt, pos + off)
        mv = memoryview(data)
        return SegmentRead(mv if off == n else mv[:off], pos, first_base, nxt)

    def read_region(
        self,
        start_offset: int,
        max_bytes: int,
        max_position: int | None = None,
        min_one_message: bool = False,
        max_offset: int | None = None,
    ) -> SegmentRead | None:
        """``read``'s whole batches, as a FileRegion when they come to ZERO_COPY_MIN bytes or more.

        The cut is found without reading the records, as Kafka's LogSegment.read does: the first
        batch's header, the offset index bisected by position near the end, a walk of the few
        headers after that entry, and (only when the LSO or HW falls inside this segment) the
        position of the batch holding it. Smaller answers go through ``read``.
        """
        start = self._start(start_offset, max_position, remember=True)  # a fallback to read() does not walk again
        if start is None:
            return None
        pos, limit, _size_now = start
        if min(limit - pos, max_bytes) < ZERO_COPY_MIN:
            return self.read(start_offset, max_bytes, max_position, min_one_message, max_offset)
        head = self._pread(HEADER_SIZE, pos)
        first_base, length, delta = _WALK.unpack_from(head, 0)
        first_size = length + LOG_OVERHEAD
        first_last = first_base + delta
        if first_last < start_offset:  # stale hint (cannot happen unless the file changed under us)
            self._read_hint = None
            return self.read(start_offset, max_bytes, max_position, min_one_message, max_offset)
        bound = _NO_BOUND if max_offset is None else max_offset
        if first_last >= bound or pos + first_size > limit or (first_size > max_bytes and not min_one_message):
            return SegmentRead(EMPTY, pos, first_base, start_offset)
        end, nxt = pos + first_size, first_last + 1
        if first_size < max_bytes:
            cap = min(limit, pos + max_bytes)
            if bound < self.next_offset:  # the LSO/HW is in this segment: stop before its batch
                at = self.translate_offset(bound)
                if at is not None:
                    cap = min(cap, at.position)
            # Walk from the index entry before the last one at or below the cap: that entry's
            # batch ends at or before the cap, so the walk finds at least one whole batch.
            index = self.offset_index
            slot = index.slot_at_or_below_position(cap) - 1
            start = end
            if slot >= 0:
                start = max(start, index.entry(slot).position)
            for p, size, data, off in self._walk(start, cap):
                last = _BASE_LEN.unpack_from(data, off)[0] + _I32.unpack_from(data, off + _LAST_DELTA_AT)[0]
                if last >= bound:
                    break
                end, nxt = p + size, last + 1
            if end < start:  # the indexed batch did not come back whole: walk all the headers
                for p, size, data, off in self._walk(end, cap):
                    last = _BASE_LEN.unpack_from(data, off)[0] + _I32.unpack_from(data, off + _LAST_DELTA_AT)[0]
                    if last >= bound:
                        break
                    end, nxt = p + size, last + 1
        self._read_hint = (nxt, end)
        n = end - pos
        if n < ZERO_COPY_MIN:
            return SegmentRead(memoryview(self._pread(n, pos)), pos, first_base, nxt)
        if os.fstat(self._fd).st_size < end:  # sendfile would send less than the answer announces
            self._pread(n, pos)  # raises
        return SegmentRead(FileRegion(self._shared_fd, pos, n), pos, first_base, nxt)

    # --- recovery / truncation -----------------------------------------------------------------

    def recover(
        self, max_batch_size: int | None = None, on_batch: Callable[[BatchInfo], None] | None = None
    ) -> int:
        """Re-validate every batch (length, magic, CRC, offsets increasing and in range), rebuild the
        offset and time indexes from scratch and cut the log after the last valid batch.

        ``on_batch`` sees every valid batch (positions are file positions), e.g. to rebuild the
        leader epoch cache. Returns the number of bytes truncated.
        """
        self.offset_index.reset()
        self.time_index.reset()
        interval = self.index_interval_bytes
        fd = self._fd
        file_size = os.fstat(fd).st_size
        base_offset = self.base_offset
        valid = 0
        last_index_entry = 0
        max_ts, off_max = NO_TIMESTAMP, base_offset
        prev_last = base_offset - 1
        reason = None
        chunk_size = RECOVERY_CHUNK
        while valid < file_size and reason is None:
            data = os.pread(fd, min(chunk_size, file_size - valid), valid)
            mv = memoryview(data)
            n = len(data)
            at_eof = valid + n >= file_size
            off = 0
            while reason is None and off < n:
                if n - off < HEADER_SIZE:
                    if at_eof:
                        reason = "torn header"
                    break  # otherwise re-read from this batch on
                base, length = _BASE_LEN.unpack_from(mv, off)
                size = length + LOG_OVERHEAD
                if length < MIN_BATCH_LENGTH or mv[off + MAGIC_OFFSET] != 2:
                    reason = "bad length or magic"
                    break
                if max_batch_size is not None and length > max_batch_size:
                    reason = f"batch of {size} bytes above the maximum {max_batch_size}"
                    break
                if off + size > n:
                    if valid + off + size > file_size:
                        reason = "torn batch"
                    else:
                        chunk_size = max(chunk_size, size)
                    break
                if CRC.unpack_from(mv, off + 17)[0] != crc32c(mv[off + CRC_START : off + size]):
                    reason = "CRC mismatch"
                    break
                info = read_header(mv, off)
                last = base + info.last_offset_delta
                if (
                    info.last_offset_delta < 0
                    or base <= prev_last
                    or not self.offset_index.can_append_offset(last)
                ):
                    reason = f"offsets out of order or range (base {base}, previous last {prev_last})"
                    break
                if info.max_timestamp > max_ts:
                    max_ts, off_max = info.max_timestamp, last
                pos = valid + off
                if pos - last_index_entry > interval and not self.offset_index.is_full:
                    self.offset_index.append(last, pos)
                    self.time_index.maybe_append(max_ts, off_max, skip_full_check=True)
                    last_index_entry = pos
                prev_last = last
                off += size
                if on_batch is not None:
                    info.position = pos
                    on_batch(info)
            valid += off
        truncated = file_size - valid
        if truncated > 0:
            os.ftruncate(fd, valid)
            log.warning(
                "segment_recovery_truncated",
                path=self.log_path,
                base_offset=base_offset,
                valid_bytes=valid,
                truncated_bytes=truncated,
                reason=reason,
            )
        self._size = valid
        self.time_index.maybe_append(max_ts, off_max, skip_full_check=True)
        self._max_ts, self._offset_of_max_ts = max_ts, off_max
        self._next_offset = prev_last + 1
        self._valid_tail_end = valid
        self.txn_index.truncate_to(prev_last + 1)
        self._bytes_since_last_index_entry = valid - last_index_entry
        self._rolling_ts_loaded = False
        self._rolling_ts = None
        self._read_hint = None
        self._index_missing = False
        self.release_index_files()  # written; the active segment opens them again on its next append
        return truncated

    def truncate_to(self, offset: int, now_ms: int | None = None) -> int:
        """Remove every batch whose last offset >= ``offset``; returns bytes removed."""
        loc = self.translate_offset(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        truncated = 0
        if loc is not None:
            truncated = self._size - loc.position
            try:
                os.ftruncate(self._fd, loc.position)
            except OSError as e:
                raise KafkaStorageError(f"truncate of {self.log_path} failed: {e}") from e
            self._size = loc.position
        if self._size == 0:
            if now_ms is not None:
                self.created_ms = now_ms
            self._rolling_ts = None
            self._rolling_ts_loaded = False
        self._bytes_since_last_index_entry = self._size - self._last_index_position()
        self._max_ts = None
        self._read_hint = None
        self._scan_tail()
        return truncated

    def trim_torn_tail(self) -> int:
        """Cut a partial batch left at the end of a trusted segment; returns bytes removed."""
        end = self.valid_tail_end
        extra = self._size - end
        if extra > 0:
            try:
                os.ftruncate(self._fd, end)
            except OSError as e:
                raise KafkaStorageError(f"truncate of {self.log_path} failed: {e}") from e
            self._size = end
            self._bytes_since_last_index_entry = end - self._last_index_position()
            self._read_hint = None
        return extra

    # --- timestamps ----------------------------------------------------------------------------

    def _decode_first_matching(
        self, pos: int, size: int, match: Callable[[int, int], bool]
    ) -> TimestampAndOffset | None:
        data = self._pread(size, pos)
        ple = _I32.unpack_from(data, _PLE_AT)[0]
        for rec in decode_records(data):
            if match(rec.offset, rec.timestamp):
                return TimestampAndOffset(rec.timestamp, rec.offset, ple)
        return None

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int = 0) -> TimestampAndOffset | None:
        """First record with timestamp >= ``timestamp`` and offset >= ``starting_offset``
        (Kafka's findOffsetByTimestamp: time index, offset index, then scan; decodes one batch)."""
        ts_entry = self.time_index.lookup(timestamp)
        position = self.offset_index.lookup(max(ts_entry.offset, starting_offset)).position
        for pos, size, data, off in self._walk(position):
            if _I64.unpack_from(data, off + _MAX_TS_AT)[0] >= timestamp:
                found = self._decode_first_matching(
                    pos, size, lambda o, t: t >= timestamp and o >= starting_offset
                )
                if found is not None:
                    return found
        return None

    def find_max_timestamp(self) -> TimestampAndOffset | None:
        """The first record carrying this segment's max timestamp (ListOffsets MAX_TIMESTAMP)."""
        ts = self._ensure_max_ts()
        position = self.offset_index.lookup(self._offset_of_max_ts).position
        for pos, size, data, off in self._walk(position):
            if _I64.unpack_from(data, off + _MAX_TS_AT)[0] == ts:
                return self._decode_first_matching(pos, size, lambda o, t: t == ts)
        return None

    # --- rolling -------------------------------------------------------------------------------

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        ts = self.rolling_based_timestamp
        if ts is not None and ts >= 0:
            return message_timestamp - ts
        return now_ms - self.created_ms

    def should_roll(
        self,
        *,
        max_segment_bytes: int,
        max_segment_ms: int,
        messages_size: int,
        max_timestamp_in_messages: int,
        max_offset_in_messages: int,
        now_ms: int,
    ) -> bool:
        """Kafka's LogSegment.shouldRoll."""
        size = self._size
        if size > max_segment_bytes - messages_size:
            return True
        if size > 0 and (
            self.time_waited_for_roll(now_ms, max_timestamp_in_messages)
            > max_segment_ms - self.roll_jitter_ms
        ):
            return True
        return (
            self.offset_index.is_full
            or self.time_index.is_full
            or not self.offset_index.can_append_offset(max_offset_in_messages)
        )

    def on_become_inactive(self) -> None:
        """Record the final max timestamp in the time index, as Kafka does when a segment is rolled."""
        self.time_index.maybe_append(self._ensure_max_ts(), self._offset_of_max_ts, skip_full_check=True)
        self.release_index_files()

    def release_index_files(self) -> None:
        """Write what the indexes hold and close their descriptors (an inactive segment keeps
        only its ``.log`` open, as Kafka's memory-mapped indexes need no descriptor). A write that
        fails now is retried by the next flush or close, which then raise."""
        for index in (self.offset_index, self.time_index, self.txn_index):
            try:
                index.write_pending()
            except KafkaStorageError as e:
                log.warning("index write deferred", path=index.path, error=str(e))
            index.release()

    @property
    def open_descriptors(self) -> int:
        return (self._fd >= 0) + self.offset_index.open_descriptors + self.time_index.open_descriptors + \
            self.txn_index.open_descriptors

    # --- transactions --------------------------------------------------------------------------

    def append_aborted_txn(self, txn: AbortedTxn) -> None:
        self.txn_index.append(txn)

    def collect_aborted_txns(
        self, fetch_offset: int, upper_bound_offset: int
    ) -> tuple[list[AbortedTxn], bool]:
        return self.txn_index.collect_aborted(fetch_offset, upper_bound_offset)

    # --- files ---------------------------------------------------------------------------------

    def flush(self) -> None:
        try:
            os.fsync(self._fd)
            self.offset_index.flush()
            self.time_index.flush()
            self.txn_index.flush()
        except OSError as e:
            raise KafkaStorageError(f"fsync of {self.log_path} failed: {e}") from e

    def close(self, final_time_entry: bool = True) -> None:
        """Close the files; the time index gets its final max-timestamp entry first (Kafka's close).
        Every file is closed even when writing an index's last entries fails (then this raises,
        and the log is not to be trusted without recovery)."""
        if self._fd < 0:
            return
        if final_time_entry and self._max_ts is not None:
            self.time_index.maybe_append(self._max_ts, self._offset_of_max_ts, skip_full_check=True)
        self._shared_fd.release()  # closed now, or once the last region of an answer is sent
        self._fd = -1
        failed: list[str] = []
        for index in (self.offset_index, self.time_index, self.txn_index):
            try:
                index.close()
            except KafkaStorageError as e:
                failed.append(str(e))
        if failed:
            raise KafkaStorageError("; ".join(failed))

    @property
    def closed(self) -> bool:
        return self._fd < 0

    def _paths(self) -> list[str]:
        return [self.log_path, self.offset_index.path, self.time_index.path, self.txn_index.path]

    def file_paths(self) -> list[str]:
        """The paths of the segment's files (the .txnindex one may not exist)."""
        return self._paths()

    def change_suffix(
        self,
        old: str,
        new: str,
        *,
        log_last: bool = False,
        on_rename: Callable[[str], None] | None = None,
    ) -> None:
        """Rename every file from ``<name><old>`` to ``<name><new>`` (e.g. '' -> '.deleted').

        The ``.log`` goes first (Kafka's order), or last with ``log_last``; the cleaner's swap
        protocol relies on that order (see ``PartitionLog.replace_segments``). ``on_rename(path)``
        is called after each rename (crash-point tests). A ``.txnindex`` that was never created is
        skipped, as in Kafka."""

        def renamed(p: str) -> str:
            if old and not p.endswith(old):
                raise ValueError(f"{p} does not end with {old}")
            return (p[: -len(old)] if old else p) + new

        def rename_log() -> None:
            new_log = renamed(self.log_path)
            os.rename(self.log_path, new_log)
            self.log_path = new_log
            if on_rename is not None:
                on_rename(new_log)

        def rename_indexes() -> None:
            for index in (self.offset_index, self.time_index, self.txn_index):
                existed = not isinstance(index, TransactionIndex) or os.path.exists(index.path)
                index.rename(renamed(index.path))
                if existed and on_rename is not None:
                    on_rename(index.path)

        if log_last:
            rename_indexes()
            rename_log()
        else:
            rename_log()
            rename_indexes()

    def set_last_modified(self, ms: int) -> None:
        """Kafka's setLastModified: the cleaner keeps the replaced segments' mtime, which
        retention and the legacy delete horizon read."""
        os.utime(self.log_path, ns=(ms * 1_000_000, ms * 1_000_000))

    def delete(self) -> None:
        """Close and unlink every file of the segment."""
        self.close(final_time_entry=False)
        for p in self._paths():
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self._size})"
