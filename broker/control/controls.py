"""What the control endpoint steers in the request path of every broker of the process: fault
rules, the request log and the API versions advertised (an emulated Kafka release, and per-API
ranges as librdkafka's ``rd_kafka_mock_set_apiversion`` sets them). The dispatcher reads one
flag, ``engaged``, per request; while it is false (no rule, no RTT, no log, no emulation: the
default) requests take exactly the path they take without any of this.
"""

from __future__ import annotations

from broker.control.faults import FaultRules
from broker.control.kafka_versions import KafkaRelease
from broker.control.request_log import RequestLog


class Controls:
    def __init__(self, request_log_size: int = 10_000, seed: int | None = None) -> None:
        self.faults = FaultRules(seed)
        self.requests = RequestLog(request_log_size)
        self.logging = False  # the request log records (on with the control endpoint)
        self.release: KafkaRelease | None = None  # the Kafka release whose API versions are advertised
        self.api_ranges: dict[int, tuple[int, int]] = {}  # per-API ranges set on top; (-1, -1): not advertised
        self.engaged = False
        self.faults.on_change.append(self.update)

    def update(self) -> None:
        self.engaged = self.logging or self.faults.active or self.restricted

    @property
    def restricted(self) -> bool:
        """The advertised API versions are not this broker's own."""
        return self.release is not None or bool(self.api_ranges)

    def set_api_range(self, api_key: int, low: int, high: int) -> None:
        """Advertise ``api_key`` at ``low``-``high`` only (within what is served); -1, -1: not at all."""
        self.api_ranges[api_key] = (low, high)
        self.update()

    def reset_api_ranges(self) -> None:
        self.api_ranges.clear()
        self.update()

    def advertised(self, ours: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
        """(key, min, max) to list in ApiVersions, from this broker's own."""
        out = self.release.advertised(ours) if self.release is not None else list(ours)
        if self.api_ranges:
            restricted = []
            for key, lo, hi in out:
                if key in self.api_ranges:
                    low, high = self.api_ranges[key]
                    lo, hi = max(lo, low), min(hi, high)
                if 0 <= lo <= hi:
                    restricted.append((key, lo, hi))
            out = restricted
        return out

    def accepts(self, api_key: int, version: int) -> bool:
        """Whether a request of this version is served (else the connection is closed, as a broker
        that does not serve it closes it)."""
        if self.release is not None and not self.release.accepts(api_key, version):
            return False
        bounds = self.api_ranges.get(api_key)
        return bounds is None or bounds[0] <= version <= bounds[1]

    def log_requests(self, on: bool) -> None:
        self.logging = on
        self.update()

    def emulate(self, release: KafkaRelease | None) -> None:
        self.release = release
        self.update()
