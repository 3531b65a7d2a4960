"""``.txnindex``: aborted transactions of one segment, 34-byte entries (Kafka's TransactionIndex).

Entry: version int16 (0), producerId int64, firstOffset int64, lastOffset int64 (the ABORT marker),
lastStableOffset int64. Entries are rare, so they are kept in memory as objects; the file is created
only when the first entry is appended, as Kafka does, and open only while it is being written.

Like the offset index (``storage.index_file``), an entry whose write fails is kept in memory
(reads see it) and written at the next append, flush or close; ``flush`` raises until it is, so
the recovery point, from which recovery rebuilds this index, never passes it.
"""

from __future__ import annotations

import os
import struct
from bisect import bisect_left
from dataclasses import dataclass

from storage.errors import CorruptRecord, KafkaStorageError
from storage.log.index_file import BufferedAppendFile

ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = ENTRY.size  # 34
CURRENT_VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return ENTRY.pack(
            CURRENT_VERSION, self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset
        )

    @classmethod
    def decode(cls, buf: bytes | memoryview, offset: int = 0) -> AbortedTxn:
        version, pid, first, last, lso = ENTRY.unpack_from(buf, offset)
        if version > CURRENT_VERSION or version < 0:
            raise CorruptRecord(f"Unexpected aborted transaction version {version}")
        return cls(pid, first, last, lso)

    def as_aborted_transaction(self) -> tuple[int, int]:
        """(producer_id, first_offset): what a Fetch response carries."""
        return (self.producer_id, self.first_offset)


class TransactionIndex(BufferedAppendFile):
    """Aborted-transaction index of one segment."""

    __slots__ = ("base_offset", "_txns", "_last_offsets", "corrupt")
    KIND = "transaction index"

    def __init__(self, path: str, base_offset: int) -> None:
        super().__init__(path)
        self.base_offset = base_offset
        self._txns: list[AbortedTxn] = []
        self._last_offsets: list[int] = []
        self.corrupt = False
        if os.path.exists(path):
            self._load()

    def _load(self) -> None:
        """(Re)read the file; a torn last entry or a bad version marks the index ``corrupt``."""
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            data = b""
        except OSError as e:
            raise KafkaStorageError(f"cannot read transaction index {self.path}: {e}") from e
        size = len(data)
        self._pending.clear()
        txns: list[AbortedTxn] = []
        self.corrupt = size % ENTRY_SIZE != 0
        try:
            for off in range(0, size - size % ENTRY_SIZE, ENTRY_SIZE):
                txns.append(AbortedTxn.decode(data, off))
        except CorruptRecord:
            self.corrupt = True
        self._txns = txns
        self._last_offsets = [t.last_offset for t in txns]

    reload = _load

    @property
    def entries(self) -> list[AbortedTxn]:
        return list(self._txns)

    @property
    def last_offset(self) -> int | None:
        return self._last_offsets[-1] if self._last_offsets else None

    def sanity_ok(self) -> bool:
        return not self.corrupt

    def append(self, txn: AbortedTxn) -> None:
        """Append one entry; lastOffset must strictly increase (Kafka's TransactionIndex.append)."""
        if self._last_offsets and txn.last_offset <= self._last_offsets[-1]:
            raise ValueError(
                f"The last offset of appended transactions must increase sequentially, but {txn.last_offset} "
                f"is not greater than current last offset {self._last_offsets[-1]} of index {self.path}"
            )
        self._txns.append(txn)
        self._last_offsets.append(txn.last_offset)
        self._pending += txn.encode()
        self._write_or_keep()

    def collect_aborted(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        """Entries overlapping [fetch_offset, upper_bound_offset) and whether the search is complete.

        Kafka's rule: include if lastOffset >= fetchOffset and firstOffset < upperBound; stop once an
        entry's lastStableOffset >= upperBound. Entries with lastOffset < fetchOffset are skipped with
        a bisect: their lastStableOffset <= lastOffset + 1 <= fetchOffset < upperBound, so none of
        them could have stopped the scan.
        """
        out: list[AbortedTxn] = []
        for i in range(bisect_left(self._last_offsets, fetch_offset), len(self._txns)):
            txn = self._txns[i]
            if txn.first_offset < upper_bound_offset:
                out.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return out, True
        return out, False

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose lastOffset >= ``offset``."""
        n = bisect_left(self._last_offsets, offset)
        if n >= len(self._txns):
            return
        written = len(self._txns) - len(self._pending) // ENTRY_SIZE
        del self._txns[n:]
        del self._last_offsets[n:]
        if n >= written:  # only unwritten entries go
            del self._pending[(n - written) * ENTRY_SIZE:]
            return
        self._pending.clear()
        if os.path.exists(self.path):
            self._truncate_file(n * ENTRY_SIZE)

    def reset(self) -> None:
        self._txns = []
        self._last_offsets = []
        self._pending.clear()
        self.corrupt = False
        if os.path.exists(self.path):
            self._truncate_file(0)

    def rename(self, new_path: str) -> None:
        if os.path.exists(self.path):
            os.rename(self.path, new_path)
        self.path = new_path

    def delete(self) -> None:
        self._pending.clear()
        self.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
