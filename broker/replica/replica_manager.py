"""Appends to and reads from the partition logs this node leads (all of them), and parks
Fetch requests until data arrives: Kafka's ReplicaManager with one replica per partition.

Validation split, as in Kafka: ProduceRequest.validateRecords (magic 2, one batch, zstd needs
v7) answers INVALID_RECORD / UNSUPPORTED_COMPRESSION_TYPE; LogValidator (CRC, structure)
answers CORRUPT_MESSAGE; size against ``max.message.bytes`` answers MESSAGE_TOO_LARGE. The
partition log then checks producer state and assigns offsets. Nothing is written unless every
check passed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import structlog

from broker.replica.produce_validation import RequestLevelError, validate_batch, validate_request_records
from broker.replica.txn_verification import verify_produce
from protocol import records as rec
from protocol.errors import ErrorCode, KafkaError, error_code_of
from protocol.record_codec import decode_records, rebuild_batch_with_codec
from storage.log.file_region import FileRegion

if TYPE_CHECKING:
    from broker.services import Services
    from storage.log.partition_log import PartitionLog
    from storage.log_config import LogConfig

log = structlog.get_logger(__name__)

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
# ReplicaManager.appendToLocalLog answers these with UNKNOWN_LOG_APPEND_INFO (log start -1).
_NO_LOG_INFO_ERRORS = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.MESSAGE_TOO_LARGE,
    ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.CORRUPT_MESSAGE, ErrorCode.KAFKA_STORAGE_ERROR,
})
ISOLATION_READ_COMMITTED = 1


@dataclass(slots=True)
class ProduceResult:
    error: ErrorCode = ErrorCode.NONE
    base_offset: int = -1
    last_offset: int = -1  # acks=all waits for the high watermark to pass it
    log_append_time: int = -1
    log_start_offset: int = -1
    error_message: str | None = None
    record_errors: list[tuple[int, str | None]] = field(default_factory=list)
    current_leader: tuple[int, int] | None = None  # KIP-951: with NOT_LEADER_OR_FOLLOWER


@dataclass(slots=True)
class FetchPartitionResult:
    error: ErrorCode
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: bytes | memoryview | FileRegion | None = None
    aborted: list[tuple[int, int]] | None = None
    diverging_epoch: tuple[int, int] | None = None  # a follower's log left ours here (epoch, end offset)
    current_leader: tuple[int, int] | None = None  # KIP-951: with NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH


class ReplicaManager:
    def __init__(self, broker: Services) -> None:
        self.broker = broker
        self.log_manager = broker.log_manager
        # Fetch waiters: one future per parked Fetch, registered under each partition it reads.
        self._waiters: dict[tuple[str, int], set[asyncio.Future]] = {}

    # --- lookup -----------------------------------------------------------------------------

    def partition_log(self, topic: str, partition: int) -> PartitionLog:
        """getPartitionOrException: this broker's replica; a partition the cluster has elsewhere
        is NOT_LEADER_OR_FOLLOWER here, one it does not have UNKNOWN_TOPIC_OR_PARTITION."""
        plog = self.log_manager.get(topic, partition)
        if plog is None:
            if self.broker.shared is not None and self.broker.metadata.partition(topic, partition) is not None:
                raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                 f"Broker {self.broker.node_id} is not a replica of {topic}-{partition}")
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        return plog

    def leader_log(self, topic: str, partition: int) -> PartitionLog:
        """The log of a partition this broker leads (getPartitionOrException + leader check):
        NOT_LEADER_OR_FOLLOWER when another broker leads it (or nobody does)."""
        reg = self.broker.metadata.partition(topic, partition)
        if reg is not None and reg.leader != self.broker.node_id:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                             f"Leader not local for partition {topic}-{partition} on broker {self.broker.node_id}")
        return self.partition_log(topic, partition)

    def leader_epoch(self, topic: str, partition: int) -> int:
        """The partition's leader epoch in the cluster metadata (0 on a single node)."""
        reg = self.broker.metadata.partition(topic, partition)
        return reg.leader_epoch if reg is not None else 0

    def current_leader_if(self, error: BaseException, topic: str, partition: int) -> tuple[int, int] | None:
        """KIP-951: the leader (id, epoch) the metadata names, for an answer that sends a client
        elsewhere (-1, -1 when the partition has no live leader)."""
        if error_code_of(error) not in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH):
            return None
        reg = self.broker.metadata.partition(topic, partition)
        if reg is None or not self.broker.brokers.alive(reg.leader):
            return -1, -1
        return reg.leader, reg.leader_epoch

    def check_leader_epoch(self, topic: str, partition: int, current_leader_epoch: int | None) -> None:
        """Partition.checkCurrentLeaderEpoch: a client ahead of our epoch is UNKNOWN_LEADER_EPOCH, one
        behind it FENCED_LEADER_EPOCH; -1 (or absent) skips the check."""
        if current_leader_epoch is None or current_leader_epoch < 0:
            return
        epoch = self.leader_epoch(topic, partition)
        if current_leader_epoch > epoch:
            raise KafkaError(ErrorCode.UNKNOWN_LEADER_EPOCH)
        if current_leader_epoch < epoch:
            raise KafkaError(ErrorCode.FENCED_LEADER_EPOCH)

    def topic_deleted(self, topic: str) -> None:
        for key in [k for k in self._waiters if k[0] == topic]:
            for fut in self._waiters.pop(key):
                if not fut.done():
                    fut.set_result(None)

    # --- produce ---------------------------------------------------------------------------

    def append_records(
        self,
        topic: str,
        partition: int,
        records: bytes | memoryview | None,
        *,
        api_version: int,
        acks: int = 1,
        transactional_id: str | None = None,
        internal: bool = False,
        validated: tuple[bytearray | memoryview, list[rec.BatchInfo]] | BaseException | None = None,
    ) -> ProduceResult:
        """Validate and append one partition's payload from a Produce request (``validated``: what
        ``produce_validation.validate_payload`` gave for it off the loop, batches or the refusal).

        Two phases, as in Kafka: request-level checks (KafkaApis / ProduceRequest.validateRecords)
        and the log-level ones (LogValidator, producer state). Errors answer log_start_offset -1,
        except log-level errors outside ReplicaManager.appendToLocalLog's "unknown append info"
        list (sequence, epoch, transaction errors), which carry the partition's log start offset.
        """
        try:
            plog = self.leader_log(topic, partition)
            if topic in INTERNAL_TOPICS and not internal:
                raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Cannot append to internal topic {topic}")
            if validated is None:
                buf = validate_request_records(records, api_version)
            elif isinstance(validated, RequestLevelError):
                raise validated
        except KafkaError as e:
            self.broker.metrics.produce_failed(topic)
            return ProduceResult(e.code, error_message=e.message, current_leader=self.current_leader_if(e, topic, partition))
        try:
            if validated is None:
                batches = validate_batch(buf, plog.config.max_message_bytes, plog.config.compact, topic, partition)
            elif isinstance(validated, BaseException):
                raise validated
            else:
                buf, batches = validated
            buf, batches = _in_topic_codec(buf, batches, plog.config)
            self.broker.replication.append_error(topic, partition, acks, plog)
            try:
                # KIP-890: a transactional batch needs its partition in the producer's transaction.
                guard = verify_produce(self.broker, plog, transactional_id, batches[0], api_version)
            except KafkaError as e:  # answered before the log is touched: no log info
                self.broker.metrics.produce_failed(topic)
                return ProduceResult(e.code, error_message=e.message)
            result = self.append_validated(topic, partition, plog, buf, batches, verification_guard=guard)
            self.broker.metrics.produced(topic, len(buf), sum(b.records_count for b in batches))
            return result
        except Exception as e:  # noqa: BLE001 - every failure becomes this partition's error code
            code = error_code_of(e)
            if isinstance(e, KafkaError):  # a refusal the validation chose: one line, no traceback
                log.info("produce refused", topic=topic, partition=partition, error=code.name, reason=str(e))
            elif code == ErrorCode.UNKNOWN_SERVER_ERROR:
                log.exception("append failed", topic=topic, partition=partition)
            self.broker.metrics.produce_failed(topic)
            return ProduceResult(code, log_start_offset=-1 if code in _NO_LOG_INFO_ERRORS else plog.log_start_offset,
                                 error_message=str(e) if str(e) != code.name else None,
                                 record_errors=list(getattr(e, "record_errors", ())))

    def append_validated(
        self, topic: str, partition: int, plog: PartitionLog, buf: bytearray | memoryview, batches: list[rec.BatchInfo],
        verification_guard: object | None = None,
    ) -> ProduceResult:
        now = self.broker.clock.now_ms()
        append_time = plog.config.message_timestamp_type == "LogAppendTime"
        info = plog.append(buf, batches, leader_epoch=self.leader_epoch(topic, partition), now_ms=now,
                           log_append_time=append_time,
                           verify_transactions=verification_guard is not None,
                           verification_guard=verification_guard)
        self.wake(topic, partition)
        self.broker.replication.maybe_increment_hw((topic, partition), plog)  # an ISR of one
        return ProduceResult(
            ErrorCode.NONE, info.first_offset, info.last_offset, info.log_append_time_ms, info.log_start_offset
        )

    def append_internal(self, topic: str, partition: int, batch: bytearray) -> int:
        """Append a batch the broker built itself (internal topics, markers); returns its first
        offset. Raises on failure: internal writers decide how to retry."""
        plog = self.partition_log(topic, partition)
        batches = rec.validate_batches(batch)
        now = self.broker.clock.now_ms()
        info = plog.append(batch, batches, leader_epoch=self.leader_epoch(topic, partition), now_ms=now,
                           log_append_time=False)
        self.wake(topic, partition)
        self.broker.replication.maybe_increment_hw((topic, partition), plog)
        return info.first_offset

    # --- fetch -----------------------------------------------------------------------------

    def read(
        self,
        topic: str,
        partition: int,
        fetch_offset: int,
        max_bytes: int,
        isolation_level: int,
        min_one_message: bool,
        current_leader_epoch: int = -1,
        leader_only: bool = True,
    ) -> FetchPartitionResult:
        """A consumer's read, up to the high watermark (the LSO for read_committed) of this
        broker's replica: the leader's, or with ``leader_only`` false a follower's (KIP-392)."""
        try:
            plog = self.partition_log(topic, partition)
            self.check_leader_epoch(topic, partition, current_leader_epoch)
            if leader_only:
                plog = self.leader_log(topic, partition)
            committed = isolation_level == ISOLATION_READ_COMMITTED
            hw = plog.high_watermark
            lso = last_stable_offset(plog)
            upper = lso if committed else hw
            result = plog.read(fetch_offset, max_bytes, upper, min_one_message, include_aborted_txns=committed,
                               zero_copy=True)
            return FetchPartitionResult(
                ErrorCode.NONE, hw, lso, plog.log_start_offset, result.records, result.aborted_txns
            )
        except Exception as e:  # noqa: BLE001
            code = error_code_of(e)
            if code == ErrorCode.UNKNOWN_SERVER_ERROR:
                log.exception("read failed", topic=topic, partition=partition)
            self.broker.metrics.fetch_failed(topic)
            # Kafka answers an errored partition with unknown (-1) offsets and no records; one
            # it does not host is built by KafkaApis with an empty (not null) aborted list.
            return FetchPartitionResult(code, aborted=[] if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION else None,
                                        current_leader=self.current_leader_if(e, topic, partition))

    def read_for_follower(self, replica_id: int, topic: str, partition: int, fetch_offset: int,
                          last_fetched_epoch: int, log_start_offset: int, max_bytes: int,
                          current_leader_epoch: int, min_one_message: bool) -> FetchPartitionResult:
        """A follower's fetch (Partition.fetchRecords with a replica id): its position first (the
        diverging epoch if its log left ours, KIP-320), then what it lacks up to our log end; the
        fetch offset tells the leader what the follower holds (ISR, high watermark)."""
        try:
            plog = self.partition_log(topic, partition)
            self.check_leader_epoch(topic, partition, current_leader_epoch)
            plog = self.leader_log(topic, partition)
            if last_fetched_epoch >= 0:
                epoch, end = plog.end_offset_for_epoch(last_fetched_epoch)
                if epoch < last_fetched_epoch or end < fetch_offset:
                    return FetchPartitionResult(ErrorCode.NONE, plog.high_watermark, plog.last_stable_offset,
                                                plog.log_start_offset, b"", diverging_epoch=(epoch, end))
            if fetch_offset > plog.log_end_offset or fetch_offset < plog.log_start_offset:
                return FetchPartitionResult(ErrorCode.OFFSET_OUT_OF_RANGE, -1, -1, plog.log_start_offset)
            self.broker.replication.follower_fetched(topic, partition, replica_id, fetch_offset, log_start_offset, plog)
            result = plog.read(fetch_offset, max_bytes, plog.log_end_offset, min_one_message, zero_copy=True)
            return FetchPartitionResult(ErrorCode.NONE, plog.high_watermark, plog.last_stable_offset,
                                        plog.log_start_offset, result.records)
        except Exception as e:  # noqa: BLE001
            code = error_code_of(e)
            if code == ErrorCode.UNKNOWN_SERVER_ERROR:
                log.exception("follower read failed", topic=topic, partition=partition, replica=replica_id)
            return FetchPartitionResult(code)

    def wait_for_data(self, partitions: Iterable[tuple[str, int]], timeout: float) -> asyncio.Future:
        """A future resolved by the next append to any of ``partitions`` (or by the timeout)."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        keys = list(partitions)
        for key in keys:
            self._waiters.setdefault(key, set()).add(fut)

        def cleanup(_: asyncio.Future) -> None:
            handle.cancel()
            for key in keys:
                waiters = self._waiters.get(key)
                if waiters is not None:
                    waiters.discard(fut)
                    if not waiters:
                        del self._waiters[key]

        def expire() -> None:
            if not fut.done():
                fut.set_result(None)

        handle = self.broker.wire_clock.call_later(timeout, expire)
        fut.add_done_callback(cleanup)
        return fut

    def wake(self, topic: str, partition: int) -> None:
        waiters = self._waiters.get((topic, partition))
        if waiters:
            for fut in list(waiters):
                if not fut.done():
                    fut.set_result(None)

    def wake_all(self) -> None:
        for waiters in list(self._waiters.values()):
            for fut in list(waiters):
                if not fut.done():
                    fut.set_result(None)


_TOPIC_CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}  # "producer": as sent


def _in_topic_codec(buf: bytearray | memoryview, batches: list[rec.BatchInfo],
                    config: LogConfig) -> tuple[bytearray | memoryview, list[rec.BatchInfo]]:
    """The batch in the topic's ``compression.type`` (LogValidator recompresses when it is not
    ``producer`` and differs from the batch's codec), at the topic's level for that codec."""
    target = _TOPIC_CODECS.get(config.compression_type)
    if target is None or target == batches[0].compression:
        return buf, batches
    level = {1: config.compression_gzip_level, 3: config.compression_lz4_level,
             4: config.compression_zstd_level}.get(target)
    rebuilt = rebuild_batch_with_codec(batches[0], decode_records(buf), target, level)
    return rebuilt, rec.validate_batches(rebuilt)


def last_stable_offset(plog: PartitionLog) -> int:
    """The LSO: the first offset of the earliest open transaction, else the high watermark."""
    return plog.last_stable_offset
