"""Topic administration: what the KRaft controller does for CreateTopics, DeleteTopics,
CreatePartitions and config changes. The metadata changes first (durably); then every running
broker of the process makes the logs of its replicas, drops a deleted topic's, or takes new
configs (the metadata publisher's job in Kafka).

Replication factor: several brokers place replicas as Kafka does (StripedReplicaPlacer, or the
request's own assignment) and refuse more replicas than brokers. A single node holds one replica:
a request for RF > 1 is accepted there (so tools and Testcontainers setups written for a 3-broker
cluster keep working) and logged as a warning; the topic really has one replica, which Metadata
reports honestly (replicas = isr = [this node]). An RF of 0 or below -1 is
INVALID_REPLICATION_FACTOR, as in Kafka.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

import structlog

from broker.cluster.metadata import TopicInfo, validate_topic_name
from broker.cluster.partition_change import PartitionRegistration
from protocol.errors import ErrorCode, KafkaError
from storage.errors import InvalidConfig
from storage.log_config import INTERNAL_TOPIC_CONFIGS, TOPIC_CONFIGS, LogConfig

if TYPE_CHECKING:
    from broker.cluster.replication_control import PartitionPublisher
    from broker.services import Services

log = structlog.get_logger(__name__)

MAX_PARTITIONS = 100_000
# Kafka's controller writes at most this many records in one batch and refuses more partitions than
# that in one request (ReplicationControlManager).
MAX_RECORDS_PER_BATCH = 10_000


def deadline_passed(timeout_ms: int) -> bool:
    """Kafka forwards the admin requests that change the cluster to its controller with a deadline of
    now + timeout_ms; at zero or below it has passed before the controller looks, so every entry is
    REQUEST_TIMED_OUT and nothing changes (CreateTopics, CreatePartitions, DeleteTopics, ElectLeaders,
    AlterPartitionReassignments)."""
    return timeout_ms <= 0


SLICE_S = 0.005  # the longest stretch of log creation before the event loop gets a turn
CLUSTER_METADATA_TOPIC = "__cluster_metadata"  # KRaft's metadata log: never a client's topic


class Controller:
    def __init__(self, broker: Services) -> None:
        self.broker = broker

    def log_config(self, topic: TopicInfo) -> LogConfig:
        return LogConfig.from_overrides(self.broker.config.topic_defaults(), topic.configs)

    def validate_configs(self, configs: dict[str, str]) -> None:
        if not configs:
            return  # the broker-level defaults alone were validated at start-up
        for name, value in configs.items():
            d = TOPIC_CONFIGS.get(name) or INTERNAL_TOPIC_CONFIGS.get(name)
            if d is None:
                raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {name}")
            if value is None:
                raise KafkaError(ErrorCode.INVALID_CONFIG, f"Null value not supported for topic configs: {name}")
        try:
            LogConfig.from_overrides(self.broker.config.topic_defaults(), configs)
        except InvalidConfig as e:
            raise KafkaError(ErrorCode.INVALID_CONFIG, str(e)) from None

    def create_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: dict[str, str] | None = None,
        *,
        validate_only: bool = False,
        assignments: list[list[int]] | None = None,
        create_logs: bool = True,
    ) -> TopicInfo | None:
        """Validate and create a topic; raises KafkaError with Kafka's error code. With
        ``create_logs=False`` only the metadata changes: the caller creates the partitions' logs
        (``create_logs``) once the metadata is durable, in slices for a large request."""
        configs = dict(configs or {})
        validate_topic_name(name)
        if name == CLUSTER_METADATA_TOPIC:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Creation of internal topic {name} is prohibited.")
        metadata = self.broker.metadata
        if metadata.get(name) is not None:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        clash = metadata.colliding(name)
        if clash is not None:
            raise KafkaError(
                ErrorCode.INVALID_TOPIC_EXCEPTION,
                f"Topic '{name}' collides with existing topic: {clash}",
            )
        if assignments:
            if num_partitions != -1 or replication_factor != -1:
                raise KafkaError(
                    ErrorCode.INVALID_REQUEST,
                    "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time.",
                )
            num_partitions = len(assignments)
        if num_partitions == -1:
            num_partitions = self.broker.config.get("num.partitions")
        if replication_factor == -1:
            replication_factor = self.broker.config.get("default.replication.factor")
        if num_partitions <= 0 or num_partitions > MAX_PARTITIONS:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
        if replication_factor <= 0:
            raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.")
        self.validate_configs(configs)
        registrations = self._place(num_partitions, replication_factor, assignments)
        if validate_only:
            return None
        info = metadata.add(name, num_partitions, configs, registrations=registrations)
        if create_logs:
            self.create_logs(info)
        log.info("topic created", topic=name, topic_id=str(info.topic_id), partitions=num_partitions,
                 configs=configs or None)
        return info

    @property
    def clustered(self) -> bool:
        return self.broker.shared is not None

    def _place(self, partitions: int, replication_factor: int, assignments: list[list[int]] | None,
               topic: str = "", first_partition: int = 0, existing: bool = False) -> list[PartitionRegistration] | None:
        """The new partitions' registrations (None on a single node: all of them its own). A manual
        assignment for an ``existing`` topic (CreatePartitions) must keep its replication factor."""
        if not self.clustered:
            if replication_factor > 1:
                log.warning("replication factor above 1 accepted on a single node; the topic has one replica",
                            topic=topic or None, requested_replication_factor=replication_factor)
            return None
        control = self.broker.replication_control
        if assignments:
            return control.assigned(assignments, replication_factor if existing else None, first_partition)
        return control.place(partitions, replication_factor)

    def _publishers(self) -> list[PartitionPublisher]:
        """The brokers that act on a change: every running one of the process (this one alone)."""
        if self.clustered:
            return list(self.broker.replication_control.publishers)
        return [self.broker.replication]

    async def create_logs_in_slices(self, created: list[TopicInfo]) -> None:
        """The logs of just-created topics, giving the event loop back every SLICE_S (a request
        for thousands of topics would otherwise hold it for seconds)."""
        started = time.perf_counter()  # how long this slice held the loop
        for info in created:
            for p in range(info.partitions):
                self.create_logs(info, range(p, p + 1))
                if time.perf_counter() - started > SLICE_S:
                    await asyncio.sleep(0)
                    started = time.perf_counter()

    def create_logs(self, info: TopicInfo, partitions: range | None = None) -> None:
        """The logs of a topic's partitions (none if the topic was deleted meanwhile); a crash
        before they exist is mended at start-up, which creates every log the metadata names."""
        if self.broker.metadata.get(info.name) is not info:
            return
        for publisher in self._publishers():
            publisher.on_partitions_created(info.name, partitions if partitions is not None else range(info.partitions))

    def delete_topic(self, name: str) -> TopicInfo:
        info = self.broker.metadata.get(name)
        if info is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        if info.internal:
            raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, f"Internal topic {name} cannot be deleted")
        self.broker.metadata.remove(name)
        for publisher in self._publishers():
            publisher.on_topic_deleted(name)
        log.info("topic deleted", topic=name, topic_id=str(info.topic_id))
        return info

    @staticmethod
    def _replication_factor(info: TopicInfo) -> int:
        return len(info.registrations[0].replicas) if info.registrations else 1

    def create_partitions(self, name: str, count: int, *, validate_only: bool = False,
                          assignments: list[list[int]] | None = None) -> None:
        info = self.broker.metadata.get(name)
        if info is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        if count < info.partitions:
            raise KafkaError(
                ErrorCode.INVALID_PARTITIONS,
                f"The topic {name} currently has {info.partitions} partition(s); {count} would not be an increase.",
            )
        if count == info.partitions:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {info.partitions} partition(s).")
        if count > MAX_PARTITIONS:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, "Too many partitions.")
        registrations = self._place(count - info.partitions, self._replication_factor(info), assignments, name,
                                    info.partitions, existing=True)
        if validate_only:
            return
        old = info.partitions
        self.broker.metadata.set_partitions(name, count, registrations)
        for publisher in self._publishers():
            publisher.on_partitions_created(name, range(old, count))
        log.info("partitions created", topic=name, old_count=old, new_count=count)

    def alter_configs(self, name: str, configs: dict[str, str], *, validate_only: bool = False) -> None:
        info = self.broker.metadata.get(name)
        if info is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist")
        self.validate_configs(configs)
        if validate_only:
            return
        self.broker.metadata.set_configs(name, configs)
        for publisher in self._publishers():
            publisher.on_topic_configs(name)
        log.info("topic configs altered", topic=name, configs=configs)

    def ensure_internal_topic(self, name: str, partitions: int, configs: dict[str, str]) -> TopicInfo:
        info = self.broker.metadata.get(name)
        if info is not None:
            return info
        factor = {"__consumer_offsets": "offsets.topic.replication.factor",
                  "__transaction_state": "transaction.state.log.replication.factor"}.get(name)
        rf = int(self.broker.config.get(factor)) if factor else 1
        info = self.broker.metadata.add(name, partitions, configs,
                                        registrations=self._place(partitions, rf, None) if self.clustered else None)
        self.create_logs(info)
        log.info("internal topic created", topic=name, partitions=partitions)
        return info
