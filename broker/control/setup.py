"""The process's clock and controls from its configuration, checked before anything starts.

Safe by default: everything here is off unless configured. The endpoint (``control.port``)
binds loopback unless ``control.host`` says otherwise; a virtual clock needs the endpoint (only
it moves the clock); a faults file (``--faults``) is loaded at start-up with or without it.
"""

from __future__ import annotations

from broker.config.broker_config import BrokerConfig
from broker.control.controls import Controls
from broker.control.faults import FaultSpecError, load_file
from broker.control.kafka_versions import release
from storage.clock import SYSTEM_CLOCK, Clock, VirtualClock

CLOCKS = ("system", "virtual")


def process_clock(config: BrokerConfig) -> Clock:
    kind = str(config.get("control.clock") or "system").lower()
    if kind not in CLOCKS:
        raise ValueError(f"control.clock must be one of {', '.join(CLOCKS)}, not {kind!r}")
    if kind == "virtual":
        if int(config.get("control.port") or 0) <= 0:
            raise ValueError("control.clock=virtual needs the control endpoint (control.port), which moves it")
        return VirtualClock()
    return SYSTEM_CLOCK


def build_controls(config: BrokerConfig) -> Controls:
    """Raises ValueError for a faults file or a Kafka release that cannot be used."""
    size = int(config.get("control.request.log.size"))
    if size < 1:
        raise ValueError("control.request.log.size must be at least 1")
    controls = Controls(request_log_size=size)
    path = str(config.get("control.faults.file") or "")
    if path:
        try:
            spec = load_file(path)
            controls.faults.add(spec if spec is not None else [])
        except (OSError, FaultSpecError) as e:
            raise ValueError(f"control.faults.file {path}: {e}") from None
    version = str(config.get("control.kafka.version") or "")
    if version:
        controls.emulate(release(version))
    controls.log_requests(int(config.get("control.port") or 0) > 0)
    return controls
