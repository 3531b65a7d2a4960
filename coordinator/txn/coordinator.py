"""TransactionCoordinator: the request logic of Kafka 4.3's ``kafka.coordinator.transaction.
TransactionCoordinator``, on the event loop.

Each request reads the id's metadata, prepares a transition (``state.TransactionMetadata``),
awaits its durable write (``state_manager``) and only then answers. Everything up to the first
``await`` is synchronous, so the check-and-prepare step cannot interleave with another request:
that is the role Kafka's ``txnMetadata.inLock`` plays.

Transaction versions: the broker finalizes ``transaction.version`` (our broker property, default
2, advertised in ApiVersions). A client's version comes from its request versions, as Kafka
derives it: TV1 clients (librdkafka, kafka-python, aiokafka, Java against TV<2) send
AddPartitionsToTxn v<=3, AddOffsetsToTxn and EndTxn v<=4, and keep their epoch; TV2 clients
(KIP-890 part 2: Java 4.x, franz-go) add partitions implicitly with Produce v12+ and
TxnOffsetCommit v5+ (``coordinator.txn.verification``) and send EndTxn v5, which bumps the
epoch on every commit/abort (a new producer id once the epoch is exhausted). The coordinator's
own aborts (timeouts, InitProducerId fencing an ongoing transaction) use the server's version,
``state_manager.transaction_version``, as Kafka does.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

import structlog

from coordinator.txn.marker_channel import MarkerChannel, TransactionMarkerManager
from coordinator.txn.state import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    SHORT_MAX,
    TV_0,
    IllegalTransition,
    TopicPartition,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
    is_epoch_exhausted,
    new_metadata,
    supports_epoch_bump,
)
from coordinator.txn.state_manager import TransactionStateManager
from protocol.errors import ErrorCode, KafkaError, error_code_of

if TYPE_CHECKING:
    from coordinator.runtime import CoordinatorEnv, PartitionWriter, TransactionObserver

log = structlog.get_logger(__name__)

S = TransactionState
EndResult = tuple[ErrorCode, int, int]  # error, producer id, producer epoch (TV2 answers them)


class _Prepared:
    """A prepared EndTxn transition (as opposed to an immediate answer)."""

    __slots__ = ("transit", "is_epoch_fence")

    def __init__(self, transit: TxnTransitMetadata, is_epoch_fence: bool) -> None:
        self.transit = transit
        self.is_epoch_fence = is_epoch_fence



class TransactionCoordinator:
    """One per broker; owns every transactional id whose ``__transaction_state`` partition it leads."""

    def __init__(self, env: CoordinatorEnv, writer: PartitionWriter, channel: MarkerChannel,
                 observer: TransactionObserver | None = None) -> None:
        self.env = env
        self.state_manager = TransactionStateManager(env, writer, observer)
        self.markers = TransactionMarkerManager(env, self.state_manager, channel, observer)
        cfg = env.config
        self.abort_interval_ms = int(cfg.get("transaction.abort.timed.out.transaction.cleanup.interval.ms"))
        self.expiry_interval_ms = int(cfg.get("transaction.remove.expired.transaction.cleanup.interval.ms"))
        self.active = False
        self._tasks: list[asyncio.Task] = []

    # --- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Load ``__transaction_state`` in the background (COORDINATOR_LOAD_IN_PROGRESS until
        done), then run the timeout and expiry scans."""
        partitions = self.state_manager.start_loading()
        self.active = True
        self._tasks.append(asyncio.create_task(self._load(partitions), name="txn-state-load"))
        self._tasks.append(asyncio.create_task(self._every(self.abort_interval_ms, self.abort_timed_out_transactions),
                                               name="txn-abort-timed-out"))
        self._tasks.append(asyncio.create_task(
            self._every(self.expiry_interval_ms, self.state_manager.remove_expired_transactional_ids),
            name="txn-expire-ids"))

    async def _load(self, partitions: list[int]) -> None:
        started = time.perf_counter()
        records = 0
        for p in partitions:
            if p not in self.state_manager.loading:
                continue  # resigned before its turn came
            try:
                records += self.state_manager.load_partition(p, self.markers.on_loaded_prepared)
            except Exception:
                log.exception("loading __transaction_state partition failed", partition=p)
                self.state_manager.loading.discard(p)
            await asyncio.sleep(0)
        log.info("transaction coordinator loaded", partitions=len(partitions), records=records,
                 transactional_ids=sum(len(e) for e in self.state_manager.cache.values()),
                 load_ms=round((time.perf_counter() - started) * 1000, 1))

    # --- coordinator partitions moving between brokers ------------------------------------------

    def on_election(self, partition: int, coordinator_epoch: int) -> None:
        """This broker now leads ``partition`` of ``__transaction_state`` (TransactionCoordinator.
        onElection): load it in the background (COORDINATOR_LOAD_IN_PROGRESS meanwhile); the
        coordinator epoch is the partition's leader epoch; Prepare* transactions found get their
        markers again."""
        if partition in self.state_manager.cache and \
                self.state_manager.coordinator_epochs.get(partition) == coordinator_epoch:
            return
        self.state_manager.unload_partition(partition)
        self.state_manager.loading.add(partition)
        self._tasks = [t for t in self._tasks if not t.done()]
        self._tasks.append(asyncio.create_task(self._load([partition]), name=f"txn-state-load-{partition}"))

    def on_resignation(self, partition: int) -> None:
        """Another broker leads ``partition`` now (TransactionCoordinator.onResignation)."""
        dropped = self.state_manager.unload_partition(partition)
        if dropped:
            log.info("transaction state partition unloaded", partition=partition, transactional_ids=dropped)

    async def _every(self, interval_ms: int, fn) -> None:
        interval = max(interval_ms, 10) / 1000
        while True:
            await self.env.clock.sleep(interval)
            try:
                result = fn()
                if asyncio.iscoroutine(result):
                    await result
            except Exception:
                log.exception("transaction coordinator task failed", task=getattr(fn, "__name__", str(fn)))

    async def shutdown(self) -> None:
        self.active = False
        self.state_manager.shutting_down = True
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        await self.markers.close()

    # --- FindCoordinator -----------------------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        return self.state_manager.partition_for(transactional_id)

    def find_coordinator(self, transactional_id: str) -> ErrorCode:
        """This node leads every partition: NONE once ``__transaction_state`` exists."""
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        try:
            self.state_manager.ensure_topic()
        except KafkaError as e:
            return e.code
        return ErrorCode.NONE

    def coordinator_for(self, transactional_id: str) -> tuple[ErrorCode, int]:
        """(error, node id) of the coordinator of ``transactional_id``."""
        code = self.find_coordinator(transactional_id)
        return code, (self.env.node_id if code == ErrorCode.NONE else -1)

    def _generate_producer_id(self) -> int:
        return self.env.generate_producer_id()

    # --- InitProducerId ------------------------------------------------------------------------

    async def handle_init_producer_id(
        self, transactional_id: str | None, transaction_timeout_ms: int, producer_id: int, producer_epoch: int,
        api_version: int,
    ) -> tuple[int, int, int]:
        """(error, producer id, epoch). ``producer_id``/``producer_epoch`` (v3+, KIP-360) are the
        ones the producer has, -1/-1 for none."""
        fail = (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
        if (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH):
            return ErrorCode.INVALID_REQUEST, *fail
        expected = None if producer_id == NO_PRODUCER_ID else (producer_id, producer_epoch)
        if transactional_id is None:
            try:
                return ErrorCode.NONE, self._generate_producer_id(), 0
            except Exception as e:  # noqa: BLE001
                return error_code_of(e), *fail
        if transactional_id == "":
            return ErrorCode.INVALID_REQUEST, *fail
        if not self.state_manager.validate_transaction_timeout_ms(transaction_timeout_ms):
            return ErrorCode.INVALID_TRANSACTION_TIMEOUT, *fail
        code, found = self.state_manager.get_transaction_state(transactional_id)
        if code != ErrorCode.NONE:
            return code, *fail
        if found is None:
            try:
                created = new_metadata(transactional_id, self._generate_producer_id(), transaction_timeout_ms,
                                       self.env.clock.now_ms())
            except Exception as e:  # noqa: BLE001
                return error_code_of(e), *fail
            code, found = self.state_manager.put_transaction_state_if_not_exists(created)
            if code != ErrorCode.NONE or found is None:
                return code, *fail
        coordinator_epoch, metadata = found
        try:
            transit = self._prepare_init_producer_id_transit(transactional_id, transaction_timeout_ms, metadata,
                                                             expected)
        except KafkaError as e:
            return e.code, *fail
        except IllegalTransition:
            log.exception("illegal transaction state on InitProducerId", transactional_id=transactional_id)
            return ErrorCode.UNKNOWN_SERVER_ERROR, *fail
        if transit.txn_state == S.PREPARE_EPOCH_FENCE:
            # Abort the ongoing transaction with the bumped epoch; the client retries on
            # CONCURRENT_TRANSACTIONS and then gets a second bump (or a new producer id).
            error, _, _ = await self._end_transaction(
                transactional_id, transit.producer_id, transit.producer_epoch, False, False,
                self.state_manager.transaction_version,  # not from the client: the server's version
            )
            return (error if error != ErrorCode.NONE else ErrorCode.CONCURRENT_TRANSACTIONS), *fail
        error = await self.state_manager.append_transaction_to_log(transactional_id, coordinator_epoch, transit)
        if error != ErrorCode.NONE:
            log.info("InitProducerId failed", transactional_id=transactional_id, error=error.name)
            return error, *fail
        log.info("initialized transactional id", transactional_id=transactional_id, producer_id=transit.producer_id,
                 producer_epoch=transit.producer_epoch, partition=self.partition_for(transactional_id))
        return ErrorCode.NONE, transit.producer_id, transit.producer_epoch

    def _prepare_init_producer_id_transit(
        self, transactional_id: str, timeout_ms: int, m: TransactionMetadata, expected: tuple[int, int] | None,
    ) -> TxnTransitMetadata:
        def valid_producer_id(pid: int, epoch: int) -> bool:
            # A just-created id, the current id, or a retry across a rotation at epoch exhaustion.
            return (
                m.producer_epoch == NO_PRODUCER_EPOCH
                or pid == m.producer_id
                or (pid == m.prev_producer_id and is_epoch_exhausted(epoch))
            )

        if m.pending_transition_in_progress:
            raise KafkaError(ErrorCode.CONCURRENT_TRANSACTIONS)
        if expected is not None and not valid_producer_id(*expected):
            raise KafkaError(ErrorCode.PRODUCER_FENCED)
        state = m.state
        if state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):
            raise KafkaError(ErrorCode.CONCURRENT_TRANSACTIONS)
        if state in (S.COMPLETE_ABORT, S.COMPLETE_COMMIT, S.EMPTY):
            if m.is_producer_epoch_exhausted and (expected is None or expected[1] == m.producer_epoch):
                try:
                    new_pid = self._generate_producer_id()
                except Exception as e:  # noqa: BLE001
                    raise KafkaError(error_code_of(e)) from None
                return m.prepare_producer_id_rotation(new_pid, timeout_ms, self.env.clock.now_ms(), expected is not None)
            return m.prepare_increment_producer_epoch(timeout_ms, None if expected is None else expected[1], self.env.clock.now_ms())
        if state == S.ONGOING:
            return m.prepare_fence_producer_epoch()
        raise IllegalTransition(
            f"Found transactionalId {transactional_id} with state {state.name}. This is illegal as we should never "
            "have transitioned to this state."
        )

    # --- AddPartitionsToTxn / AddOffsetsToTxn -------------------------------------------------------

    async def handle_add_partitions_to_transaction(
        self, transactional_id: str | None, producer_id: int, producer_epoch: int,
        partitions: set[TopicPartition], client_transaction_version: int = TV_0,
    ) -> ErrorCode:
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        code, found = self.state_manager.get_transaction_state(transactional_id)
        if code != ErrorCode.NONE:
            return code
        if found is None:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        coordinator_epoch, m = found
        if m.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if m.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        if m.pending_transition_in_progress or m.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if m.state == S.ONGOING and partitions <= m.topic_partitions:
            return ErrorCode.NONE  # already there: no write needed
        transit = m.prepare_add_partitions(partitions, self.env.clock.now_ms(), client_transaction_version)
        return await self.state_manager.append_transaction_to_log(transactional_id, coordinator_epoch, transit)

    def handle_verify_partitions_in_transaction(
        self, transactional_id: str | None, producer_id: int, producer_epoch: int, partitions: set[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        """KIP-890 verification (AddPartitionsToTxn verify_only): is each partition in the txn?"""
        if not transactional_id:
            return dict.fromkeys(partitions, ErrorCode.INVALID_REQUEST)
        code, found = self.state_manager.get_transaction_state(transactional_id)
        if code == ErrorCode.NONE and found is None:
            code = ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if code == ErrorCode.NONE and found is not None:
            m = found[1]
            if m.producer_id != producer_id:
                code = ErrorCode.INVALID_PRODUCER_ID_MAPPING
            elif m.producer_epoch != producer_epoch:
                code = ErrorCode.PRODUCER_FENCED
            elif m.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                code = ErrorCode.CONCURRENT_TRANSACTIONS
            else:
                # Pending state is not checked: the partition log does the final check on append.
                return {tp: ErrorCode.NONE if tp in m.topic_partitions else ErrorCode.TRANSACTION_ABORTABLE
                        for tp in partitions}
        return dict.fromkeys(partitions, code)

    # --- EndTxn -------------------------------------------------------------------------------

    async def handle_end_transaction(
        self, transactional_id: str | None, producer_id: int, producer_epoch: int, commit: bool,
        client_transaction_version: int = TV_0,
    ) -> EndResult:
        return await self._end_transaction(transactional_id, producer_id, producer_epoch, commit, True,
                                           client_transaction_version)

    async def _end_transaction(
        self, transactional_id: str | None, producer_id: int, producer_epoch: int, commit: bool,
        is_from_client: bool, client_transaction_version: int,
    ) -> EndResult:
        fail = (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST, *fail
        code, found = self.state_manager.get_transaction_state(transactional_id)
        if code != ErrorCode.NONE:
            return code, *fail
        if found is None:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, *fail
        coordinator_epoch, m = found
        try:
            if supports_epoch_bump(client_transaction_version):
                prepared = self._prepare_end_tv2(m, producer_id, producer_epoch, commit, is_from_client,
                                                 client_transaction_version)
            else:
                prepared = self._prepare_end_tv1(m, producer_id, producer_epoch, commit, is_from_client)
        except IllegalTransition:
            log.exception("illegal transaction state on EndTxn", transactional_id=transactional_id)
            return ErrorCode.UNKNOWN_SERVER_ERROR, *fail
        if not isinstance(prepared, _Prepared):
            return prepared
        transit, is_epoch_fence = prepared.transit, prepared.is_epoch_fence
        error = await self.state_manager.append_transaction_to_log(transactional_id, coordinator_epoch, transit)
        if error != ErrorCode.NONE:
            log.info("EndTxn: the Prepare write failed", transactional_id=transactional_id, error=error.name,
                     commit=commit)
            if is_epoch_fence:
                code, found = self.state_manager.get_transaction_state(transactional_id)
                if code == ErrorCode.NONE and found is not None and found[0] == coordinator_epoch:
                    # The bumped epoch may not be in the log: the next fence must not bump again.
                    found[1].has_failed_epoch_fence = True
            return error, *fail
        # Re-check after the await, then answer and send the markers (sendTxnMarkersCallback).
        code, found = self.state_manager.get_transaction_state(transactional_id)
        if code != ErrorCode.NONE:
            return code, *fail
        if found is None:
            log.error("the coordinator owns the partition but lost the metadata", transactional_id=transactional_id)
            return ErrorCode.UNKNOWN_SERVER_ERROR, *fail
        if found[0] != coordinator_epoch:
            return ErrorCode.NOT_COORDINATOR, *fail
        m = found[1]
        tv2 = supports_epoch_bump(client_transaction_version)
        if m.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, *fail
        if m.producer_epoch != producer_epoch and not (tv2 and m.producer_epoch == producer_epoch + 1):
            return ErrorCode.PRODUCER_FENCED, *fail
        if m.pending_transition_in_progress:
            return ErrorCode.CONCURRENT_TRANSACTIONS, *fail
        if m.state == S.PREPARE_COMMIT and commit or m.state == S.PREPARE_ABORT and not commit:
            complete = m.prepare_complete(self.env.clock.now_ms())
        elif m.state in (S.DEAD, S.PREPARE_EPOCH_FENCE):
            log.error("illegal transaction state after EndTxn", transactional_id=transactional_id,
                      state=m.state.name)
            return ErrorCode.UNKNOWN_SERVER_ERROR, *fail
        else:
            return self._invalid_state(transactional_id, m.state, commit), *fail
        self.markers.add_txn_markers_to_send(coordinator_epoch, commit, m, complete)
        if tv2:
            # The producer id and epoch the transaction completes with: the bumped epoch, or the
            # next producer id at epoch 0 once the epoch is exhausted.
            return ErrorCode.NONE, complete.producer_id, complete.producer_epoch
        return ErrorCode.NONE, *fail

    @staticmethod
    def _invalid_state(transactional_id: str, state: TransactionState, commit: bool) -> ErrorCode:
        log.warning("EndTxn in an incompatible state", transactional_id=transactional_id, state=state.state_name,
                    result="COMMIT" if commit else "ABORT")
        return ErrorCode.INVALID_TXN_STATE

    def _prepare_end_tv1(
        self, m: TransactionMetadata, producer_id: int, producer_epoch: int, commit: bool, is_from_client: bool,
    ) -> _Prepared | EndResult:
        fail = (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
        if m.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, *fail
        # Client requests must match the epoch exactly; the coordinator's own aborts carry a bump.
        if (is_from_client and producer_epoch != m.producer_epoch) or producer_epoch < m.producer_epoch:
            return ErrorCode.PRODUCER_FENCED, *fail
        if m.pending_transition_in_progress and m.pending_state != S.PREPARE_EPOCH_FENCE:
            return ErrorCode.CONCURRENT_TRANSACTIONS, *fail
        state = m.state
        if state == S.ONGOING:
            next_state = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
            is_epoch_fence = False
            if next_state == S.PREPARE_ABORT and m.pending_state == S.PREPARE_EPOCH_FENCE:
                # The fence: drop the pending state and carry the bumped epoch into PrepareAbort.
                is_epoch_fence = True
                m.pending_state = None
                m.producer_epoch = producer_epoch
                m.last_producer_epoch = NO_PRODUCER_EPOCH
            return _Prepared(m.prepare_abort_or_commit(next_state, TV_0, NO_PRODUCER_ID, self.env.clock.now_ms(), False),
                             is_epoch_fence)
        if state == S.COMPLETE_COMMIT:
            return (ErrorCode.NONE if commit else self._invalid_state(m.transactional_id, state, commit)), *fail
        if state == S.COMPLETE_ABORT:
            return (ErrorCode.NONE if not commit else self._invalid_state(m.transactional_id, state, commit)), *fail
        if state == S.PREPARE_COMMIT:
            return (ErrorCode.CONCURRENT_TRANSACTIONS if commit
                    else self._invalid_state(m.transactional_id, state, commit)), *fail
        if state == S.PREPARE_ABORT:
            return (ErrorCode.CONCURRENT_TRANSACTIONS if not commit
                    else self._invalid_state(m.transactional_id, state, commit)), *fail
        if state == S.EMPTY:
            return self._invalid_state(m.transactional_id, state, commit), *fail
        raise IllegalTransition(f"Found transactionalId {m.transactional_id} with state {state.name}")

    def _prepare_end_tv2(
        self, m: TransactionMetadata, producer_id: int, producer_epoch: int, commit: bool, is_from_client: bool,
        client_transaction_version: int,
    ) -> _Prepared | EndResult:
        """Transactions V2 (KIP-890): every EndTxn bumps the epoch; retries are recognised by it.

        +----------------+-----------------+-----------------+
        |                | Abort           | Commit          |
        |                | Retry | Current | Retry | Current |
        | Empty          | PF    | EB      | PF    | ITS     |
        | CompleteAbort  | NONE  | EB      | ITS   | ITS     |
        | CompleteCommit | ITS   | EB      | NONE  | ITS     |
        (PF PRODUCER_FENCED, ITS INVALID_TXN_STATE, EB epoch bump, Retry = stored epoch - 1)
        """
        fail = (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
        current = (ErrorCode.NONE, m.producer_id, m.producer_epoch)
        is_epoch_fence = m.pending_state == S.PREPARE_EPOCH_FENCE
        retry_on_overflow = (not is_epoch_fence and m.prev_producer_id == producer_id
                             and producer_epoch == SHORT_MAX - 1 and m.producer_epoch == 0)
        retry_on_epoch_bump = not is_epoch_fence and m.producer_epoch == producer_epoch + 1
        state = m.state
        if not is_epoch_fence:
            if state in (S.ONGOING, S.EMPTY, S.DEAD, S.PREPARE_EPOCH_FENCE):
                valid_epoch = producer_epoch == m.producer_epoch
            elif state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                valid_epoch = retry_on_epoch_bump
            else:
                valid_epoch = retry_on_epoch_bump or retry_on_overflow or producer_epoch == m.producer_epoch
        else:
            valid_epoch = ((not is_from_client or producer_epoch == m.producer_epoch)
                           and producer_epoch >= m.producer_epoch)
        is_retry = retry_on_epoch_bump or retry_on_overflow

        def completion(next_state: TransactionState, no_partition_added: bool) -> _Prepared:
            next_pid = NO_PRODUCER_ID
            if m.is_producer_epoch_exhausted:
                try:
                    next_pid = self._generate_producer_id()
                except Exception as e:  # noqa: BLE001
                    raise KafkaError(error_code_of(e)) from None
            if next_state == S.PREPARE_ABORT and is_epoch_fence:
                # Make way for PrepareAbort; unlike TV1 the fenced epoch is not copied in:
                # prepare_abort_or_commit bumps the current one (Kafka 4.3).
                m.pending_state = None
            transit = m.prepare_abort_or_commit(next_state, client_transaction_version, next_pid, self.env.clock.now_ms(),
                                                no_partition_added)
            return _Prepared(transit, is_epoch_fence)

        def invalid() -> EndResult:
            return self._invalid_state(m.transactional_id, state, commit), *fail

        if m.pending_transition_in_progress and m.pending_state != S.PREPARE_EPOCH_FENCE:
            return ErrorCode.CONCURRENT_TRANSACTIONS, *fail
        if m.producer_id != producer_id and not retry_on_overflow:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, *fail
        if not valid_epoch:
            return ErrorCode.PRODUCER_FENCED, *fail
        try:
            if state == S.ONGOING:
                return completion(S.PREPARE_COMMIT if commit else S.PREPARE_ABORT, False)
            if state == S.COMPLETE_COMMIT:
                if commit:
                    return current if is_retry else invalid()
                return invalid() if is_retry else completion(S.PREPARE_ABORT, True)
            if state == S.COMPLETE_ABORT:
                if not commit:
                    return current if is_retry else completion(S.PREPARE_ABORT, True)
                return invalid()
            if state == S.PREPARE_COMMIT:
                return (ErrorCode.CONCURRENT_TRANSACTIONS, *fail) if commit else invalid()
            if state == S.PREPARE_ABORT:
                return (ErrorCode.CONCURRENT_TRANSACTIONS, *fail) if not commit else invalid()
            if state == S.EMPTY:
                return completion(S.PREPARE_ABORT, True) if not commit else invalid()
        except KafkaError as e:
            return e.code, *fail
        raise IllegalTransition(f"Found transactionalId {m.transactional_id} with state {state.name}")

    # --- timeouts -----------------------------------------------------------------------------

    async def abort_timed_out_transactions(self) -> int:
        """Abort Ongoing transactions past their timeout, bumping the epoch to fence the producer."""
        aborted = 0
        for transactional_id, producer_id, _epoch in self.state_manager.timed_out_transactions(self.env.clock.now_ms()):
            code, found = self.state_manager.get_transaction_state(transactional_id)
            if code != ErrorCode.NONE or found is None:
                continue
            m = found[1]
            if m.producer_id != producer_id:
                log.error("found incorrect producerId when expiring transactional id", transactional_id=transactional_id,
                          expected=producer_id, found=m.producer_id)
                continue
            if m.pending_transition_in_progress:
                continue
            transit = m.prepare_fence_producer_epoch()
            log.info("aborting timed-out transaction", transactional_id=transactional_id, producer_id=producer_id,
                     timeout_ms=m.txn_timeout_ms, new_epoch=transit.producer_epoch)
            error, _, _ = await self._end_transaction(transactional_id, transit.producer_id, transit.producer_epoch,
                                                      False, False, self.state_manager.transaction_version)
            if error == ErrorCode.NONE:
                aborted += 1
                self.env.metrics.txn_timed_out()
            elif error in (ErrorCode.INVALID_PRODUCER_ID_MAPPING, ErrorCode.PRODUCER_FENCED,
                           ErrorCode.CONCURRENT_TRANSACTIONS):
                log.debug("rollback of timed-out transaction cancelled", transactional_id=transactional_id,
                          error=error.name)
            else:
                log.warning("rollback of timed-out transaction failed", transactional_id=transactional_id,
                            error=error.name)
        return aborted

    # --- ListTransactions / DescribeTransactions ----------------------------------------------------

    def handle_list_transactions(
        self, producer_ids: set[int], states: set[str], duration_ms: int = -1, pattern: str | None = None,
    ) -> tuple[int, list[str], list[tuple[str, int, str]]]:
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, [], []
        return self.state_manager.list_transaction_states(producer_ids, states, duration_ms, pattern)

    def handle_describe_transaction(self, transactional_id: str) -> tuple[int, TransactionMetadata | None]:
        """(error, metadata); TRANSACTIONAL_ID_NOT_FOUND for an unknown or expiring id."""
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        if transactional_id == "":
            return ErrorCode.INVALID_REQUEST, None
        code, found = self.state_manager.get_transaction_state(transactional_id)
        if code != ErrorCode.NONE:
            return code, None
        if found is None or found[1].state == S.DEAD:
            return ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, None
        return ErrorCode.NONE, found[1]
