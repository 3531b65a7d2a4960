"""The Prometheus endpoint: ``GET /metrics`` on ``metrics.host:metrics.port`` (off when the port is 0).

Served by a small asyncio HTTP/1.1 server on the broker's own event loop rather than by
prometheus-client's threaded server: the scrape-time collectors read partition logs and
coordinator state, which belong to the event loop thread (no locks anywhere in the broker), so
a scrape must run there too. A scrape is one registry walk and one encode (a few ms for
hundreds of partitions). Supports what Prometheus sends: the OpenMetrics ``Accept`` header,
``Accept-Encoding: gzip`` and ``?name[]=`` filters; ``/`` answers the same as ``/metrics`` and
``/healthz`` answers ``ok``. One request per connection; a scraper that does not read its
answer within _WRITE_TIMEOUT is cut off, so never-reading clients cannot pile up answers.

``/inspect`` and below is the transaction inspector (``broker.inspect.live.routes``), on the same
port and the same loop, unless ``inspector.enable`` is false.
"""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import Iterator
from typing import TYPE_CHECKING
from urllib.parse import parse_qs

import structlog
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import Metric

from broker.inspect.live.routes import Inspector
from broker.inspect.live.settings import MAX_BODY, inspector_enabled
from broker.ops.http_head import read_head

if TYPE_CHECKING:
    from broker.broker import Broker
    from broker.ops.metrics import BrokerMetrics

log = structlog.get_logger(__name__)

_READ_TIMEOUT = 10.0
_WRITE_TIMEOUT = 10.0
_MAX_HEAD = 16 * 1024


class _Filtered:
    """The families of ``registry`` named in ``names`` (family or sample name), for ``?name[]=``.

    (``restricted_registry`` only sees collectors that describe themselves; ours don't.)
    """

    def __init__(self, registry: CollectorRegistry, names: set[str]) -> None:
        self.registry = registry
        self.names = names

    def collect(self) -> Iterator[Metric]:
        for metric in self.registry.collect():
            if metric.name in self.names or any(s.name in self.names for s in metric.samples):
                yield metric


def render(registry: CollectorRegistry, accept: str = "", query: str = "",
           accept_encoding: str = "") -> tuple[bytes, dict[str, str]]:
    """The body and headers for one scrape of ``registry``."""
    names = parse_qs(query).get("name[]")
    target = _Filtered(registry, set(names)) if names else registry
    encoder, content_type = choose_encoder(accept)
    body = encoder(target)
    headers = {"Content-Type": content_type}
    if "gzip" in accept_encoding:
        body = gzip.compress(body, compresslevel=1)
        headers["Content-Encoding"] = "gzip"
    return body, headers


def _response(status: str, body: bytes, headers: dict[str, str] | None = None, head_only: bool = False) -> bytes:
    lines = [f"HTTP/1.1 {status}", f"Content-Length: {len(body)}", "Connection: close"]
    lines += [f"{k}: {v}" for k, v in (headers or {"Content-Type": "text/plain; charset=utf-8"}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (b"" if head_only else body)


async def _serve(metrics: BrokerMetrics, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 inspector: Inspector | None = None) -> None:
    abort = False
    writer.transport.set_write_buffer_limits(high=0)  # drain() waits until the answer is in the kernel
    try:
        head = await read_head(reader, _READ_TIMEOUT)
        if head is None:
            return
        if not head.method:
            writer.write(_response("400 Bad Request", b"bad request\n"))
            return
        method, headers = head.method, head.headers
        path, _, query = head.target.partition("?")
        if inspector is not None and (path == "/inspect" or path.startswith("/inspect/")):
            body = b""
            if method == "POST":
                try:
                    length = int(headers.get("content-length") or 0)
                except ValueError:
                    length = -1
                if not 0 <= length <= MAX_BODY:
                    writer.write(_response("413 Payload Too Large", b"too large\n"))
                    return
                try:
                    body = await asyncio.wait_for(reader.readexactly(length), _READ_TIMEOUT) if length else b""
                except (asyncio.IncompleteReadError, TimeoutError, ConnectionError):
                    return
            status, out_headers, answer = await inspector.handle(method, head.target, headers, body)
            if "gzip" in headers.get("accept-encoding", "") and len(answer) > 4096 \
                    and not out_headers["Content-Type"].startswith("image/"):
                answer = gzip.compress(answer, compresslevel=1)
                out_headers["Content-Encoding"] = "gzip"
            writer.write(_response(status, answer, out_headers, head_only=method == "HEAD"))
        elif method not in ("GET", "HEAD"):
            writer.write(_response("405 Method Not Allowed", b"GET /metrics\n"))
        elif path in ("/metrics", "/"):
            metrics.prepare_scrape()
            body, out_headers = render(metrics.registry, headers.get("accept", ""), query,
                                       headers.get("accept-encoding", ""))
            writer.write(_response("200 OK", body, out_headers, head_only=method == "HEAD"))
        elif path == "/healthz":
            writer.write(_response("200 OK", b"ok\n", head_only=method == "HEAD"))
        else:
            writer.write(_response("404 Not Found", b"try /metrics or /inspect\n" if inspector else b"try /metrics\n"))
        try:
            await asyncio.wait_for(writer.drain(), _WRITE_TIMEOUT)
        except (TimeoutError, ConnectionError):
            abort = True
    except Exception:  # noqa: BLE001 - a bad scrape must never hurt the broker
        log.exception("metrics request failed")
    finally:
        if abort:
            writer.transport.abort()  # close() would wait for a reader that never reads
        else:
            writer.close()


async def start_metrics(broker: Broker) -> asyncio.AbstractServer | None:
    """Bind the scrape-time collectors to ``broker`` and, if ``metrics.port`` > 0, serve them.

    The server is closed by a shutdown hook; the bound port is ``broker.metrics_port``.
    """
    broker.metrics.bind(broker)
    port = int(broker.config.get("metrics.port") or 0)
    broker.metrics_port = None
    if port <= 0:
        return None
    host = str(broker.config.get("metrics.host") or "").strip() or None
    metrics = broker.metrics
    inspector = Inspector(broker) if inspector_enabled(broker.config) else None
    server = await asyncio.start_server(
        lambda r, w: _serve(metrics, r, w, inspector), host, port, reuse_address=True, limit=_MAX_HEAD)
    broker.metrics_port = server.sockets[0].getsockname()[1]
    log.info("metrics endpoint listening", host=host or "0.0.0.0", port=broker.metrics_port, path="/metrics",
             inspector="/inspect" if inspector is not None else None)

    async def close(_broker: Broker) -> None:
        server.close()
        await server.wait_closed()

    broker.shutdown_hooks.append(close)
    return server
