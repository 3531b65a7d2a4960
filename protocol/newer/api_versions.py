"""ApiVersions v0-5 (v5: KIP-1242, ClusterId and NodeId), Kafka 4.4.0's spec."""

from __future__ import annotations

import importlib

from protocol.newer import message_classes

# Not ``from kafka.protocol.metadata import ...``: that would build every class of the package
# (protocol.messages registers kafka-python's packages without running their __init__). The
# response keeps kafka-python's behaviour: a v0 header, an error answer read as a v0 body.
_kafka_python = importlib.import_module("kafka.protocol.metadata.api_versions")

ApiVersionsRequest, ApiVersionsResponse = message_classes(
    "ApiVersions", 18, __name__, response_base=_kafka_python.ApiVersionsResponse)

__all__ = ["ApiVersionsRequest", "ApiVersionsResponse"]
