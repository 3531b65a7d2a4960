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
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import structlog

from coordinator.txn.verification import verify_produce
from protocol import records as rec
from protocol.compression import CompressionError, DecompressedTooLarge
from protocol.errors import ErrorCode, KafkaError
from protocol.record_codec import decode_records, rebuild_batch_with_codec
from protocol.record_validation import check_compressed_records, check_records, record_errors_message
from storage.file_region import FileRegion
from storage.producer_state import AppendOrigin, ProducerStateLogListener

if TYPE_CHECKING:
    from broker.broker import Broker
    from storage.log import PartitionLog
    from storage.log_config import LogConfig

log = structlog.get_logger(__name__)

LEADER_EPOCH = 0  # a single node that has always led every partition
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
# ReplicaManager.appendToLocalLog answers these with UNKNOWN_LOG_APPEND_INFO (log start -1).
_NO_LOG_INFO_ERRORS = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.MESSAGE_TOO_LARGE,
    ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.CORRUPT_MESSAGE, ErrorCode.KAFKA_STORAGE_ERROR,
})
ISOLATION_READ_COMMITTED = 1
MIN_DECOMPRESSED_LIMIT = 64 * 1024 * 1024
DECOMPRESSED_LIMIT_FACTOR = 16  # x max.message.bytes


@dataclass(slots=True)
class ProduceResult:
    error: ErrorCode = ErrorCode.NONE
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    error_message: str | None = None
    record_errors: list[tuple[int, str | None]] = field(default_factory=list)


@dataclass(slots=True)
class FetchPartitionResult:
    error: ErrorCode
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: bytes | memoryview | FileRegion | None = None
    aborted: list[tuple[int, int]] | None = None


def error_code_of(exc: BaseException) -> ErrorCode:
    if isinstance(exc, KafkaError):
        return exc.code
    code = getattr(exc, "error_code", None)
    if code is not None:
        return ErrorCode(code)
    return ErrorCode.UNKNOWN_SERVER_ERROR


class ReplicaManager:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.log_manager = broker.log_manager
        # Fetch waiters: one future per parked Fetch, registered under each partition it reads.
        self._waiters: dict[tuple[str, int], set[asyncio.Future]] = {}

    # --- lookup -----------------------------------------------------------------------------

    def partition_log(self, topic: str, partition: int) -> PartitionLog:
        plog = self.log_manager.get(topic, partition)
        if plog is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        return plog

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
        transactional_id: str | None = None,
        internal: bool = False,
    ) -> ProduceResult:
        """Validate and append one partition's payload from a Produce request.

        Two phases, as in Kafka: request-level checks (KafkaApis / ProduceRequest.validateRecords)
        and the log-level ones (LogValidator, producer state). Errors answer log_start_offset -1,
        except log-level errors outside ReplicaManager.appendToLocalLog's "unknown append info"
        list (sequence, epoch, transaction errors), which carry the partition's log start offset.
        """
        try:
            plog = self.partition_log(topic, partition)
            if topic in INTERNAL_TOPICS and not internal:
                raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Cannot append to internal topic {topic}")
            buf = self._validate_request_records(records, api_version)
        except KafkaError as e:
            self.broker.metrics.produce_failed(topic)
            return ProduceResult(e.code, error_message=e.message)
        try:
            batches = self._validate(buf, plog)
            buf, batches = _in_topic_codec(buf, batches, plog.config)
            try:
                # KIP-890: a transactional batch needs its partition in the producer's transaction.
                guard = verify_produce(self.broker, plog, transactional_id, batches[0], api_version)
            except KafkaError as e:  # answered before the log is touched: no log info
                self.broker.metrics.produce_failed(topic)
                return ProduceResult(e.code, error_message=e.message)
            if guard is None:
                result = self.append_validated(topic, partition, plog, buf, batches)
            else:
                with ProducerStateLogListener.of(plog).appending(
                    AppendOrigin.CLIENT, verify_transactions=True, verification_guard=guard
                ):
                    result = self.append_validated(topic, partition, plog, buf, batches)
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

    @staticmethod
    def _validate_request_records(records: bytes | memoryview | None, api_version: int) -> bytearray | memoryview:
        """ProduceRequest.validateRecords: exactly one complete magic-2 batch (a trailing partial
        batch is ignored, as Kafka's batch iterator stops there), zstd only from v7."""
        if records is None or len(records) == 0:
            raise KafkaError(ErrorCode.INVALID_RECORD, "Produce request has no records for the partition")
        complete = []
        for pos, size in rec.iter_batch_positions(records):
            if size - rec.LOG_OVERHEAD < 14:  # LegacyRecord.RECORD_OVERHEAD_V0
                raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"Record size {size - rec.LOG_OVERHEAD} is less than the "
                                                            "minimum record overhead (14)")
            complete.append((pos, size))
        if complete and records[complete[0][0] + rec.MAGIC_OFFSET] != 2:
            raise KafkaError(
                ErrorCode.INVALID_RECORD,
                f"Produce requests with version {api_version} are only allowed to contain record batches with magic version 2",
            )
        if len(complete) != 1:
            raise KafkaError(
                ErrorCode.INVALID_RECORD,
                f"Produce requests with version {api_version} are only allowed to contain exactly one record batch",
            )
        size = complete[0][1]
        if size >= rec.HEADER_SIZE and api_version < 7 and \
                rec.ATTRS.unpack_from(records, 21)[0] & rec.COMPRESSION_MASK == 4:
            raise KafkaError(
                ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                "Produce requests with version below 7 are not allowed to use ZStandard compression",
            )
        if isinstance(records, memoryview) and not records.readonly:
            return records[:size]  # a slice of the request frame: offsets are patched in place
        return bytearray(records[:size])

    def _validate(self, buf: bytearray, plog: PartitionLog) -> list[rec.BatchInfo]:
        """UnifiedLog.analyzeAndValidateRecords (size, then structure and CRC) and LogValidator
        (offsets and count, control records, every record read back, keys on compacted topics)."""
        max_size = plog.config.max_message_bytes
        if len(buf) > max_size:
            raise KafkaError(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"The record batch size in the append to {plog.topic}-{plog.partition} is {len(buf)} bytes "
                f"which exceeds the maximum configured value of {max_size}.",
            )
        try:
            batches = rec.validate_batches(buf)
        except rec.InvalidBatch as e:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, str(e)) from None
        batch = batches[0]
        if batch.compression > 4:  # CompressionType.forId's IllegalArgumentException: unexpected in Kafka
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"Unknown compression type id: {batch.compression}")
        try:
            rec.check_offsets_and_count(batch)
        except rec.InvalidRecord as e:
            raise KafkaError(ErrorCode.INVALID_RECORD, str(e)) from None
        if batch.is_control:
            raise KafkaError(ErrorCode.INVALID_RECORD, "Clients are not allowed to write control records")
        keyless: list[int] | None = [] if plog.config.compact else None
        _check_records(buf, batch, decompressed_limit(max_size), keyless)
        if keyless:  # LogValidator.validateKey
            message = (f"Compacted topic cannot accept message without key in topic partition "
                       f"{plog.topic}-{plog.partition}")
            errors: list[tuple[int, str | None]] = [(i, message) for i in keyless]
            e = KafkaError(ErrorCode.INVALID_RECORD, record_errors_message(errors))
            e.record_errors = errors
            raise e
        return batches

    def append_validated(
        self, topic: str, partition: int, plog: PartitionLog, buf: bytearray, batches: list[rec.BatchInfo]
    ) -> ProduceResult:
        now = int(time.time() * 1000)
        append_time = plog.config.message_timestamp_type == "LogAppendTime"
        info = plog.append(buf, batches, leader_epoch=LEADER_EPOCH, now_ms=now, log_append_time=append_time)
        self.wake(topic, partition)
        return ProduceResult(
            ErrorCode.NONE, info.first_offset, info.log_append_time_ms, info.log_start_offset
        )

    def append_internal(self, topic: str, partition: int, batch: bytearray) -> int:
        """Append a batch the broker built itself (internal topics, markers); returns its first
        offset. Raises on failure: internal writers decide how to retry."""
        plog = self.partition_log(topic, partition)
        batches = rec.validate_batches(batch)
        now = int(time.time() * 1000)
        info = plog.append(batch, batches, leader_epoch=LEADER_EPOCH, now_ms=now, log_append_time=False)
        self.wake(topic, partition)
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
    ) -> FetchPartitionResult:
        try:
            plog = self.partition_log(topic, partition)
            self._check_leader_epoch(current_leader_epoch)
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
            return FetchPartitionResult(code, aborted=[] if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION else None)

    @staticmethod
    def _check_leader_epoch(current_leader_epoch: int) -> None:
        if current_leader_epoch < 0:
            return
        if current_leader_epoch > LEADER_EPOCH:
            raise KafkaError(ErrorCode.UNKNOWN_LEADER_EPOCH)
        if current_leader_epoch < LEADER_EPOCH:
            raise KafkaError(ErrorCode.FENCED_LEADER_EPOCH)

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

        handle = loop.call_later(timeout, lambda: fut.done() or fut.set_result(None))
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


def decompressed_limit(max_message_bytes: int) -> int:
    """The most a produced batch may decompress to: Kafka has no such bound (its validator streams
    records on one of many request threads); here one event loop serves every client, so a batch
    that inflates past this is refused (MESSAGE_TOO_LARGE) rather than read for seconds."""
    return max(MIN_DECOMPRESSED_LIMIT, DECOMPRESSED_LIMIT_FACTOR * max_message_bytes)


def _check_records(buf: bytearray, batch: rec.BatchInfo, limit: int, keyless: list[int] | None) -> None:
    """Every record read back as LogValidator reads it (streaming a compressed batch through its
    codec), so that nothing a consumer could not read is stored. A codec that cannot decompress
    the payload is an unexpected error in Kafka (UNKNOWN_SERVER_ERROR); records that do not fit
    are INVALID_RECORD."""
    try:
        if batch.compression == 0:
            check_records(buf, rec.HEADER_SIZE, len(buf), batch.records_count, keyless)
        else:
            payload = memoryview(buf)[rec.HEADER_SIZE:]
            check_compressed_records(batch.compression, payload, batch.records_count, limit, keyless)
    except DecompressedTooLarge as e:
        raise KafkaError(ErrorCode.MESSAGE_TOO_LARGE, f"The record batch {e}") from None
    except CompressionError as e:
        raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"cannot decompress the record batch: {e}") from None
    except rec.InvalidInnerOffset as e:
        raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, str(e)) from None
    except rec.InvalidRecord as e:
        raise KafkaError(ErrorCode.INVALID_RECORD, str(e)) from None


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
    return ProducerStateLogListener.of(plog).last_stable_offset(plog)
