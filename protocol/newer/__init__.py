"""Message classes for API versions newer than kafka-python's specs, one module per API.

kafka-python 3.0.12 carries Apache Kafka 4.3's JSON specs. Where Kafka 4.4 added a version a stock
client uses (ApiVersions v5, TxnOffsetCommit v6, DeleteGroups v3), the module here builds
kafka-python's generated class from Kafka 4.4.0's own spec (``protocol/schemas``, copied from
kafka-clients-4.4.0.jar ``common/message``), so layouts stay exact. ``protocol.messages.NEWER``
says which API uses which module; each is imported on the API's first use.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from kafka.protocol.api_header import ResponseClassRegistry

SPECS = "protocol.schemas"


@contextmanager
def keeping_kafka_python_registry(*api_keys: int) -> Iterator[None]:
    """Defining a response class registers it in kafka-python's by-key registry, which
    kafka-python's clients use to decode answers; put the entries back as they were, so a
    kafka-python client in the same process keeps kafka-python's own classes."""
    registry = ResponseClassRegistry._response_class_registry
    before = {key: registry[key] for key in api_keys if key in registry}
    try:
        yield
    finally:
        for key in api_keys:
            if key in before:
                registry[key] = before[key]
            else:
                registry.pop(key, None)
