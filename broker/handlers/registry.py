"""The API registry: registering a handler declares the versions it serves.

ApiVersions is built from this table, so the broker advertises exactly what is implemented
(franz-go's kfake does the same, one module per API key).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, overload

import broker.handlers as pkg
from broker.net.context import NoResponse, RawResponse, RequestContext
from protocol.messages import API_MODULES, NEWER_ONLY, ApiMessage, request_class, response_class

#: What a handler answers: a response message, a body a fast path encoded, or nothing (acks=0).
Answer = ApiMessage | RawResponse | NoResponse
Req = TypeVar("Req")
#: A handler of requests of type ``Req``: kafka-python's message, or what the API's own decoder
#: builds (Produce, Fetch). It answers at once, or returns an awaitable when it must wait.
Handler = Callable[[RequestContext, Req], Answer | Awaitable[Answer]]
Decoder = Callable[[bytes | memoryview, int], Req]


@dataclass(slots=True)
class ApiSpec(Generic[Req]):
    key: int
    min_version: int
    max_version: int
    handler: Handler[Req]
    # Advertised minimum: Kafka 4 advertises Produce min 0 for old librdkafka (KAFKA-18659)
    # while rejecting v0-2 (the connection is closed, as parseRequestHeader does).
    advertised_min: int
    decode: Decoder[Req] | None  # None: kafka-python's generated decoder

    @property
    def request_cls(self) -> Any:
        return request_class(self.key)

    @property
    def response_cls(self) -> Any:
        return response_class(self.key)

    def accepts(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


#: API key -> its spec; each handler takes what its own decoder builds, so the table holds any.
HANDLERS: dict[int, ApiSpec[Any]] = {}


@overload
def api(key: int, versions: tuple[int, int], *,
        advertised_min: int | None = None) -> Callable[[Handler[ApiMessage]], Handler[ApiMessage]]: ...
@overload
def api(key: int, versions: tuple[int, int], *, advertised_min: int | None = None,
        decode: Decoder[Req]) -> Callable[[Handler[Req]], Handler[Req]]: ...
def api(
    key: int,
    versions: tuple[int, int],
    *,
    advertised_min: int | None = None,
    decode: Decoder[Any] | None = None,
) -> Callable[[Handler[Any]], Handler[Any]]:
    """Register ``handler`` for API ``key`` at ``versions`` (inclusive); with ``decode``, the
    handler takes what that decoder builds instead of kafka-python's message."""

    def register(handler: Handler[Any]) -> Handler[Any]:
        if key in HANDLERS:
            raise RuntimeError(f"API key {key} registered twice")
        if key not in API_MODULES and key not in NEWER_ONLY:
            raise RuntimeError(f"API key {key} has no message classes (protocol.messages.API_MODULES)")
        HANDLERS[key] = ApiSpec(
            key,
            versions[0],
            versions[1],
            handler,
            versions[0] if advertised_min is None else advertised_min,
            decode,
        )
        return handler

    return register


def load_all() -> dict[int, ApiSpec]:
    """Import every handler module so their registrations run."""
    for mod in pkgutil.iter_modules(pkg.__path__):
        if mod.name != "registry":
            importlib.import_module(f"broker.handlers.{mod.name}")
    return HANDLERS
