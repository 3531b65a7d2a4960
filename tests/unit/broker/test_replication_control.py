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
from protocol.errors import ErrorCode, KafkaError


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


def test_a_reassignment_adds_first_and_completes_when_the_new_replicas_are_in_sync(cluster, tmp_path: Path) -> None:
    control, store, brokers, _ = cluster
    brokers.register(_Node(4))
    store.add("r", 1, {}, registrations=control.assigned([[1, 2, 3]]))
    control.reassign("r", 0, [4, 2, 3])
    reg = store.partition("r", 0)
    # stage 1: the new replica is added, the old one kept until the new one is in sync
    assert (reg.replicas, reg.isr, reg.adding, reg.removing, reg.leader) == ((4, 2, 3, 1), (1, 2, 3), (4,), (1,), 1)
    assert control.reassignments() == {"r": [(0, reg)]}
    assert control.reassignments({"r": [0, 7], "missing": [0]}) == {"r": [(0, reg)]}
    # the leader's AlterPartition taking 4 into the ISR completes it: 1 leaves, and loses leadership
    error, done = control.alter_partition("r", 0, 1, reg.leader_epoch, reg.partition_epoch, [1, 2, 3, 4])
    assert error == ErrorCode.NONE
    assert (done.replicas, done.isr, done.adding, done.removing) == ((4, 2, 3), (2, 3, 4), (), ())
    assert done.leader == 4 and done.leader_epoch == reg.leader_epoch + 1  # the first target replica in sync
    assert control.reassignments() == {}
    # durable: a reload sees the finished assignment
    again = MetadataStore(tmp_path)
    again.load()
    assert again.partition("r", 0) == done


def test_a_reassignment_among_replicas_in_sync_completes_at_once(cluster) -> None:
    control, store, _, _ = cluster
    store.add("r", 1, {}, registrations=control.assigned([[1, 2, 3]]))
    control.reassign("r", 0, [3, 2])  # lowering the replication factor: nothing to copy
    reg = store.partition("r", 0)
    assert (reg.replicas, reg.isr, reg.adding, reg.removing) == ((3, 2), (2, 3), (), ())
    assert reg.leader in (2, 3)
    control.reassign("r", 0, [2, 3])  # only the order (the preferred leader) changes
    assert store.partition("r", 0).replicas == (2, 3)


def test_reassignment_checks_and_cancellation(cluster) -> None:
    control, store, brokers, _ = cluster
    brokers.register(_Node(4))
    store.add("r", 1, {}, registrations=control.assigned([[1, 2]]))

    def refused(topic: str, partition: int, target: list[int] | None, allow: bool = True) -> tuple[ErrorCode, str]:
        try:
            control.reassign(topic, partition, target, allow)
        except KafkaError as e:
            return e.code, e.message
        raise AssertionError("accepted")

    assert refused("nope", 0, [1]) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find a topic named nope.")
    assert refused("r", 3, [1]) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find partition r:3.")
    assert refused("r", 0, [])[0] == ErrorCode.INVALID_REPLICATION_ASSIGNMENT
    assert refused("r", 0, [9, 1]) == (ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                                       "The manual partition assignment includes broker 9, but no such broker is "
                                       "registered.")
    assert refused("r", 0, [2, 1, 2])[1] == "The manual partition assignment includes the broker 2 more than once."
    assert refused("r", 0, [1, 2, 4], False) == (ErrorCode.INVALID_REPLICATION_FACTOR,
                                                 "The replication factor is changed from 2 to 3")
    assert refused("r", 0, None)[0] == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS

    control.reassign("r", 0, [3, 4], False)  # same factor: allowed
    reg = store.partition("r", 0)
    assert (reg.replicas, reg.adding, reg.removing) == ((3, 4, 1, 2), (3, 4), (1, 2))
    assert refused("r", 0, [1, 2, 3], False)[1] == "The replication factor is changed from 2 to 3"
    control.reassign("r", 0, None)  # cancelled: the added replicas leave, the removed ones stay
    reg = store.partition("r", 0)
    assert (reg.replicas, reg.isr, reg.adding, reg.removing, reg.leader) == ((1, 2), (1, 2), (), (), 1)


def test_new_partitions_leave_fenced_brokers_out_of_the_isr(cluster) -> None:
    control, store, brokers, _ = cluster
    control.broker_fenced(2)
    brokers.fence(2)
    for reg in control.place(6, 3):  # three replicas on three brokers: the fenced one among them
        assert set(reg.replicas) == {1, 2, 3} and 2 not in reg.isr and reg.leader == reg.isr[0]
    reg, = control.assigned([[2, 3]])
    assert (reg.isr, reg.leader) == ((3,), 3)
    with pytest.raises(KafkaError, match="for partition 4 are fenced"):
        control.assigned([[1], [2]], first_partition=3)


def test_balance_leaders_restores_preferred_leaders_that_are_in_sync(cluster) -> None:
    control, store, brokers, _ = cluster
    store.add("b", 2, {}, registrations=control.assigned([[1, 2, 3], [2, 3, 1]]))
    control.move_leader("b", 0, 3)
    control.move_leader("b", 1, 3)
    reg = store.partition("b", 1)
    error, _ = control.alter_partition("b", 1, 3, reg.leader_epoch, reg.partition_epoch, [3, 1])  # 2 out of sync
    assert error == ErrorCode.NONE
    assert control.balance_leaders() == 1  # only partition 0: partition 1's preferred replica is not in sync
    assert (store.partition("b", 0).leader, store.partition("b", 1).leader) == (1, 3)
    assert control.balance_leaders() == 0
