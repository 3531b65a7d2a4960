"""The head of an HTTP/1.1 request, as the broker's two small HTTP servers (``/metrics`` and the
control endpoint) read it: one request per connection, a bounded head, a read timeout."""

from __future__ import annotations

import asyncio
from typing import NamedTuple


class RequestHead(NamedTuple):
    method: str
    target: str  # path and query
    headers: dict[str, str]  # names lower-cased


async def read_head(reader: asyncio.StreamReader, timeout_s: float) -> RequestHead | None:
    """The request line and headers; None when the client closed, stalled or sent too much, and
    a RequestHead with an empty method for a malformed request line (answer 400)."""
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout_s)
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError):
        return None
    request_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in header_lines:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    parts = request_line.split(" ")
    if len(parts) != 3:
        return RequestHead("", "", headers)
    return RequestHead(parts[0], parts[1], headers)
