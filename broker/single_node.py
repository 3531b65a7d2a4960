"""One broker as a process (the default, ``cluster.brokers`` 1), seen by the control endpoint the
way a process of several brokers is: the same actions (fault rules, the request log, time, the
emulated release, broker down/up) work on a lone broker, whose data stays directly in its
``log.dirs`` (no ``broker-<id>/`` level, unlike ``--brokers N``).

Taking the broker down closes its listeners and stops it (cleanly, or as ``kill -9`` leaves it);
bringing it up starts a new broker over the same data, as a restart of the process would.
"""

from __future__ import annotations

import structlog

from broker.broker import Broker
from broker.cluster.shared import SharedCluster
from broker.config.broker_config import BrokerConfig, pinned_listeners
from broker.control.controls import Controls
from broker.ops.control_http import ControlEndpoint
from storage.clock import SYSTEM_CLOCK, Clock

log = structlog.get_logger(__name__)


class SingleNode:
    def __init__(self, config: BrokerConfig, clock: Clock = SYSTEM_CLOCK, controls: Controls | None = None) -> None:
        self.config = config
        self.clock = clock
        self.controls = controls if controls is not None else Controls()
        self.count = 1
        self.broker = self._new_broker()
        self.control = ControlEndpoint(self)  # served when control.port > 0

    def _new_broker(self, bound: dict[str, int] | None = None) -> Broker:
        config = self.config
        if bound:  # back where its clients knew it
            config = BrokerConfig({**config.originals, "listeners": pinned_listeners(config.get("listeners"), bound)},
                                  sources=config.sources)
        return Broker(config, self.clock, controls=self.controls)

    @property
    def node_ids(self) -> list[int]:
        return [self.broker.node_id]

    @property
    def brokers(self) -> dict[int, Broker]:
        return {self.broker.node_id: self.broker}

    @property
    def shared(self) -> SharedCluster:
        return self.broker.cluster_state

    @property
    def cluster_id(self) -> str:
        return self.broker.cluster_id

    async def start(self) -> None:
        await self.broker.start()
        port = int(self.config.get("control.port") or 0)
        if port > 0:
            await self.control.start(str(self.config.get("control.host") or "127.0.0.1"), port)

    async def start_broker(self, node_id: int) -> Broker:
        if not self.broker.stopping:
            return self.broker
        self.broker = self._new_broker(self.broker.bound_ports)
        await self.broker.start()
        return self.broker

    async def stop_broker(self, node_id: int, clean: bool = True) -> None:
        if not self.broker.stopping:
            await self.broker.stop(clean)

    def alive(self, node_id: int) -> bool:
        return node_id == self.broker.node_id and not self.broker.stopping

    def running(self) -> list[Broker]:
        return [] if self.broker.stopping else [self.broker]

    async def stop(self) -> None:
        await self.control.stop()
        await self.stop_broker(self.broker.node_id)
