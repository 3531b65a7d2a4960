"""The asyncio shell around GroupMetadataManager: timers, the ``__consumer_offsets`` writer,
loading at start-up, offset expiry and shutdown.

- Writes: the group's records go to ``__consumer_offsets`` partition
  ``abs(javaHashCode(group)) % offsets.topic.num.partitions`` as one uncompressed batch,
  appended before the request is answered (the append is synchronous, so an answered commit is
  in the log and survives kill -9). The topic is created on first use, as Kafka does.
- Loading: every batch of every partition is replayed at start-up, before the listeners open.
  Transactional batches are held per producer id until their COMMIT/ABORT marker; control
  batches apply the marker. Undecodable records are logged and skipped, never fatal.
- Waiting requests: JoinGroup/SyncGroup get an asyncio future completed by the manager's
  callback; at shutdown they are answered with NOT_COORDINATOR so the broker can stop promptly.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import structlog

from coordinator.group.consumer_manager import ConsumerGroupConfig
from coordinator.group.group import JoinResult, SyncResult
from coordinator.group.java_hash import partition_for
from coordinator.group.manager import GroupConfig, GroupMetadataManager, JoinRequest, Record
from coordinator.group.offsets import NO_PRODUCER_ID
from coordinator.group.records import RecordFormatError
from protocol import records as batches
from protocol.errors import ErrorCode, KafkaError, error_code_of
from protocol.record_codec import control_type, decode_records
from storage.clock import Clock, TimerHandle
from storage.log_config import segment_bytes_config

if TYPE_CHECKING:
    from coordinator.group.consumer_manager import Topics
    from coordinator.runtime import CoordinatorEnv, PartitionWriter, TransactionVerifier
    from storage.log.partition_log import PartitionLog

log = structlog.get_logger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
LOAD_READ_BYTES = 4 * 1024 * 1024
STOP_POLL_SECONDS = 0.05


class ClockTimer:
    """Kafka's CoordinatorTimer over the broker's clock: one pending deadline per key."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._handles: dict[str, TimerHandle] = {}

    def schedule(self, key: str, delay_ms: int, fn: Callable[[], None]) -> None:
        old = self._handles.pop(key, None)
        if old is not None:
            old.cancel()
        handle: TimerHandle | None = None

        def fire() -> None:
            if self._handles.get(key) is handle:
                del self._handles[key]
            try:
                fn()
            except Exception:
                log.exception("group coordinator timer failed", key=key)

        handle = self._clock.call_later(max(delay_ms, 0) / 1000, fire)
        self._handles[key] = handle

    def cancel(self, key: str) -> None:
        handle = self._handles.pop(key, None)
        if handle is not None:
            handle.cancel()

    def cancel_all(self) -> None:
        for handle in self._handles.values():
            handle.cancel()
        self._handles.clear()

    def __len__(self) -> int:
        return len(self._handles)


class GroupCoordinator:
    """One per broker (``broker.group_coordinator``); owns every classic group."""

    def __init__(self, env: CoordinatorEnv, writer: PartitionWriter, topics: Topics | None = None,
                 verifier: TransactionVerifier | None = None) -> None:
        """``topics``: the cluster's topics (KIP-848 assignment); ``verifier``: KIP-890 for
        transactional offset commits (``coordinator.group.txn_offsets``)."""
        self.env = env
        self.writer = writer
        self.verifier = verifier
        cfg = env.config
        self.num_partitions = int(cfg.get("offsets.topic.num.partitions"))
        self.segment_bytes = int(cfg.get("offsets.topic.segment.bytes"))
        self.retention_check_interval_ms = int(cfg.get("offsets.retention.check.interval.ms"))
        self.timer = ClockTimer(env.clock)
        self.manager = GroupMetadataManager(GroupConfig.from_broker(cfg.get), self.timer, self._write,
                                            partition_for=self.partition_for,
                                            on_rebalanced=env.metrics.group_rebalanced,
                                            consumer_config=ConsumerGroupConfig.from_broker(cfg.get),
                                            topics=topics,
                                            group_config=lambda group_id: dict(env.group_configs(group_id)),
                                            time_ms=env.clock.now_ms)
        self.active = False
        self._tasks: list[asyncio.Task] = []

    # --- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        started = time.perf_counter()
        self.active = True
        loaded = self._load()
        self.manager.on_loaded()
        self._tasks.append(asyncio.create_task(self._expiry_loop(), name="group-offset-expiry"))
        self._tasks.append(asyncio.create_task(self._watch_stopping(), name="group-coordinator-stop-watch"))
        log.info("group coordinator started", groups=len(self.manager.groups), records=loaded,
                 load_ms=round((time.perf_counter() - started) * 1000, 1))

    async def shutdown(self) -> None:
        self._unload()
        for task in self._tasks:
            task.cancel()
        self._tasks.clear()
        self.timer.cancel_all()

    def _unload(self) -> None:
        if self.active:
            self.active = False
            self.manager.unload()

    async def _watch_stopping(self) -> None:
        """Answer parked JoinGroup/SyncGroup as soon as the broker starts stopping, so its
        grace period for in-flight requests is not spent waiting on a rebalance."""
        while not self.env.stopping:
            await asyncio.sleep(STOP_POLL_SECONDS)  # the process stopping, not time in Kafka's sense
        self._unload()

    async def _expiry_loop(self) -> None:
        interval = max(self.retention_check_interval_ms, 10) / 1000
        while True:
            await self.env.clock.sleep(interval)
            try:
                self.manager.cleanup_expired()
            except Exception:
                log.exception("offset expiry failed")

    # --- partitions and the log ---------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def ensure_offsets_topic(self) -> None:
        """Create ``__consumer_offsets`` on first use; COORDINATOR_NOT_AVAILABLE if that fails."""
        if self.writer.partitions(OFFSETS_TOPIC) is not None:
            return
        try:
            self.writer.ensure_internal_topic(
                OFFSETS_TOPIC,
                self.num_partitions,
                {"cleanup.policy": "compact", "compression.type": "producer",
                 **segment_bytes_config(self.segment_bytes)},
            )
        except Exception as e:
            log.exception("could not create the offsets topic")
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, str(e)) from None

    def offsets_log(self, group_id: str) -> PartitionLog:
        """The log of the group's ``__consumer_offsets`` partition (created on first use)."""
        self.ensure_offsets_topic()
        plog = self.writer.log(OFFSETS_TOPIC, self.partition_for(group_id))
        if plog is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        return plog

    def _write(self, group_id: str, records: list[Record]) -> int:
        if not self.active:
            raise KafkaError(ErrorCode.NOT_COORDINATOR)
        self.ensure_offsets_topic()
        partition = self.partition_for(group_id)
        batch = batches.build_batch(records, timestamp=self.env.clock.now_ms())
        try:
            return self.writer.append(OFFSETS_TOPIC, partition, batch).first_offset
        except Exception as e:
            code = error_code_of(e)
            log.warning("group metadata write failed", group=group_id, partition=partition, error=code.name,
                        detail=str(e))
            raise KafkaError(code, str(e)) from None

    def _load(self) -> int:
        if self.writer.partitions(OFFSETS_TOPIC) is None:
            return 0
        total = 0
        for p in range(self.num_partitions):
            plog = self.writer.log(OFFSETS_TOPIC, p)
            if plog is not None:
                total += self._load_partition(p, plog)
        return total

    def _load_partition(self, partition: int, plog: PartitionLog) -> int:
        """Replay one partition from its log start to its high watermark."""
        offset = plog.log_start_offset
        end = plog.high_watermark
        count = 0
        while offset < end:
            result = plog.read(offset, LOAD_READ_BYTES, end, True)
            data = result.records
            assert isinstance(data, memoryview)  # not zero_copy: never a FileRegion
            if not data:
                break
            next_offset = offset
            for pos, size in batches.iter_batch_positions(data):
                info = batches.read_header(data, pos)
                next_offset = info.next_offset
                batch = data[pos:pos + size]
                count += self._replay_batch(partition, info, batch)
            if next_offset <= offset:
                break
            offset = next_offset
        return count

    def _replay_batch(self, partition: int, info: batches.BatchInfo, batch: bytes | memoryview) -> int:
        if info.is_control:
            try:
                ctype = control_type(batch)
            except Exception:
                log.warning("skipping unreadable control batch", partition=partition, offset=info.base_offset)
                return 0
            if ctype in (batches.CONTROL_COMMIT, batches.CONTROL_ABORT):
                self.manager.replay_end_transaction(info.producer_id, ctype == batches.CONTROL_COMMIT, partition)
            return 0
        producer_id = info.producer_id if info.is_transactional else NO_PRODUCER_ID
        n = 0
        for record in decode_records(batch):
            try:
                self.manager.replay(record.offset, producer_id, record.key, record.value)
                n += 1
            except RecordFormatError as e:
                log.warning("skipping undecodable __consumer_offsets record", partition=partition,
                            offset=record.offset, error=str(e))
        return n

    def complete_transaction(self, partition: int, producer_id: int, commit: bool) -> None:
        """Hook for the transaction marker path: call after a COMMIT/ABORT marker has been
        appended to ``__consumer_offsets`` partition ``partition``."""
        self.manager.replay_end_transaction(producer_id, commit, partition)

    # --- requests -------------------------------------------------------------------------------

    async def join_group(self, req: JoinRequest) -> JoinResult:
        if not self.active:
            return JoinResult(error=ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id=req.member_id)
        fut: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        self.manager.join_group(req, _completer(fut))
        return await fut

    async def sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: list[tuple[str, bytes]],
    ) -> SyncResult:
        if not self.active:
            return SyncResult(error=ErrorCode.COORDINATOR_NOT_AVAILABLE)
        fut: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        self.manager.sync_group(group_id, generation_id, member_id, group_instance_id, protocol_type, protocol_name,
                                assignments, _completer(fut))
        return await fut


def _completer(fut: asyncio.Future) -> Callable[[object], None]:
    def complete(result: object) -> None:
        if not fut.done():
            fut.set_result(result)

    return complete
