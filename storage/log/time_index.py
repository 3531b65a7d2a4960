"""``.timeindex``: Kafka's time index, 12-byte entries (timestamp int64, relative offset int32).

An entry (maxTimestampSoFar, offset of that max timestamp) is appended only when the timestamp
grows, at the same moments as offset index entries and once more when the segment becomes
inactive or is closed, so the last entry always carries the segment's max timestamp.
"""

from __future__ import annotations

import struct
from array import array
from bisect import bisect_right
from typing import NamedTuple

from storage.errors import LogSegmentOffsetOverflow
from storage.log.index_file import INT32_MAX, IndexFile

ENTRY = struct.Struct(">qi")
ENTRY_SIZE = ENTRY.size  # 12
NO_TIMESTAMP = -1


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int


class TimeIndex(IndexFile):
    """The time index of one segment."""

    __slots__ = ("_ts", "_rel")
    ENTRY_SIZE = ENTRY_SIZE
    KIND = "time index"

    def _clear_columns(self) -> None:
        self._ts = array("q")
        self._rel = array("i")

    def _columns(self) -> tuple[array, ...]:
        return self._ts, self._rel

    def _load(self, data: bytes) -> None:
        for ts, rel in ENTRY.iter_unpack(data):
            self._ts.append(ts)
            self._rel.append(rel)

    def last_entry(self) -> TimestampOffset:
        """The last entry, or (-1, base offset) when empty (Kafka's lastEntry)."""
        if not self._ts:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return TimestampOffset(self._ts[-1], self.base_offset + self._rel[-1])

    def entry(self, n: int) -> TimestampOffset:
        return TimestampOffset(self._ts[n], self.base_offset + self._rel[n])

    def lookup(self, timestamp: int) -> TimestampOffset:
        """The last entry with timestamp <= ``timestamp``, else (-1, base offset)."""
        slot = bisect_right(self._ts, timestamp) - 1
        if slot < 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return TimestampOffset(self._ts[slot], self.base_offset + self._rel[slot])

    def sanity_ok(self) -> bool:
        if self.corrupt:
            return False
        ts, rel = self._ts, self._rel
        if not ts:
            return True
        if rel[-1] < 0 or ts[-1] < ts[0]:
            return False
        return len(ts) < 2 or (ts[-1] > ts[-2] and rel[-1] >= rel[-2])

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Append only if ``timestamp`` grows (Kafka's TimeIndex.maybeAppend)."""
        if not skip_full_check and len(self._ts) >= self.max_entries:
            raise ValueError(f"Attempt to append to a full time index (size = {len(self._ts)}).")
        last_ts, last_off = self.last_entry()
        if self._ts and offset < last_off:
            raise ValueError(
                f"Attempt to append an offset ({offset}) no larger than the last offset appended ({last_off})"
            )
        if self._ts and timestamp < last_ts:
            raise ValueError(
                f"Attempt to append a timestamp ({timestamp}) no larger than the last timestamp appended ({last_ts})"
            )
        if timestamp > last_ts:
            rel = offset - self.base_offset
            if not 0 <= rel <= INT32_MAX:
                raise LogSegmentOffsetOverflow(
                    f"offset {offset} overflows index with base {self.base_offset}"
                )
            self._append_entry(ENTRY.pack(timestamp, rel))
            self._ts.append(timestamp)
            self._rel.append(rel)

    def truncate_to(self, offset: int) -> None:
        """Drop every entry with offset >= ``offset``; offsets are monotonic, so a bisect finds the cut."""
        self.truncate_to_entries(bisect_right(self._rel, offset - self.base_offset - 1))
