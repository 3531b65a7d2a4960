"""ConsumerGroupDescribe v0-1 (KIP-848; v1 adds each member's MemberType), Kafka 4.3.1's spec."""

from __future__ import annotations

from protocol.newer import message_classes

ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse = message_classes("ConsumerGroupDescribe", 69, __name__)

__all__ = ["ConsumerGroupDescribeRequest", "ConsumerGroupDescribeResponse"]
