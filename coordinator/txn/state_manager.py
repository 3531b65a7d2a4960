"""TransactionStateManager: ``__transaction_state`` and the cache of transaction metadata.

- Placement: a transactional id lives on partition ``abs(javaStringHashCode(id)) %
  transaction.state.log.num.partitions`` (default 50). The topic is compacted, uncompressed,
  and created on first use (FindCoordinator or InitProducerId), as Kafka creates it.
- Writes (``append_transaction_to_log``): one uncompressed batch holding the TransactionLogKey /
  TransactionLogValue record, appended before the transition is applied and the request is
  answered. Kafka writes this topic with acks=-1, which on one node means the local log (the page
  cache): a kill -9 loses nothing, and fsync follows the topic's ``flush.messages`` /
  ``log.flush.*`` settings like every other log (set ``flush.messages=1`` on the topic to fsync
  each transition; the write then waits for it).
- Value version: the finalized ``transaction.version`` (broker.config.features; the broker property is
  its level at first start, UpdateFeatures changes it) 0
  writes TransactionLogValue v0, 1 and 2 write v1 (flexible, with the previous/next producer
  ids and the client's transaction version as tagged fields); loading reads both.
- Loading: at start-up every partition is replayed (last record per id wins, a tombstone
  removes it) in a background task; until a partition is loaded its ids answer
  COORDINATOR_LOAD_IN_PROGRESS. Loaded PrepareCommit/PrepareAbort transactions are handed to
  the marker channel, Ongoing ones keep their start timestamp, so they time out as before.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import structlog

from coordinator.group.java_hash import partition_for
from coordinator.txn import records as txnrec
from coordinator.txn.state import (
    TV_2,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
)
from protocol import records as batches
from protocol.errors import ErrorCode, KafkaError
from protocol.record_codec import decode_records
from storage.log_config import segment_bytes_config

if TYPE_CHECKING:
    from coordinator.runtime import CoordinatorEnv, PartitionWriter, TransactionObserver

log = structlog.get_logger(__name__)

TRANSACTION_VERSION = "transaction.version"  # the feature
TRANSACTION_STATE_TOPIC = "__transaction_state"
LOAD_READ_BYTES = 5 * 1024 * 1024  # transaction.state.log.load.buffer.size
INVALID_REGULAR_EXPRESSION = 128  # Errors.INVALID_REGULAR_EXPRESSION (KIP-1152)
# transaction.version levels this broker can finalize (TransactionVersion TV_0..TV_2).
MAX_TRANSACTION_VERSION = TV_2

OnPrepared = Callable[[int, TransactionMetadata], None]



def transaction_version_level(config) -> int:
    """The finalized ``transaction.version`` (our broker property; Kafka finalizes it at format
    time). Out of range is a start-up error, as kafka-storage/kafka-features refuse it."""
    level = int(config.get("transaction.version"))
    if not 0 <= level <= MAX_TRANSACTION_VERSION:
        raise ValueError(
            f"Invalid value {level} for configuration transaction.version: supported levels are 0 to "
            f"{MAX_TRANSACTION_VERSION}"
        )
    return level


def map_append_error(code: ErrorCode) -> ErrorCode:
    """The log-append error a coordinator answers with (appendTransactionToLog's mapping)."""
    if code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return code


class TransactionStateManager:
    def __init__(self, env: CoordinatorEnv, writer: PartitionWriter,
                 observer: TransactionObserver | None = None) -> None:
        self.env = env
        self.writer = writer
        self.observer = observer  # told of each durable transition (the broker's inspector), if any
        cfg = env.config
        self.num_partitions = int(cfg.get("transaction.state.log.num.partitions"))
        self.segment_bytes = int(cfg.get("transaction.state.log.segment.bytes"))
        self.max_timeout_ms = int(cfg.get("transaction.max.timeout.ms"))
        self.transactional_id_expiration_ms = int(cfg.get("transactional.id.expiration.ms"))
        transaction_version_level(cfg)  # an out-of-range property is a start-up error
        # partition -> {transactional id -> metadata}; a partition present here is owned and loaded.
        self.cache: dict[int, dict[str, TransactionMetadata]] = {}
        self.coordinator_epochs: dict[int, int] = {}
        self.loading: set[int] = set()
        self.shutting_down = False

    @property
    def transaction_version(self) -> int:
        """TransactionStateManager.transactionVersionLevel(): the finalized ``transaction.version``
        (UpdateFeatures changes it), read at each use: the log value version (v1 from TV1) and the
        version the coordinator's own aborts (timeouts, fencing) run with."""
        return self.env.feature_level(TRANSACTION_VERSION)

    # --- placement and the topic --------------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    def topic_exists(self) -> bool:
        return self.writer.partitions(TRANSACTION_STATE_TOPIC) is not None

    def ensure_topic(self) -> None:
        """Create ``__transaction_state`` on first use; every partition starts loaded and empty."""
        if self.topic_exists():
            return
        try:
            self.writer.ensure_internal_topic(
                TRANSACTION_STATE_TOPIC,
                self.num_partitions,
                {"cleanup.policy": "compact", "compression.type": "uncompressed",
                 **segment_bytes_config(self.segment_bytes)},
            )
        except Exception as e:
            log.exception("could not create the transaction state topic")
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, str(e)) from None
        if self.env.elected:  # each partition is loaded when this broker becomes its leader
            return
        for p in range(self.num_partitions):
            self.cache.setdefault(p, {})
            self.coordinator_epochs.setdefault(p, self._leader_epoch(p))

    def _leader_epoch(self, partition: int) -> int:
        plog = self.writer.log(TRANSACTION_STATE_TOPIC, partition)
        return plog.leader_epoch if plog is not None else 0

    def validate_transaction_timeout_ms(self, txn_timeout_ms: int) -> bool:
        return 0 < txn_timeout_ms <= self.max_timeout_ms

    # --- the cache ----------------------------------------------------------------------------

    def get_transaction_state(
        self, transactional_id: str
    ) -> tuple[ErrorCode, tuple[int, TransactionMetadata] | None]:
        """(NONE, (coordinator epoch, metadata) or None), or the error to answer."""
        return self._get_and_maybe_add(transactional_id, None)

    def put_transaction_state_if_not_exists(
        self, metadata: TransactionMetadata
    ) -> tuple[ErrorCode, tuple[int, TransactionMetadata] | None]:
        return self._get_and_maybe_add(metadata.transactional_id, metadata)

    def _get_and_maybe_add(
        self, transactional_id: str, created: TransactionMetadata | None
    ) -> tuple[ErrorCode, tuple[int, TransactionMetadata] | None]:
        partition = self.partition_for(transactional_id)
        if partition in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, None
        entries = self.cache.get(partition)
        if entries is None:
            return ErrorCode.NOT_COORDINATOR, None
        metadata = entries.get(transactional_id)
        if metadata is None and created is not None:
            metadata = entries.setdefault(transactional_id, created)
        if metadata is None:
            return ErrorCode.NONE, None
        return ErrorCode.NONE, (self.coordinator_epochs.get(partition, 0), metadata)

    def all_metadata(self) -> Iterable[tuple[int, TransactionMetadata]]:
        for partition, entries in self.cache.items():
            epoch = self.coordinator_epochs.get(partition, 0)
            for metadata in list(entries.values()):
                yield epoch, metadata

    # --- writes -------------------------------------------------------------------------------

    async def write_records(self, partition: int, records: list[tuple[bytes, bytes | None]]) -> ErrorCode:
        """Append one batch to ``__transaction_state-partition`` (the log flushes it per its
        flush settings, synchronously when ``flush.messages`` is 1)."""
        return (await self._write_records(partition, records))[0]

    async def _write_records(self, partition: int, records: list[tuple[bytes, bytes | None]]) -> tuple[ErrorCode, int]:
        """(error, offset of the batch's last record; -1 when not written)."""
        batch = batches.build_batch(records, timestamp=self.env.clock.now_ms())
        try:
            result = self.writer.append(TRANSACTION_STATE_TOPIC, partition, batch)
        except KafkaError as e:
            return map_append_error(e.code), -1
        except Exception:  # noqa: BLE001 - a storage failure is a coordinator error, never a crash
            log.exception("transaction log append failed", partition=partition)
            return ErrorCode.NOT_COORDINATOR, -1
        # answered once replicated (acks=all), so a new coordinator finds what this one said
        code = await self.writer.committed(TRANSACTION_STATE_TOPIC, partition, result.last_offset + 1)
        return map_append_error(code), result.last_offset

    async def append_transaction_to_log(
        self,
        transactional_id: str,
        coordinator_epoch: int,
        transit: TxnTransitMetadata,
        retry_on_error: Callable[[ErrorCode], bool] = lambda _code: False,
    ) -> ErrorCode:
        """Write a prepared transition, then apply it (or drop the pending state).

        Returns the error the request must answer; NONE means the metadata now holds ``transit``.
        """
        partition = self.partition_for(transactional_id)
        key = txnrec.encode_key(transactional_id)
        value = txnrec.encode_value(transit, self.transaction_version)
        error, offset = await self._write_records(partition, [(key, value)])
        if error != ErrorCode.NONE:
            log.debug("transaction log append failed", transactional_id=transactional_id, error=error.name)
        code, found = self.get_transaction_state(transactional_id)
        if error == ErrorCode.NONE:
            if code != ErrorCode.NONE:
                # The partition was unloaded meanwhile: another coordinator owns the id now.
                return ErrorCode.NOT_COORDINATOR
            if found is None or found[0] != coordinator_epoch:
                return ErrorCode.NOT_COORDINATOR
            metadata = found[1]
            if metadata.pending_state is None:
                return ErrorCode.NOT_COORDINATOR
            previous = metadata.state
            metadata.complete_transition_to(transit)
            if self.observer is not None:
                self.observer.transaction_state_changed(transactional_id, int(previous), transit, partition,
                                                        coordinator_epoch, offset)
            return ErrorCode.NONE
        if (code == ErrorCode.NONE and found is not None and found[0] == coordinator_epoch
                and not retry_on_error(error)):
            # No transition happened: let the next request try again.
            found[1].pending_state = None
        return error

    # --- loading -------------------------------------------------------------------------------

    def start_loading(self) -> list[int]:
        """Mark every existing partition as loading; ``load_partition`` each afterwards (a single
        node; one of several brokers loads a partition when elected its leader)."""
        if not self.topic_exists() or self.env.elected:
            return []
        parts = list(range(self.writer.partitions(TRANSACTION_STATE_TOPIC) or 0))
        self.loading.update(parts)
        return parts

    def load_partition(self, partition: int, on_prepared: OnPrepared) -> int:
        """Replay one partition into the cache (TransactionStateManager.loadTransactionMetadata)."""
        loaded: dict[str, TransactionMetadata] = {}
        count = 0
        plog = self.writer.log(TRANSACTION_STATE_TOPIC, partition)
        if plog is not None:
            offset = plog.log_start_offset
            end = plog.log_end_offset
            while offset < end and not self.shutting_down:
                result = plog.read(offset, LOAD_READ_BYTES, end, True)
                data = result.records
                assert isinstance(data, memoryview)  # not zero_copy: never a FileRegion
                if not data:
                    break
                next_offset = offset
                for pos, size in batches.iter_batch_positions(data):
                    info = batches.read_header(data, pos)
                    next_offset = info.next_offset
                    if info.is_control:
                        continue
                    for record in decode_records(data[pos : pos + size]):
                        count += 1
                        self._replay(loaded, partition, record.offset, record.key, record.value)
                if next_offset <= offset:
                    break
                offset = next_offset
        epoch = plog.leader_epoch if plog is not None else 0
        self.cache[partition] = loaded
        self.coordinator_epochs[partition] = epoch
        self.loading.discard(partition)
        for metadata in loaded.values():
            if metadata.state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
                on_prepared(epoch, metadata)
        return count

    def unload_partition(self, partition: int) -> int:
        """TransactionStateManager.removeTransactionsForTxnTopicPartition: another broker leads
        the partition now; its ids answer NOT_COORDINATOR and pending markers stop here (the new
        coordinator resumes them). Returns how many ids were dropped."""
        self.loading.discard(partition)
        self.coordinator_epochs.pop(partition, None)
        return len(self.cache.pop(partition, {}))

    @staticmethod
    def _replay(
        loaded: dict[str, TransactionMetadata], partition: int, offset: int, key: bytes | None, value: bytes | None
    ) -> None:
        try:
            transactional_id = txnrec.decode_key(key)
            v = txnrec.decode_value(value)
        except (txnrec.TxnRecordError, UnicodeDecodeError) as e:
            log.warning("skipping undecodable __transaction_state record", partition=partition, offset=offset,
                        error=str(e))
            return
        if v is None:
            loaded.pop(transactional_id, None)
            return
        try:
            state = TransactionState(v.transaction_status)
        except ValueError:
            log.warning("skipping record with unknown transaction state", partition=partition, offset=offset,
                        status=v.transaction_status)
            return
        # TransactionLog.read: lastProducerEpoch is not stored and comes back as -1.
        loaded[transactional_id] = TransactionMetadata(
            transactional_id, v.producer_id, v.previous_producer_id, v.next_producer_id, v.producer_epoch, -1,
            v.transaction_timeout_ms, state, v.topic_partitions(), v.start_timestamp_ms,
            v.last_update_timestamp_ms, v.client_transaction_version,
        )

    # --- timeouts, expiry, listing -------------------------------------------------------------

    def timed_out_transactions(self, now_ms: int) -> list[tuple[str, int, int]]:
        """(id, producer id, epoch) of Ongoing transactions past their timeout, none pending."""
        out = []
        for _epoch, m in self.all_metadata():
            if m.pending_transition_in_progress or m.state != TransactionState.ONGOING:
                continue
            if not m.is_distributed_two_phase_commit_txn and m.txn_start_timestamp + m.txn_timeout_ms < now_ms:
                out.append((m.transactional_id, m.producer_id, m.producer_epoch))
        return out

    async def remove_expired_transactional_ids(self, now_ms: int | None = None) -> int:
        """Tombstone ids idle for transactional.id.expiration.ms in Empty/Complete* states."""
        now = self.env.clock.now_ms() if now_ms is None else now_ms
        removed = 0
        for partition, entries in list(self.cache.items()):
            epoch = self.coordinator_epochs.get(partition, 0)
            doomed: list[tuple[TransactionMetadata, TxnTransitMetadata]] = []
            for m in list(entries.values()):
                if (
                    m.state.expiration_allowed
                    and not m.pending_transition_in_progress
                    and m.txn_last_update_timestamp <= now - self.transactional_id_expiration_ms
                ):
                    doomed.append((m, m.prepare_dead()))
            if not doomed:
                continue
            error, last = await self._write_records(partition, [(txnrec.encode_key(m.transactional_id), None)
                                                                for m, _ in doomed])
            current = self.cache.get(partition)
            for i, (m, transit) in enumerate(doomed):
                if (
                    error == ErrorCode.NONE
                    and current is not None
                    and self.coordinator_epochs.get(partition) == epoch
                    and m.pending_state == TransactionState.DEAD
                    and m.producer_epoch == transit.producer_epoch
                ):
                    current.pop(m.transactional_id, None)
                    removed += 1
                    log.info("expired transactional id", transactional_id=m.transactional_id)
                    if self.observer is not None:  # the tombstones are one batch, in this order
                        self.observer.transaction_state_changed(m.transactional_id, int(m.state), transit, partition,
                                                                epoch, last - (len(doomed) - 1 - i))
                else:
                    log.warning("failed to remove expired transactional id", transactional_id=m.transactional_id,
                                error=error.name)
                    m.pending_state = None
        return removed

    def list_transaction_states(
        self, producer_ids: set[int], state_names: set[str], duration_ms: int, pattern: str | None,
    ) -> tuple[int, list[str], list[tuple[str, int, str]]]:
        """(error, unknown state filters, [(id, producer id, state name)])."""
        if self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, [], []
        unknown: list[str] = []
        states: set[TransactionState] = set()
        for name in state_names:
            state = TransactionState.from_name(name)
            if state is None:
                unknown.append(name)
            else:
                states.add(state)
        regex = None
        if pattern:
            try:
                regex = re.compile(pattern)
            except re.error:
                return INVALID_REGULAR_EXPRESSION, [], []
        now = self.env.clock.now_ms()
        out = []
        for _epoch, m in self.all_metadata():
            if m.state == TransactionState.DEAD:
                continue
            if producer_ids and m.producer_id not in producer_ids:
                continue
            if states and m.state not in states:
                continue
            if duration_ms >= 0 and now - m.txn_start_timestamp <= duration_ms:
                continue
            if regex is not None and regex.fullmatch(m.transactional_id) is None:
                continue
            out.append((m.transactional_id, m.producer_id, m.state.state_name))
        return ErrorCode.NONE, unknown, out
