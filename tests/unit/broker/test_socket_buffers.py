"""socket.send.buffer.bytes / socket.receive.buffer.bytes become SO_SNDBUF / SO_RCVBUF on every
accepted connection, as Kafka's acceptor sets them; -1 leaves the OS default (autotuning)."""

from __future__ import annotations

import socket

from broker.config.broker_config import BrokerConfig
from broker.net.server import _set_buffer_sizes


class _Config(dict):
    def get(self, key):  # the broker config's accessor
        return self[key]


def test_buffer_sizes_applied_or_left_to_the_os() -> None:
    a, b = socket.socketpair()
    try:
        default_snd = b.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
        _set_buffer_sizes(a, _Config({"socket.send.buffer.bytes": 65536, "socket.receive.buffer.bytes": 32768}))
        # Linux doubles the requested size for bookkeeping
        assert a.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) in (65536, 131072)
        assert a.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) in (32768, 65536)
        _set_buffer_sizes(b, _Config({"socket.send.buffer.bytes": -1, "socket.receive.buffer.bytes": -1}))
        assert b.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) == default_snd
        _set_buffer_sizes(None, _Config())  # a transport without a socket: nothing to do
    finally:
        a.close()
        b.close()


def test_send_buffer_left_to_the_os_by_default() -> None:
    """A deliberate difference from Kafka's 102400: an autotuned send buffer takes a whole Fetch answer
    in one sendfile; the receive buffer keeps Kafka's default."""
    config = BrokerConfig()
    assert config.get("socket.send.buffer.bytes") == -1
    assert config.get("socket.receive.buffer.bytes") == 102400
