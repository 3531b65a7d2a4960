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
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from functools import cache
from typing import Any

from crc32c import crc32c

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
