"""What the brokers of one process share, as a KRaft cluster shares its controller: the cluster
metadata, the registry of brokers, the controller's replication rules and the producer id blocks
(Kafka's controller hands each broker its blocks; here one allocator serves them all, so no two
brokers ever give out the same producer id). A single broker builds its own."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from broker.cluster.brokers import BrokerRegistry
from broker.cluster.metadata import MetadataStore
from broker.cluster.replication_control import ReplicationControl, TopicSettings
from broker.config.broker_config import BrokerConfig
from broker.config.features import ELR_VERSION
from broker.inspect.live.recorder import TxnRecorder
from coordinator.producer_ids import ProducerIdManager
from storage.log_config import LogConfig

if TYPE_CHECKING:
    from broker.services import Services


@dataclass(slots=True)
class SharedCluster:
    metadata: MetadataStore
    brokers: BrokerRegistry
    replication_control: ReplicationControl
    producer_ids: ProducerIdManager | None = None  # built once the metadata dir is locked
    # the running brokers by id, for what brokers of one process ask each other directly
    members: dict[int, Services] = field(default_factory=dict)
    # what the transactions of every broker of the process did, for the inspector (None: not recorded)
    txn_recorder: TxnRecorder | None = None


class ConfiguredTopicSettings(TopicSettings):
    """The effective topic configs the controller reads (the cluster-level defaults under each
    topic's overrides) and whether ELR is on (its finalized feature level)."""

    def __init__(self, metadata: MetadataStore, config: BrokerConfig) -> None:
        self.metadata = metadata
        self.config = config

    def _log_config(self, topic: str) -> LogConfig:
        info = self.metadata.get(topic)
        return LogConfig.from_overrides(self.config.topic_defaults(), info.configs if info is not None else {})

    def min_insync_replicas(self, topic: str) -> int:
        return self._log_config(topic).min_insync_replicas

    def unclean_leader_election(self, topic: str) -> bool:
        return self._log_config(topic).unclean_leader_election_enable

    def elr_enabled(self) -> bool:
        return self.metadata.features.get(ELR_VERSION, 0) >= 1
