"""The marker channel: COMMIT/ABORT markers from the coordinator to the partition leaders, then
the Complete* write (Kafka's TransactionMarkerChannelManager + completion handler).

``MarkerChannel`` is the transport: one ``send`` is one WriteTxnMarkers round trip to whoever
leads the partitions, answering an error code per partition, and ``leader_known`` says whether a
partition still has a leader. The broker injects its single-node transport
(``broker.replica.txn_markers.InProcessMarkerChannel``, which runs the WriteTxnMarkers handler's own
leader path); a remote channel (a real WriteTxnMarkers request to another broker) could replace
it without touching the coordinator.

``TransactionMarkerManager`` owns delivery: every partition of the transaction gets its marker,
retried with backoff until the leader acknowledges it (a deleted topic's partitions are
skipped, as Kafka skips partitions without a leader); then CompleteCommit/CompleteAbort is
written to ``__transaction_state``, retried while the log is unavailable. The pending Complete*
state keeps new requests for the id at CONCURRENT_TRANSACTIONS until then.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import structlog

from coordinator.txn.state import TopicPartition, TransactionMetadata, TransactionState, TxnTransitMetadata
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from coordinator.runtime import CoordinatorEnv, TransactionObserver
    from coordinator.txn.state_manager import TransactionStateManager

log = structlog.get_logger(__name__)

RETRY_BACKOFF_S = 0.02
RETRY_BACKOFF_MAX_S = 1.0
# Test only: ``test.txn.stop.before.markers=true`` parks commit markers forever once PrepareCommit
# is durable (and EndTxn answered), so a crash test can kill -9 the broker at exactly that point.
TEST_STOP_BEFORE_MARKERS = "test.txn.stop.before.markers"

# Per-partition answers after which the marker is done (or pointless), as Kafka's handler decides.
_DONE = {ErrorCode.NONE, ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT, ErrorCode.UNSUPPORTED_VERSION}
# The producer or coordinator epoch moved on: this transaction's markers can be dropped.
_ABANDON = {ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED}


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """One WriteTxnMarkers entry."""

    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    transaction_version: int
    partitions: tuple[TopicPartition, ...]


class MarkerChannel(Protocol):
    async def send(self, marker: TxnMarker) -> dict[TopicPartition, ErrorCode]:
        """Write ``marker`` to each of its partitions' leaders; one attempt, an error per partition."""
        ...

    def leader_known(self, tp: TopicPartition) -> bool:
        """False for a partition that no longer exists (its marker is skipped, as Kafka skips
        partitions without a leader)."""
        ...


class TransactionMarkerManager:
    def __init__(self, env: CoordinatorEnv, state_manager: TransactionStateManager, channel: MarkerChannel,
                 observer: TransactionObserver | None = None) -> None:
        self.env = env
        self.state_manager = state_manager
        self.channel = channel
        self.observer = observer  # told of each round of markers (the broker's inspector), if any
        self.stop_before_commit_markers = str(env.config.get(TEST_STOP_BEFORE_MARKERS) or "").lower() == "true"
        self._tasks: set[asyncio.Task] = set()
        self.closed = False

    def add_txn_markers_to_send(
        self, coordinator_epoch: int, commit: bool, metadata: TransactionMetadata, complete: TxnTransitMetadata
    ) -> None:
        """Start delivering the markers of a transaction whose Prepare* is durable."""
        task = asyncio.create_task(self._deliver(coordinator_epoch, commit, metadata, complete),
                                   name=f"txn-markers-{metadata.transactional_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def on_loaded_prepared(self, coordinator_epoch: int, metadata: TransactionMetadata) -> None:
        """A Prepare* transaction found while loading the log: finish it (Kafka does the same)."""
        commit = metadata.state == TransactionState.PREPARE_COMMIT
        log.info("resuming transaction markers after load", transactional_id=metadata.transactional_id,
                 state=metadata.state.state_name, partitions=sorted(metadata.topic_partitions))
        self.add_txn_markers_to_send(coordinator_epoch, commit, metadata, metadata.prepare_complete(self.env.clock.now_ms()))

    def _still_owned(self, coordinator_epoch: int, metadata: TransactionMetadata) -> bool:
        code, found = self.state_manager.get_transaction_state(metadata.transactional_id)
        return code == ErrorCode.NONE and found is not None and found[0] == coordinator_epoch and found[1] is metadata

    async def _deliver(
        self, coordinator_epoch: int, commit: bool, metadata: TransactionMetadata, complete: TxnTransitMetadata
    ) -> None:
        txn_id = metadata.transactional_id
        if commit and self.stop_before_commit_markers:
            log.warning("TEST HOOK test.txn.stop.before.markers: PrepareCommit is durable, markers are withheld",
                        transactional_id=txn_id, producer_id=metadata.producer_id,
                        partitions=sorted(metadata.topic_partitions))
            await asyncio.Event().wait()
        backoff = RETRY_BACKOFF_S
        while True:
            if self.closed or not self._still_owned(coordinator_epoch, metadata):
                return
            pending: list[TopicPartition] = []
            for tp in sorted(metadata.topic_partitions):
                if not self.channel.leader_known(tp):
                    log.info("skipping marker for a partition that no longer exists", transactional_id=txn_id,
                             topic=tp[0], partition=tp[1])
                    metadata.remove_partition(tp)
                else:
                    pending.append(tp)
            if not pending:
                break
            marker = TxnMarker(metadata.producer_id, metadata.producer_epoch, commit, coordinator_epoch,
                               metadata.client_transaction_version, tuple(pending))
            try:
                results = await self.channel.send(marker)
            except Exception:  # noqa: BLE001 - a transport failure is retried like any other
                log.exception("sending transaction markers failed", transactional_id=txn_id)
                results = {tp: ErrorCode.NETWORK_EXCEPTION for tp in pending}
            if self.observer is not None:
                self.observer.markers_answered(txn_id, marker.producer_id, marker.producer_epoch, commit,
                                               {tp: results.get(tp, ErrorCode.NETWORK_EXCEPTION) for tp in pending})
            retry = False
            for tp in pending:
                code = results.get(tp, ErrorCode.NETWORK_EXCEPTION)
                if code in _DONE:
                    metadata.remove_partition(tp)
                    self.env.metrics.marker_written("COMMIT" if commit else "ABORT")
                elif code in _ABANDON:
                    log.warning("transaction markers abandoned: the epoch moved on", transactional_id=txn_id,
                                topic=tp[0], partition=tp[1], error=code.name)
                    return
                else:
                    retry = True
                    self.env.metrics.marker_retry()
                    log.info("transaction marker not written, retrying", transactional_id=txn_id, topic=tp[0],
                             partition=tp[1], error=code.name)
            if not retry and not metadata.topic_partitions:
                break
            await self.env.clock.sleep(backoff)
            backoff = min(backoff * 2, RETRY_BACKOFF_MAX_S)
        await self._write_completion(coordinator_epoch, metadata, complete)

    async def _write_completion(
        self, coordinator_epoch: int, metadata: TransactionMetadata, complete: TxnTransitMetadata
    ) -> None:
        """Complete* after every marker; retried while the log answers COORDINATOR_NOT_AVAILABLE."""
        backoff = RETRY_BACKOFF_S
        while not self.closed:
            error = await self.state_manager.append_transaction_to_log(
                metadata.transactional_id, coordinator_epoch, complete,
                retry_on_error=lambda code: code == ErrorCode.COORDINATOR_NOT_AVAILABLE,
            )
            if error == ErrorCode.NONE:
                state = complete.txn_state.state_name
                log.info("transaction completed", transactional_id=metadata.transactional_id,
                         producer_id=complete.producer_id, producer_epoch=complete.producer_epoch, state=state)
                if complete.txn_start_timestamp > 0:
                    self.env.metrics.txn_completed(state, (self.env.clock.now_ms() - complete.txn_start_timestamp) / 1000)
                return
            if error != ErrorCode.COORDINATOR_NOT_AVAILABLE:
                log.info("not writing the transaction completion", transactional_id=metadata.transactional_id,
                         error=error.name)
                return
            await self.env.clock.sleep(backoff)
            backoff = min(backoff * 2, RETRY_BACKOFF_MAX_S)

    async def close(self) -> None:
        self.closed = True
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

