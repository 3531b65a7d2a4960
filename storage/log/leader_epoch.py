"""The leader-epoch cache (Kafka's LeaderEpochFileCache over ``leader-epoch-checkpoint``): which
leader epoch started at which offset, for OffsetForLeaderEpoch and for truncation."""

from __future__ import annotations

from storage import checkpoints

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochCache:
    """Kafka's LeaderEpochFileCache: (epoch, start offset) entries, persisted on every change."""

    def __init__(self, path: str, entries: list[tuple[int, int]] | None = None) -> None:
        self.path = path
        self._entries: list[tuple[int, int]] = list(entries or [])
        self._persisted: list[tuple[int, int]] = list(self._entries)  # what the file holds

    @classmethod
    def load(cls, path: str) -> LeaderEpochCache:
        return cls(path, checkpoints.read_leader_epoch_checkpoint(path))

    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int | None:
        return self._entries[-1][0] if self._entries else None

    @property
    def earliest_entry(self) -> tuple[int, int] | None:
        return self._entries[0] if self._entries else None

    def flush(self) -> None:
        """Write the checkpoint if it changed: a load that truncates an entry and re-assigns the
        same one (an empty log's (0, 0)) costs no fsync."""
        if self._entries != self._persisted:
            checkpoints.write_leader_epoch_checkpoint(self.path, self._entries)
            self._persisted = list(self._entries)

    def assign(self, epoch: int, start_offset: int, *, flush: bool = True) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; later/conflicting entries are dropped."""
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"Received invalid partition leader epoch entry ({epoch}, {start_offset})")
        if self._entries:
            last_epoch, last_start = self._entries[-1]
            if epoch == last_epoch and start_offset >= last_start:
                return False
        while self._entries and (self._entries[-1][0] >= epoch or self._entries[-1][1] >= start_offset):
            self._entries.pop()
        self._entries.append((epoch, start_offset))
        if flush:
            self.flush()
        return True

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (epoch, end offset) per Kafka's LeaderEpochFileCache.endOffsetFor."""
        if requested_epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if self._entries and self._entries[-1][0] == requested_epoch:
            return requested_epoch, log_end_offset
        higher = next((e for e in self._entries if e[0] > requested_epoch), None)
        if higher is None:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        floor = None
        for e in self._entries:
            if e[0] <= requested_epoch:
                floor = e
        if floor is None:
            return requested_epoch, higher[1]
        return floor[0], higher[1]

    def epoch_for_offset(self, offset: int) -> int | None:
        previous = None
        for epoch, start in self._entries:
            if start == offset:
                return epoch
            if start > offset:
                return previous
            previous = epoch
        return previous

    def truncate_from_end(self, end_offset: int, *, flush: bool = True) -> None:
        """Drop entries starting at or after ``end_offset`` (log truncation)."""
        if end_offset >= 0 and self._entries and self._entries[-1][1] >= end_offset:
            while self._entries and self._entries[-1][1] >= end_offset:
                self._entries.pop()
            if flush:
                self.flush()

    def truncate_from_start(self, start_offset: int, *, flush: bool = True) -> None:
        """Drop entries before ``start_offset``; the last dropped one is kept, moved to start there."""
        removed = None
        while self._entries and self._entries[0][1] <= start_offset:
            removed = self._entries.pop(0)
        if removed is not None:
            self._entries.insert(0, (removed[0], start_offset))
            if flush:
                self.flush()

    def clear(self) -> None:
        self._entries = []
        self.flush()
