"""AddPartitionsToTxnManager.TransactionSupportedOperation: what a request's version lets the
partition leader do when it asks the transaction coordinator about a partition (KIP-890)."""

from __future__ import annotations

from enum import IntEnum


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


def supports_epoch_bump(operation: SupportedOperation) -> bool:
    return operation == SupportedOperation.ADD_PARTITION
