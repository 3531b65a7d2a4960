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
from coordinator.group.manager import (
    GroupConfig,
    GroupMetadataManager,
    JoinRequest,
    Record,
    append_error_to_response_error,
)
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
        # __consumer_offsets partitions this broker coordinates: all of them on a single node
        # (None), those it leads among several brokers (on_election / on_resignation)
        self.owned: set[int] | None = set() if env.elected else None
        self.loading: set[int] = set()

    # --- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        started = time.perf_counter()
        self.active = True
        loaded = self._load() if self.owned is None else 0
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

    def check(self, group_id: str) -> ErrorCode:
        """Whether this broker coordinates ``group_id`` now: COORDINATOR_NOT_AVAILABLE while
        stopped, COORDINATOR_LOAD_IN_PROGRESS while its partition loads, NOT_COORDINATOR when
        another broker leads that partition."""
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if self.owned is None:
            return ErrorCode.NONE
        partition = self.partition_for(group_id)
        if partition in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if partition not in self.owned:
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE

    async def replicated(self, group_id: str) -> ErrorCode:
        """Wait until the group's partition is replicated up to its current end (what this
        coordinator wrote for the group so far); the error its clients answer otherwise."""
        partition = self.partition_for(group_id)
        plog = self.writer.log(OFFSETS_TOPIC, partition)
        if plog is None:
            return ErrorCode.NONE
        code = await self.writer.committed(OFFSETS_TOPIC, partition, plog.log_end_offset)
        return append_error_to_response_error(code) if code != ErrorCode.NONE else code

    def on_election(self, partition: int, epoch: int) -> None:
        """This broker now leads ``partition`` of ``__consumer_offsets`` (GroupCoordinator.
        onElection): its groups and offsets load in the background."""
        if self.owned is None or partition in self.owned or partition in self.loading:
            return
        self.loading.add(partition)
        self._tasks = [t for t in self._tasks if not t.done()]
        self._tasks.append(asyncio.create_task(self._load_elected(partition), name=f"group-load-{partition}"))

    async def _load_elected(self, partition: int) -> None:
        await asyncio.sleep(0)
        if partition not in self.loading or self.owned is None:
            return  # resigned before the load ran
        plog = self.writer.log(OFFSETS_TOPIC, partition)
        try:
            records = self._load_partition(partition, plog) if plog is not None else 0
        except Exception:
            log.exception("loading __consumer_offsets partition failed", partition=partition)
            self.loading.discard(partition)
            return
        self.loading.discard(partition)
        self.owned.add(partition)
        self.manager.on_loaded(self.manager.groups_of_partition(partition))
        log.info("group coordinator partition loaded", partition=partition, epoch=epoch_of(plog), records=records)

    def on_resignation(self, partition: int) -> None:
        """Another broker leads ``partition`` now (GroupCoordinator.onResignation)."""
        if self.owned is None:
            return
        self.loading.discard(partition)
        if partition in self.owned:
            self.owned.discard(partition)
            gone = self.manager.unload_partition(partition)
            log.info("group coordinator partition unloaded", partition=partition, groups=gone)

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
            if code == ErrorCode.NOT_LEADER_OR_FOLLOWER:  # the partition moved: the client finds its new coordinator
                code = ErrorCode.NOT_COORDINATOR
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
        """Replay one partition from its log start to its end (CoordinatorLoaderImpl: a new
        leader holds every record the last one wrote up to there)."""
        offset = plog.log_start_offset
        end = plog.log_end_offset
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
        if (error := self.check(req.group_id)) != ErrorCode.NONE:
            return JoinResult(error=error, member_id=req.member_id)
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
        if (error := self.check(group_id)) != ErrorCode.NONE:
            return SyncResult(error=error)
        fut: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        self.manager.sync_group(group_id, generation_id, member_id, group_instance_id, protocol_type, protocol_name,
                                assignments, _completer(fut))
        return await fut


def _completer(fut: asyncio.Future) -> Callable[[object], None]:
    def complete(result: object) -> None:
        if not fut.done():
            fut.set_result(result)

    return complete


def epoch_of(plog: PartitionLog | None) -> int:
    return plog.leader_epoch if plog is not None else -1
