"""A minimal blocking Kafka client over a socket, for tests that need exact requests.

Requests are kafka-python's generated message classes; the answer is decoded with the matching
response class at the same version.
"""

from __future__ import annotations

import socket
import struct

from kafka.protocol.api_message import ApiMessage


class ConnectionClosed(Exception):
    pass


class RawClient:
    def __init__(self, bootstrap: str, timeout: float = 10.0, client_id: str = "raw-test") -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.client_id = client_id
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv_frame(self) -> bytes:
        size = struct.unpack(">i", self._recv(4))[0]
        return self._recv(size)

    def _recv(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionClosed()
            buf += chunk
        return buf

    def is_closed(self, timeout: float = 5.0) -> bool:
        """True when the broker has closed this connection."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False

    def send(self, request: ApiMessage, version: int, expect_response: bool = True):
        self.correlation_id += 1
        request.with_header(correlation_id=self.correlation_id, client_id=self.client_id)
        self.send_bytes(bytes(request.encode(version=version, header=True, framed=True)))
        if not expect_response:
            return None
        frame = self.recv_frame()
        response_cls = type(request).header_class and _response_class(request)
        flexible = response_cls.flexible_version_q(version) and response_cls.API_KEY != 18
        corr = struct.unpack_from(">i", frame, 0)[0]
        assert corr == self.correlation_id, (corr, self.correlation_id)
        offset = 5 if flexible else 4
        return response_cls.decode(frame[offset:], version=version)


def _response_class(request: ApiMessage):
    from protocol.messages import response_class

    return response_class(request.API_KEY)
