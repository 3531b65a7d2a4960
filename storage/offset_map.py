"""The cleaner's key -> latest offset map (the role of Kafka's OffsetMap / SkimpyOffsetMap).

Kafka keeps a fixed array of (MD5 of the key, offset) slots sized by
``log.cleaner.dedupe.buffer.size`` and stops mapping at ``log.cleaner.io.buffer.load.factor`` of
the slots. Here the map is a plain ``dict``: keys up to ``MAX_RAW_KEY`` bytes are stored as they
are (no hash collisions at all, and no hashing cost for the common short keys), longer ones as a
128-bit BLAKE2b digest held in an ``int`` so it can never equal a raw ``bytes`` key. The same
config bounds it, counted in approximate Python bytes rather than Kafka's 24-byte slots, so the
map costs at most about ``dedupe_buffer_size * load_factor`` of memory; a map that is full stops
the offset map build early exactly as Kafka's does (the rest of the dirty section waits for the
next cleaning).
"""

from __future__ import annotations

from hashlib import blake2b

MAX_RAW_KEY = 64
# dict slot (hash, key, value pointers, ~1.5x spare) + bytes header + int value: measured with
# tracemalloc at ~100-120 bytes per entry for short keys on CPython 3.11.
ENTRY_OVERHEAD = 112


def map_key(key: bytes) -> bytes | int:
    """What the map stores for ``key``."""
    if len(key) <= MAX_RAW_KEY:
        return key
    return int.from_bytes(blake2b(key, digest_size=16).digest(), "big")


class OffsetMap:
    __slots__ = ("_map", "_bytes", "limit_bytes", "latest_offset")

    def __init__(self, memory_bytes: int, load_factor: float = 0.9) -> None:
        if memory_bytes <= 0:
            raise ValueError("the offset map needs a positive memory budget")
        self._map: dict[bytes | int, int] = {}
        self._bytes = 0
        self.limit_bytes = int(memory_bytes * load_factor)
        # The last offset the map covers (Kafka's latestOffset); -1 before anything was mapped.
        self.latest_offset = -1

    def clear(self) -> None:
        self._map.clear()
        self._bytes = 0
        self.latest_offset = -1

    def __len__(self) -> int:
        return len(self._map)

    @property
    def full(self) -> bool:
        return self._bytes >= self.limit_bytes

    @property
    def utilization(self) -> float:
        return min(self._bytes / self.limit_bytes, 1.0) if self.limit_bytes else 1.0

    def put(self, key: bytes, offset: int) -> None:
        k = key if len(key) <= MAX_RAW_KEY else map_key(key)
        m = self._map
        n = len(m)
        m[k] = offset
        if len(m) != n:
            self._bytes += ENTRY_OVERHEAD + (len(k) if type(k) is bytes else 24)

    def get(self, key: bytes) -> int:
        """The latest offset mapped for ``key``, or -1."""
        return self._map.get(key if len(key) <= MAX_RAW_KEY else map_key(key), -1)
