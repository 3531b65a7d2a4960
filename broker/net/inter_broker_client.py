"""A broker's own connection to another broker (Kafka's NetworkClient / NodeToNodeChannel, one
request at a time): the replica fetcher's Fetch and the marker channel's WriteTxnMarkers go to the
other broker's listener over the real wire, as Kafka's do (with TLS when the inter-broker listener
is an SSL one).

Requests and answers are kafka-python's generated classes (``protocol.messages``), so their
layouts are Kafka's own.
"""

from __future__ import annotations

import asyncio
import ssl
import struct
from typing import Any

from protocol.messages import ApiMessage, response_class

_SIZE = struct.Struct(">i")
MAX_RESPONSE_BYTES = 256 * 1024 * 1024  # a broker's answer is bounded by what its request asked for


class InterBrokerClient:
    def __init__(self, host: str, port: int, client_id: str, timeout_s: float = 30.0,
                 tls: ssl.SSLContext | None = None) -> None:
        self.host, self.port = host, port
        self.tls = tls  # the inter-broker listener is an SSL one
        self.client_id = client_id
        self.timeout_s = timeout_s
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation = 0
        self._lock = asyncio.Lock()
        self.waiting = 0  # sends in progress or queued (the marker channel picks an idle client)

    def retarget(self, host: str, port: int) -> None:
        """The broker now listens elsewhere (it came back on a new port): reconnect there."""
        if (host, port) != (self.host, self.port):
            self.close()
            self.host, self.port = host, port

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self._writer is None or self._writer.is_closing() or self._reader is None:
            self._reader, self._writer = await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port, ssl=self.tls), self.timeout_s)
        return self._reader, self._writer  # type: ignore[return-value]

    async def send(self, request: ApiMessage, version: int) -> Any:
        """The decoded answer; raises OSError / asyncio.TimeoutError (and closes) on failure."""
        self.waiting += 1
        try:
            return await self._send(request, version)
        finally:
            self.waiting -= 1

    async def _send(self, request: ApiMessage, version: int) -> Any:
        async with self._lock:
            try:
                reader, writer = await self._connect()
                self._correlation = (self._correlation + 1) & 0x7FFFFFFF
                request.with_header(correlation_id=self._correlation, client_id=self.client_id)
                writer.write(bytes(request.encode(version=version, header=True, framed=True)))
                await writer.drain()
                size = _SIZE.unpack(await asyncio.wait_for(reader.readexactly(4), self.timeout_s))[0]
                if not 0 < size <= MAX_RESPONSE_BYTES:
                    raise OSError(f"bad response size {size} from {self.host}:{self.port}")
                frame = await asyncio.wait_for(reader.readexactly(size), self.timeout_s)
            except (TimeoutError, OSError, asyncio.IncompleteReadError):
                self.close()
                raise
        cls = response_class(request.API_KEY)
        corr = _SIZE.unpack_from(frame, 0)[0]
        if corr != self._correlation:
            self.close()
            raise OSError(f"correlation id {corr} != {self._correlation}")
        flexible = cls.flexible_version_q(version) and cls.API_KEY != 18
        return cls.decode(frame[5 if flexible else 4:], version=version)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None
