"""Kafka's producer-state ``.snapshot`` file, version 1 (``ProducerSnapshot.json``).

Layout (big-endian), as ``ProducerStateManager.writeSnapshot``/``readSnapshot`` write and read it::

    int16  version = 1
    uint32 crc            CRC-32C over bytes [6, EOF): the entry count and the entries
    int32  entryCount
    entryCount x 46 bytes:
      int64 producerId | int16 epoch | int32 lastSequence | int64 lastOffset | int32 offsetDelta |
      int64 timestamp  | int32 coordinatorEpoch | int64 currentTxnFirstOffset (-1 = none)

The construct definition is the declarative reference; encoding and decoding go through the
``struct`` it is checked against, because a broker can hold 100k+ producers and the snapshot is
written on the event loop at every segment roll (construct is ~25x slower).

Writing and reading whole files of ``ProducerStateEntry`` (``write_snapshot``/``read_snapshot``).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

from crc32c import crc32c

from protocol.records import (
    NO_SEQUENCE,
)
from storage.producer.entry import ProducerStateEntry
from storage.producer.types import TMP_SUFFIX, BatchMetadata

SNAPSHOT_VERSION = 1
SNAPSHOT_SUFFIX = ".snapshot"
CRC_OFFSET = 2
ENTRIES_OFFSET = 6  # the CRC covers the array count and the entries

HEADER = struct.Struct(">hIi")  # version, crc, entry count
ENTRY = struct.Struct(">qhiqiqiq")
assert ENTRY.size == 46
assert HEADER.size == 10

# (producer_id, epoch, last_sequence, last_offset, offset_delta, timestamp, coordinator_epoch,
#  current_txn_first_offset)
SnapshotRow = tuple[int, int, int, int, int, int, int, int]


class CorruptSnapshot(Exception):
    """Unreadable snapshot: wrong version, bad CRC or short file (Kafka's CorruptSnapshotException)."""


def encode_snapshot(rows: Iterable[SnapshotRow]) -> bytes:
    pack = ENTRY.pack
    body = b"".join(pack(*row) for row in rows)
    count = len(body) // ENTRY.size
    tail = struct.pack(">i", count) + body
    return struct.pack(">hI", SNAPSHOT_VERSION, crc32c(tail)) + tail


def decode_snapshot(data: bytes | bytearray | memoryview) -> Iterator[SnapshotRow]:
    """Validate version and CRC, then yield the rows; raises CorruptSnapshot like Kafka's reader."""
    mv = memoryview(data)
    if len(mv) < HEADER.size:
        raise CorruptSnapshot(f"snapshot of {len(mv)} bytes is shorter than its header")
    version, crc, count = HEADER.unpack_from(mv, 0)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshot(f"snapshot contained an unknown file version {version}")
    computed = crc32c(mv[ENTRIES_OFFSET:])
    if crc != computed:
        raise CorruptSnapshot(
            f"snapshot is corrupt (CRC is no longer valid). Stored crc: {crc}. Computed crc: {computed}"
        )
    end = HEADER.size + count * ENTRY.size
    if count < 0 or end > len(mv):
        raise CorruptSnapshot(
            f"snapshot claims {count} entries but holds {len(mv) - HEADER.size} bytes of entries"
        )
    # Bytes past the last entry are tolerated, as Kafka's Schema.read does (the CRC covers them).
    return ENTRY.iter_unpack(mv[HEADER.size : end])


def snapshot_file_name(offset: int) -> str:
    """``LogFileUtils.producerSnapshotFile``: the 20-digit next offset plus ``.snapshot``."""
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


def offset_from_file_name(name: str) -> int:
    return int(name[: name.index(".")])


@cache
def _construct_spec() -> dict[str, Any]:
    """Built on first use: construct costs ~12 ms to import, and start-up needs only ``struct``."""
    import construct as c

    entry = c.Struct(
        "producer_id" / c.Int64sb,
        "epoch" / c.Int16sb,
        "last_sequence" / c.Int32sb,
        "last_offset" / c.Int64sb,
        "offset_delta" / c.Int32sb,
        "timestamp" / c.Int64sb,
        "coordinator_epoch" / c.Int32sb,
        "current_txn_first_offset" / c.Int64sb,
    )
    snapshot = c.Struct(
        "version" / c.Int16sb,
        "crc" / c.Int32ub,
        "producer_entries" / c.PrefixedArray(c.Int32sb, entry),
    )
    return {"ProducerSnapshotEntry": entry, "ProducerSnapshot": snapshot}


def __getattr__(name: str) -> Any:
    """``ProducerSnapshot`` and ``ProducerSnapshotEntry``, the construct reference (PEP 562)."""
    if name in ("ProducerSnapshot", "ProducerSnapshotEntry"):  # not on any other lookup (``__path__``)
        return _construct_spec()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --- snapshot file I/O ----------------------------------------------------------------------


def _entry_row(entry: ProducerStateEntry) -> SnapshotRow:
    """Only the last batch is stored (lastOffset -1 / offsetDelta 0 when there is none)."""
    last = entry.last_batch
    if last is not None:
        last_seq, last_offset, offset_delta = last.last_seq, last.last_offset, last.offset_delta
    else:
        last_seq, last_offset, offset_delta = NO_SEQUENCE, -1, 0
    txn = entry.current_txn_first_offset
    return (
        entry.producer_id,
        entry.producer_epoch,
        last_seq,
        last_offset,
        offset_delta,
        entry.last_timestamp,
        entry.coordinator_epoch,
        -1 if txn is None else txn,
    )


def write_snapshot(path: Path, entries: Iterable[ProducerStateEntry], *, sync: bool = True) -> None:
    """Write atomically: a reader sees the old file, the new one, or none, never a torn one."""
    data = encode_snapshot(sorted((_entry_row(e) for e in entries), key=lambda row: row[0]))
    tmp = path.with_name(path.name + TMP_SUFFIX)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if sync:
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def read_snapshot(path: Path) -> list[ProducerStateEntry]:
    """Kafka's readSnapshot: batch metadata is restored only when lastOffset >= 0."""
    entries = []
    for pid, epoch, seq, offset, delta, timestamp, coordinator_epoch, txn in decode_snapshot(
        path.read_bytes()
    ):
        entries.append(
            ProducerStateEntry(
                pid,
                epoch,
                coordinator_epoch,
                timestamp,
                txn if txn >= 0 else None,
                [BatchMetadata(seq, offset, delta, timestamp)] if offset >= 0 else (),
            )
        )
    return entries
