"""SaslHandshake v0-1, Kafka 4.3.1's spec (kafka-python keeps its SASL classes outside the areas
``protocol.messages`` loads)."""

from __future__ import annotations

from protocol.newer import message_classes

SaslHandshakeRequest, SaslHandshakeResponse = message_classes("SaslHandshake", 17, __name__)

__all__ = ["SaslHandshakeRequest", "SaslHandshakeResponse"]
