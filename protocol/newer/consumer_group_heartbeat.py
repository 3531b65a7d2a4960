"""ConsumerGroupHeartbeat v0-1 (KIP-848; v1: the client generates its member id and may subscribe
by regular expression), Kafka 4.3.1's spec: kafka-python has no classes for it."""

from __future__ import annotations

from protocol.newer import message_classes

ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse = message_classes("ConsumerGroupHeartbeat", 68, __name__)

__all__ = ["ConsumerGroupHeartbeatRequest", "ConsumerGroupHeartbeatResponse"]
