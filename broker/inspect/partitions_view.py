"""What a stopped broker's data directory says about each partition, read from its files alone:

- the log start and end offsets: the end from the last segment's last batch, the start from
  the first segment and ``log-start-offset-checkpoint`` (whichever is later, as the broker loads
  it); the high watermark and recovery point from their checkpoints when they are there;
- each segment: base and next offset, batches, bytes, largest timestamp, index entries;
- the producer states of the newest ``.snapshot`` (as DumpLogSegments prints them), and from
  them the open transactions and the last stable offset they hold back;
- the aborted transactions of every ``.txnindex``, in order.

This is the offline half of the transaction inspector; a live broker will answer the same view
from memory, so the dict keys are the view's contract.
"""

from __future__ import annotations

import mmap
import os
import struct
from typing import Any

from broker.inspect.data_dir import CHECKPOINTS, PartitionDir, checkpoint, partition_dirs
from broker.inspect.index_dump import dump_txn_index
from broker.inspect.snapshot_dump import dump_snapshot
from protocol.records import HEADER_SIZE, LOG_OVERHEAD, read_header

_OFFSET_SIZE = struct.Struct(">qi")


def segment_summary(base_offset: int, path: str) -> dict[str, Any]:
    """One ``.log``'s batches walked by their headers (up to a torn tail)."""
    size = os.path.getsize(path)
    batches = 0
    next_offset = base_offset
    max_timestamp = -1
    valid = 0
    if size:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            pos = 0
            while size - pos >= HEADER_SIZE:
                _base, length = _OFFSET_SIZE.unpack_from(data, pos)
                if length < HEADER_SIZE - LOG_OVERHEAD or pos + length + LOG_OVERHEAD > size:
                    break
                info = read_header(data, pos)
                batches += 1
                next_offset = info.last_offset + 1
                max_timestamp = max(max_timestamp, info.max_timestamp)
                pos += info.size
            valid = pos
    stem = path[: -len(".log")]
    return {
        "baseOffset": base_offset,
        "nextOffset": next_offset,
        "batches": batches,
        "sizeBytes": size,
        "trailingBytes": size - valid,
        "maxTimestamp": max_timestamp,
        "indexEntries": _entries(stem + ".index", 8),
        "timeIndexEntries": _entries(stem + ".timeindex", 12),
        "txnIndexEntries": _entries(stem + ".txnindex", 34),
    }


def _entries(path: str, entry_size: int) -> int:
    return os.path.getsize(path) // entry_size if os.path.exists(path) else 0


def partition_view(p: PartitionDir, checkpoints: dict[str, dict[tuple[str, int], int]]) -> dict[str, Any]:
    tp = (p.topic, p.partition)
    segments = [segment_summary(base, path) for base, path in p.files("log")]
    first_base = segments[0]["baseOffset"] if segments else 0
    log_end = segments[-1]["nextOffset"] if segments else checkpoints["logStartOffset"].get(tp, 0)
    log_start = max(first_base, checkpoints["logStartOffset"].get(tp, first_base))
    aborted = []
    for _base, path in p.files("log"):
        txn_index = path[: -len(".log")] + ".txnindex"
        if os.path.exists(txn_index):
            aborted += [{k: v for k, v in e.items() if k != "version"} for e in dump_txn_index(txn_index)["entries"]]
    snapshots = p.files("snapshot")
    producers: dict[str, Any] = {"snapshot": None, "producers": []}
    if snapshots:
        offset, path = snapshots[-1]
        producers = {"snapshot": os.path.basename(path), "snapshotOffset": offset, **dump_snapshot(path)}
    open_txns = [{"producerId": e["producerId"], "producerEpoch": e["producerEpoch"],
                  "firstOffset": e["currentTxnFirstOffset"]}
                 for e in producers["producers"] if e["currentTxnFirstOffset"] is not None]
    high_watermark = checkpoints["highWatermark"].get(tp)
    stable_bound = log_end if high_watermark is None else min(high_watermark, log_end)
    return {
        "topic": p.topic,
        "partition": p.partition,
        "broker": p.broker,
        "topicId": p.topic_id(),
        "dir": p.path,
        "logStartOffset": log_start,
        "logEndOffset": log_end,
        "highWatermark": high_watermark,
        "recoveryPoint": checkpoints["recoveryPoint"].get(tp),
        "lastStableOffset": min([stable_bound, *(t["firstOffset"] for t in open_txns)]),
        "segments": segments,
        "producerSnapshot": producers,
        "openTransactions": open_txns,
        "abortedTransactions": aborted,
    }


def partitions(spec: str, topics: set[str] | None = None) -> list[dict[str, Any]]:
    """The view of every partition of the data directory ``spec`` (``log.dirs``)."""
    cache: dict[str, dict[str, dict[tuple[str, int], int]]] = {}
    out = []
    for p in partition_dirs(spec, topics):
        if p.log_dir not in cache:
            cache[p.log_dir] = {key: checkpoint(p.log_dir, name) for key, name in CHECKPOINTS.items()}
        out.append(partition_view(p, cache[p.log_dir]))
    return out
