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
"""

from __future__ import annotations

import time
from enum import IntEnum
from typing import TYPE_CHECKING

from protocol.errors import ErrorCode, KafkaError
from storage.producer_state import ProducerStateLogListener

if TYPE_CHECKING:
    from broker.broker import Broker
    from protocol.records import BatchInfo
    from storage.log import PartitionLog


class SupportedOperation(IntEnum):
    """AddPartitionsToTxnManager.TransactionSupportedOperation."""

    DEFAULT_ERROR = 0  # Produce < 11, TxnOffsetCommit < 4
    GENERIC_ERROR_SUPPORTED = 1  # Produce 11, TxnOffsetCommit 4: TRANSACTION_ABORTABLE is understood
    ADD_PARTITION = 2  # TV2 (Produce 12+, TxnOffsetCommit 5+): the partition is added implicitly


def produce_operation(version: int) -> SupportedOperation:
    if version > 11:
        return SupportedOperation.ADD_PARTITION
    return SupportedOperation.GENERIC_ERROR_SUPPORTED if version == 11 else SupportedOperation.DEFAULT_ERROR


def txn_offset_commit_operation(version: int) -> SupportedOperation:
    if version > 4:
        return SupportedOperation.ADD_PARTITION
    return SupportedOperation.GENERIC_ERROR_SUPPORTED if version == 4 else SupportedOperation.DEFAULT_ERROR


def verification_enabled(broker: Broker) -> bool:
    value = broker.config.get("transaction.partition.verification.enable")
    return value is True or str(value).lower() == "true"


def verify(
    broker: Broker, plog: PartitionLog, transactional_id: str | None, producer_id: int, producer_epoch: int,
    base_sequence: int, operation: SupportedOperation,
) -> tuple[ErrorCode, object | None]:
    """(error as AddPartitionsToTxnManager reports it, guard to append with).

    The guard is None when no check is needed: verification is off, no coordinator runs (Kafka
    skips verification when the coordinator does not support it), or the producer's transaction
    is already open on the partition.
    """
    txn = broker.txn_coordinator
    if txn is None or not verification_enabled(broker):
        return ErrorCode.NONE, None
    manager = ProducerStateLogListener.of(plog).manager
    if manager.has_ongoing_transaction(producer_id, producer_epoch):
        return ErrorCode.NONE, None
    state = manager.maybe_create_verification_state_entry(
        producer_id, base_sequence, producer_epoch, operation == SupportedOperation.ADD_PARTITION,
        time.time_ns() // 1_000_000,
    )
    tp = (plog.topic, plog.partition)
    code = txn.handle_verify_partitions_in_transaction(transactional_id, producer_id, producer_epoch, {tp})[tp]
    if code == ErrorCode.PRODUCER_FENCED:
        code = ErrorCode.INVALID_PRODUCER_EPOCH
    elif code == ErrorCode.TRANSACTION_ABORTABLE and operation == SupportedOperation.DEFAULT_ERROR:
        code = ErrorCode.INVALID_TXN_STATE
    return code, (state.guard if code == ErrorCode.NONE else None)


def verify_produce(
    broker: Broker, plog: PartitionLog, transactional_id: str | None, batch: BatchInfo, api_version: int,
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
    if code == ErrorCode.INVALID_TXN_STATE:
        raise KafkaError(code, "Partition was not added to the transaction")
    if code in (ErrorCode.NETWORK_EXCEPTION, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR) or (
        code == ErrorCode.CONCURRENT_TRANSACTIONS and operation != SupportedOperation.ADD_PARTITION
    ):
        raise KafkaError(
            ErrorCode.NOT_ENOUGH_REPLICAS,
            f"Unable to verify the partition has been added to the transaction. Underlying error: {code.name}",
        )
    raise KafkaError(code)
