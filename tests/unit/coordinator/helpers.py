"""A fake clock/timer and an in-memory writer to drive GroupMetadataManager deterministically."""

from __future__ import annotations

import struct
from collections.abc import Callable

from coordinator.group.group import JoinResult, SyncResult
from coordinator.group.manager import GroupConfig, GroupMetadataManager, JoinRequest
from protocol.errors import ErrorCode, KafkaError
from storage.clock import SYSTEM_CLOCK


class FakeTimer:
    def __init__(self) -> None:
        self.now = 1_000_000
        self.tasks: dict[str, tuple[int, int, Callable[[], None]]] = {}
        self._seq = 0

    def time_ms(self) -> int:
        return self.now

    def schedule(self, key: str, delay_ms: int, fn: Callable[[], None]) -> None:
        self._seq += 1
        self.tasks[key] = (self.now + delay_ms, self._seq, fn)

    def cancel(self, key: str) -> None:
        self.tasks.pop(key, None)

    def advance(self, ms: int) -> None:
        """Move the clock, firing every due timer in deadline order (timers may schedule more)."""
        target = self.now + ms
        while True:
            due = [(d, s, k) for k, (d, s, _) in self.tasks.items() if d <= target]
            if not due:
                break
            deadline, _, key = min(due)
            _, _, fn = self.tasks.pop(key)
            self.now = max(self.now, deadline)
            fn()
        self.now = target


class FakeWriter:
    """Appends records to per-group lists with increasing offsets; can be told to fail."""

    def __init__(self) -> None:
        self.log: list[tuple[int, str, bytes, bytes | None]] = []  # (offset, group, key, value)
        self.fail_with: ErrorCode | None = None

    def __call__(self, group_id: str, records: list[tuple[bytes, bytes | None]]) -> int:
        if self.fail_with is not None:
            raise KafkaError(self.fail_with)
        base = len(self.log)
        for key, value in records:
            self.log.append((len(self.log), group_id, key, value))
        return base


def make_manager(**config) -> tuple[GroupMetadataManager, FakeTimer, FakeWriter]:
    timer = FakeTimer()
    writer = FakeWriter()
    cfg = GroupConfig(initial_rebalance_delay_ms=config.pop("initial_rebalance_delay_ms", 0), **config)
    return GroupMetadataManager(cfg, timer, writer, timer.time_ms), timer, writer


def subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0: version, topics, user data (null)."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


class Box:
    """Captures a callback's result."""

    def __init__(self) -> None:
        self.value = None
        self.calls = 0

    def __call__(self, value) -> None:
        self.value = value
        self.calls += 1

    @property
    def done(self) -> bool:
        return self.calls > 0


def join(
    mgr: GroupMetadataManager,
    group: str = "g",
    member_id: str = "",
    *,
    instance_id: str | None = None,
    protocols: list[tuple[str, bytes]] | None = None,
    protocol_type: str = "consumer",
    session: int = 10_000,
    rebalance: int = 30_000,
    version: int = 5,
    client_id: str = "client",
) -> Box:
    box = Box()
    mgr.join_group(JoinRequest(
        group_id=group, member_id=member_id, group_instance_id=instance_id, session_timeout_ms=session,
        rebalance_timeout_ms=rebalance, protocol_type=protocol_type,
        protocols=protocols if protocols is not None else [("range", subscription("t"))],
        client_id=client_id, client_host="/127.0.0.1", api_version=version,
    ), box)
    return box


def sync(mgr: GroupMetadataManager, group: str, generation: int, member_id: str,
         assignments: list[tuple[str, bytes]] | None = None, instance_id: str | None = None) -> Box:
    box = Box()
    mgr.sync_group(group, generation, member_id, instance_id, None, None, assignments or [], box)
    return box


def join_result(box: Box) -> JoinResult:
    assert box.done, "JoinGroup still parked"
    return box.value


def sync_result(box: Box) -> SyncResult:
    assert box.done, "SyncGroup still parked"
    return box.value


class FakeEnv:
    """``coordinator.runtime.CoordinatorEnv`` with a config dict and counted metrics."""

    def __init__(self, config: dict, features: dict[str, int] | None = None) -> None:
        from types import SimpleNamespace

        self.node_id = 1
        self.config = SimpleNamespace(get=config.__getitem__)  # KeyError: the code falls back to defaults
        self.metrics = SimpleNamespace(txn_completed=lambda *a: None, txn_timed_out=lambda: None,
                                       marker_written=lambda *a: None, marker_retry=lambda: None,
                                       group_rebalanced=lambda *a: None)
        self.clock = SYSTEM_CLOCK
        self.stopping = False
        self.elected = False  # a single node: every coordinator partition is its own
        self.features = features or {}
        self._next_pid = 1000

    def feature_level(self, name: str) -> int:
        return self.features.get(name, 0)

    def group_configs(self, group_id: str) -> dict[str, str]:
        return {}

    def generate_producer_id(self) -> int:
        self._next_pid += 1
        return self._next_pid


class FakePartitionWriter:
    """``coordinator.runtime.PartitionWriter`` over named topics with no logs (loading sees none)."""

    def __init__(self, topics: dict[str, int] | None = None) -> None:
        self.topics = dict(topics or {})
        self.appended: list[tuple[str, int, bytes]] = []

    def partitions(self, topic: str) -> int | None:
        return self.topics.get(topic)

    def ensure_internal_topic(self, name: str, partitions: int, configs: dict[str, str]) -> None:
        self.topics.setdefault(name, partitions)

    def log(self, topic: str, partition: int):
        return None

    def append(self, topic: str, partition: int, batch: bytearray, verification_guard: object | None = None):
        from types import SimpleNamespace

        self.appended.append((topic, partition, bytes(batch)))
        return SimpleNamespace(first_offset=len(self.appended) - 1, last_offset=len(self.appended) - 1)

    async def committed(self, topic: str, partition: int, end_offset: int) -> ErrorCode:
        return ErrorCode.NONE  # one replica: written is committed
