"""The controller's replication rules on a real (on-disk) cluster metadata store: placement, a
broker fenced and back, AlterPartition's checks, elections, and that every change is durable and
handed to the brokers."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from broker.cluster.brokers import BrokerRegistry
from broker.cluster.metadata import MetadataStore
from broker.cluster.partition_change import NO_LEADER, Election, PartitionRegistration
from broker.cluster.replication_control import ReplicationControl
from protocol.errors import ErrorCode


@dataclass
class _Node:
    node_id: int
    rack: str | None = None

    def advertised_endpoint(self, listener: str, local_host: str) -> tuple[str, int]:
        return "127.0.0.1", 9091 + self.node_id


@dataclass
class _Settings:
    min_isr: int = 2
    unclean: bool = False
    elr: bool = True

    def min_insync_replicas(self, topic: str) -> int:
        return self.min_isr

    def unclean_leader_election(self, topic: str) -> bool:
        return self.unclean

    def elr_enabled(self) -> bool:
        return self.elr


@dataclass
class _Publisher:
    seen: list[tuple[str, int, int, int]] = field(default_factory=list)

    def on_partition_change(self, topic: str, partition: int, old: PartitionRegistration | None,
                            new: PartitionRegistration) -> None:
        self.seen.append((topic, partition, new.leader, new.leader_epoch))


@pytest.fixture
def cluster(tmp_path: Path) -> tuple[ReplicationControl, MetadataStore, BrokerRegistry, _Publisher]:
    store = MetadataStore(tmp_path)
    store.load()
    brokers = BrokerRegistry()
    for i in (1, 2, 3):
        brokers.register(_Node(i))
    control = ReplicationControl(store, brokers, _Settings(), random.Random(5))
    publisher = _Publisher()
    control.publishers.append(publisher)
    store.add("t", 3, {}, registrations=control.place(3, 3))
    return control, store, brokers, publisher


def test_new_partitions_spread_their_leaders(cluster) -> None:
    _control, store, _brokers, _ = cluster
    regs = store.topics["t"].registrations
    assert sorted(r.leader for r in regs) == [1, 2, 3]
    assert all(sorted(r.replicas) == [1, 2, 3] and r.isr == r.replicas for r in regs)


def test_a_fenced_broker_leaves_every_isr_and_its_partitions_get_new_leaders(cluster, tmp_path: Path) -> None:
    control, store, brokers, publisher = cluster
    led = [p for p, r in enumerate(store.topics["t"].registrations) if r.leader == 2]
    brokers.fence(2)
    control.broker_fenced(2)
    regs = store.topics["t"].registrations
    assert all(2 not in r.isr and r.leader in (1, 3) for r in regs)
    assert all(regs[p].leader_epoch == 1 for p in led)
    assert {(t, p) for t, p, _, _ in publisher.seen} == {("t", 0), ("t", 1), ("t", 2)}
    reloaded = MetadataStore(tmp_path)  # durable: the journal holds every change
    reloaded.load()
    assert reloaded.topics["t"].registrations == regs


def test_a_partition_left_without_isr_waits_for_its_broker_to_come_back(cluster) -> None:
    control, store, brokers, _ = cluster
    for b in (3, 2, 1):
        brokers.fence(b)
        control.broker_fenced(b)
    assert all(r.leader == NO_LEADER for r in store.topics["t"].registrations)
    assert all(set(r.elr) == {1, 2} for r in store.topics["t"].registrations)
    brokers.register(_Node(3))
    control.broker_unfenced(3)
    # 3 left while the ISR still met min ISR, so it may lack committed records: not eligible (KIP-966)
    assert all(r.leader == NO_LEADER for r in store.topics["t"].registrations)
    brokers.register(_Node(2))
    control.broker_unfenced(2)
    regs = store.topics["t"].registrations
    # 2 left when the ISR fell below min ISR (into the ELR): it has every committed record and leads
    assert all(r.leader == 2 and r.isr == (2,) and r.elr == (1,) for r in regs)


def test_alter_partition_checks_epochs_and_eligibility(cluster) -> None:
    control, store, brokers, _ = cluster
    reg = store.partition("t", 0)
    leader = reg.leader
    follower = next(r for r in reg.replicas if r != leader)
    shrunk = [r for r in reg.isr if r != follower]
    assert control.alter_partition("t", 0, leader, reg.leader_epoch + 1, reg.partition_epoch, shrunk)[0] \
        == ErrorCode.FENCED_LEADER_EPOCH
    assert control.alter_partition("t", 0, leader, reg.leader_epoch, reg.partition_epoch + 1, shrunk)[0] \
        == ErrorCode.INVALID_UPDATE_VERSION
    assert control.alter_partition("t", 0, follower, reg.leader_epoch, reg.partition_epoch, shrunk)[0] \
        == ErrorCode.INVALID_REQUEST
    error, new = control.alter_partition("t", 0, leader, reg.leader_epoch, reg.partition_epoch, shrunk)
    assert error == ErrorCode.NONE and new is not None and follower not in new.isr
    assert new.leader_epoch == reg.leader_epoch and new.partition_epoch == reg.partition_epoch + 1
    brokers.fence(follower)
    error, _ = control.alter_partition("t", 0, leader, new.leader_epoch, new.partition_epoch, [*shrunk, follower])
    assert error == ErrorCode.INELIGIBLE_REPLICA


def test_elections(cluster) -> None:
    control, store, brokers, _ = cluster
    reg = store.partition("t", 0)
    assert control.elect("t", 0, Election.PREFERRED) == ErrorCode.ELECTION_NOT_NEEDED
    other = next(r for r in reg.replicas if r != reg.leader)
    assert control.move_leader("t", 0, other) == ErrorCode.NONE
    assert store.partition("t", 0).leader == other
    assert control.elect("t", 0, Election.PREFERRED) == ErrorCode.NONE
    assert store.partition("t", 0).leader == reg.replicas[0]
    assert control.elect("t", 0, Election.UNCLEAN) == ErrorCode.ELECTION_NOT_NEEDED
