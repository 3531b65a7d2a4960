"""kafka-python's generated message classes, looked up by API key.

They are generated from Apache Kafka's JSON message specs, so layouts are exact; the broker
uses them for every control-plane API and keeps hand-written fast paths for the hot ones.
"""

from __future__ import annotations

import importlib
import inspect
from functools import cache

from kafka.protocol.api_message import ApiMessage

_MODULES = (
    "kafka.protocol.admin",
    "kafka.protocol.consumer",
    "kafka.protocol.metadata",
    "kafka.protocol.producer",
)


@cache
def _classes() -> dict[tuple[int, str], type[ApiMessage]]:
    table: dict[tuple[int, str], type[ApiMessage]] = {}
    for name in _MODULES:
        module = importlib.import_module(name)
        for obj in vars(module).values():
            if inspect.isclass(obj) and issubclass(obj, ApiMessage) and obj is not ApiMessage:
                table[(obj.API_KEY, obj.type)] = obj
    return table


def request_class(api_key: int) -> type[ApiMessage] | None:
    return _classes().get((api_key, "request"))


def response_class(api_key: int) -> type[ApiMessage] | None:
    return _classes().get((api_key, "response"))


def is_flexible(api_key: int, version: int) -> bool:
    """Whether this request/response version uses flexible encoding (header v2 / v1)."""
    cls = request_class(api_key)
    return bool(cls is not None and cls.flexible_version_q(version))
