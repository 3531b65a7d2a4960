"""Committed offsets and pending transactional offsets (Kafka's OffsetMetadataManager state).

Plain commits go straight to ``committed``. Transactional commits (TxnOffsetCommit, written as
transactional batches carrying the producer id) wait in ``pending`` per producer id until the
COMMIT/ABORT marker for that producer lands in the same ``__consumer_offsets`` partition: a
COMMIT moves them into ``committed`` unless a newer plain commit (higher record offset) is
already there; an ABORT drops them. ``open_transactions`` answers "is a transactional commit
pending for this partition", which OffsetFetch with require_stable reports as
UNSTABLE_OFFSET_COMMIT and which holds back offset expiry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from coordinator.group.records import OffsetCommitValue

NO_PRODUCER_ID = -1

TopicPartitionKey = tuple[str, str, int]  # (group, topic, partition)


@dataclass(slots=True)
class OffsetAndMetadata:
    committed_offset: int
    leader_epoch: int  # -1 when unknown
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int | None  # only from OffsetCommit v2-4 retention_time / value v1
    record_offset: int  # where the record sits in __consumer_offsets (-1 before it is written)

    @classmethod
    def from_record(cls, record_offset: int, value: OffsetCommitValue) -> OffsetAndMetadata:
        return cls(
            value.offset,
            value.leader_epoch,
            value.metadata,
            value.commit_timestamp,
            value.expire_timestamp if value.expire_timestamp >= 0 else None,
            record_offset,
        )

    def to_value(self) -> OffsetCommitValue:
        return OffsetCommitValue(
            self.committed_offset,
            self.leader_epoch,
            self.metadata,
            self.commit_timestamp_ms,
            -1 if self.expire_timestamp_ms is None else self.expire_timestamp_ms,
        )


class OffsetStore:
    """group -> topic -> partition -> OffsetAndMetadata, plus per-producer pending offsets."""

    def __init__(self) -> None:
        self.committed: dict[str, dict[str, dict[int, OffsetAndMetadata]]] = {}
        # Transactional offsets not yet committed, per producer id (hook for exactly-once).
        self.pending: dict[int, dict[TopicPartitionKey, OffsetAndMetadata]] = {}
        # (group, topic, partition) -> producer ids with a pending commit there.
        self.open_transactions: dict[TopicPartitionKey, set[int]] = {}

    def unload(self, groups: set[str]) -> None:
        """Forget these groups' offsets, committed and pending (their partition moved away)."""
        for group in groups:
            self.committed.pop(group, None)
        for producer_id in list(self.pending):
            entries = self.pending[producer_id]
            for key in [k for k in entries if k[0] in groups]:
                del entries[key]
            if not entries:
                del self.pending[producer_id]
        for key in [k for k in self.open_transactions if k[0] in groups]:
            del self.open_transactions[key]

    # --- reads -----------------------------------------------------------------------------

    def get(self, group: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        return self.committed.get(group, {}).get(topic, {}).get(partition)

    def group_offsets(self, group: str) -> dict[str, dict[int, OffsetAndMetadata]]:
        return self.committed.get(group, {})

    def has_offsets(self, group: str) -> bool:
        return bool(self.committed.get(group))

    def has_pending_transactional_offsets(self, group: str, topic: str, partition: int) -> bool:
        return bool(self.open_transactions.get((group, topic, partition)))

    def group_has_open_transactions(self, group: str) -> bool:
        return any(key[0] == group for key in self.open_transactions)

    # --- writes (replayed records) --------------------------------------------------------

    def put(self, group: str, topic: str, partition: int, value: OffsetAndMetadata) -> None:
        self.committed.setdefault(group, {}).setdefault(topic, {})[partition] = value

    def remove(self, group: str, topic: str, partition: int) -> None:
        """A tombstone: drops the committed offset and any pending transactional one."""
        topics = self.committed.get(group)
        if topics is not None:
            parts = topics.get(topic)
            if parts is not None:
                parts.pop(partition, None)
                if not parts:
                    del topics[topic]
            if not topics:
                del self.committed[group]
        key = (group, topic, partition)
        for pid in self.open_transactions.pop(key, ()):
            offsets = self.pending.get(pid)
            if offsets is not None:
                offsets.pop(key, None)
                if not offsets:
                    del self.pending[pid]

    def remove_group(self, group: str) -> None:
        self.committed.pop(group, None)

    def replay(self, group: str, topic: str, partition: int, producer_id: int, value: OffsetAndMetadata) -> None:
        """An OffsetCommit record: plain commits apply now, transactional ones wait for the marker."""
        if producer_id == NO_PRODUCER_ID:
            self.put(group, topic, partition, value)
            return
        key = (group, topic, partition)
        self.pending.setdefault(producer_id, {})[key] = value
        self.open_transactions.setdefault(key, set()).add(producer_id)

    def replay_end_transaction(
        self, producer_id: int, commit: bool, in_partition: Callable[[str], bool] | None = None
    ) -> None:
        """A COMMIT/ABORT marker for ``producer_id`` in one ``__consumer_offsets`` partition:
        only the pending offsets of groups living there (``in_partition(group)``) are resolved,
        as Kafka's per-partition coordinator shards do; None resolves them all."""
        offsets = self.pending.get(producer_id)
        if not offsets:
            return
        resolved = [k for k in offsets if in_partition is None or in_partition(k[0])]
        for key in resolved:
            value = offsets.pop(key)
            pids = self.open_transactions.get(key)
            if pids is not None:
                pids.discard(producer_id)
                if not pids:
                    del self.open_transactions[key]
            if commit:
                existing = self.get(*key)
                # Keep the newest commit when plain and transactional commits interleave:
                # compaction could otherwise resurrect an older one.
                if existing is None or value.record_offset > existing.record_offset:
                    self.put(*key, value)
        if not offsets:
            del self.pending[producer_id]
