"""``.index``, ``.timeindex`` and ``.txnindex`` files as DumpLogSegments reads them, each entry
checked against the segment's ``.log`` the way it checks them:

- ``.index`` (8-byte entries, relative offset + position): the first batch at the position must
  end at the entry's offset, else a mismatch (``Mismatches in :<file>``).
- ``.timeindex`` (12-byte entries, timestamp + relative offset): the first batch ending at or
  after the entry's offset (searched from the offset index's position) must end exactly there
  and its largest record timestamp must be the entry's; timestamps must grow.
- ``.txnindex`` (34-byte entries): version, producer id, first and last offset, last stable offset.

A zero entry after the first (a preallocated tail, as Kafka's own files have after a crash)
ends the listing, as in Kafka.
"""

from __future__ import annotations

import os
import struct
from bisect import bisect_right
from typing import Any

from protocol.record_codec import CorruptRecords, decode_records
from protocol.records import LOG_OVERHEAD, read_header

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_TXN_ENTRY = struct.Struct(">hqqqq")
_OFFSET_SIZE = struct.Struct(">qi")
NO_TIMESTAMP = -1


def _base_offset(path: str) -> int:
    return int(os.path.basename(path).split(".")[0])


def _sibling(path: str, suffix: str) -> str:
    return os.path.join(os.path.dirname(os.path.abspath(path)), os.path.basename(path).split(".")[0] + suffix)


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _batches_from(log: bytes, position: int):
    """(base offset, last offset, start, size) of each whole batch from ``position`` on."""
    pos = position
    while len(log) - pos >= LOG_OVERHEAD + 5:
        _base, length = _OFFSET_SIZE.unpack_from(log, pos)
        size = length + LOG_OVERHEAD
        if length < 0 or pos + size > len(log):
            return
        info = read_header(log, pos) if size >= 61 else None
        if info is None:
            return
        yield info.base_offset, info.last_offset, pos, size
        pos += size


def offset_index_entries(path: str) -> list[tuple[int, int]]:
    base = _base_offset(path)
    data = _read(path)
    out = []
    for i, (rel, position) in enumerate(_OFFSET_ENTRY.iter_unpack(data[: len(data) - len(data) % 8])):
        if rel == 0 and i > 0:
            break
        out.append((base + rel, position))
    return out


def dump_offset_index(path: str) -> dict[str, Any]:
    """``{"entries": [{"offset", "position"}], "mismatches": [[index offset, log offset]]}``."""
    entries = offset_index_entries(path)
    log = _read(_sibling(path, ".log"))
    mismatches = []
    for offset, position in entries:
        first = next(_batches_from(log, position), None)
        if first is not None and first[1] != offset:
            mismatches.append([offset, first[1]])
    return {"entries": [{"offset": o, "position": p} for o, p in entries], "mismatches": mismatches}


def dump_time_index(path: str) -> dict[str, Any]:
    """``{"entries": [{"timestamp", "offset"}], "notFound", "timestampMismatches", "outOfOrder"}``."""
    base = _base_offset(path)
    data = _read(path)
    index_path = _sibling(path, ".index")
    offsets = offset_index_entries(index_path) if os.path.exists(index_path) else []
    index_offsets = [o for o, _p in offsets]
    log = _read(_sibling(path, ".log"))
    entries: list[dict[str, Any]] = []
    not_found: list[list[int]] = []
    mismatches: list[list[int]] = []
    out_of_order: list[list[int]] = []
    prev = NO_TIMESTAMP
    for i, (timestamp, rel) in enumerate(_TIME_ENTRY.iter_unpack(data[: len(data) - len(data) % 12])):
        offset = base + rel
        if offset == base and i > 0:
            break
        slot = bisect_right(index_offsets, offset) - 1  # OffsetIndex.lookup
        position = offsets[slot][1] if slot >= 0 else 0
        found = next((b for b in _batches_from(log, position) if b[1] >= offset), None)
        if found is None:
            not_found.append([offset, -1])
        elif found[1] != offset:
            not_found.append([offset, found[1]])
        else:
            _b, _l, start, size = found
            try:
                max_ts = max((r.timestamp for r in decode_records(log[start : start + size])), default=NO_TIMESTAMP)
            except CorruptRecords:
                max_ts = NO_TIMESTAMP
            if max_ts != timestamp:
                mismatches.append([timestamp, max_ts])
            if prev >= timestamp:
                out_of_order.append([timestamp, prev])
        entries.append({"timestamp": timestamp, "offset": offset})
        prev = timestamp
    return {"entries": entries, "notFound": not_found, "timestampMismatches": mismatches, "outOfOrder": out_of_order}


def dump_txn_index(path: str) -> dict[str, Any]:
    """``{"entries": [{"version", "producerId", "firstOffset", "lastOffset", "lastStableOffset"}]}``."""
    data = _read(path)
    entries = [
        {"version": v, "producerId": pid, "firstOffset": first, "lastOffset": last, "lastStableOffset": lso}
        for v, pid, first, last, lso in _TXN_ENTRY.iter_unpack(data[: len(data) - len(data) % _TXN_ENTRY.size])
    ]
    return {"entries": entries}
