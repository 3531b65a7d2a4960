"""The API registry: registering a handler declares the versions it serves.

ApiVersions is built from this table, so the broker advertises exactly what is implemented
(franz-go's kfake does the same, one module per API key).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from protocol.messages import API_MODULES, NEWER_ONLY, request_class, response_class

if TYPE_CHECKING:
    from broker.net.context import RequestContext

Handler = Callable[["RequestContext", Any], Any | Awaitable[Any]]


@dataclass(slots=True)
class ApiSpec:
    key: int
    min_version: int
    max_version: int
    handler: Handler
    # Advertised minimum: Kafka 4 advertises Produce min 0 for old librdkafka (KAFKA-18659)
    # while rejecting v0-2 (the connection is closed, as parseRequestHeader does).
    advertised_min: int
    decode: Callable[[bytes | memoryview, int], Any] | None

    @property
    def request_cls(self) -> Any:
        return request_class(self.key)

    @property
    def response_cls(self) -> Any:
        return response_class(self.key)

    def accepts(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


HANDLERS: dict[int, ApiSpec] = {}


def api(
    key: int,
    versions: tuple[int, int],
    *,
    advertised_min: int | None = None,
    decode: Callable[[bytes | memoryview, int], Any] | None = None,
) -> Callable[[Handler], Handler]:
    """Register ``handler`` for API ``key`` at ``versions`` (inclusive)."""

    def register(handler: Handler) -> Handler:
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
    import importlib
    import pkgutil

    import broker.handlers as pkg

    for mod in pkgutil.iter_modules(pkg.__path__):
        if mod.name != "registry":
            importlib.import_module(f"broker.handlers.{mod.name}")
    return HANDLERS
