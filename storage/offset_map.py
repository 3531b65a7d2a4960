"""The cleaner's key -> latest offset map (the role of Kafka's OffsetMap / SkimpyOffsetMap).

Kafka keeps a fixed array of (MD5 of the key, offset) slots sized by
``log.cleaner.dedupe.buffer.size`` and stops mapping at ``log.cleaner.io.buffer.load.factor`` of
the slots. Here the map is made of ``dict`` shards: keys up to ``MAX_RAW_KEY`` bytes are stored as
they are (no hash collisions at all, and no hashing cost for the common short keys), longer ones
as a 128-bit BLAKE2b digest held in an ``int`` so it can never equal a raw ``bytes`` key. The same
config bounds it, counted in approximate Python bytes rather than Kafka's 24-byte slots, so the
map costs at most about ``dedupe_buffer_size * load_factor`` of memory; a map that is full stops
the offset map build early exactly as Kafka's does (the rest of the dirty section waits for the
next cleaning).

Why shards: CPython grows a dict by rehashing all of it at once, which takes ~150 ms at 3M
entries and would stall the event loop the cleaner shares. A key's shard is picked by its hash,
which the dict needs anyway (and ``bytes`` caches), so each resize is 1/SHARDS of the work;
``clear_steps`` frees the map shard by shard for the same reason.
"""

from __future__ import annotations

from collections.abc import Iterator
from hashlib import blake2b

MAX_RAW_KEY = 64
SHARDS = 256
_SHARD_MASK = SHARDS - 1
# dict slot (hash, key, value pointers, ~1.5x spare) + bytes header + int value: measured with
# tracemalloc at ~100-120 bytes per entry for short keys on CPython 3.11.
ENTRY_OVERHEAD = 112


def map_key(key: bytes) -> bytes | int:
    """What the map stores for ``key``."""
    if len(key) <= MAX_RAW_KEY:
        return key
    return int.from_bytes(blake2b(key, digest_size=16).digest(), "big")


class OffsetMap:
    __slots__ = ("_shards", "_bytes", "limit_bytes", "latest_offset")

    def __init__(self, memory_bytes: int, load_factor: float = 0.9) -> None:
        if memory_bytes <= 0:
            raise ValueError("the offset map needs a positive memory budget")
        self._shards: list[dict[bytes | int, int]] = [{} for _ in range(SHARDS)]
        self._bytes = 0
        self.limit_bytes = int(memory_bytes * load_factor)
        # The last offset the map covers (Kafka's latestOffset); -1 before anything was mapped.
        self.latest_offset = -1

    def clear_steps(self) -> Iterator[None]:
        """Empty the map one shard at a time, yielding in between (pause points)."""
        for shard in self._shards:
            if shard:
                shard.clear()
                yield None
        self._bytes = 0
        self.latest_offset = -1

    def clear(self) -> None:
        for _ in self.clear_steps():
            pass
        self._bytes = 0
        self.latest_offset = -1

    def __len__(self) -> int:
        return sum(len(s) for s in self._shards)

    @property
    def full(self) -> bool:
        return self._bytes >= self.limit_bytes

    @property
    def utilization(self) -> float:
        return min(self._bytes / self.limit_bytes, 1.0) if self.limit_bytes else 1.0

    def put(self, key: bytes, offset: int) -> None:
        k = key if len(key) <= MAX_RAW_KEY else map_key(key)
        m = self._shards[hash(k) & _SHARD_MASK]
        n = len(m)
        m[k] = offset
        if len(m) != n:
            self._bytes += ENTRY_OVERHEAD + (len(k) if type(k) is bytes else 24)

    def get(self, key: bytes) -> int:
        """The latest offset mapped for ``key``, or -1."""
        k = key if len(key) <= MAX_RAW_KEY else map_key(key)
        return self._shards[hash(k) & _SHARD_MASK].get(k, -1)

    def put_records(self, records: list, lo: int, hi: int, base_offset: int, start: int) -> bool:
        """Map the keyed records ``records[lo:hi]`` of a batch at ``base_offset`` whose offset is
        at least ``start`` (records as ``protocol.record_codec.records_of`` gives them: offset delta
        at 5, key at 6). Returns True, having stopped before a record, when the map is full
        (Kafka checks before each put too). The cleaner's hot loop, hence the inlining."""
        shards = self._shards
        nbytes = self._bytes
        limit = self.limit_bytes
        try:
            for r in records[lo:hi]:
                key = r[6]
                if key is None:
                    continue
                offset = base_offset + r[5]
                if offset < start:
                    continue
                if nbytes >= limit:
                    return True
                if len(key) > MAX_RAW_KEY:
                    key = map_key(key)
                m = shards[hash(key) & _SHARD_MASK]
                n = len(m)
                m[key] = offset
                if len(m) != n:
                    nbytes += ENTRY_OVERHEAD + (len(key) if type(key) is bytes else 24)
            return False
        finally:
            self._bytes = nbytes

    def lookup_function(self):
        """``get`` for the cleaning loop, with the lookups bound once."""
        shards = self._shards

        def get(key: bytes) -> int:
            k = key if len(key) <= MAX_RAW_KEY else map_key(key)
            return shards[hash(k) & _SHARD_MASK].get(k, -1)

        return get
