"""What the control endpoint steers in the request path of every broker of the process: fault
rules, the request log and the emulated Kafka release. The dispatcher reads one flag,
``engaged``, per request; while it is false (no rule, no RTT, no log, no emulation: the default)
requests take exactly the path they take without any of this.
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
        self.engaged = False
        self.faults.on_change.append(self.update)

    def update(self) -> None:
        self.engaged = self.logging or self.faults.active or self.release is not None

    def log_requests(self, on: bool) -> None:
        self.logging = on
        self.update()

    def emulate(self, release: KafkaRelease | None) -> None:
        self.release = release
        self.update()
