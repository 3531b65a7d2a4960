"""Incremental fetch sessions (KIP-227), as Kafka's FetchManager, FetchContext and FetchSession.

A consumer's first Fetch (epoch 0) names every partition; the broker answers with a session id
and remembers each partition's fetch position. Later Fetches (epoch 1, 2, ...) name only the
partitions whose position changed and list the ones to forget; the answer carries only the
partitions that have records, a new high watermark or log start offset, or an error. A session
error (unknown id, wrong epoch, topic ids switched on or off) answers a top-level error with no
partitions, and the client starts over with a full fetch.

Sessions live in a cache of ``max.incremental.fetch.session.cache.slots`` (1000) entries; a new
session evicts one unused for ``min.incremental.fetch.session.eviction.ms`` (120 s), else one
older than that with fewer partitions (FetchSessionCacheShard.tryEvict; every session here is a
consumer's, none privileged). Sessions are per broker process, as in Kafka: none survive a restart.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from protocol.errors import ErrorCode

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_MAX_INT32 = 2**31 - 1


def next_epoch(epoch: int) -> int:
    """FetchMetadata.nextEpoch."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == _MAX_INT32 else epoch + 1


class CachedPartition:
    """One partition of a session: the fetch position the client last sent and the state it was
    last told (Kafka's CachedPartition)."""

    __slots__ = ("topic", "topic_id", "partition", "fetch_offset", "max_bytes", "current_leader_epoch",
                 "high_watermark", "local_log_start_offset")

    def __init__(self, p: PartitionFetch) -> None:
        self.topic, self.topic_id, self.partition = p.topic, p.topic_id, p.partition
        self.update_request(p)
        self.high_watermark = -1
        self.local_log_start_offset = -1

    def update_request(self, p: PartitionFetch) -> None:
        self.fetch_offset, self.max_bytes, self.current_leader_epoch = p.fetch_offset, p.max_bytes, p.current_leader_epoch

    def to_fetch(self) -> PartitionFetch:
        return PartitionFetch(self.topic, self.topic_id, self.partition, self.fetch_offset, self.max_bytes,
                              self.current_leader_epoch)

    def must_respond(self, error: int, high_watermark: int, log_start_offset: int, has_records: bool) -> bool:
        """maybeUpdateResponseData(updateResponseData=true): include the partition when it has
        records, a changed high watermark or log start offset, or an error (which also forgets the
        high watermark, so the partition is sent again once the error is gone)."""
        respond = has_records
        if self.high_watermark != high_watermark:
            respond = True
            self.high_watermark = high_watermark
        if self.local_log_start_offset != log_start_offset:
            respond = True
            self.local_log_start_offset = log_start_offset
        if error:
            self.high_watermark = -1
            respond = True
        return respond


Key = tuple[object, int]  # (topic id, or the name for sessions without ids; partition)


def _key(uses_topic_ids: bool, topic: str | None, topic_id: uuid.UUID | None, partition: int) -> Key:
    return (topic_id if uses_topic_ids else topic, partition)


@dataclass(slots=True, eq=False)
class FetchSession:
    id: int
    uses_topic_ids: bool
    partitions: dict[Key, CachedPartition]  # insertion order is the response order
    creation_ms: int
    last_used_ms: int
    epoch: int

    def key(self, topic: str | None, topic_id: uuid.UUID | None, partition: int) -> Key:
        return _key(self.uses_topic_ids, topic, topic_id, partition)

    def update(self, fetch: Iterable[PartitionFetch], forget: Iterable[tuple[str | None, uuid.UUID | None, int]]) -> None:
        for p in fetch:
            key = self.key(p.topic, p.topic_id, p.partition)
            cached = self.partitions.get(key)
            if cached is None:
                self.partitions[key] = CachedPartition(p)
            else:
                cached.update_request(p)
        for topic, topic_id, partition in forget:
            self.partitions.pop(self.key(topic, topic_id, partition), None)


@dataclass(slots=True)
class PartitionFetch:
    """One partition to read: ``topic`` is None when a topic id is unknown here."""

    topic: str | None
    topic_id: uuid.UUID | None
    partition: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int
    last_fetched_epoch: int = -1  # v12+ (a follower's)
    log_start_offset: int = -1  # a follower's


@dataclass(slots=True)
class FetchContext:
    """What one Fetch reads and how its answer is built (Kafka's four FetchContexts in one)."""

    partitions: list[PartitionFetch]
    error: ErrorCode = ErrorCode.NONE  # a session error: answer it with no partitions
    session: FetchSession | None = None  # incremental: the session being served
    request_epoch: int = FINAL_EPOCH
    create_session: bool = False  # full fetch at epoch 0: open a session when answering
    uses_topic_ids: bool = False


class FetchSessionCache:
    def __init__(self, max_entries: int = 1000, eviction_ms: int = 120_000,
                 rng: Callable[[int, int], int] = random.randint) -> None:
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self.sessions: dict[int, FetchSession] = {}
        self._rng = rng

    def __len__(self) -> int:
        return len(self.sessions)

    def total_partitions(self) -> int:
        return sum(len(s.partitions) for s in self.sessions.values())

    # --- contexts (FetchManager.newContext) ------------------------------------------------------

    def new_context(self, version: int, session_id: int, epoch: int, fetch: list[PartitionFetch],
                    forget: list[tuple[str | None, uuid.UUID | None, int]], now_ms: int) -> FetchContext:
        uses_ids = version >= 13
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):  # a full fetch closes any session it names
            if session_id != INVALID_SESSION_ID:
                self.sessions.pop(session_id, None)
            return FetchContext(fetch, create_session=epoch == INITIAL_EPOCH, uses_topic_ids=uses_ids)
        session = self.sessions.get(session_id)
        if session is None:
            return FetchContext([], ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            return FetchContext([], ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        if session.uses_topic_ids != uses_ids:
            return FetchContext([], ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
        session.update(fetch, forget)
        if not session.partitions:  # nothing left: the session closes, this fetch is sessionless
            del self.sessions[session_id]
            return FetchContext(fetch)
        session.last_used_ms = now_ms
        session.epoch = next_epoch(session.epoch)
        partitions = [c.to_fetch() for c in session.partitions.values()]
        return FetchContext(partitions, session=session, request_epoch=epoch, uses_topic_ids=uses_ids)

    # --- answering (updateAndGenerateResponseData) -------------------------------------------------

    def maybe_create_session(self, context: FetchContext, results: list[tuple[PartitionFetch, int, int, int]],
                             now_ms: int) -> int:
        """A full fetch at epoch 0: cache its partitions with what this answer tells the client
        (``results``: (partition, error, high watermark, log start offset)); the new id, or 0
        when the cache is full of sessions that may not be evicted."""
        if len(self.sessions) >= self.max_entries and not self._try_evict(len(results), now_ms):
            return INVALID_SESSION_ID
        partitions: dict[Key, CachedPartition] = {}
        for p, error, high_watermark, log_start in results:
            cached = partitions[_key(context.uses_topic_ids, p.topic, p.topic_id, p.partition)] = CachedPartition(p)
            cached.high_watermark = -1 if error else high_watermark
            cached.local_log_start_offset = log_start
        session_id = self._new_session_id()
        self.sessions[session_id] = FetchSession(session_id, context.uses_topic_ids, partitions, now_ms, now_ms,
                                                 next_epoch(INITIAL_EPOCH))
        return session_id

    @staticmethod
    def select_incremental(context: FetchContext, results: list[tuple[PartitionFetch, int, int, int, bool]]
                           ) -> tuple[ErrorCode, list[int]]:
        """The partitions an incremental answer carries (indexes into ``results``: (partition,
        error, high watermark, log start offset, has records)), updating what the session
        remembers; one with records moves to the end of the session, so the next answers serve
        the others first. INVALID_FETCH_SESSION_EPOCH if another fetch advanced the session
        meanwhile (a duplicate request)."""
        session = context.session
        assert session is not None
        if session.epoch != next_epoch(context.request_epoch):
            return ErrorCode.INVALID_FETCH_SESSION_EPOCH, []
        selected = []
        for i, (p, error, high_watermark, log_start, has_records) in enumerate(results):
            key = session.key(p.topic, p.topic_id, p.partition)
            cached = session.partitions.get(key)
            if cached is None or not cached.must_respond(error, high_watermark, log_start, has_records):
                continue
            selected.append(i)
            if has_records:
                session.partitions[key] = session.partitions.pop(key)
        return ErrorCode.NONE, selected

    def _new_session_id(self) -> int:
        while True:
            session_id = self._rng(1, _MAX_INT32 - 1)
            if session_id not in self.sessions:
                return session_id

    def _try_evict(self, size: int, now_ms: int) -> bool:
        """A stale session first; else the smallest session older than the eviction time, if the
        new one is at least as large (no session here is privileged)."""
        if not self.sessions:
            return False
        stale = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now_ms - stale.last_used_ms > self.eviction_ms:
            del self.sessions[stale.id]
            return True
        evictable = [s for s in self.sessions.values() if now_ms - s.creation_ms > self.eviction_ms]
        if not evictable:
            return False
        smallest = min(evictable, key=lambda s: (len(s.partitions), s.id))
        if (size, 0) < (len(smallest.partitions), smallest.id):
            return False
        del self.sessions[smallest.id]
        return True
