"""KIP-890 part 1: a partition accepts a transactional batch only if the coordinator knows the
partition is in the producer's ongoing transaction (``transaction.partition.verification.enable``,
default true).

Kafka's leader creates a VerificationStateEntry (a guard token), asks the coordinator with
AddPartitionsToTxn v4+ ``verify_only`` (AddPartitionsToTxnManager), and appends with the guard
if the answer is NONE. On one node that RPC is an in-process call to
``TransactionCoordinator.handle_verify_partitions_in_transaction``; the error mapping the
clients see is kept exactly:

- AddPartitionsToTxnManager: PRODUCER_FENCED -> INVALID_PRODUCER_EPOCH; TRANSACTION_ABORTABLE
  -> INVALID_TXN_STATE for requests that predate it (Produce < v11, TxnOffsetCommit < v4);
- ReplicaManager (Produce only): INVALID_TXN_STATE carries "Partition was not added to the
  transaction"; NETWORK_EXCEPTION, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE,
  NOT_COORDINATOR and (TV1) CONCURRENT_TRANSACTIONS become NOT_ENOUGH_REPLICAS, which old
  clients retry without a metadata refresh.

A producer that already has an open transaction on the partition (same epoch) skips the check,
as ``UnifiedLog.maybeStartTransactionVerification`` does.

KIP-890 part 2 (Transactions V2: Produce v12+, TxnOffsetCommit v5+, ``SupportedOperation.
ADD_PARTITION``): the client sends no AddPartitionsToTxn/AddOffsetsToTxn; the leader asks the
coordinator to *add* the partition (AddPartitionsToTxn v4+ with ``verify_only=false``,
clientTransactionVersion TV2), whatever ``transaction.partition.verification.enable`` says.
``add_partitions`` is that step (async: the coordinator writes ``__transaction_state``); for
Produce it retries CONCURRENT_TRANSACTIONS every ``add.partitions.to.txn.retry.backoff.ms``
(20) for up to ``add.partitions.to.txn.retry.backoff.max.ms`` (100), because the previous
transaction's markers are usually still being written when a TV2 producer starts the next one
(ReplicaManager.handleProduceAppend), and then answers CONCURRENT_TRANSACTIONS unconverted.
The append that follows is verified as in part 1 (the partition is now in the transaction).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from coordinator.txn.operations import SupportedOperation, produce_operation, supports_epoch_bump
from coordinator.txn.state import TV_2
from coordinator.txn.state_manager import TRANSACTION_STATE_TOPIC
from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from broker.services import Services
    from coordinator.txn.coordinator import TransactionCoordinator
    from protocol.records import BatchInfo
    from storage.log.partition_log import PartitionLog
    from storage.producer.manager import ProducerStateManager


def producers(plog: PartitionLog) -> ProducerStateManager:
    """The partition's producer state: every log the broker opens has one (LogManager opens it)."""
    state = plog.producer_state
    assert state is not None, f"{plog} was opened without producer state"
    return state.manager


def verification_enabled(broker: Services) -> bool:
    value = broker.config.get("transaction.partition.verification.enable")
    return value is True or str(value).lower() == "true"


def coordinator_of(broker: Services, transactional_id: str | None) -> TransactionCoordinator | None:
    """The transaction coordinator of ``transactional_id``: this broker's on a single node; among
    several brokers, the one of the leader of its ``__transaction_state`` partition (Kafka's
    AddPartitionsToTxnManager sends it the verification over the wire; brokers sharing a process
    call it directly, with the same answers). None while that partition has no live leader."""
    if broker.shared is None or transactional_id is None:
        return broker.txn_coordinator
    partition = broker.txn_coordinator.partition_for(transactional_id)
    reg = broker.metadata.partition(TRANSACTION_STATE_TOPIC, partition)
    member = broker.shared.members.get(reg.leader) if reg is not None else None
    if member is None or member.stopping:
        return None
    return member.txn_coordinator


def verify(
    broker: Services, plog: PartitionLog, transactional_id: str | None, producer_id: int, producer_epoch: int,
    base_sequence: int, operation: SupportedOperation,
) -> tuple[ErrorCode, object | None]:
    """(error as AddPartitionsToTxnManager reports it, guard to append with).

    The guard is None when no check is needed: verification is off, no coordinator runs (Kafka
    skips verification when the coordinator does not support it), or the producer's transaction
    is already open on the partition.
    """
    if not verification_enabled(broker):
        return ErrorCode.NONE, None
    txn = coordinator_of(broker, transactional_id)
    if txn is None:  # its coordinator's broker is down: the client retries
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
    manager = producers(plog)
    if manager.has_ongoing_transaction(producer_id, producer_epoch):
        return ErrorCode.NONE, None
    state = manager.maybe_create_verification_state_entry(
        producer_id, base_sequence, producer_epoch, operation == SupportedOperation.ADD_PARTITION,
        broker.clock.now_ms(),
    )
    tp = (plog.topic, plog.partition)
    code = txn.handle_verify_partitions_in_transaction(transactional_id, producer_id, producer_epoch, {tp})[tp]
    code = _manager_error(code, operation)
    return code, (state.guard if code == ErrorCode.NONE else None)


def _manager_error(code: ErrorCode, operation: SupportedOperation) -> ErrorCode:
    """AddPartitionsToTxnManager's mapping of a coordinator answer."""
    if code == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if code == ErrorCode.TRANSACTION_ABORTABLE and operation == SupportedOperation.DEFAULT_ERROR:
        return ErrorCode.INVALID_TXN_STATE
    return code


def not_yet_in_transaction(
    targets: dict[tuple[str, int], tuple[PartitionLog, int]], producer_id: int, producer_epoch: int,
) -> dict[tuple[str, int], tuple[PartitionLog, int]]:
    """The ``targets`` where this producer has no open transaction yet: only those need the
    coordinator (the first Produce of a transaction to a partition); the rest append at once."""
    return {
        tp: target for tp, target in targets.items()
        if not producers(target[0]).has_ongoing_transaction(producer_id, producer_epoch)
    }


async def add_partitions(
    broker: Services, transactional_id: str | None, producer_id: int, producer_epoch: int,
    targets: dict[tuple[str, int], tuple[PartitionLog, int]], retry_concurrent: bool,
) -> dict[tuple[str, int], ErrorCode]:
    """TV2: add ``targets`` ((topic, partition) -> (log, base sequence of the first batch)) to
    the producer's transaction; an error per partition that could not be added (AddPartitions
    ToTxnManager's mapping), nothing for the ones now in the transaction or already open there.

    ReplicaManager.maybeSendPartitionsToTransactionCoordinator with verify_only=false: a
    partition where this producer's transaction is already open needs nothing; for the others a
    verification state entry (TV2: a producer without state must start at sequence 0) is
    created and one AddPartitions (clientTransactionVersion TV2) goes to the coordinator.
    ``retry_concurrent`` is Produce's retry loop on CONCURRENT_TRANSACTIONS.
    """
    if transactional_id is None or not targets:
        return {}
    txn = coordinator_of(broker, transactional_id)
    if txn is None:  # its coordinator's broker is down: the client retries
        return dict.fromkeys(targets, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    config = broker.config
    backoff_s = int(config.get("add.partitions.to.txn.retry.backoff.ms")) / 1000
    retry_timeout_s = int(config.get("add.partitions.to.txn.retry.backoff.max.ms")) / 1000
    started = broker.wire_clock.monotonic()
    while True:
        now_ms = broker.clock.now_ms()
        to_add: set[tuple[str, int]] = set()
        for tp, (plog, base_sequence) in targets.items():
            manager = producers(plog)
            if manager.has_ongoing_transaction(producer_id, producer_epoch):
                continue
            manager.maybe_create_verification_state_entry(producer_id, base_sequence, producer_epoch, True, now_ms)
            to_add.add(tp)
        if not to_add:
            return {}
        # Kafka's AddPartitionsToTxn v4+ handler: verify_only=false is TV2 (transactionVersion
        # ForAddPartitionsToTxn), and the coordinator answers one error for the whole set.
        code = await txn.handle_add_partitions_to_transaction(
            transactional_id, producer_id, producer_epoch, to_add, TV_2,
        )
        code = _manager_error(code, SupportedOperation.ADD_PARTITION)
        if (
            not retry_concurrent
            or code != ErrorCode.CONCURRENT_TRANSACTIONS
            or broker.wire_clock.monotonic() - started >= retry_timeout_s
        ):
            return {} if code == ErrorCode.NONE else dict.fromkeys(to_add, code)
        await broker.wire_clock.sleep(backoff_s)


def produce_error(code: ErrorCode, operation: SupportedOperation) -> KafkaError:
    """ReplicaManager.handleProduceAppend's translation of a verification/add error."""
    if code == ErrorCode.INVALID_TXN_STATE:
        return KafkaError(code, "Partition was not added to the transaction")
    if code in (ErrorCode.NETWORK_EXCEPTION, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR) or (
        # TV2 keeps CONCURRENT_TRANSACTIONS: common while the previous commit completes.
        code == ErrorCode.CONCURRENT_TRANSACTIONS and not supports_epoch_bump(operation)
    ):
        return KafkaError(
            ErrorCode.NOT_ENOUGH_REPLICAS,
            f"Unable to verify the partition has been added to the transaction. Underlying error: {code.name}",
        )
    return KafkaError(code)


def verify_produce(
    broker: Services, plog: PartitionLog, transactional_id: str | None, batch: BatchInfo, api_version: int,
) -> object | None:
    """For a Produce batch: the guard to append with (None: append unverified). Raises
    KafkaError with the error the client must see."""
    if not batch.is_transactional or batch.producer_id < 0:
        return None
    if transactional_id is None:
        # KafkaApis: transactional records need an (authorized) transactional id.
        raise KafkaError(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    operation = produce_operation(api_version)
    code, guard = verify(broker, plog, transactional_id, batch.producer_id, batch.producer_epoch,
                         batch.base_sequence, operation)
    if code == ErrorCode.NONE:
        return guard
    raise produce_error(code, operation)


class BrokerTransactionVerifier:
    """The group coordinator's ``coordinator.runtime.TransactionVerifier``: this module's checks,
    against this broker's transaction coordinator."""

    def __init__(self, broker: Services) -> None:
        self.broker = broker

    def verify(self, plog: PartitionLog, transactional_id: str | None, producer_id: int, producer_epoch: int,
               sequence: int, operation: int) -> tuple[ErrorCode, object | None]:
        return verify(self.broker, plog, transactional_id, producer_id, producer_epoch, sequence,
                      SupportedOperation(operation))

    async def add_partitions(self, transactional_id: str | None, producer_id: int, producer_epoch: int,
                             targets: dict[tuple[str, int], tuple[PartitionLog, int]],
                             retry_concurrent: bool) -> dict[tuple[str, int], ErrorCode]:
        return await add_partitions(self.broker, transactional_id, producer_id, producer_epoch, targets,
                                    retry_concurrent)
