"""TxnOffsetCommit v0-6 (v6: KIP-1319, topics by id; GenerationId renamed
GenerationIdOrMemberEpoch), Kafka 4.4.0's spec."""

from __future__ import annotations

from protocol.newer import message_classes

TxnOffsetCommitRequest, TxnOffsetCommitResponse = message_classes("TxnOffsetCommit", 28, __name__)

__all__ = ["TxnOffsetCommitRequest", "TxnOffsetCommitResponse"]
