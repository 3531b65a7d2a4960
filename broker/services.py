"""The typed view of a broker that handlers and the broker's parts are given (``ctx.broker``).

``broker.broker.Broker`` builds every service and satisfies this protocol; a handler sees only
what is listed here, all of it present once the broker has started (no ``None`` coordinator: a
broker always has both). Several brokers in one process each hand out their own view.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from broker.cluster.brokers import BrokerRegistry
    from broker.cluster.controller import Controller
    from broker.cluster.metadata import MetadataStore
    from broker.cluster.quotas import ClientQuotas
    from broker.cluster.replication_control import ReplicationControl
    from broker.cluster.shared import SharedCluster
    from broker.config.broker_config import BrokerConfig
    from broker.control.controls import Controls
    from broker.inspect.live.recorder import TxnRecorder
    from broker.net.sasl import SaslSession
    from broker.ops.metrics import BrokerMetrics
    from broker.replica.fetch_sessions import FetchSessionCache
    from broker.replica.replica_manager import ReplicaManager
    from broker.replica.replication import Replication
    from broker.security.authorizer import Authorizer
    from coordinator.group.coordinator import GroupCoordinator
    from coordinator.producer_ids import ProducerIdManager
    from coordinator.txn.coordinator import TransactionCoordinator
    from storage.cleaner.manager import LogCleaner
    from storage.clock import Clock
    from storage.log_manager import LogManager


class Services(Protocol):
    # identity and settings
    config: BrokerConfig
    clock: Clock  # the broker's time: timestamps, timeouts, expiry, retention (virtual under control.clock)
    wire_clock: Clock  # network waits: long polls, request timeouts, idle connections, throttles; always real
    node_id: int
    cluster_id: str
    bound_ports: dict[str, int]
    stopping: bool
    # the cluster: topic metadata and the controller that changes it, client quotas
    shared: SharedCluster | None  # what the brokers of one process share (None: a single broker)
    metadata: MetadataStore
    controller: Controller
    brokers: BrokerRegistry  # every broker of the cluster, and which are up
    replication_control: ReplicationControl  # the controller's partition changes (shared by a process's brokers)
    quotas: ClientQuotas
    metrics: BrokerMetrics
    # partitions
    log_manager: LogManager
    replica_manager: ReplicaManager
    replication: Replication  # leader/follower roles, follower fetches, acks=all
    fetch_sessions: FetchSessionCache
    log_cleaner: LogCleaner | None  # log.cleaner.enable
    # coordinators
    group_coordinator: GroupCoordinator
    txn_coordinator: TransactionCoordinator
    producer_ids: ProducerIdManager
    # connections: the SASL exchange of each connection on a SASL listener
    sasl_sessions: dict[str, SaslSession]
    # fault rules, the request log, the emulated Kafka release (the control endpoint's)
    controls: Controls
    # the inspector's timeline events (shared by a process's brokers); None while the inspector is off
    txn_recorder: TxnRecorder | None
    # StandardAuthorizer semantics over the ACLs in the cluster metadata; None: no authorizer configured
    authorizer: Authorizer | None

    def advertised_endpoint(self, listener: str, local_host: str) -> tuple[str, int]:
        """The (host, port) clients should use on ``listener``."""
        ...

    def apply_dynamic_configs(self) -> None:
        """Layer the stored dynamic broker configs over the static ones and reconfigure."""
        ...
