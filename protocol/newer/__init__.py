"""Message classes for API versions newer than kafka-python's specs, one module per API.

kafka-python 3.0.12 carries Apache Kafka 4.3's JSON specs. Where Kafka 4.4 added a version a stock
client uses (ApiVersions v5, TxnOffsetCommit v6, DeleteGroups v3), the module here builds
kafka-python's generated classes from Kafka 4.4.0's own spec (``protocol/schemas``, copied from
kafka-clients-4.4.0.jar ``common/message``), so layouts stay exact. ``protocol.messages.NEWER``
says which API uses which module; each is imported on the API's first use.
"""

from __future__ import annotations

import types
from typing import Any

from kafka.protocol.api_header import ResponseClassRegistry
from kafka.protocol.api_message import ApiMessage

SPECS = "protocol.schemas"


def message_classes(name: str, api_key: int, module: str, response_base: type = ApiMessage) -> tuple[Any, Any]:
    """``(<name>Request, <name>Response)`` built from ``protocol/schemas/<name>Request.json`` and
    ``...Response.json``; ``response_base`` keeps behaviour kafka-python adds to a response class.

    Defining a response class registers it in kafka-python's by-key registry, which
    kafka-python's clients use to decode answers: the entry is put back as it was, so a
    kafka-python client in the same process keeps kafka-python's own class."""
    registry = ResponseClassRegistry._response_class_registry
    before = registry.get(api_key)

    def build(kind: str, base: type) -> Any:  # Any: the generated fields are unknown to a type checker
        return types.new_class(name + kind, (base,), {"load_json": SPECS}, lambda ns: ns.update(__module__=module))

    try:
        return build("Request", ApiMessage), build("Response", response_base)
    finally:
        if before is not None:
            registry[api_key] = before
        else:
            registry.pop(api_key, None)
