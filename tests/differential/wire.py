"""A small blocking Kafka protocol client for differential tests: one socket, exact requests.

Requests are kafka-python's generated message classes (built from Apache Kafka's JSON specs); the
answer is decoded with the response class of the same API at the same version. Nothing here comes
from the broker under test, so the same bytes go to Apache Kafka and to ours.
"""

from __future__ import annotations

import socket
import ssl
import struct
import time

from kafka.protocol.api_message import ApiMessage
from kafka.protocol.metadata import ApiVersionsResponse
from kafka.record.default_records import DefaultRecordBatchBuilder

from protocol.messages import response_class  # a lookup table over kafka-python's classes only


class ConnectionClosed(Exception):
    """The broker closed the connection instead of answering (Kafka does this for unparsable requests)."""


class WireClient:
    def __init__(self, bootstrap: str, timeout: float = 15.0, client_id: str = "differential",
                 tls: ssl.SSLContext | None = None) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.bootstrap = bootstrap
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        if tls is not None:  # an SSL listener
            self.sock = tls.wrap_socket(self.sock, server_hostname=host)
        self.client_id = client_id
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- bytes --------------------------------------------------------------------------------------
    def _recv(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            try:
                chunk = self.sock.recv(n - len(buf))
            except ConnectionResetError as e:
                raise ConnectionClosed() from e
            if not chunk:
                raise ConnectionClosed()
            buf += chunk
        return bytes(buf)

    def recv_frame(self) -> bytes:
        (size,) = struct.unpack(">i", self._recv(4))
        return self._recv(size)

    def send_raw(self, api_key: int, api_version: int, body: bytes, flexible_header: bool = False) -> bytes:
        """Send a hand-made request (header v1, or v2 when ``flexible_header``); return the response frame
        after the correlation id."""
        self.correlation_id += 1
        cid = self.client_id.encode()
        header = struct.pack(">hhih", api_key, api_version, self.correlation_id, len(cid)) + cid
        if flexible_header:
            header += b"\x00"
        frame = header + body
        try:
            self.sock.sendall(struct.pack(">i", len(frame)) + frame)
        except (BrokenPipeError, ConnectionResetError) as e:
            raise ConnectionClosed() from e
        resp = self.recv_frame()
        (corr,) = struct.unpack_from(">i", resp, 0)
        assert corr == self.correlation_id, (corr, self.correlation_id)
        return resp[4:]

    def is_closed(self, timeout: float = 5.0) -> bool:
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False

    # -- messages -----------------------------------------------------------------------------------
    def send(self, request: ApiMessage, version: int, expect_response: bool = True):
        self.correlation_id += 1
        request.with_header(correlation_id=self.correlation_id, client_id=self.client_id)
        try:
            self.sock.sendall(bytes(request.encode(version=version, header=True, framed=True)))
        except (BrokenPipeError, ConnectionResetError) as e:
            raise ConnectionClosed() from e
        if not expect_response:
            return None
        frame = self.recv_frame()
        (corr,) = struct.unpack_from(">i", frame, 0)
        assert corr == self.correlation_id, (corr, self.correlation_id)
        cls = response_class(request.API_KEY)
        # KIP-511: the ApiVersions response header is always v0; other flexible responses have a
        # tagged-field section (always empty from both brokers) after the correlation id.
        flexible = cls.flexible_version_q(version) and request.API_KEY != 18
        return cls.decode(frame[5 if flexible else 4:], version=version)


def decode_api_versions_v0(body: bytes):
    return ApiVersionsResponse[0].decode(body)


def record_batch(values, *, key: bytes | None = None, producer_id: int = -1, producer_epoch: int = -1,
                 base_sequence: int = -1, transactional: bool = False, compression: int = 0,
                 timestamps=None) -> bytes:
    """A RecordBatch v2 built with kafka-python's DefaultRecordBatchBuilder (an independent encoder)."""
    b = DefaultRecordBatchBuilder(magic=2, compression_type=compression, is_transactional=transactional,
                                  producer_id=producer_id, producer_epoch=producer_epoch,
                                  base_sequence=base_sequence, batch_size=1 << 30)
    now = int(time.time() * 1000)
    for i, v in enumerate(values):
        ts = timestamps[i] if timestamps is not None else now
        b.append(i, timestamp=ts, key=key, value=v, headers=[])
    return bytes(b.build())


def _fill(cls, data: dict, version: int | None):
    fields = cls._struct.fields
    vals = {}
    for name, value in data.items():
        f = fields[name]
        if f.is_struct_array() and value is not None:
            value = [_fill(f.data_class, v, None) if isinstance(v, dict) else v for v in value]
        elif f.is_struct() and isinstance(value, dict):
            value = _fill(f.data_class, value, None)
        vals[name] = value
    return cls(**vals) if version is None else cls(version=version, **vals)


def build(cls, version: int, **data) -> ApiMessage:
    """``build(CreateTopicsRequest, 7, topics=[{"name": "t", ...}])``: nested dicts become the generated
    nested classes, so requests read like the JSON specs."""
    return _fill(cls, data, version)
