"""DeleteGroups v0-3 (v3: a per-group ErrorMessage), Kafka 4.4.0's spec."""

from __future__ import annotations

from protocol.newer import message_classes

DeleteGroupsRequest, DeleteGroupsResponse = message_classes("DeleteGroups", 42, __name__)

__all__ = ["DeleteGroupsRequest", "DeleteGroupsResponse"]
