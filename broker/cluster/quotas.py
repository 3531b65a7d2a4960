"""Client quotas: what AlterClientQuotas stores and how Produce and Fetch are throttled by it.

Entities are Kafka's: ``user``, ``client-id`` (each a name or the default, None) and ``ip``. A
request's quota is found in Kafka's DefaultQuotaCallback order, most specific first:
/users/<u>/clients/<c>, /users/<u>/clients/<default>, /users/<u>, /users/<default>/clients/<c>,
/users/<default>/clients/<default>, /users/<default>, /clients/<c>, /clients/<default>. With no
SASL every principal is ``ANONYMOUS``; on a SASL listener it is the authenticated user. ``producer_byte_rate`` counts produce request bytes and
``consumer_byte_rate`` fetch response bytes over ``quota.window.num`` windows of
``quota.window.size.seconds`` (Kafka's 11 x 1 s); a client over its rate gets Kafka's throttle time
(``(rate - quota) / quota * window``) in the answer, and its connection reads no further request
until that time has passed (KIP-219's muted channel). ``request_percentage`` counts the time
the event loop spent on the client's requests, as Kafka counts request-handler thread time, in
percent of one second per second; a client over it is throttled the same way. The other keys
(controller_mutation_rate, connection_creation_rate) are stored and described, not enforced.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from typing import TYPE_CHECKING

from storage.clock import SYSTEM_CLOCK, Clock

if TYPE_CHECKING:
    from broker.cluster.metadata import MetadataStore

Entity = tuple[tuple[str, str | None], ...]  # ((type, name or None = default), ...) sorted by type

USER, CLIENT_ID, IP = "user", "client-id", "ip"
ANONYMOUS = "ANONYMOUS"
# key -> whether it must be a whole number (Kafka's QuotaConfig: LONG keys vs DOUBLE ones)
CLIENT_KEYS = {"producer_byte_rate": True, "consumer_byte_rate": True, "request_percentage": False,
               "controller_mutation_rate": False}
IP_KEYS = {"connection_creation_rate": True}
ENFORCED = ("producer_byte_rate", "consumer_byte_rate")


def entity_key(components: Iterable[tuple[str, str | None]]) -> Entity:
    return tuple(sorted(components))


class _Rate:
    """Kafka's Rate over ``samples`` windows of ``window_s`` seconds."""

    __slots__ = ("samples", "window_s", "buckets", "first")

    def __init__(self, samples: int, window_s: float, now: float) -> None:
        self.samples = samples
        self.window_s = window_s
        self.buckets: deque[list[float]] = deque()  # [window start, total]
        self.first = now

    def record(self, value: float, now: float) -> float:
        start = now - (now - self.first) % self.window_s
        if not self.buckets or self.buckets[-1][0] != start:
            self.buckets.append([start, 0.0])
        self.buckets[-1][1] += value
        horizon = now - self.samples * self.window_s
        while self.buckets and self.buckets[0][0] + self.window_s <= horizon:
            self.buckets.popleft()
        return self.measure(now)

    def elapsed(self, now: float) -> float:
        oldest = self.buckets[0][0] if self.buckets else now
        return max(now - oldest, (self.samples - 1) * self.window_s)

    def measure(self, now: float) -> float:
        return sum(b[1] for b in self.buckets) / self.elapsed(now)


class ClientQuotas:
    def __init__(self, store: MetadataStore, samples: int = 11, window_s: float = 1.0,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.clock = clock
        self.store = store  # its client_quotas are the quotas in force
        self.samples = samples
        self.window_s = window_s
        self._rates: dict[tuple[str, Entity], _Rate] = {}
        self.muted_until: dict[str, float] = {}  # connection id -> clock.monotonic() deadline

    @property
    def enforcing(self) -> bool:
        return any(k in values for values in self.store.client_quotas.values() for k in ENFORCED)

    @property
    def enforcing_requests(self) -> bool:
        return any("request_percentage" in values for values in self.store.client_quotas.values())

    def quota(self, key: str, user: str, client_id: str) -> tuple[Entity, float] | None:
        """The quota entity that applies and its value (DefaultQuotaCallback's order)."""
        quotas = self.store.client_quotas
        for entity in ((((CLIENT_ID, client_id), (USER, user))), ((CLIENT_ID, None), (USER, user)), ((USER, user),),
                       ((CLIENT_ID, client_id), (USER, None)), ((CLIENT_ID, None), (USER, None)), ((USER, None),),
                       ((CLIENT_ID, client_id),), ((CLIENT_ID, None),)):
            values = quotas.get(entity)
            if values is not None and key in values:
                return entity, values[key]
        return None

    def record(self, key: str, client_id: str | None, amount: float, now: float | None = None,
               user: str = ANONYMOUS) -> int:
        """Count ``amount`` (bytes, or percent-seconds for request_percentage) against the client's
        ``key`` quota; the throttle time in ms (0: within it)."""
        found = self.quota(key, user, client_id or "")
        if found is None:
            return 0
        entity, bound = found
        now = self.clock.monotonic() if now is None else now
        rate = self._rates.get((key, entity))
        if rate is None:
            rate = self._rates[(key, entity)] = _Rate(self.samples, self.window_s, now)
        observed = rate.record(amount, now)
        if bound <= 0 or observed <= bound:
            return 0
        throttle = (observed - bound) / bound * rate.elapsed(now) * 1000
        return int(min(math.ceil(throttle), self.samples * self.window_s * 1000))

    def mute(self, connection_id: str, throttle_ms: int) -> None:
        if throttle_ms > 0:
            self.muted_until[connection_id] = self.clock.monotonic() + throttle_ms / 1000

    def forget_connection(self, connection_id: str) -> None:
        self.muted_until.pop(connection_id, None)


def user_of(principal: str) -> str:
    """The principal's name, as quotas see users: the SASL user, the TLS subject, or ANONYMOUS."""
    return principal.partition(":")[2] or ANONYMOUS
