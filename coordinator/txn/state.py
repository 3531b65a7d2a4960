"""Transaction states and TransactionMetadata, ported from Kafka 4.3's
``org.apache.kafka.coordinator.transaction.TransactionState`` / ``TransactionMetadata``.

Every change goes through two steps, exactly as in Kafka, which is what keeps the coordinator
correct across the ``await`` of the log write:

1. ``prepare_*`` validates against the table of legal previous states, sets ``pending_state``
   and returns an immutable :class:`TxnTransitMetadata` (nothing else changes);
2. the caller writes that transit to ``__transaction_state`` and, only once the write is
   durable, calls :meth:`TransactionMetadata.complete_transition_to` (or clears the pending
   state if the write failed).

While a transition is pending, other requests for the same id see
``pending_transition_in_progress`` and answer CONCURRENT_TRANSACTIONS.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import IntEnum

import structlog

from protocol.errors import ErrorCode, KafkaError

log = structlog.get_logger(__name__)

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
SHORT_MAX = 0x7FFF
INT_MAX = 0x7FFFFFFF

# TransactionVersion feature levels (server-common TransactionVersion).
TV_0 = 0
TV_1 = 1
TV_2 = 2

TopicPartition = tuple[str, int]


class TransactionState(IntEnum):
    """The TransactionStatus byte stored in the log (TransactionState.id)."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def state_name(self) -> str:
        """The name ListTransactions/DescribeTransactions report (admin TransactionState)."""
        return _STATE_NAMES[self]

    @property
    def expiration_allowed(self) -> bool:
        """Whether an idle transactional id in this state may be expired (isExpirationAllowed)."""
        return self in (TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT)

    @classmethod
    def from_name(cls, name: str) -> TransactionState | None:
        return _BY_NAME.get(name)


S = TransactionState

_STATE_NAMES = {
    S.EMPTY: "Empty",
    S.ONGOING: "Ongoing",
    S.PREPARE_COMMIT: "PrepareCommit",
    S.PREPARE_ABORT: "PrepareAbort",
    S.COMPLETE_COMMIT: "CompleteCommit",
    S.COMPLETE_ABORT: "CompleteAbort",
    S.DEAD: "Dead",
    S.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {name: state for state, name in _STATE_NAMES.items()}

# Target state -> the states it may be entered from (TransactionState.validPreviousStates).
VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}


def is_epoch_exhausted(producer_epoch: int) -> bool:
    """Short.MAX stays reserved so the coordinator can always fence (isEpochExhausted)."""
    return producer_epoch >= SHORT_MAX - 1


def supports_epoch_bump(transaction_version: int) -> bool:
    return transaction_version >= TV_2


class IllegalTransition(RuntimeError):
    """A transition the state machine forbids: a coordinator bug, never a client error."""


@dataclass(frozen=True, slots=True)
class TxnTransitMetadata:
    """The immutable target of one prepared transition: what is written to the log."""

    producer_id: int
    prev_producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    txn_state: TransactionState
    topic_partitions: frozenset[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int
    client_transaction_version: int


@dataclass(slots=True)
class _TransitionData:
    """Kafka's TransitionData: starts as a copy of the current metadata."""

    state: TransactionState
    producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    topic_partitions: frozenset[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int
    client_transaction_version: int


@dataclass(eq=False)
class TransactionMetadata:
    """One transactional id's state, owned by the coordinator of its log partition."""

    transactional_id: str
    producer_id: int
    prev_producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    topic_partitions: set[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int
    client_transaction_version: int = TV_0
    pending_state: TransactionState | None = None
    # A failed epoch-fence write: the next fence must not bump the epoch again (never returned).
    has_failed_epoch_fence: bool = False

    # --- queries ---------------------------------------------------------------------------

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    @property
    def is_distributed_two_phase_commit_txn(self) -> bool:
        return self.txn_timeout_ms == INT_MAX

    def _has_pending_transaction(self) -> bool:
        return self.state in (S.ONGOING, S.PREPARE_ABORT, S.PREPARE_COMMIT)

    def remove_partition(self, tp: TopicPartition) -> None:
        """A marker for ``tp`` was written: DescribeTransactions stops listing it."""
        if self.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            raise IllegalTransition(
                f"Transaction metadata's current state is {self.state.name}, and its pending state is "
                f"{self.pending_state} while trying to remove partitions whose txn marker has been sent"
            )
        self.topic_partitions.discard(tp)

    # --- prepare -----------------------------------------------------------------------------

    def _data(self, state: TransactionState) -> _TransitionData:
        return _TransitionData(
            state, self.producer_id, self.next_producer_id, self.producer_epoch, self.last_producer_epoch,
            self.txn_timeout_ms, frozenset(self.topic_partitions), self.txn_start_timestamp,
            self.txn_last_update_timestamp, self.client_transaction_version,
        )

    def prepare_no_transit(self) -> TxnTransitMetadata:
        return TxnTransitMetadata(
            self.producer_id, self.prev_producer_id, self.next_producer_id, self.producer_epoch,
            self.last_producer_epoch, self.txn_timeout_ms, self.state, frozenset(self.topic_partitions),
            self.txn_start_timestamp, self.txn_last_update_timestamp, self.client_transaction_version,
        )

    def prepare_fence_producer_epoch(self) -> TxnTransitMetadata:
        """Bump the epoch so the current producer is fenced; PrepareAbort follows at once.
        Never written itself: EndTxn(ABORT, isFromClient=false) writes PrepareAbort instead."""
        if self.producer_epoch == SHORT_MAX:
            log.error("fencing producer at Short.MAX epoch", transactional_id=self.transactional_id,
                      producer_id=self.producer_id)
        bump = self.has_failed_epoch_fence or self.producer_epoch == SHORT_MAX
        data = self._data(S.PREPARE_EPOCH_FENCE)
        data.producer_epoch = self.producer_epoch if bump else self.producer_epoch + 1
        return self._prepare_transition_to(data)

    def prepare_increment_producer_epoch(
        self, new_txn_timeout_ms: int, expected_producer_epoch: int | None, update_timestamp: int
    ) -> TxnTransitMetadata:
        """InitProducerId on Empty/Complete*: bump the epoch (or recognise a retry)."""
        if self.is_producer_epoch_exhausted:
            raise IllegalTransition(f"Cannot allocate any more producer epochs for producerId {self.producer_id}")
        data = self._data(S.EMPTY)
        bumped = self.producer_epoch + 1
        if expected_producer_epoch is None:
            # No expected epoch: a new producer (epoch -1 becomes 0) or a plain re-init.
            data.producer_epoch = bumped
            data.last_producer_epoch = NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_producer_epoch == self.producer_epoch:
            # KIP-360: the producer continues after an error and nobody else took over.
            data.producer_epoch = bumped
            data.last_producer_epoch = self.producer_epoch
        elif expected_producer_epoch == self.last_producer_epoch:
            # A retry of a successful bump whose answer was lost: return the current epoch.
            data.producer_epoch = self.producer_epoch
            data.last_producer_epoch = self.last_producer_epoch
        else:
            log.info("expected producer epoch matches neither the current nor the previous one",
                     transactional_id=self.transactional_id, expected=expected_producer_epoch,
                     current=self.producer_epoch, last=self.last_producer_epoch)
            raise KafkaError(ErrorCode.PRODUCER_FENCED)
        data.txn_timeout_ms = new_txn_timeout_ms
        data.topic_partitions = frozenset()
        data.txn_start_timestamp = -1
        data.txn_last_update_timestamp = update_timestamp
        return self._prepare_transition_to(data)

    def prepare_producer_id_rotation(
        self, new_producer_id: int, new_txn_timeout_ms: int, update_timestamp: int, record_last_epoch: bool
    ) -> TxnTransitMetadata:
        """Epochs exhausted: continue under a new producer id at epoch 0."""
        if self._has_pending_transaction():
            raise IllegalTransition("Cannot rotate producer ids while a transaction is still pending")
        data = self._data(S.EMPTY)
        data.producer_id = new_producer_id
        data.producer_epoch = 0
        data.last_producer_epoch = self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH
        data.txn_timeout_ms = new_txn_timeout_ms
        data.topic_partitions = frozenset()
        data.txn_start_timestamp = -1
        data.txn_last_update_timestamp = update_timestamp
        return self._prepare_transition_to(data)

    def prepare_add_partitions(
        self, added: set[TopicPartition] | frozenset[TopicPartition], update_timestamp: int,
        client_transaction_version: int,
    ) -> TxnTransitMetadata:
        """AddPartitionsToTxn/AddOffsetsToTxn: the first addition starts the transaction clock."""
        data = self._data(S.ONGOING)
        if self.state in (S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT):
            data.txn_start_timestamp = update_timestamp
        data.topic_partitions = frozenset(self.topic_partitions) | frozenset(added)
        data.txn_last_update_timestamp = update_timestamp
        data.client_transaction_version = client_transaction_version
        return self._prepare_transition_to(data)

    def prepare_abort_or_commit(
        self, new_state: TransactionState, client_transaction_version: int, next_producer_id: int,
        update_timestamp: int, no_partition_added: bool,
    ) -> TxnTransitMetadata:
        """EndTxn: PrepareCommit/PrepareAbort (TV2 bumps the epoch here)."""
        data = self._data(new_state)
        if supports_epoch_bump(client_transaction_version):
            if self.producer_epoch == SHORT_MAX and new_state == S.PREPARE_ABORT:
                log.error("aborting producer at Short.MAX epoch", transactional_id=self.transactional_id)
            else:
                data.producer_epoch = self.producer_epoch + 1
            data.last_producer_epoch = self.producer_epoch
        else:
            data.producer_epoch = self.producer_epoch
            data.last_producer_epoch = self.last_producer_epoch
        data.txn_start_timestamp = update_timestamp if no_partition_added else self.txn_start_timestamp
        data.next_producer_id = next_producer_id
        data.txn_last_update_timestamp = update_timestamp
        data.client_transaction_version = client_transaction_version
        return self._prepare_transition_to(data)

    def prepare_complete(self, update_timestamp: int) -> TxnTransitMetadata:
        """All markers written: CompleteCommit/CompleteAbort, partitions cleared."""
        self.has_failed_epoch_fence = False
        data = self._data(S.COMPLETE_COMMIT if self.state == S.PREPARE_COMMIT else S.COMPLETE_ABORT)
        if supports_epoch_bump(self.client_transaction_version) and self.next_producer_id != NO_PRODUCER_ID:
            data.producer_id = self.next_producer_id
            data.producer_epoch = 0
        data.next_producer_id = NO_PRODUCER_ID
        data.topic_partitions = frozenset()
        data.txn_last_update_timestamp = update_timestamp
        return self._prepare_transition_to(data)

    def prepare_dead(self) -> TxnTransitMetadata:
        """transactional.id.expiration.ms passed: a tombstone will be written."""
        data = self._data(S.DEAD)
        data.topic_partitions = frozenset()
        return self._prepare_transition_to(data)

    def _prepare_transition_to(self, data: _TransitionData) -> TxnTransitMetadata:
        if self.pending_state is not None:
            raise IllegalTransition(
                f"Preparing transaction state transition to {data.state.name} while it already has a pending "
                f"state {self.pending_state.name}"
            )
        if data.producer_id < 0:
            raise IllegalTransition(f"Illegal new producer id {data.producer_id}")
        if data.state != S.DEAD and data.producer_epoch < 0:
            raise IllegalTransition(f"Illegal new producer epoch {data.producer_epoch}")
        if self.state not in VALID_PREVIOUS_STATES[data.state]:
            raise IllegalTransition(
                f"Preparing transaction state transition to {data.state.name} failed since the target state "
                f"{data.state.name} is not a valid previous state of the current state {self.state.name}"
            )
        transit = TxnTransitMetadata(
            data.producer_id, self.producer_id, data.next_producer_id, data.producer_epoch,
            data.last_producer_epoch, data.txn_timeout_ms, data.state, data.topic_partitions,
            data.txn_start_timestamp, data.txn_last_update_timestamp, data.client_transaction_version,
        )
        self.pending_state = data.state
        return transit

    # --- complete ----------------------------------------------------------------------------

    def complete_transition_to(self, transit: TxnTransitMetadata) -> None:
        """Apply a transition whose log write succeeded, after checking it is the pending one."""
        to_state = self.pending_state
        if to_state is None:
            raise IllegalTransition(
                f"TransactionalId {self.transactional_id} completing transaction state transition while it "
                "does not have a pending state"
            )
        if to_state != transit.txn_state:
            self._fail(transit)
        if to_state == S.EMPTY:
            if (
                (self.producer_epoch != transit.producer_epoch and not self._valid_producer_epoch_bump(transit))
                or transit.topic_partitions
                or transit.txn_start_timestamp != -1
            ):
                self._fail(transit)
        elif to_state == S.ONGOING:
            if (
                not self._valid_producer_epoch(transit)
                or not transit.topic_partitions >= self.topic_partitions
                or self.txn_timeout_ms != transit.txn_timeout_ms
            ):
                self._fail(transit)
        elif to_state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):
            allowed_empty_abort = (
                to_state == S.PREPARE_ABORT
                and supports_epoch_bump(transit.client_transaction_version)
                and self.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
            )
            valid_timestamp = self.txn_start_timestamp == transit.txn_start_timestamp or allowed_empty_abort
            if (
                not self._valid_producer_epoch(transit)
                or self.topic_partitions != transit.topic_partitions
                or self.txn_timeout_ms != transit.txn_timeout_ms
                or not valid_timestamp
            ):
                self._fail(transit)
        elif to_state in (S.COMPLETE_ABORT, S.COMPLETE_COMMIT):
            if (
                not self._valid_producer_epoch(transit)
                or self.txn_timeout_ms != transit.txn_timeout_ms
                or transit.txn_start_timestamp == -1
            ):
                self._fail(transit)
        elif to_state == S.PREPARE_EPOCH_FENCE:
            # Never completed: PrepareAbort replaces it before anything is written.
            self._fail(transit)
        elif to_state == S.DEAD:
            raise IllegalTransition(
                f"TransactionalId {self.transactional_id} is trying to complete a transition to Dead: an expired id "
                "is removed from the cache, never moved to Dead"
            )
        self.producer_id = transit.producer_id
        self.prev_producer_id = transit.prev_producer_id
        self.next_producer_id = transit.next_producer_id
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.txn_timeout_ms = transit.txn_timeout_ms
        self.topic_partitions = set(transit.topic_partitions)
        self.txn_start_timestamp = transit.txn_start_timestamp
        self.txn_last_update_timestamp = transit.txn_last_update_timestamp
        self.client_transaction_version = transit.client_transaction_version
        self.pending_state = None
        self.state = to_state

    def _valid_producer_epoch(self, transit: TxnTransitMetadata) -> bool:
        tv2 = supports_epoch_bump(transit.client_transaction_version)
        state = transit.txn_state
        if tv2 and state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT) and transit.producer_epoch == 0:
            # Epoch overflow: the completion switches to the next producer id.
            return transit.last_producer_epoch == self.last_producer_epoch and transit.prev_producer_id == self.producer_id
        if tv2 and state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return transit.last_producer_epoch == self.producer_epoch and transit.producer_id == self.producer_id
        return transit.producer_epoch == self.producer_epoch and transit.producer_id == self.producer_id

    def _valid_producer_epoch_bump(self, transit: TxnTransitMetadata) -> bool:
        return transit.producer_epoch == self.producer_epoch + 1 or (
            transit.producer_epoch == 0 and transit.producer_id != self.producer_id
        )

    def _fail(self, transit: TxnTransitMetadata) -> None:
        log.error("transaction state transition failed: this should not happen", metadata=repr(self),
                  transit=repr(transit))
        raise IllegalTransition(
            f"TransactionalId {self.transactional_id} failed transition to state {transit} due to unexpected metadata"
        )

    def copy(self) -> TransactionMetadata:
        return replace(self, topic_partitions=set(self.topic_partitions))


def new_metadata(
    transactional_id: str, producer_id: int, txn_timeout_ms: int, now_ms: int
) -> TransactionMetadata:
    """A first InitProducerId: Empty with epoch -1 until the bump to 0 is written."""
    return TransactionMetadata(
        transactional_id, producer_id, NO_PRODUCER_ID, NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_PRODUCER_EPOCH,
        txn_timeout_ms, S.EMPTY, set(), -1, now_ms, TV_0,
    )
