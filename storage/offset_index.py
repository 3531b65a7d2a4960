"""``.index``: Kafka's sparse offset index, 8-byte entries (relative offset int32, position int32).

Entries live in two ``array('i')`` columns so lookups are a C-level bisect; the file is written by
appending 8-byte entries with ``os.write`` (no preallocation; buffered up to PENDING_BYTES), so after
a flush, roll or close the file holds exactly the entries and needs no trimming.
"""

from __future__ import annotations

import os
import struct
import sys
from array import array
from bisect import bisect_right
from typing import NamedTuple

from storage.errors import KafkaStorageError, LogSegmentOffsetOverflow

ENTRY = struct.Struct(">ii")
ENTRY_SIZE = ENTRY.size  # 8
INT32_MAX = 2147483647
# Entries are buffered and written in batches of this many bytes (and on flush/close/roll/truncate):
# one syscall per ~500 entries instead of one per entry. Safe because a crash makes recovery
# rebuild the indexes of every segment past the recovery point, and flush writes them first.
PENDING_BYTES = 4096
_LITTLE = sys.byteorder == "little"


class OffsetPosition(NamedTuple):
    offset: int
    position: int


def _write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class OffsetIndex:
    """The offset index of one segment: maps batch last offsets to batch start positions."""

    __slots__ = ("path", "base_offset", "max_entries", "_fd", "_rel", "_pos", "corrupt", "_pending")

    def __init__(self, path: str, base_offset: int, max_index_size: int) -> None:
        """Open or create ``path``; a file whose size is not a multiple of 8 is flagged ``corrupt``."""
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(max_index_size // ENTRY_SIZE, 0)
        self._rel = array("i")
        self._pos = array("i")
        self.corrupt = False
        self._pending = bytearray()  # entries not yet written to the file
        try:
            self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
            size = os.fstat(self._fd).st_size
            if size % ENTRY_SIZE:
                self.corrupt = True
            elif size:
                self._load(os.pread(self._fd, size, 0))
        except OSError as e:
            raise KafkaStorageError(f"cannot open offset index {path}: {e}") from e

    def _load(self, data: bytes) -> None:
        flat = array("i")
        flat.frombytes(data)
        if _LITTLE:
            flat.byteswap()
        self._rel = flat[0::2]
        self._pos = flat[1::2]

    # --- queries -------------------------------------------------------------------------------

    @property
    def entries(self) -> int:
        return len(self._rel)

    @property
    def is_full(self) -> bool:
        return len(self._rel) >= self.max_entries

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
        self._pending += ENTRY.pack(rel, position)
        if len(self._pending) >= PENDING_BYTES:
            self.write_pending()
        self._rel.append(rel)
        self._pos.append(position)

    def truncate_to(self, offset: int) -> None:
        """Drop every entry with offset >= ``offset`` (Kafka's OffsetIndex.truncateTo)."""
        self.truncate_to_entries(bisect_right(self._rel, offset - self.base_offset - 1))

    def truncate_to_entries(self, n: int) -> None:
        if n >= len(self._rel):
            return
        self.write_pending()
        del self._rel[n:]
        del self._pos[n:]
        try:
            os.ftruncate(self._fd, n * ENTRY_SIZE)
        except OSError as e:
            raise KafkaStorageError(f"truncate of {self.path} failed: {e}") from e

    def reset(self) -> None:
        """Empty the index (before a rebuild)."""
        self._pending.clear()
        self._rel = array("i")
        self._pos = array("i")
        self.corrupt = False
        os.ftruncate(self._fd, 0)

    def write_pending(self) -> None:
        """Write buffered entries; called when enough accumulate and on flush, close, roll, truncate."""
        if self._pending:
            try:
                _write_all(self._fd, self._pending)
            except OSError as e:
                raise KafkaStorageError(f"write to {self.path} failed: {e}") from e
            self._pending.clear()

    def flush(self) -> None:
        self.write_pending()
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            self.write_pending()
            os.close(self._fd)
            self._fd = -1

    def rename(self, new_path: str) -> None:
        os.rename(self.path, new_path)
        self.path = new_path
