"""This broker's part in replication: Kafka's ReplicaManager.applyDelta / makeLeader / makeFollower,
the leader's side of follower fetches (Partition.fetchRecords, updateFollowerFetchState), the ISR
expiration task and the acks=all wait (DelayedProduce).

Only partitions with more than one replica get any of this: a partition whose only replica is
this broker keeps the high watermark at the log end and answers at once, as a single node does.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import structlog

from broker.cluster.partition_change import NO_LEADER, PartitionRegistration
from broker.net.tls import client_context
from broker.replica.isr import LeaderReplicas
from broker.replica.replica_fetcher import ReplicaFetcher
from coordinator.group.coordinator import OFFSETS_TOPIC
from coordinator.txn.state_manager import TRANSACTION_STATE_TOPIC
from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from broker.services import Services
    from storage.log.partition_log import PartitionLog

log = structlog.get_logger(__name__)

TopicPartition = tuple[str, int]


class Replication:
    def __init__(self, broker: Services) -> None:
        self.broker = broker
        self.leaders: dict[TopicPartition, LeaderReplicas] = {}
        self.epochs: dict[TopicPartition, int] = {}  # the leader epoch each led partition was taken at
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self._hw_waiters: dict[TopicPartition, set[asyncio.Future[None]]] = {}
        self._tls: ssl.SSLContext | None = None  # to the other brokers' SSL inter-broker listener

    # --- roles (the metadata publisher calls these) ----------------------------------------------

    def on_partition_change(self, topic: str, partition: int, old: PartitionRegistration | None,
                            new: PartitionRegistration) -> None:
        local = self.broker.node_id
        if local in new.replicas and self.broker.log_manager.get(topic, partition) is None:
            self._create_replica(topic, partition)  # a reassignment adds this broker
        self.apply(topic, partition, new)
        if old is not None and local in old.replicas and local not in new.replicas:
            self._delete_replica(topic, partition)  # a reassignment removed this broker

    def _create_replica(self, topic: str, partition: int) -> None:
        info = self.broker.metadata.get(topic)
        if info is not None:
            self.broker.log_manager.create(topic, partition, self.broker.controller.log_config(info), info.topic_id)

    def _delete_replica(self, topic: str, partition: int) -> None:
        """ReplicaManager.applyDelta's deletes: a replica no longer assigned here stops and its
        log goes (renamed ``-delete``, then removed, as a deleted topic's)."""
        key = (topic, partition)
        self._stop_following(key)
        self.leaders.pop(key, None)
        self.epochs.pop(key, None)
        self._wake_hw(key)
        if self.broker.log_manager.delete_partition(topic, partition):
            self.broker.replica_manager.wake(topic, partition)
            log.info("replica removed by a reassignment", topic=topic, partition=partition)

    def on_partitions_created(self, topic: str, partitions: range) -> None:
        """New partitions: the logs of this broker's replicas, then their roles."""
        info = self.broker.metadata.get(topic)
        if info is None:
            return
        config = self.broker.controller.log_config(info)
        for p in partitions:
            reg = info.registrations[p]
            if self.broker.node_id in reg.replicas:
                if self.broker.log_manager.get(topic, p) is None:
                    self.broker.log_manager.create(topic, p, config, info.topic_id)
                self.apply(topic, p, reg)

    def on_topic_deleted(self, topic: str) -> None:
        for key in [k for k in self.leaders if k[0] == topic]:
            self.leaders.pop(key, None)
            self.epochs.pop(key, None)
            self._wake_hw(key)
        for fetcher in self.fetchers.values():
            for key in [k for k in fetcher.partitions if k[0] == topic]:
                fetcher.remove(*key)
        self.broker.log_manager.delete_topic(topic)
        self.broker.replica_manager.topic_deleted(topic)
        self.broker.group_coordinator.manager.on_topic_deleted(topic)

    def on_topic_configs(self, topic: str) -> None:
        info = self.broker.metadata.get(topic)
        if info is None:
            return
        config = self.broker.controller.log_config(info)
        for p in range(info.partitions):
            plog = self.broker.log_manager.get(topic, p)
            if plog is not None:
                plog.update_config(config)

    def apply(self, topic: str, partition: int, reg: PartitionRegistration) -> None:
        key = (topic, partition)
        local = self.broker.node_id
        plog = self.broker.log_manager.get(topic, partition)
        self._coordinator_partition(topic, partition, reg.leader == local and plog is not None, reg.leader_epoch)
        if local not in reg.replicas or plog is None:
            self._stop_following(key)
            self.leaders.pop(key, None)
            return
        if len(reg.replicas) == 1 and reg.leader == local and not plog.replicated:
            return  # a partition with one replica: nothing to track, its high watermark is its end
        if reg.leader == local:
            self._become_leader(key, plog, reg)
        else:
            self._become_follower(key, plog, reg)

    def _coordinator_partition(self, topic: str, partition: int, leader: bool, epoch: int) -> None:
        """A coordinator topic's partition follows its leadership (onElection / onResignation)."""
        if self.broker.shared is None:
            return
        if topic == OFFSETS_TOPIC:
            gc = self.broker.group_coordinator
            gc.on_election(partition, epoch) if leader else gc.on_resignation(partition)
        elif topic == TRANSACTION_STATE_TOPIC:
            txn = self.broker.txn_coordinator
            txn.on_election(partition, epoch) if leader else txn.on_resignation(partition)

    def _start_tracking(self, key: TopicPartition, plog: PartitionLog, reg: PartitionRegistration) -> None:
        if len(reg.replicas) > 1 and not plog.replicated:
            plog.track_high_watermark(self.broker.log_manager.checkpointed_high_watermarks.get(key, 0))

    def _become_leader(self, key: TopicPartition, plog: PartitionLog, reg: PartitionRegistration) -> None:
        self._stop_following(key)
        self._start_tracking(key, plog, reg)
        now = self.broker.wire_clock.now_ms()
        previous = self.leaders.get(key)
        if previous is not None and self.epochs.get(key) == reg.leader_epoch:
            previous.update_assignment(reg.replicas, reg.isr)  # an ISR or replica change only
        else:
            if plog.epoch_cache.latest_epoch != reg.leader_epoch:
                plog.assign_leader_epoch(reg.leader_epoch)  # this epoch starts at our log end
            self.leaders[key] = LeaderReplicas.become_leader(self.broker.node_id, reg.replicas, reg.isr,
                                                             plog.log_end_offset, now, previous)
            self.epochs[key] = reg.leader_epoch
            if previous is None:
                log.info("became leader", topic=key[0], partition=key[1], leader_epoch=reg.leader_epoch,
                         isr=list(reg.isr), log_end_offset=plog.log_end_offset, high_watermark=plog.high_watermark)
        self.maybe_increment_hw(key, plog)

    def _become_follower(self, key: TopicPartition, plog: PartitionLog, reg: PartitionRegistration) -> None:
        was_leader = self.leaders.pop(key, None) is not None
        self.epochs.pop(key, None)
        self._start_tracking(key, plog, reg)
        self._stop_following(key)
        if was_leader:
            self._wake_hw(key)  # parked acks=all produces answer NOT_LEADER_OR_FOLLOWER
        if reg.leader == NO_LEADER:
            return
        endpoint = self.endpoint_of(reg.leader)
        if endpoint is None:
            return
        fetcher = self.fetchers.get(reg.leader)
        if fetcher is None:
            fetcher = self.fetchers[reg.leader] = ReplicaFetcher(self.broker, reg.leader, *endpoint)
        fetcher.client.retarget(*endpoint)
        fetcher.add(key[0], key[1], reg.leader_epoch)

    def endpoint_of(self, node_id: int) -> tuple[str, int] | None:
        """Where broker ``node_id`` listens for other brokers now (None when it is not running)."""
        node = self.broker.brokers.node(node_id)
        if node is None or not self.broker.brokers.alive(node_id):
            return None
        return node.advertised_endpoint(self.inter_broker_listener(), "127.0.0.1")

    def inter_broker_listener(self) -> str:
        config = self.broker.config
        name = config.get("inter.broker.listener.name")
        if name:
            return str(name)
        return config.listeners()[0][0]

    def inter_broker_tls(self) -> ssl.SSLContext | None:
        """The TLS context of this broker's connections to the others, when the inter-broker listener
        is an SSL one (its truststore checks them, its keystore is this broker's certificate)."""
        listener = self.inter_broker_listener()
        if self.broker.config.listener_security_protocols().get(listener) != "SSL":
            return None
        if self._tls is None:
            self._tls = client_context(self.broker.config, listener)
        return self._tls

    def _stop_following(self, key: TopicPartition) -> None:
        for fetcher in self.fetchers.values():
            fetcher.remove(*key)

    async def stop(self) -> None:
        for fetcher in list(self.fetchers.values()):
            await fetcher.stop()
        self.fetchers.clear()
        self.leaders.clear()
        for key in list(self._hw_waiters):
            self._wake_hw(key)

    # --- the leader: high watermark, follower fetches, ISR ------------------------------------------

    def _min_isr(self, plog: PartitionLog) -> int:
        return plog.config.min_insync_replicas

    def maybe_increment_hw(self, key: TopicPartition, plog: PartitionLog) -> bool:
        lead = self.leaders.get(key)
        if lead is None or not plog.replicated:
            return False
        hw = lead.high_watermark(plog.log_end_offset, plog.high_watermark, self.broker.wire_clock.now_ms(),
                                 self.broker.config.get("replica.lag.time.max.ms"), self._min_isr(plog),
                                 self.broker.brokers.alive)
        if plog.maybe_increment_high_watermark(hw):
            self._wake_hw(key)
            self.broker.replica_manager.wake(*key)  # consumers read up to the new high watermark
            return True
        return False

    def leader_of(self, topic: str, partition: int) -> LeaderReplicas | None:
        return self.leaders.get((topic, partition))

    def follower_fetched(self, topic: str, partition: int, replica_id: int, fetch_offset: int,
                         log_start_offset: int, plog: PartitionLog) -> None:
        """Partition.updateFollowerFetchState: a follower holds everything below ``fetch_offset``."""
        key = (topic, partition)
        lead = self.leaders.get(key)
        if lead is None:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        follower = lead.followers.get(replica_id)
        if follower is None:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                             f"Replica {replica_id} is not a replica of {topic}-{partition}")
        before = follower.log_end_offset
        follower.update_fetch(fetch_offset, log_start_offset, self.broker.wire_clock.now_ms(), plog.log_end_offset)
        if lead.isr_to_expand(replica_id, plog.high_watermark, self.broker.brokers.alive) is not None:
            self._alter_isr(key, add=replica_id)
        if before != follower.log_end_offset:
            self.maybe_increment_hw(key, plog)

    def _alter_isr(self, key: TopicPartition, add: int | None = None, remove: frozenset[int] = frozenset()) -> None:
        """AlterPartition to the controller (in this process; its answer comes back as a change).
        The leader proposes its ISR set in id order, as Kafka 4.3's brokers are seen to (the
        three-node differential test)."""
        reg = self.broker.metadata.partition(*key)
        if reg is None:
            return
        isr = sorted({r for r in reg.isr if r not in remove} | ({add} if add is not None else set()))
        error, _ = self.broker.replication_control.alter_partition(
            key[0], key[1], self.broker.node_id, reg.leader_epoch, reg.partition_epoch, isr)
        if error != ErrorCode.NONE:
            log.info("AlterPartition refused", topic=key[0], partition=key[1], isr=isr, error=error.name)

    def expire_isr(self) -> None:
        """Kafka's isr-expiration task: drop followers not caught up within replica.lag.time.max.ms."""
        now = self.broker.wire_clock.now_ms()
        max_lag = self.broker.config.get("replica.lag.time.max.ms")
        for key, lead in list(self.leaders.items()):
            plog = self.broker.log_manager.get(*key)
            if plog is None:
                continue
            out = lead.out_of_sync(plog.log_end_offset, now, max_lag)
            if out:
                log.info("shrinking ISR", topic=key[0], partition=key[1], out_of_sync=sorted(out),
                         log_end_offset=plog.log_end_offset, high_watermark=plog.high_watermark)
                self._alter_isr(key, remove=frozenset(out))

    # --- acks=all -----------------------------------------------------------------------------

    def append_error(self, topic: str, partition: int, acks: int, plog: PartitionLog) -> None:
        """Refuse acks=all before the append when the ISR is below min.insync.replicas."""
        lead = self.leaders.get((topic, partition))
        if lead is not None and plog.replicated:
            code = lead.append_error(acks, self._min_isr(plog))
            if code != ErrorCode.NONE:
                raise KafkaError(code, f"The size of the current ISR {sorted(lead.isr)} is insufficient to "
                                       f"satisfy the min.isr requirement of {self._min_isr(plog)} for partition "
                                       f"{topic}-{partition}")

    def acks_reached(self, topic: str, partition: int, required_offset: int) -> tuple[bool, ErrorCode]:
        """DelayedProduce.tryComplete for one partition: done (with its error) or still waiting."""
        plog = self.broker.log_manager.get(topic, partition)
        if plog is None:
            return True, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if not plog.replicated:
            return True, ErrorCode.NONE
        lead = self.leaders.get((topic, partition))
        if lead is None:
            return True, ErrorCode.NOT_LEADER_OR_FOLLOWER
        return lead.acks_all_reached(required_offset, plog.high_watermark, self._min_isr(plog))

    def needs_wait(self, topic: str, partition: int) -> bool:
        plog = self.broker.log_manager.get(topic, partition)
        return plog is not None and plog.replicated

    async def wait_for_acks(self, pending: dict[TopicPartition, int], timeout_s: float
                            ) -> dict[TopicPartition, ErrorCode]:
        """Wait until every partition's high watermark reaches its required offset, or the
        timeout (REQUEST_TIMED_OUT for those still short)."""
        loop = asyncio.get_running_loop()
        deadline = self.broker.wire_clock.monotonic() + timeout_s
        results: dict[TopicPartition, ErrorCode] = {}
        waiting = dict(pending)
        while True:
            for key, required in list(waiting.items()):
                done, error = self.acks_reached(key[0], key[1], required)
                if done:
                    results[key] = error
                    del waiting[key]
            remaining = deadline - self.broker.wire_clock.monotonic()
            if not waiting or remaining <= 0 or self.broker.stopping:
                for key in waiting:
                    results[key] = ErrorCode.REQUEST_TIMED_OUT
                return results
            fut: asyncio.Future[None] = loop.create_future()
            for key in waiting:
                self._hw_waiters.setdefault(key, set()).add(fut)
            handle = self.broker.wire_clock.call_later(remaining, _resolver(fut))
            try:
                await fut
            finally:
                handle.cancel()
                for key in waiting:
                    waiters = self._hw_waiters.get(key)
                    if waiters is not None:
                        waiters.discard(fut)
                        if not waiters:
                            del self._hw_waiters[key]

    def _wake_hw(self, key: TopicPartition) -> None:
        for fut in list(self._hw_waiters.get(key, ())):
            if not fut.done():
                fut.set_result(None)

    def led_partitions(self) -> Iterable[TopicPartition]:
        return self.leaders.keys()


def _resolver(fut: asyncio.Future[None]) -> Callable[[], None]:
    def resolve() -> None:
        if not fut.done():
            fut.set_result(None)
    return resolve
