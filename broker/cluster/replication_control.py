"""The controller's half of replication: Kafka's ReplicationControlManager for brokers in one process.

It places new partitions (StripedReplicaPlacer), and every later change of a partition — a broker
fenced or unfenced, an AlterPartition from a leader shrinking or growing its ISR, an ElectLeaders
request — goes through ``PartitionChangeBuilder``, is written to the cluster metadata (durable
before anyone acts on it) and is then handed to every running broker, which becomes leader or
follower as the new registration says (Kafka's metadata publisher and ReplicaManager.applyDelta).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from typing import Protocol

import structlog

from broker.cluster.brokers import BrokerRegistry
from broker.cluster.metadata import MetadataStore
from broker.cluster.partition_change import (
    NO_LEADER,
    Election,
    LeaderRecoveryState,
    PartitionChangeBuilder,
    PartitionRegistration,
)
from broker.cluster.placement import UsableBroker, place
from protocol.errors import ErrorCode, KafkaError

log = structlog.get_logger(__name__)


class PartitionPublisher(Protocol):
    """A broker that applies metadata changes (ReplicaManager.applyDelta, LogManager)."""

    def on_partition_change(self, topic: str, partition: int, old: PartitionRegistration | None,
                            new: PartitionRegistration) -> None: ...

    def on_partitions_created(self, topic: str, partitions: range) -> None: ...

    def on_topic_deleted(self, topic: str) -> None: ...

    def on_topic_configs(self, topic: str) -> None: ...


class TopicSettings(Protocol):
    """What the controller reads of a topic's effective configs."""

    def min_insync_replicas(self, topic: str) -> int: ...

    def unclean_leader_election(self, topic: str) -> bool: ...

    def elr_enabled(self) -> bool: ...


class ReplicationControl:
    def __init__(self, metadata: MetadataStore, brokers: BrokerRegistry, settings: TopicSettings,
                 rng: random.Random | None = None) -> None:
        self.metadata = metadata
        self.brokers = brokers
        self.settings = settings
        self.rng = rng or random.Random()
        self.publishers: list[PartitionPublisher] = []

    # --- new partitions -----------------------------------------------------------------------

    def place(self, partitions: int, replication_factor: int) -> list[PartitionRegistration]:
        """Registrations of new partitions: every replica in the ISR, the first live one leading."""
        usable = [UsableBroker(i, _rack(self.brokers, i), not self.brokers.alive(i)) for i in self.brokers.all_ids()]
        return [PartitionRegistration.new(replicas, self.brokers.alive)
                for replicas in place(usable, partitions, replication_factor, self.rng)]

    def assigned(self, assignments: list[list[int]], replication_factor: int | None = None,
                 first_partition: int = 0) -> list[PartitionRegistration]:
        """Registrations of partitions whose replicas a CreateTopics/CreatePartitions request chose;
        each must have the replication factor of the ones before it (or of the topic's) and a
        live broker among its replicas."""
        for i, replicas in enumerate(assignments):
            self.validate_assignment(replicas, replication_factor)
            replication_factor = len(replicas)
            if not any(self.brokers.alive(r) for r in replicas):
                raise KafkaError(ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                                 "All brokers specified in the manual partition assignment for partition "
                                 f"{first_partition + i} are fenced or in controlled shutdown.")
        return [PartitionRegistration.new(replicas, self.brokers.alive) for replicas in assignments]

    def validate_assignment(self, replicas: list[int], replication_factor: int | None = None) -> None:
        """validateManualPartitionAssignment: non-empty, registered brokers, each once (checked
        in broker id order, as Kafka does, so the first offender named is the same)."""
        if not replicas:
            raise KafkaError(ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                             "The manual partition assignment includes an empty replica list.")
        previous = None
        for r in sorted(replicas):
            if not self.brokers.registered(r):
                raise KafkaError(ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                                 f"The manual partition assignment includes broker {r}, but no such broker is "
                                 "registered.")
            if r == previous:
                raise KafkaError(ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                                 f"The manual partition assignment includes the broker {r} more than once.")
            previous = r
        if replication_factor is not None and len(replicas) != replication_factor:
            raise KafkaError(ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                             f"The manual partition assignment includes a partition with {len(replicas)} replica(s), "
                             "but this is not consistent with previous partitions, which have "
                             f"{replication_factor} replica(s).")

    # --- changes --------------------------------------------------------------------------------

    def _builder(self, topic: str, reg: PartitionRegistration, acceptable: Callable[[int], bool]
                 ) -> PartitionChangeBuilder:
        min_isr = min(self.settings.min_insync_replicas(topic), len(reg.replicas))  # getTopicEffectiveMinIsr
        election = Election.UNCLEAN if self.settings.unclean_leader_election(topic) else Election.ONLINE
        return PartitionChangeBuilder(reg, acceptable, min_isr, elr_enabled=self.settings.elr_enabled(),
                                      election=election)

    def _apply(self, topic: str, partition: int, builder: PartitionChangeBuilder, why: str) -> PartitionRegistration:
        old = builder.partition
        change = builder.build()
        if change is None:
            return old
        new = old.merge(change)
        self.metadata.set_partition(topic, partition, new)
        log.info("partition changed", topic=topic, partition=partition, why=why, leader=new.leader,
                 leader_epoch=new.leader_epoch, isr=list(new.isr), elr=list(new.elr) or None)
        for publisher in list(self.publishers):
            publisher.on_partition_change(topic, partition, old, new)
        return new

    def _partitions(self) -> Iterator[tuple[str, int, PartitionRegistration]]:
        for info in list(self.metadata.topics.values()):
            for p, reg in enumerate(info.registrations):
                yield info.name, p, reg

    def broker_fenced(self, node_id: int) -> None:
        """handleBrokerFenced: out of every ISR; its partitions get new leaders from the rest."""
        with self.metadata.batch():
            for topic, p, reg in self._partitions():
                if node_id not in reg.isr and reg.leader != node_id:
                    continue
                b = self._builder(topic, reg, lambda r: r != node_id and self.brokers.alive(r))
                b.target_isr = [r for r in reg.isr if r != node_id]
                self._apply(topic, p, b, f"broker {node_id} fenced")

    def broker_unfenced(self, node_id: int) -> None:
        """handleBrokerUnfenced: partitions without a leader elect one, this broker included."""
        with self.metadata.batch():
            for topic, p, reg in self._partitions():
                if reg.leader != NO_LEADER:
                    continue
                b = self._builder(topic, reg, lambda r: r == node_id or self.brokers.alive(r))
                self._apply(topic, p, b, f"broker {node_id} unfenced")

    def alter_partition(self, topic: str, partition: int, leader: int, leader_epoch: int, partition_epoch: int,
                        new_isr: list[int], leader_recovery: LeaderRecoveryState = LeaderRecoveryState.RECOVERED
                        ) -> tuple[ErrorCode, PartitionRegistration | None]:
        """AlterPartition from a leader (validateAlterPartitionData, then the change)."""
        reg = self.metadata.partition(topic, partition)
        if reg is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
        if leader != reg.leader:
            return ErrorCode.INVALID_REQUEST, reg
        if leader_epoch != reg.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH, reg
        if partition_epoch != reg.partition_epoch:
            return ErrorCode.INVALID_UPDATE_VERSION, reg
        if leader not in new_isr or any(r not in reg.replicas for r in new_isr):
            return ErrorCode.INVALID_REQUEST, reg
        if leader_recovery is LeaderRecoveryState.RECOVERING and len(new_isr) > 1:
            return ErrorCode.INVALID_REQUEST, reg
        if any(r not in reg.isr and not self.brokers.alive(r) for r in new_isr):
            return ErrorCode.INELIGIBLE_REPLICA, reg
        b = self._builder(topic, reg, self.brokers.alive)
        b.target_isr = list(new_isr)
        b.target_leader_recovery = leader_recovery
        return ErrorCode.NONE, self._apply(topic, partition, b, "AlterPartition")

    def elect(self, topic: str, partition: int, election: Election) -> ErrorCode:
        """ElectLeaders for one partition: ELECTION_NOT_NEEDED when the leader would stay,
        PREFERRED_LEADER_NOT_AVAILABLE / ELIGIBLE_LEADERS_NOT_AVAILABLE when none can lead."""
        reg = self.metadata.partition(topic, partition)
        if reg is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if election is Election.PREFERRED and reg.leader == reg.replicas[0]:
            return ErrorCode.ELECTION_NOT_NEEDED
        if election is Election.UNCLEAN and reg.leader != NO_LEADER:
            return ErrorCode.ELECTION_NOT_NEEDED
        b = self._builder(topic, reg, self.brokers.alive)
        b.election = election
        new = self._apply(topic, partition, b, f"ElectLeaders ({election.value})")
        if election is Election.PREFERRED and new.leader != reg.replicas[0]:
            return ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
        if new.leader == NO_LEADER:
            return ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
        return ErrorCode.NONE

    # --- reassignments ------------------------------------------------------------------------------

    def reassign(self, topic: str, partition: int, target: list[int] | None,
                 allow_replication_factor_change: bool = True) -> None:
        """alterPartitionReassignment for one partition: ``target`` None cancels. Raises
        KafkaError with Kafka's code and message. A reassignment first adds the new replicas
        (listed in ``adding``, the old ones being removed in ``removing``); it completes in the
        change that puts every target replica in the ISR (``PartitionChangeBuilder``), at once
        when they already are."""
        if self.metadata.get(topic) is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {topic}.")
        reg = self.metadata.partition(topic, partition)
        if reg is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {topic}:{partition}.")
        if target is None:
            self._cancel_reassignment(topic, partition, reg)
            return
        self.validate_assignment(target)
        if not allow_replication_factor_change:
            current = len(set(reg.replicas) - set(reg.removing)) if reg.reassigning else len(reg.replicas)
            if current != len(target):
                raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                                 f"The replication factor is changed from {current} to {len(target)}")
        removing = sorted(set(reg.replicas) - set(target))
        adding = sorted(set(target) - set(reg.replicas))
        replicas = [*target, *removing]
        b = self._builder(topic, reg, self.brokers.alive)
        if replicas != list(reg.replicas):
            b.target_replicas = replicas
        if removing:
            b.target_removing = removing
        if adding:
            b.target_adding = adding
        self._apply(topic, partition, b, f"reassignment to {target}")

    def _cancel_reassignment(self, topic: str, partition: int, reg: PartitionRegistration) -> None:
        """cancelPartitionReassignment (PartitionReassignmentRevert): the replicas being added
        leave; the ones being removed stay. If only added replicas were in sync, reverting needs an
        unclean election."""
        if not reg.reassigning:
            raise KafkaError(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS)
        replicas = [r for r in reg.replicas if r not in reg.adding]
        isr = [r for r in reg.isr if r not in reg.adding]
        unclean = self.settings.unclean_leader_election(topic)
        if not isr:
            if not unclean:
                raise KafkaError(ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                                 f"Unable to revert partition assignment for {topic}:{partition} because it would "
                                 "require an unclean leader election.")
            isr = [replicas[0]]
        b = self._builder(topic, reg, self.brokers.alive)
        b.target_isr, b.target_replicas, b.target_removing, b.target_adding = isr, replicas, [], []
        self._apply(topic, partition, b, "reassignment cancelled")

    def reassignments(self, topics: dict[str, list[int]] | None = None
                      ) -> dict[str, list[tuple[int, PartitionRegistration]]]:
        """listPartitionReassignments: the partitions in a reassignment, of every topic or of
        the ones named (unknown names and partitions left out)."""
        out: dict[str, list[tuple[int, PartitionRegistration]]] = {}
        if topics is None:
            for topic, p, reg in self._partitions():
                if reg.reassigning:
                    out.setdefault(topic, []).append((p, reg))
            return out
        for topic, partitions in topics.items():
            for p in partitions:
                named = self.metadata.partition(topic, p)
                if named is not None and named.reassigning:
                    out.setdefault(topic, []).append((p, named))
        return out

    def balance_leaders(self, max_elections: int = 1000) -> int:
        """maybeBalancePartitionLeaders (auto.leader.rebalance.enable): partitions not led by
        their preferred (first) replica move back to it when it is a live ISR member; returns how
        many moved. At most ``max_elections`` a pass, as Kafka's controller bounds it."""
        moved = 0
        with self.metadata.batch():
            for topic, p, reg in self._partitions():
                if moved >= max_elections:
                    break
                preferred = reg.replicas[0]
                if reg.leader == preferred or preferred not in reg.isr or not self.brokers.alive(preferred):
                    continue
                if self.elect(topic, p, Election.PREFERRED) == ErrorCode.NONE:
                    moved += 1
        return moved

    def move_leader(self, topic: str, partition: int, node_id: int) -> ErrorCode:
        """Make ``node_id`` the leader (a test's topology action, librdkafka's "set partition
        leader"): an election in which only it may lead; it must be a live ISR member. -1 leaves
        the partition without a leader (an election nobody may win; the ISR is kept, so a later
        move brings a leader back), as librdkafka's mock sets leader -1."""
        reg = self.metadata.partition(topic, partition)
        if reg is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if node_id == -1:
            if reg.leader == -1:
                return ErrorCode.ELECTION_NOT_NEEDED
            b = self._builder(topic, reg, lambda r: False)
            b.election = Election.ONLINE
            self._apply(topic, partition, b, "leader removed")
            return ErrorCode.NONE
        if node_id not in reg.isr or not self.brokers.alive(node_id):
            return ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
        if reg.leader == node_id:
            return ErrorCode.ELECTION_NOT_NEEDED
        b = self._builder(topic, reg, lambda r: r == node_id)
        b.election = Election.ONLINE
        self._apply(topic, partition, b, f"leader moved to {node_id}")
        return ErrorCode.NONE


def _rack(brokers: BrokerRegistry, node_id: int) -> str | None:
    node = brokers.node(node_id)
    return node.rack if node is not None else None
