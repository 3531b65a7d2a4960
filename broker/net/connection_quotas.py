"""Kafka's ConnectionQuotas: how many connections the broker, a listener and one client address
may hold (``max.connections``, ``listener.name.<listener>.max.connections``,
``max.connections.per.ip`` with ``max.connections.per.ip.overrides``).

A connection over a per-address limit is closed at once, as Kafka closes it
(TooManyConnectionsException). Over the broker or listener limit Kafka's acceptor stops
accepting until a connection closes; asyncio cannot hold a listening socket back, so such a
connection is closed too and the client's reconnect backoff does the waiting.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

INT_MAX = 2147483647


def parse_overrides(value: str | None) -> dict[str, int]:
    """``max.connections.per.ip.overrides``: ``host:count`` pairs, comma separated."""
    out: dict[str, int] = {}
    for item in (value or "").split(","):
        item = item.strip()
        if not item:
            continue
        host, _, count = item.rpartition(":")
        if not host or not count.strip().lstrip("-").isdigit():
            raise ValueError(f"Invalid max.connections.per.ip.overrides entry {item!r}: expected host:count")
        out[host.strip()] = int(count)
    return out


class ConnectionQuotas:
    def __init__(self, get: Callable[[str], Any]) -> None:
        """``get(name)``: the broker's current value of a config (dynamic configs apply at once)."""
        self._get = get
        self.total = 0
        self.per_listener: Counter[str] = Counter()
        self.per_ip: Counter[str] = Counter()

    def _limit(self, name: str) -> int:
        value = self._get(name)
        return INT_MAX if value is None else int(value)

    def admit(self, listener: str, ip: str) -> str | None:
        """Count a new connection in; the reason it is refused (and not counted), or None."""
        overrides = parse_overrides(self._get("max.connections.per.ip.overrides"))
        per_ip = overrides.get(ip, self._limit("max.connections.per.ip"))
        if self.per_ip[ip] >= per_ip:
            return f"Too many connections from {ip} (maximum = {per_ip})"
        listener_limit = self._get(f"listener.name.{listener.lower()}.max.connections")
        if listener_limit is not None and self.per_listener[listener] >= int(listener_limit):
            return f"Too many connections on listener {listener} (maximum = {listener_limit})"
        total = self._limit("max.connections")
        if self.total >= total:
            return f"Too many connections (max.connections = {total})"
        self.total += 1
        self.per_listener[listener] += 1
        self.per_ip[ip] += 1
        return None

    def release(self, listener: str, ip: str) -> None:
        self.total -= 1
        self.per_listener[listener] -= 1
        self.per_ip[ip] -= 1
        if self.per_ip[ip] <= 0:
            del self.per_ip[ip]
