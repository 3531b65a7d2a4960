"""The composition root: the broker process builds every service, injects the ports and owns every
piece of state, on one event loop, with no locks. Handlers see it through ``broker.services``.

Start-up order: meta.properties (cluster id that survives restarts) -> topic metadata ->
partition logs (recovery only after an unclean stop) -> coordinators -> listeners. Shutdown
runs it backwards: stop accepting, let in-flight requests finish, close connections, then close
the logs cleanly (flush, producer snapshots, checkpoints, clean-shutdown marker).
"""

from __future__ import annotations

import asyncio
import base64
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import structlog

from broker.cluster.brokers import BrokerRegistry
from broker.cluster.controller import Controller
from broker.cluster.metadata import MetadataStore
from broker.cluster.quotas import ClientQuotas
from broker.cluster.replication_control import ReplicationControl
from broker.cluster.shared import ConfiguredTopicSettings, SharedCluster
from broker.config.broker_config import BrokerConfig, listener_mechanisms
from broker.config.dynamic_config import check_stored
from broker.config.features import ELR_VERSION, elr_safety, ensure_formatted, level
from broker.control.controls import Controls
from broker.coordinator_ports import BrokerCoordinatorEnv, BrokerPartitionWriter
from broker.handlers.registry import load_all
from broker.inspect.live.recorder import CoordinatorObserver, TxnRecorder
from broker.inspect.live.settings import inspector_enabled
from broker.net.connection_quotas import ConnectionQuotas
from broker.net.sasl import SaslSession, ScramCredential, plain_users
from broker.net.server import Connection, start_listeners
from broker.net.tls import peer_subject, setting
from broker.ops.metrics import BrokerMetrics
from broker.ops.metrics_http import start_metrics
from broker.replica.fetch_sessions import FetchSessionCache
from broker.replica.replica_manager import ReplicaManager
from broker.replica.replication import Replication
from broker.replica.txn_markers import InProcessMarkerChannel
from broker.replica.txn_verification import BrokerTransactionVerifier
from broker.security.authorizer import Authorizer
from broker.security.principal import ANONYMOUS, Rule, map_subject, parse_rules
from coordinator.group.coordinator import GroupCoordinator
from coordinator.producer_ids import ProducerIdManager, expire_idle_producers
from coordinator.txn.coordinator import TransactionCoordinator
from storage import checkpoints
from storage.cleaner.config import CleanerConfig
from storage.cleaner.manager import LogCleaner
from storage.clock import SYSTEM_CLOCK, Clock
from storage.log_manager import LogManager

log = structlog.get_logger(__name__)

# In-flight requests (a parked Fetch, a JoinGroup waiting for its rebalance) get this long to finish
# on SIGTERM; then they are cancelled, so that flushing the logs still fits in Docker's 10 s grace.
SHUTDOWN_GRACE_SECONDS = 3.0


def _new_cluster_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


Hook = Callable[["Broker"], Awaitable[None]]


class Broker:
    """Satisfies ``broker.services.Services``. What needs the disk (producer ids, the coordinators'
    loads) is built in ``start``: a started broker always has every service."""

    producer_ids: ProducerIdManager
    group_coordinator: GroupCoordinator
    txn_coordinator: TransactionCoordinator

    def __init__(self, config: BrokerConfig, clock: Clock = SYSTEM_CLOCK, cluster: SharedCluster | None = None,
                 controls: Controls | None = None) -> None:
        self.config = config
        self.clock = clock  # the one clock: logs, coordinators, expiry, timeouts (a VirtualClock under control.clock)
        self.wire_clock: Clock = SYSTEM_CLOCK  # network waits keep real time: long polls, acks, idle, throttles
        # fault rules, the request log, the emulated release: steered by the control endpoint
        self.controls = controls if controls is not None else Controls()
        self.node_id: int = config.node_id
        self.cluster_id: str = ""
        self.metrics = BrokerMetrics()
        self.connections: set[Connection] = set()
        self.connection_quotas = ConnectionQuotas(config.get)
        self.max_frame_size = int(config.get("socket.request.max.bytes"))
        self.sasl_max_receive_size = int(config.get("sasl.server.max.receive.size"))
        # Kafka's memory pool: bytes of requests received and not yet answered, on every connection
        self.queued_max_request_bytes = int(config.get("queued.max.request.bytes"))
        self.queued_request_bytes = 0
        self.memory_paused: set[Connection] = set()  # connections waiting for queued.max.request.bytes
        self.inflight: set[asyncio.Task] = set()
        self.bound_ports: dict[str, int] = {}
        self.started_at = time.perf_counter()  # for the start-up time in the log
        # One broker alone owns its cluster metadata; brokers of one process share theirs
        self.shared = cluster
        if cluster is None:
            metadata = MetadataStore(config.log_dirs[0], local_node=config.node_id)
            brokers = BrokerRegistry()  # a cluster of one; registered once listening
            cluster = SharedCluster(metadata, brokers, ReplicationControl(
                metadata, brokers, ConfiguredTopicSettings(metadata, config)))
        self.cluster_state: SharedCluster = cluster  # this broker's, or the process's brokers' together
        # the transaction inspector's timeline events (beside /metrics): recorded only when it can be read
        if cluster.txn_recorder is None and inspector_enabled(config):
            cluster.txn_recorder = TxnRecorder(clock, config.get("inspector.timeline.events.per.id"),
                                               config.get("inspector.timeline.max.events"))
        self.txn_recorder: TxnRecorder | None = cluster.txn_recorder if inspector_enabled(config) else None
        self.metadata = cluster.metadata
        self.authorizer = Authorizer.from_config(config, self.metadata)  # authorizer.class.name
        self.brokers = cluster.brokers
        self.replication_control = cluster.replication_control
        self.metrics.topic_exists = lambda topic: self.metadata.get(topic) is not None
        if self.txn_recorder is not None:
            self.txn_recorder.namer = self.metadata.name_of
        self.sasl_sessions: dict[str, SaslSession] = {}  # connection id -> its SASL exchange
        self._principal_rules: dict[str, list[Rule]] = {}  # listener -> ssl.principal.mapping.rules
        self.quotas = ClientQuotas(self.metadata, int(config.get("quota.window.num")),
                                   float(config.get("quota.window.size.seconds")), self.wire_clock)
        self.controller = Controller(self)
        # KIP-227 sessions; Kafka's eviction time is a constant (MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS)
        self.fetch_sessions = FetchSessionCache(int(config.get("max.incremental.fetch.session.cache.slots")),
                                                eviction_ms=120_000)
        # The logs open in start(), after the dynamic configs are applied (update_broker_defaults)
        self.log_manager = LogManager(config.log_dirs, config.topic_defaults(), topic_overrides=self._topic_overrides,
                                      producer_state_config={
                                          "producer_id_expiration_ms": config.get("producer.id.expiration.ms"),
                                          "max_transaction_timeout_ms": config.get("transaction.max.timeout.ms"),
                                      }, clock=clock)
        self.replica_manager = ReplicaManager(self)
        self.replication = Replication(self)  # leader and follower roles of replicated partitions
        self.log_cleaner: LogCleaner | None = None  # when log.cleaner.enable
        self._servers: list[asyncio.Server] = []
        self.metrics_port: int | None = None  # the /metrics endpoint's bound port (metrics.port)
        self._periodic: list[asyncio.Task[None]] = []
        self._stopped = asyncio.Event()
        self.stopping = False
        self.startup_hooks: list[Hook] = []
        self.shutdown_hooks: list[Hook] = []

    def resume_memory_paused(self) -> None:
        """Connections paused for queued.max.request.bytes read again once there is room."""
        if self.memory_paused and (self.queued_max_request_bytes <= 0
                                   or self.queued_request_bytes < self.queued_max_request_bytes):
            for conn in list(self.memory_paused):
                self.memory_paused.discard(conn)
                conn.resume_after_memory()

    # --- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        load_all()
        for d in self.config.log_dirs:
            Path(d).mkdir(parents=True, exist_ok=True)
        self._load_meta_properties()
        if self.shared is None:  # brokers of one process share metadata their process loaded
            self.metadata.load()
        ensure_formatted(self)  # the finalized features of a new cluster (kafka-storage format)
        try:  # before the logs open: they take the broker-level defaults
            if level(self, ELR_VERSION) >= 1:
                elr_safety(self)
            check_stored(self)
            self.apply_dynamic_configs()
        except Exception:  # noqa: BLE001 - as Kafka: log it and start on the static configs
            log.exception("dynamic broker configs could not be applied; starting with the static configs",
                          stored=self.metadata.broker_configs)
            self.config.set_dynamic({}, {})
            self.log_manager.update_broker_defaults(self.config.topic_defaults(), self._topic_overrides)
            self.log_manager.update_producer_state_config(
                producer_id_expiration_ms=self.config.get("producer.id.expiration.ms"))
        self.log_manager.startup(now_ms=self.clock.now_ms())
        self._reconcile_partitions()
        # producer ids: after the log dirs are locked (one process owns the block file)
        shared_ids = self.shared.producer_ids if self.shared is not None else None
        self.producer_ids = shared_ids or ProducerIdManager(self.config.log_dirs[0], broker_id=self.node_id)
        await self._start_coordinators()
        self._servers = await start_listeners(self)
        self.brokers.register(self)
        if self.shared is not None:  # one of several brokers: take up this broker's replicas
            self.replication_control.publishers.append(self.replication)
            for info in list(self.metadata.topics.values()):
                for p, reg in enumerate(info.registrations):
                    self.replication.apply(info.name, p, reg)
            self.replication_control.broker_unfenced(self.node_id)
            self._schedule(lambda: max(self.config.get("replica.lag.time.max.ms") // 2, 10),
                           self.replication.expire_isr, clock=self.wire_clock)  # followers fetch in real time
        await start_metrics(self)  # collectors; /metrics when metrics.port > 0
        first_ms = self.config.get("log.initial.task.delay.ms")  # LogManager's initialTaskDelayMs
        self._schedule(self.config.get("log.retention.check.interval.ms"), self._retention_tick, first_ms)
        self._schedule(min(self.config.log_flush_interval_ms, 1000), self._flush_tick, clock=self.wire_clock)
        self._schedule(lambda: min(self.config.get("connections.max.idle.ms") // 2, 1000), self._expire_idle_connections,
                       clock=self.wire_clock)
        self._schedule(self.config.get("log.flush.offset.checkpoint.interval.ms"), self.log_manager.checkpoint,
                       first_ms, clock=self.wire_clock)  # I/O housekeeping, not time in Kafka's sense
        if self.config.get("log.cleaner.enable"):  # log compaction, in slices on this loop
            cleaner = self.log_cleaner = LogCleaner.from_broker_config(self.log_manager, self.config)
            self._schedule(lambda: cleaner.config.backoff_ms, cleaner.run)
        # issue 4: Kafka's PeriodicProducerExpirationCheck, for every partition
        self._schedule(self.config.get("producer.id.expiration.check.interval.ms"),
                       lambda: expire_idle_producers(self.log_manager))
        log.info("broker started", node_id=self.node_id, cluster_id=self.cluster_id,
                 log_dirs=self.config.log_dirs, ports=self.bound_ports,
                 startup_ms=round((time.perf_counter() - self.started_at) * 1000, 1))

    async def _start_coordinators(self) -> None:
        """Group and transaction coordinators (added by their own modules when present)."""
        env, writer = BrokerCoordinatorEnv(self), BrokerPartitionWriter(self)
        # Loads __consumer_offsets before the listeners open; stopped by a shutdown hook.
        self.group_coordinator = GroupCoordinator(env, writer, topics=self.metadata,
                                                  verifier=BrokerTransactionVerifier(self))
        await self.group_coordinator.start()
        self.shutdown_hooks.append(lambda broker: broker.group_coordinator.shutdown())
        # Transactions (issue 5): loads __transaction_state in the background; stopped first.
        self.marker_channel = InProcessMarkerChannel(self)
        observer = CoordinatorObserver(self.txn_recorder, self.node_id) if self.txn_recorder is not None else None
        self.txn_coordinator = TransactionCoordinator(env, writer, self.marker_channel, observer)
        await self.txn_coordinator.start()
        self.shutdown_hooks.insert(0, lambda broker: broker.txn_coordinator.shutdown())
        for hook in self.startup_hooks:
            await hook(self)

    def apply_dynamic_configs(self) -> None:
        """Layer the dynamic broker configs kept in the cluster metadata over the static ones and
        hand the new values to what Kafka reconfigures in place (DynamicLogConfig, LogCleaner,
        DynamicProducerStateManagerConfig). Thread pools, listeners, SSL/SASL and connection quotas
        have no counterpart in this single-threaded PLAINTEXT broker: they are kept and reported."""
        stored = self.metadata.broker_configs
        self.config.set_dynamic(stored.get("", {}), stored.get(str(self.node_id), {}))
        self.log_manager.update_broker_defaults(self.config.topic_defaults(), self._topic_overrides)
        self.log_manager.update_producer_state_config(
            producer_id_expiration_ms=self.config.get("producer.id.expiration.ms"))
        if self.log_cleaner is not None:
            self.log_cleaner.reconfigure(CleanerConfig.from_broker_config(self.config))

    def _topic_overrides(self, topic: str) -> dict[str, str]:
        info = self.metadata.get(topic)
        return info.configs if info is not None else {}

    def _reconcile_partitions(self) -> None:
        """Create any partition directory of this broker's replicas the metadata names but the disk
        lacks. Among several brokers, a log of a partition no longer assigned here (a reassignment
        finished while this broker was down) is a stray: renamed ``-stray``, as Kafka does."""
        for info in self.metadata.topics.values():
            config = self.controller.log_config(info)
            for p, reg in enumerate(info.registrations):
                if self.node_id in reg.replicas:
                    if self.log_manager.get(info.name, p) is None:
                        self.log_manager.create(info.name, p, config, info.topic_id)
                elif self.shared is not None and self.log_manager.get(info.name, p) is not None:
                    log.warning("stray replica found", topic=info.name, partition=p, replicas=list(reg.replicas))
                    self.log_manager.delete_partition(info.name, p, stray=True)

    def _load_meta_properties(self) -> None:
        """meta.properties holds cluster.id and node.id; refuse a dir that belongs to another node."""
        cluster_id = self.config.get("cluster.id")
        found: dict[str, str] = {}
        for d in self.config.log_dirs:
            path = Path(d) / "meta.properties"
            if path.exists():
                props = checkpoints.read_meta_properties(str(path)) or {}
                if props.get("node.id") and int(props["node.id"]) != self.node_id:
                    raise RuntimeError(
                        f"Stored node id {props['node.id']} in {path} doesn't match node.id={self.node_id}"
                    )
                found = props
                break
        if found.get("cluster.id"):
            if cluster_id and cluster_id != found["cluster.id"]:
                raise RuntimeError(
                    f"Configured cluster.id {cluster_id} doesn't match stored cluster id {found['cluster.id']}"
                )
            cluster_id = found["cluster.id"]
        self.cluster_id = cluster_id or _new_cluster_id()
        for d in self.config.log_dirs:
            path = Path(d) / "meta.properties"
            if not path.exists():
                checkpoints.write_meta_properties(
                    str(path),
                    {
                        "version": "1",
                        "cluster.id": self.cluster_id,
                        "node.id": str(self.node_id),
                        "directory.id": base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("="),
                    },
                )

    def _schedule(self, interval_ms: int | Callable[[], int], fn: Callable[..., object],
                  first_ms: int | None = None, clock: Clock | None = None) -> None:
        """Run ``fn`` every ``interval_ms`` (read again each time when it is a callable: a dynamic config),
        the first time after ``first_ms`` when given (Kafka's scheduler: initial delay, then period), on
        the broker's clock unless another is given."""
        timer = clock or self.clock

        async def loop() -> None:
            delay_ms = first_ms
            while True:
                ms = interval_ms() if callable(interval_ms) else interval_ms
                await timer.sleep(max(ms if delay_ms is None else delay_ms, 10) / 1000)
                delay_ms = None
                try:
                    result = fn()
                    if asyncio.iscoroutine(result):
                        await result
                except Exception:
                    log.exception("periodic task failed", task=getattr(fn, "__name__", str(fn)))

        self._periodic.append(asyncio.create_task(loop()))

    def _expire_idle_connections(self) -> None:
        idle_s = self.config.get("connections.max.idle.ms") / 1000
        now = self.wire_clock.monotonic()
        for conn in list(self.connections):
            conn.close_if_idle(now, idle_s)

    def _retention_tick(self) -> None:
        self.log_manager.run_retention(self.clock.now_ms())

    def _flush_tick(self) -> None:
        self.log_manager.flush_dirty(self.clock.now_ms())

    async def stop(self, clean: bool = True) -> None:
        """The clean shutdown (SIGTERM). ``clean=False`` is a crash of this broker alone, for a
        broker of a cluster process taken down hard: requests in flight are dropped unanswered and
        the logs are closed without a flush, checkpoints, producer snapshots or the clean-shutdown
        marker, so its next start recovers them as after ``kill -9``."""
        log.info("broker shutting down" if clean else "broker crashing (taken down hard)")
        self.stopping = True
        for server in self._servers:
            server.close()
        self.replica_manager.wake_all()
        if self.inflight and clean:
            await asyncio.wait(list(self.inflight), timeout=SHUTDOWN_GRACE_SECONDS)
        for task in list(self.inflight):
            task.cancel()
        for conn in list(self.connections):
            conn.transport.close()
        self.brokers.fence(self.node_id)
        if self.shared is not None:  # the others elect new leaders for what this one led
            if self.replication in self.replication_control.publishers:
                self.replication_control.publishers.remove(self.replication)
            self.replication_control.broker_fenced(self.node_id)
            await self.replication.stop()
            self.shared.members.pop(self.node_id, None)
        for task in self._periodic:
            task.cancel()
        for hook in self.shutdown_hooks:
            try:
                await hook(self)
            except Exception:
                log.exception("shutdown hook failed")
        if self.shared is not None:
            self.marker_channel.close()
        if self.log_manager.started:
            if clean:
                self.log_manager.shutdown()
            else:
                self.log_manager.close_unclean()
        if self.shared is None:  # a process of several brokers folds its shared journal once
            try:
                self.metadata.write_snapshot()  # the journal folded into topics.json
            except OSError as e:
                log.error("metadata snapshot failed; the journal is kept", error=str(e))
        self._stopped.set()
        log.info("broker stopped")

    def new_sasl_session(self, listener: str) -> SaslSession | None:
        """The SASL exchange of a new connection on a SASL_PLAINTEXT or SASL_SSL listener (None elsewhere)."""
        if self.config.listener_security_protocols().get(listener) not in ("SASL_PLAINTEXT", "SASL_SSL"):
            return None
        users = plain_users(self.config.get(f"listener.name.{listener.lower()}.plain.sasl.jaas.config"))

        def credential(user: str, mechanism: int) -> ScramCredential | None:
            return self.metadata.scram.get(user, {}).get(mechanism)

        return SaslSession(listener_mechanisms(self.config, listener), users, credential)

    def tls_principal(self, listener: str, ssl_object: object) -> str:
        """The principal of a TLS client: its certificate's subject through the listener's
        ssl.principal.mapping.rules; ANONYMOUS without a certificate. Raises NoMatchingRule."""
        subject = peer_subject(ssl_object)
        if subject is None:
            return ANONYMOUS
        rules = self._principal_rules.get(listener)
        if rules is None:
            rules = self._principal_rules[listener] = parse_rules(setting(self.config, listener,
                                                                          "ssl.principal.mapping.rules"))
        return "User:" + map_subject(rules, subject)

    @property
    def rack(self) -> str | None:
        return self.config.get("broker.rack")

    def advertised_endpoint(self, listener: str, local_host: str) -> tuple[str, int]:
        """The (host, port) clients should use on ``listener``; a wildcard host becomes the
        address the client reached us on, so a plain ``listeners=PLAINTEXT://:9092`` works."""
        chosen = None
        for name, host, port in self.config.advertised_listeners():
            if name == listener:
                chosen = (host, port)
                break
        if chosen is None:
            chosen = ("", self.bound_ports.get(listener, 9092))
        host, port = chosen
        if port == 0:
            port = self.bound_ports.get(listener, port)
        if host in ("", "0.0.0.0", "::"):
            host = local_host
        return host, port

    async def wait_stopped(self) -> None:
        await self._stopped.wait()
