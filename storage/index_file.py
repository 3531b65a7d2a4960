"""The file side shared by ``.index`` and ``.timeindex``: fixed-size entries appended with
``os.write`` (buffered up to PENDING_BYTES), truncation, flush, close, rename.

Subclasses keep their entries in ``array`` columns (C-level bisect for lookups) and say how to
load them from bytes and which columns a truncation cuts.
"""

from __future__ import annotations

import os
from array import array

from storage.errors import KafkaStorageError

INT32_MAX = 2147483647
# Entries are buffered and written in batches of this many bytes (and on flush/close/roll/truncate):
# one syscall per ~500 entries instead of one per entry. Safe because a crash makes recovery
# rebuild the indexes of every segment past the recovery point, and flush writes them first.
PENDING_BYTES = 4096


def _write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class IndexFile:
    __slots__ = ("path", "base_offset", "max_entries", "_fd", "corrupt", "_pending")

    ENTRY_SIZE = 0  # set by subclasses
    KIND = "index"

    def __init__(self, path: str, base_offset: int, max_index_size: int) -> None:
        """Open or create ``path``; a file whose size is not a multiple of the entry size is
        flagged ``corrupt`` (and rebuilt by the segment)."""
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(max_index_size // self.ENTRY_SIZE, 0)
        self.corrupt = False
        self._pending = bytearray()  # entries not yet written to the file
        self._clear_columns()
        try:
            self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
            size = os.fstat(self._fd).st_size
            if size % self.ENTRY_SIZE:
                self.corrupt = True
            elif size:
                self._load(os.pread(self._fd, size, 0))
        except OSError as e:
            raise KafkaStorageError(f"cannot open {self.KIND} {path}: {e}") from e

    # --- what subclasses provide -------------------------------------------------------------

    def _clear_columns(self) -> None:
        raise NotImplementedError

    def _columns(self) -> tuple[array, ...]:
        raise NotImplementedError

    def _load(self, data: bytes) -> None:
        raise NotImplementedError

    # --- shared ------------------------------------------------------------------------------

    @property
    def entries(self) -> int:
        return len(self._columns()[0])

    @property
    def is_full(self) -> bool:
        return self.entries >= self.max_entries

    def _append_entry(self, packed: bytes) -> None:
        self._pending += packed
        if len(self._pending) >= PENDING_BYTES:
            self.write_pending()

    def truncate_to_entries(self, n: int) -> None:
        if n >= self.entries:
            return
        self.write_pending()
        for column in self._columns():
            del column[n:]
        try:
            os.ftruncate(self._fd, n * self.ENTRY_SIZE)
        except OSError as e:
            raise KafkaStorageError(f"truncate of {self.path} failed: {e}") from e

    def reset(self) -> None:
        """Empty the index (before a rebuild)."""
        self._pending.clear()
        self._clear_columns()
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
