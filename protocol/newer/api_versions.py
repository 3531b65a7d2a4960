"""ApiVersions v0-5 (v5: KIP-1242, ClusterId and NodeId), Kafka 4.4.0's spec."""

from __future__ import annotations

import importlib

from kafka.protocol.api_message import ApiMessage

from protocol.newer import SPECS, keeping_kafka_python_registry

# Not ``from kafka.protocol.metadata import ...``: that would build every class of the package
# (protocol.messages registers kafka-python's packages without running their __init__).
_kafka_python = importlib.import_module("kafka.protocol.metadata.api_versions")

with keeping_kafka_python_registry(18):

    class ApiVersionsRequest(ApiMessage, load_json=SPECS):
        """v5 adds the cluster id and node id the client means to reach."""

    class ApiVersionsResponse(_kafka_python.ApiVersionsResponse, load_json=SPECS):
        """kafka-python's behaviour kept: a v0 header, an error answer read as a v0 body."""

__all__ = ["ApiVersionsRequest", "ApiVersionsResponse"]
