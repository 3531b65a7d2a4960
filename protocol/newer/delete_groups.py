"""DeleteGroups v0-3 (v3: a per-group ErrorMessage), Kafka 4.4.0's spec."""

from __future__ import annotations

from kafka.protocol.api_message import ApiMessage

from protocol.newer import SPECS, keeping_kafka_python_registry

with keeping_kafka_python_registry(42):

    class DeleteGroupsRequest(ApiMessage, load_json=SPECS):
        pass

    class DeleteGroupsResponse(ApiMessage, load_json=SPECS):
        pass

__all__ = ["DeleteGroupsRequest", "DeleteGroupsResponse"]
