"""Errors a request's version does not know, answered as the older code Kafka gives it instead:
one table for the handlers and for the error answers of fault rules.

Kafka's coordinators and request handlers make these translations where they answer
(TransactionCoordinator, KafkaApis); listed here by API and version range so no handler repeats
them (Kafka 4.3.1: KafkaApis, ReplicaManager). PRODUCER_FENCED (90, KIP-588) is unknown to
InitProducerId v0-3, AddPartitionsToTxn v0-1, AddOffsetsToTxn v0-1 and EndTxn v0-1, whose clients
expect INVALID_PRODUCER_EPOCH; TxnOffsetCommit v0-1 get COORDINATOR_NOT_AVAILABLE for
COORDINATOR_LOAD_IN_PROGRESS; Fetch v0-5 NOT_LEADER_OR_FOLLOWER for KAFKA_STORAGE_ERROR;
ListOffsets v0-4 LEADER_NOT_AVAILABLE for OFFSET_NOT_AVAILABLE.
"""

from __future__ import annotations

from protocol.errors import ErrorCode

#: (api key, error) -> (first version that knows the error, what older versions get)
_NEWER_ERRORS: dict[tuple[int, ErrorCode], tuple[int, ErrorCode]] = {
    (22, ErrorCode.PRODUCER_FENCED): (4, ErrorCode.INVALID_PRODUCER_EPOCH),  # InitProducerId
    (24, ErrorCode.PRODUCER_FENCED): (2, ErrorCode.INVALID_PRODUCER_EPOCH),  # AddPartitionsToTxn
    (25, ErrorCode.PRODUCER_FENCED): (2, ErrorCode.INVALID_PRODUCER_EPOCH),  # AddOffsetsToTxn
    (26, ErrorCode.PRODUCER_FENCED): (2, ErrorCode.INVALID_PRODUCER_EPOCH),  # EndTxn
    (28, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS): (2, ErrorCode.COORDINATOR_NOT_AVAILABLE),  # TxnOffsetCommit
    (1, ErrorCode.KAFKA_STORAGE_ERROR): (6, ErrorCode.NOT_LEADER_OR_FOLLOWER),  # Fetch
    (2, ErrorCode.OFFSET_NOT_AVAILABLE): (5, ErrorCode.LEADER_NOT_AVAILABLE),  # ListOffsets
}


def for_version(api_key: int, version: int, code: ErrorCode) -> ErrorCode:
    """``code`` as the given version of the API answers it."""
    entry = _NEWER_ERRORS.get((api_key, code))
    if entry is not None and version < entry[0]:
        return entry[1]
    return code
