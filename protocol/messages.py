"""kafka-python's generated message classes, looked up by API key.

They are generated from Apache Kafka's JSON message specs, so layouts are exact; the broker
uses them for every control-plane API and keeps hand-written fast paths for the hot ones.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from functools import cache


def _import_kafka_protocol_only() -> None:
    """Make ``kafka.protocol`` importable without running ``kafka/__init__.py``.

    That file imports kafka-python's whole client stack (admin, net, consumer, producer):
    ~110 ms of a broker start-up that needs only the message codecs. The package module is
    registered unexecuted and finishes loading itself on first attribute access (PEP 562), so
    code in the same process that does ``from kafka import KafkaProducer`` still works.
    """
    if "kafka" in sys.modules:
        return
    spec = importlib.util.find_spec("kafka")
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)

    def complete(name: str):
        del module.__getattr__
        spec.loader.exec_module(module)
        return getattr(module, name)

    module.__getattr__ = complete
    sys.modules["kafka"] = module


_import_kafka_protocol_only()

from kafka.protocol.api_message import ApiMessage  # noqa: E402

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
