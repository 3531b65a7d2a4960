"""SaslAuthenticate v0-2, Kafka 4.3.1's spec."""

from __future__ import annotations

from protocol.newer import message_classes

SaslAuthenticateRequest, SaslAuthenticateResponse = message_classes("SaslAuthenticate", 36, __name__)

__all__ = ["SaslAuthenticateRequest", "SaslAuthenticateResponse"]
