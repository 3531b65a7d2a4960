"""The file side shared by ``.index`` and ``.timeindex``: fixed-size entries appended with
``os.write`` (buffered up to PENDING_BYTES), truncation, flush, close, rename.

Subclasses keep their entries in ``array`` columns (C-level bisect for lookups) and say how to
load them from bytes and which columns a truncation cuts. Lookups never read the file, so its
descriptor is open only while there is something to write: an inactive segment's indexes hold
none (Kafka memory-maps them and closes the file, for one descriptor per segment).

An index is derived data (recovery rebuilds it from the log), so a failed write does not fail the
append that added the entry: the entry is served from memory and written at the next write,
flush or close; ``flush`` raises until it is, so the recovery point never passes it.
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


class BufferedAppendFile:
    """An append-only file whose entries are also held in memory: written through ``_pending``
    (what has not reached the file yet), opened only while there is something to write. A write
    that fails keeps its entries pending (retried by the next write; ``flush`` and ``close``
    raise until they are written), and what a failed write did write is not written again."""

    __slots__ = ("path", "_fd", "_pending")

    KIND = "file"

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd = -1
        self._pending = bytearray()

    def _open(self) -> int:
        if self._fd < 0:
            try:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
            except OSError as e:
                raise KafkaStorageError(f"cannot open {self.KIND} {self.path}: {e}") from e
        return self._fd

    def _write_or_keep(self) -> None:
        try:
            self.write_pending()
        except KafkaStorageError:
            pass  # kept in _pending: flush and close retry and raise

    def write_pending(self) -> None:
        pending = self._pending
        if pending:
            fd = self._open()
            try:
                while pending:
                    del pending[: os.write(fd, pending)]
            except OSError as e:
                raise KafkaStorageError(f"write to {self.path} failed: {e}") from e

    def _truncate_file(self, size: int) -> None:
        try:
            os.ftruncate(self._open(), size)
        except OSError as e:
            raise KafkaStorageError(f"truncate of {self.path} failed: {e}") from e

    def flush(self) -> None:
        if self._pending or self._fd >= 0:
            self.write_pending()
            try:
                os.fsync(self._fd)
            except OSError as e:
                raise KafkaStorageError(f"fsync of {self.path} failed: {e}") from e

    def release(self) -> None:
        """Close the descriptor once everything is written (an inactive segment's index); the next
        write or truncation opens it again."""
        if self._fd >= 0 and not self._pending:
            os.close(self._fd)
            self._fd = -1

    @property
    def unwritten(self) -> bool:
        return bool(self._pending)

    @property
    def open_descriptors(self) -> int:
        return 1 if self._fd >= 0 else 0

    def close(self) -> None:
        """Write what is pending and close; raises if the write fails (the descriptor is closed
        either way: entries still pending are lost, and recovery rebuilds the index)."""
        try:
            if self._pending:
                self.write_pending()
        finally:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1


class IndexFile(BufferedAppendFile):
    __slots__ = ("base_offset", "max_entries", "corrupt")

    ENTRY_SIZE = 0  # set by subclasses
    KIND = "index"

    def __init__(self, path: str, base_offset: int, max_index_size: int) -> None:
        """Open or create ``path``; a file whose size is not a multiple of the entry size is
        flagged ``corrupt`` (and rebuilt by the segment)."""
        super().__init__(path)
        self.base_offset = base_offset
        self.max_entries = max(max_index_size // self.ENTRY_SIZE, 0)
        self.corrupt = False
        self._clear_columns()
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o644)
            try:
                size = os.fstat(fd).st_size
                if size % self.ENTRY_SIZE:
                    self.corrupt = True
                elif size:
                    self._load(os.pread(fd, size, 0))
            finally:
                os.close(fd)
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
            self._write_or_keep()

    def truncate_to_entries(self, n: int) -> None:
        if n >= self.entries:
            return
        written = self.entries - len(self._pending) // self.ENTRY_SIZE
        for column in self._columns():
            del column[n:]
        if n >= written:  # only unwritten entries go
            del self._pending[(n - written) * self.ENTRY_SIZE:]
            return
        self._pending.clear()
        self._truncate_file(n * self.ENTRY_SIZE)

    def reset(self) -> None:
        """Empty the index (before a rebuild)."""
        self._pending.clear()
        self._clear_columns()
        self.corrupt = False
        self._truncate_file(0)

    def rename(self, new_path: str) -> None:
        os.rename(self.path, new_path)
        self.path = new_path
