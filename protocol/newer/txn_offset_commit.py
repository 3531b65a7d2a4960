"""TxnOffsetCommit v0-6 (v6: KIP-1319, topics by id; GenerationId renamed
GenerationIdOrMemberEpoch), Kafka 4.4.0's spec."""

from __future__ import annotations

from kafka.protocol.api_message import ApiMessage

from protocol.newer import SPECS, keeping_kafka_python_registry

with keeping_kafka_python_registry(28):

    class TxnOffsetCommitRequest(ApiMessage, load_json=SPECS):
        pass

    class TxnOffsetCommitResponse(ApiMessage, load_json=SPECS):
        pass

__all__ = ["TxnOffsetCommitRequest", "TxnOffsetCommitResponse"]
