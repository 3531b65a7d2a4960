"""protocol.messages: the static API -> kafka-python module table and the lazy classes."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys

from protocol import messages


def _scan() -> dict[int, tuple[str, str]]:
    """Every ApiMessage class kafka-python ships, by importing all four areas whole."""
    from kafka.protocol.api_message import ApiMessage

    table: dict[int, tuple[str, str]] = {}
    for area in ("admin", "consumer", "metadata", "producer"):
        module = importlib.import_module(f"kafka.protocol.{area}")
        for obj in (getattr(module, name) for name in module.__all__):  # completes a lazy package
            if inspect.isclass(obj) and issubclass(obj, ApiMessage) and obj is not ApiMessage:
                name = obj.__name__.removesuffix("Request").removesuffix("Response")
                table[obj.API_KEY] = (obj.__module__.removeprefix("kafka.protocol."), name)
    return table


def test_api_modules_table_matches_kafka_python() -> None:
    assert _scan() == messages.API_MODULES


def test_classes_resolve_by_key() -> None:
    for key, (_, name) in messages.API_MODULES.items():
        req, resp = messages.request_class(key), messages.response_class(key)
        assert (req.API_KEY, req.type, req.__name__) == (key, "request", name + "Request")
        assert (resp.API_KEY, resp.type, resp.__name__) == (key, "response", name + "Response")
    assert messages.request_class(9999) is None
    assert messages.api_name(0) == "Produce" and messages.api_name(9999) == "9999"


def test_lazy_response_builds_nested_classes_and_versions() -> None:
    Response = messages.lazy_response(3)
    Broker = Response.MetadataResponseBroker
    b = Broker(node_id=1, host="h", port=9092, rack=None)
    assert b.node_id == 1
    resp = Response(throttle_time_ms=0, brokers=[b], cluster_id="c", controller_id=1, topics=[])
    assert messages.response_class(3).decode(resp.encode(version=12), version=12).brokers[0].host == "h"
    assert Response[0] is messages.response_class(3)[0]
    assert not hasattr(Response, "__wrapped__")


def test_broker_start_imports_no_message_class_it_does_not_serve() -> None:
    """Importing the broker and every handler builds no kafka-python class until a request needs it."""
    code = (
        "import sys, broker.broker, broker.net.server\n"
        "from broker.handlers.registry import load_all\n"
        "load_all()\n"
        "print(sorted(m for m in sys.modules if m.startswith('kafka.protocol.')"
        " and m.count('.') >= 3 and getattr(sys.modules[m], '__file__', '').endswith('.py')"
        " and not m.startswith(('kafka.protocol.schemas', 'kafka.protocol.api'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_newer_api_classes_load_only_their_own_module() -> None:
    """The first ApiVersions request (every connection's first) builds ApiVersions classes only:
    not kafka-python's whole metadata package, nor any other newer API."""
    code = (
        "import sys, protocol.messages as m\n"
        "m.request_class(18), m.response_class(18)\n"
        "print(sorted(k for k in sys.modules if (k.startswith('kafka.protocol.') and k.count('.') >= 3"
        " and not k.startswith(('kafka.protocol.schemas', 'kafka.protocol.api'))) or k.startswith('protocol.newer.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = eval(out)  # noqa: S307 - our own subprocess's repr of a list of names
    assert loaded == ["kafka.protocol.metadata.api_versions", "protocol.newer.api_versions"], loaded
    from protocol.newer.api_versions import ApiVersionsResponse

    assert messages.response_class(18) is ApiVersionsResponse
    assert messages.request_class(28)._valid_versions == (0, 6)
    assert messages.response_class(42)._valid_versions == (0, 3)
