"""``.index``: Kafka's sparse offset index, 8-byte entries (relative offset int32, position int32).

Entries live in two ``array('i')`` columns so lookups are a C-level bisect; the file is written by
appending 8-byte entries with ``os.write`` (no preallocation; buffered up to PENDING_BYTES), so after
a flush, roll or close the file holds exactly the entries and needs no trimming.
"""

from __future__ import annotations

import struct
import sys
from array import array
from bisect import bisect_right
from typing import NamedTuple

from storage.errors import LogSegmentOffsetOverflow
from storage.log.index_file import INT32_MAX, IndexFile

ENTRY = struct.Struct(">ii")
ENTRY_SIZE = ENTRY.size  # 8
_LITTLE = sys.byteorder == "little"


class OffsetPosition(NamedTuple):
    offset: int
    position: int


class OffsetIndex(IndexFile):
    """The offset index of one segment: maps batch last offsets to batch start positions."""

    __slots__ = ("_rel", "_pos")
    ENTRY_SIZE = ENTRY_SIZE
    KIND = "offset index"

    def _clear_columns(self) -> None:
        self._rel = array("i")
        self._pos = array("i")

    def _columns(self) -> tuple[array, ...]:
        return self._rel, self._pos

    def _load(self, data: bytes) -> None:
        flat = array("i")
        flat.frombytes(data)
        if _LITTLE:
            flat.byteswap()
        self._rel = flat[0::2]
        self._pos = flat[1::2]

    # --- queries -------------------------------------------------------------------------------

    @property
    def last_offset(self) -> int:
        """Offset of the last entry, or the base offset when empty (Kafka's lastOffset)."""
        return self.base_offset + self._rel[-1] if self._rel else self.base_offset

    def entry(self, n: int) -> OffsetPosition:
        return OffsetPosition(self.base_offset + self._rel[n], self._pos[n])

    def lookup(self, offset: int) -> OffsetPosition:
        """The largest entry with offset <= ``offset``, else (base offset, 0)."""
        slot = bisect_right(self._rel, offset - self.base_offset) - 1
        if slot < 0:
            return OffsetPosition(self.base_offset, 0)
        return OffsetPosition(self.base_offset + self._rel[slot], self._pos[slot])

    def slot_at_or_below_position(self, position: int) -> int:
        """The last entry whose batch starts at or before ``position`` (-1 if none): positions grow
        with offsets, so this is a bisect too (what Kafka's fetchUpperBoundOffset does)."""
        return bisect_right(self._pos, position) - 1

    def can_append_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= INT32_MAX

    def sanity_ok(self) -> bool:
        """Kafka's sanityCheck plus a monotonicity check of the tail, so a preallocated or torn
        file (trailing zero entries) is rebuilt instead of trusted."""
        if self.corrupt:
            return False
        rel, pos = self._rel, self._pos
        if not rel:
            return True
        if rel[-1] < 0 or rel[0] < 0:
            return False
        return len(rel) < 2 or (rel[-1] > rel[-2] and pos[-1] > pos[-2])

    # --- mutation ------------------------------------------------------------------------------

    def append(self, offset: int, position: int) -> None:
        rel = offset - self.base_offset
        if not 0 <= rel <= INT32_MAX:
            raise LogSegmentOffsetOverflow(f"offset {offset} overflows index with base {self.base_offset}")
        if self._rel and rel <= self._rel[-1]:
            raise ValueError(
                f"Attempt to append an offset ({offset}) no larger than the last offset appended "
                f"({self.last_offset}) to {self.path}"
            )
        if len(self._rel) >= self.max_entries:
            raise ValueError(f"Attempt to append to a full index (size = {len(self._rel)}).")
        self._append_entry(ENTRY.pack(rel, position))
        self._rel.append(rel)
        self._pos.append(position)

    def truncate_to(self, offset: int) -> None:
        """Drop every entry with offset >= ``offset`` (Kafka's OffsetIndex.truncateTo)."""
        self.truncate_to_entries(bisect_right(self._rel, offset - self.base_offset - 1))
