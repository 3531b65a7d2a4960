"""The partition log's side of its producer state (UnifiedLog's calls into ProducerStateManager):
``storage.log.partition_log.PartitionLog`` opens one and calls it at Kafka's points.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import structlog

from protocol.records import (
    BatchInfo,
    read_header,
)
from storage.log.txn_index import AbortedTxn

if TYPE_CHECKING:
    from storage.log.partition_log import PartitionLog

from storage.producer.append_info import PendingAppend
from storage.producer.manager import ProducerStateManager
from storage.producer.types import AppendOrigin, BatchMetadata, CompletedTxn

log = structlog.get_logger(__name__)


# --- the partition log's side ----------------------------------------------------------------


class LogProducerState:
    """A partition log's producer state (Kafka's UnifiedLog holds its ProducerStateManager):
    ``PartitionLog`` creates it when it opens (``open``) and calls its hooks at Kafka's call
    points, with what the append says about itself (origin, transaction version, the KIP-890
    verification guard). All hooks run synchronously inside the log operation."""

    __slots__ = ("manager", "_pending", "_unreplicated")

    def __init__(self, manager: ProducerStateManager) -> None:
        self.manager = manager
        self._pending: PendingAppend | None = None
        # Kafka's unreplicatedTxns: first offset -> marker offset of transactions completed in a
        # replicated log whose marker is not below the high watermark yet (they hold the LSO)
        self._unreplicated: dict[int, int] = {}

    @classmethod
    def open(cls, plog: PartitionLog, now_ms: int, **manager_config: int) -> LogProducerState:
        """Recovery after ``PartitionLog.open``: drop stray snapshots, load the newest usable one,
        replay the log after it, snapshot the result."""
        manager = ProducerStateManager(plog.dir, **manager_config)
        manager.remove_stray_snapshots(s.base_offset for s in plog.segments)
        state = cls(manager)
        state.rebuild(plog, now_ms)
        return state

    def last_stable_offset(self, plog: PartitionLog) -> int:
        """The LSO read_committed fetches stop at: the first open transaction, bounded by the
        high watermark above and the log start below (UnifiedLog.lastStableOffset)."""
        hw = plog.high_watermark
        first = self.manager.first_unstable_offset()
        if self._unreplicated:
            for txn_first, marker in list(self._unreplicated.items()):
                if marker < hw:  # the marker is committed: the transaction no longer holds the LSO
                    del self._unreplicated[txn_first]
            if self._unreplicated:
                oldest = min(self._unreplicated)
                first = oldest if first is None else min(first, oldest)
        if first is None or first >= hw:
            return hw
        return max(first, plog.log_start_offset)

    def rebuild(self, plog: PartitionLog, now_ms: int) -> None:
        """UnifiedLog.rebuildProducerState: snapshot + replay up to the log end.

        Snapshots are taken at the last two segment bases on the way, so a later truncation
        into the active segment needs no full replay.
        """
        manager = self.manager
        end = plog.log_end_offset
        start = manager.load(plog.log_start_offset, end, now_ms)
        if start < end:
            bases = [s.base_offset for s in plog.segments][-2:]
            segment = None
            for seg, info in plog.iter_batches(start):
                if info.base_offset >= end:
                    break
                if seg is not segment:
                    segment = seg
                    if seg.base_offset in bases and seg.base_offset >= manager.map_end_offset:
                        manager.take_snapshot(seg.base_offset, sync=False)
                buf = None
                if info.is_control:
                    buf = seg.read_at(info.position, info.size)
                    info = read_header(buf)
                manager.replay_batch(info, buf)
        manager.update_map_end_offset(end)
        manager.take_snapshot()

    # --- the log's call points -----------------------------------------------------------------

    def before_append(
        self, buf: bytearray | memoryview, batches: Sequence[BatchInfo], origin: AppendOrigin,
        transaction_version: int, verify_transactions: bool, verification_guard: object | None,
    ) -> BatchMetadata | None:
        """Offsets and LogAppendTime are already in ``batches``; nothing is written yet. Raises
        to refuse the append; returns the stored batch a retried duplicate is answered with."""
        self._pending = None
        pending = self.manager.validate_append(
            batches, buf, origin, transaction_version=transaction_version,
            verify_transactions=verify_transactions, verification_guard=verification_guard,
        )
        if pending.duplicate is not None:
            return pending.duplicate
        self._pending = pending
        return None

    def after_append(self, plog: PartitionLog, last_offset: int) -> None:
        pending, self._pending = self._pending, None
        if pending is None:
            return

        def index_aborted(txn: CompletedTxn, last_stable_offset: int) -> None:
            if txn.is_aborted:
                plog.append_aborted_txn(
                    AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, last_stable_offset)
                )

        open_before = ({t.first_offset for t in self.manager.ongoing_transactions()}
                       if plog.replicated else None)
        self.manager.apply_append(pending, last_offset + 1, index_aborted)
        if open_before:  # transactions this append completed stay unstable until it is replicated
            still_open = {t.first_offset for t in self.manager.ongoing_transactions()}
            for txn_first in open_before - still_open:
                self._unreplicated[txn_first] = last_offset

    def on_roll(self, plog: PartitionLog, new_base_offset: int) -> None:
        # Kafka snapshots at every roll without fsync (a torn one fails its CRC and is skipped).
        self.manager.take_snapshot(new_base_offset, sync=False)
        self.manager.prune_snapshots(plog.log_start_offset)

    def on_truncate(self, plog: PartitionLog, now_ms: int) -> None:
        self._pending = None
        self._unreplicated.clear()
        self.rebuild(plog, now_ms)

    def on_log_start_offset(self, log_start_offset: int) -> None:
        self.manager.on_log_start_offset_incremented(log_start_offset)

    def on_segments_deleted(self, plog: PartitionLog, base_offsets: list[int]) -> None:
        for base in base_offsets:
            self.manager.delete_snapshot(base)
        self.manager.delete_snapshots_before(plog.log_start_offset)

    def on_close(self, plog: PartitionLog) -> None:
        self.manager.take_snapshot(plog.log_end_offset)

    def on_delete(self) -> None:
        self.manager.truncate_fully_and_start_at(0)
