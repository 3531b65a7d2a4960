"""Several brokers in one process and one event loop (``cluster.brokers`` N > 1, ``--brokers N``):
node ids 1..N, broker i listening on each configured port + (i - 1) and advertising likewise,
keeping its data in ``<log.dirs>/broker-<i>/`` (Kafka's layout: its own meta.properties,
partition directories and checkpoints), with its own replica manager, fetchers and coordinators.

What a KRaft cluster's controller holds is shared (``broker.cluster.shared``): the cluster
metadata in ``<first log dir>/__cluster_metadata/``, the broker registry, the replication rules
and the producer id blocks. A broker can be taken down (listeners closed, fetchers and
coordinators stopped, data kept; the others elect new leaders) and brought back (its logs
recovered as after a crash, then it catches up from the leaders).
"""

from __future__ import annotations

import asyncio
import base64
import uuid
from pathlib import Path

import structlog

from broker.broker import Broker
from broker.cluster.brokers import BrokerRegistry
from broker.cluster.metadata import MetadataStore
from broker.cluster.replication_control import ReplicationControl
from broker.cluster.shared import ConfiguredTopicSettings, SharedCluster
from broker.config.broker_config import BrokerConfig, parse_listeners, pinned_listeners
from broker.control.controls import Controls
from broker.ops.control_http import ControlEndpoint
from coordinator.producer_ids import ProducerIdManager
from storage import checkpoints
from storage.clock import SYSTEM_CLOCK, Clock

log = structlog.get_logger(__name__)


def _shift(listeners: str, offset: int) -> str:
    """Each listener's port moved by ``offset`` (port 0, "any free port", stays 0)."""
    out = []
    for name, host, port in parse_listeners(listeners):
        host = f"[{host}]" if ":" in host else host
        out.append(f"{name}://{host}:{port + offset if port else 0}")
    return ",".join(out)


def broker_config(base: BrokerConfig, node_id: int, cluster_id: str) -> BrokerConfig:
    """Broker ``node_id``'s settings: the process's, with its id, ports and data directory."""
    props = dict(base.originals)
    props["node.id"] = str(node_id)
    props.pop("broker.id", None)
    props["cluster.id"] = cluster_id
    props["listeners"] = _shift(base.get("listeners"), node_id - 1)
    if base.get("advertised.listeners"):
        props["advertised.listeners"] = _shift(base.get("advertised.listeners"), node_id - 1)
    props["log.dirs"] = ",".join(str(Path(d) / f"broker-{node_id}") for d in base.log_dirs)
    props.pop("log.dir", None)
    metrics_port = int(base.get("metrics.port"))
    if metrics_port > 0:
        props["metrics.port"] = str(metrics_port + node_id - 1)
    return BrokerConfig(props, sources=base.sources)


class ClusterProcess:
    def __init__(self, config: BrokerConfig, clock: Clock = SYSTEM_CLOCK, controls: Controls | None = None) -> None:
        self.config = config
        self.clock = clock
        self.controls = controls if controls is not None else Controls()  # shared by every broker
        self.count = int(config.get("cluster.brokers"))
        self.root = Path(config.log_dirs[0])
        metadata = MetadataStore(self.root, local_node=1)
        registry = BrokerRegistry()
        control = ReplicationControl(metadata, registry, ConfiguredTopicSettings(metadata, config))
        self.shared = SharedCluster(metadata, registry, control)
        self.cluster_id = ""
        self.brokers: dict[int, Broker] = {}
        self.control = ControlEndpoint(self)  # served when control.port > 0
        self._balancer: asyncio.Task[None] | None = None

    def _cluster_id(self) -> str:
        """The id every broker's meta.properties agrees on: configured, stored, or new."""
        configured = self.config.get("cluster.id")
        if configured:
            return str(configured)
        for node_id in range(1, self.count + 1):
            props = checkpoints.read_meta_properties(str(self.root / f"broker-{node_id}" / "meta.properties"))
            if props and props.get("cluster.id"):
                return props["cluster.id"]
        return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")

    async def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.cluster_id = self._cluster_id()
        self.shared.metadata.load()
        self.shared.producer_ids = ProducerIdManager(self.root, broker_id=0)
        for node_id in range(1, self.count + 1):
            await self.start_broker(node_id)
        port = int(self.config.get("control.port") or 0)
        if port > 0:
            await self.control.start(str(self.config.get("control.host") or "127.0.0.1"), port)
        if self.config.get("auto.leader.rebalance.enable"):
            self._balancer = asyncio.create_task(self._balance_leaders(), name="leader-balance")
        log.info("cluster started", brokers=self.count, cluster_id=self.cluster_id)

    async def _balance_leaders(self) -> None:
        """The controller's periodic preferred-leader election, every
        leader.imbalance.check.interval.seconds (the process's clock: a test's ManualClock moves it)."""
        while True:
            await self.clock.sleep(max(int(self.config.get("leader.imbalance.check.interval.seconds")), 1))
            try:
                moved = self.shared.replication_control.balance_leaders()
                if moved:
                    log.info("preferred leaders restored", partitions=moved)
            except Exception:  # noqa: BLE001 - the next pass tries again
                log.exception("leader balance failed")

    async def start_broker(self, node_id: int) -> Broker:
        """Start (or bring back) broker ``node_id``: a new broker object over the same data."""
        if node_id in self.brokers and not self.brokers[node_id].stopping:
            return self.brokers[node_id]
        config = broker_config(self.config, node_id, self.cluster_id)
        previous = self.brokers.get(node_id)
        if previous is not None and previous.bound_ports:  # back where its clients knew it
            config = BrokerConfig({**config.originals,
                                   "listeners": pinned_listeners(config.get("listeners"), previous.bound_ports)},
                                  sources=config.sources)
        broker = Broker(config, self.clock, self.shared, self.controls)
        self.brokers[node_id] = broker
        self.shared.members[node_id] = broker
        await broker.start()
        return broker

    async def stop_broker(self, node_id: int, clean: bool = True) -> None:
        """Take broker ``node_id`` down: listeners closed, data kept; its logs closed cleanly, or
        (``clean=False``) left as a crash leaves them, to be recovered when it comes back."""
        broker = self.brokers.get(node_id)
        if broker is not None and not broker.stopping:
            await broker.stop(clean)

    def running(self) -> list[Broker]:
        return [b for b in self.brokers.values() if not b.stopping]

    @property
    def node_ids(self) -> list[int]:
        return list(range(1, self.count + 1))

    def alive(self, node_id: int) -> bool:
        return self.shared.brokers.alive(node_id)

    async def stop(self) -> None:
        if self._balancer is not None:
            self._balancer.cancel()
        await self.control.stop()
        for node_id in sorted(self.brokers, reverse=True):
            await self.stop_broker(node_id)
        try:
            self.shared.metadata.write_snapshot()
        except OSError as e:
            log.error("metadata snapshot failed; the journal is kept", error=str(e))
