"""Rewriting one batch for a cleaning (kept records, emptied batches, KIP-534 delete horizons)
and the transaction bookkeeping of a cleaning pass (Kafka's CleanedTransactionMetadata).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from crc32c import crc32c

from protocol.compression import compress
from protocol.record_codec import (
    R_AFTER_TS,
    R_ATTRS,
    R_END,
    R_START,
    R_TS_DELTA,
    Record,
    zigzag,
)
from protocol.records import (
    COMPRESSION_MASK,
    CONTROL_ABORT,
    CONTROL_COMMIT,
    CONTROL_FLAG,
    CRC,
    CRC_START,
    DELETE_HORIZON_FLAG,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG,
    BatchInfo,
)
from storage.log.txn_index import AbortedTxn, TransactionIndex

# --- batch building -----------------------------------------------------------------------------


def empty_batch(info: BatchInfo) -> bytearray:
    """DefaultRecordBatch.writeEmptyHeader: the header alone, keeping offsets, producer id, epoch
    and base sequence (RETAIN_EMPTY)."""
    attrs = info.attributes & (TIMESTAMP_TYPE_MASK | TRANSACTIONAL_FLAG | CONTROL_FLAG)
    buf = bytearray(HEADER_SIZE)
    HEADER.pack_into(
        buf,
        0,
        info.base_offset,
        HEADER_SIZE - LOG_OVERHEAD,
        info.partition_leader_epoch,
        2,
        0,
        attrs,
        info.last_offset_delta,
        info.max_timestamp,
        info.max_timestamp,
        info.producer_id,
        info.producer_epoch,
        info.base_sequence,
        0,
    )
    CRC.pack_into(buf, 17, crc32c(memoryview(buf)[CRC_START:]))
    return buf


def rebuild_batch(info: BatchInfo, buf: bytes, kept: Sequence[Record], horizon: int | None) -> bytearray:
    """The retained records of a batch as a new batch (MemoryRecords.buildRetainedRecordsInto):
    same base offset, last offset delta, producer fields, leader epoch, timestamp type and codec;
    with ``horizon`` the delete-horizon flag is set and the base timestamp holds it (KIP-534)."""
    orig_base_ts = info.base_timestamp
    had_horizon = bool(info.attributes & DELETE_HORIZON_FLAG)
    base_ts = orig_base_ts if horizon is None else horizon
    if horizon is None and had_horizon:
        raise ValueError("a batch cannot lose its delete horizon")
    reencode = base_ts != orig_base_ts
    parts: list[bytes | memoryview] = []
    mv = memoryview(buf)
    max_ts = -1
    for r in kept:
        ts = orig_base_ts + r[R_TS_DELTA]
        if ts > max_ts:
            max_ts = ts
        if reencode:
            body_rest = mv[r[R_AFTER_TS] : r[R_END]]
            body_len = 1 + len(zigzag(ts - base_ts)) + len(body_rest)
            parts.append(zigzag(body_len))
            parts.append(mv[r[R_ATTRS] : r[R_ATTRS] + 1])
            parts.append(zigzag(ts - base_ts))
            parts.append(body_rest)
        else:
            parts.append(mv[r[R_START] : r[R_END]])
    records = b"".join(parts)
    codec = info.attributes & COMPRESSION_MASK
    if codec:
        records = compress(codec, records)
    attrs = info.attributes & ~DELETE_HORIZON_FLAG
    if horizon is not None:
        attrs |= DELETE_HORIZON_FLAG
    if info.attributes & TIMESTAMP_TYPE_MASK:
        max_ts = info.max_timestamp  # LOG_APPEND_TIME: the batch's append time
    size = HEADER_SIZE + len(records)
    out = bytearray(size)
    HEADER.pack_into(
        out,
        0,
        info.base_offset,
        size - LOG_OVERHEAD,
        info.partition_leader_epoch,
        2,
        0,
        attrs,
        info.last_offset_delta,
        base_ts,
        max_ts,
        info.producer_id,
        info.producer_epoch,
        info.base_sequence,
        len(kept),
    )
    out[HEADER_SIZE:] = records
    CRC.pack_into(out, 17, crc32c(memoryview(out)[CRC_START:]))
    return out


# --- transactions -------------------------------------------------------------------------------


class CleanedTransactionMetadata:
    """Kafka's CleanedTransactionMetadata: which transactions are aborted or committed while the
    cleaner walks the log, whether a marker may go, and the cleaned segment's ``.txnindex``."""

    def __init__(self) -> None:
        self.ongoing_committed: set[int] = set()
        self.ongoing_aborted: dict[int, list] = {}  # pid -> [AbortedTxn, last observed batch offset]
        self._heap: list[tuple[int, int, AbortedTxn]] = []
        self._seen: set[AbortedTxn] = set()
        self._seq = 0
        self.cleaned_index: TransactionIndex | None = None

    def add_aborted_transactions(self, txns: Sequence[AbortedTxn]) -> None:
        for txn in txns:
            if txn not in self._seen:
                self._seen.add(txn)
                self._seq += 1
                heapq.heappush(self._heap, (txn.first_offset, self._seq, txn))

    def _consume_aborted_up_to(self, offset: int) -> None:
        heap = self._heap
        while heap and heap[0][0] <= offset:
            txn = heapq.heappop(heap)[2]
            self.ongoing_aborted.setdefault(txn.producer_id, [txn, None])

    def on_control_batch_read(self, info: BatchInfo, control_type: int | None) -> bool:
        """True if the marker may be discarded."""
        self._consume_aborted_up_to(info.last_offset)
        if control_type is None:
            return True  # an empty control batch was already cleaned
        pid = info.producer_id
        if control_type == CONTROL_ABORT:
            meta = self.ongoing_aborted.pop(pid, None)
            if meta is not None and meta[1] is not None:
                # Retain the marker until all batches of the transaction are gone.
                if self.cleaned_index is not None:
                    self.cleaned_index.append(meta[0])
                return False
            return True
        if control_type == CONTROL_COMMIT:
            if pid in self.ongoing_committed:
                self.ongoing_committed.discard(pid)
                return False
            return True
        return False

    def on_batch_read(self, info: BatchInfo) -> bool:
        """True if the (data) batch belongs to an aborted transaction."""
        self._consume_aborted_up_to(info.last_offset)
        if info.attributes & TRANSACTIONAL_FLAG:
            meta = self.ongoing_aborted.get(info.producer_id)
            if meta is not None:
                meta[1] = info.last_offset
                return True
            self.ongoing_committed.add(info.producer_id)
        return False
