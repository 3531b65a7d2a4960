"""The broker's side of ``coordinator.runtime``: what the group and transaction coordinators are
given instead of the broker (Kafka's CoordinatorPartitionWriter and the coordinator services'
configuration, time and metrics)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from broker.config.features import level
from protocol import records as rec
from protocol.errors import ErrorCode, KafkaError
from storage.clock import Clock
from storage.producer.types import AppendOrigin

if TYPE_CHECKING:
    from broker.config.broker_config import BrokerConfig
    from broker.ops.metrics import BrokerMetrics
    from broker.services import Services
    from storage.log.partition_log import AppendResult, PartitionLog


class BrokerCoordinatorEnv:
    """``coordinator.runtime.CoordinatorEnv`` over a broker."""

    def __init__(self, broker: Services) -> None:
        self._broker = broker
        self.node_id: int = broker.node_id
        self.config: BrokerConfig = broker.config
        self.metrics: BrokerMetrics = broker.metrics
        self.clock: Clock = broker.clock

    @property
    def stopping(self) -> bool:
        return self._broker.stopping

    @property
    def elected(self) -> bool:
        return self._broker.shared is not None

    def feature_level(self, name: str) -> int:
        return level(self._broker, name)

    def group_configs(self, group_id: str) -> Mapping[str, str]:
        return self._broker.metadata.group_configs.get(group_id, {})

    def generate_producer_id(self) -> int:
        producer_ids = self._broker.producer_ids
        if producer_ids is None:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "producer ids are not available yet")
        return producer_ids.generate()


class BrokerPartitionWriter:
    """``coordinator.runtime.PartitionWriter``: this node leads every partition, so a write is a
    local append as the leader (Kafka's CoordinatorPartitionWriter.append)."""

    def __init__(self, broker: Services) -> None:
        self._broker = broker

    def partitions(self, topic: str) -> int | None:
        info = self._broker.metadata.get(topic)
        return info.partitions if info is not None else None

    def ensure_internal_topic(self, name: str, partitions: int, configs: dict[str, str]) -> None:
        self._broker.controller.ensure_internal_topic(name, partitions, configs)

    def log(self, topic: str, partition: int) -> PartitionLog | None:
        return self._broker.log_manager.get(topic, partition)

    def append(self, topic: str, partition: int, batch: bytearray,
               verification_guard: object | None = None) -> AppendResult:
        rm = self._broker.replica_manager
        plog = rm.leader_log(topic, partition)  # a follower's log is written by its fetcher only
        batches = rec.validate_batches(batch)
        now = self._broker.clock.now_ms()
        epoch = rm.leader_epoch(topic, partition)
        if batches[0].is_transactional:
            info = plog.append(batch, batches, leader_epoch=epoch, now_ms=now, origin=AppendOrigin.COORDINATOR,
                               verify_transactions=verification_guard is not None,
                               verification_guard=verification_guard)
        else:
            info = plog.append(batch, batches, leader_epoch=epoch, now_ms=now, log_append_time=False)
        rm.wake(topic, partition)
        return info

    async def committed(self, topic: str, partition: int, end_offset: int) -> ErrorCode:
        replication = self._broker.replication
        if not replication.needs_wait(topic, partition):
            return ErrorCode.NONE
        timeout_s = int(self._broker.config.get("offsets.commit.timeout.ms")) / 1000
        errors = await replication.wait_for_acks({(topic, partition): end_offset}, timeout_s)
        return errors.get((topic, partition), ErrorCode.NONE)

    def __repr__(self) -> str:
        return "BrokerPartitionWriter()"
