"""The ports through which the coordinators reach the rest of the broker. Kafka's group-coordinator
module imports nothing of the broker: it writes through ``PartitionWriter`` and is given its
configuration, time and metrics. So are these: the broker implements the ports
(``broker/coordinator_ports.py``) and injects them; tests inject fakes.

- ``PartitionWriter``: the partitions a coordinator keeps its state in (``__consumer_offsets``,
  ``__transaction_state``): whether the topic exists, creating it, reading a partition's log
  when loading, and appending what the coordinator built (waking fetchers, as any append does).
- ``TransactionVerifier``: KIP-890 for the group coordinator's transactional offset commits: is
  the offsets partition in the producer's transaction (and, for Transactions V2, add it).
- ``CoordinatorEnv``: configuration, node id, feature levels, the metrics sink, dynamic group
  configs, the producer-id source and whether the broker is stopping.
- ``TransactionObserver``: told of each durable transaction state change and of each round of
  markers (the broker's inspector records them for a transaction's timeline; absent by default).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from protocol.errors import ErrorCode
from storage.clock import Clock

if TYPE_CHECKING:
    from coordinator.txn.state import TxnTransitMetadata
    from storage.log.partition_log import AppendResult, PartitionLog

TopicPartition = tuple[str, int]


class ConfigView(Protocol):
    def get(self, name: str) -> Any:
        """The current value of a broker property (its default when unset)."""
        ...


class MetricsSink(Protocol):
    def txn_completed(self, state: str, duration_s: float) -> None: ...
    def txn_timed_out(self) -> None: ...
    def marker_written(self, result: str) -> None: ...
    def marker_retry(self) -> None: ...
    def group_rebalanced(self, group_id: str) -> None: ...


class CoordinatorEnv(Protocol):
    # Read-only properties, not attributes: a settable protocol member would have to be declared
    # with exactly these types, and the broker's env rightly holds its concrete config and metrics.
    @property
    def node_id(self) -> int: ...

    @property
    def config(self) -> ConfigView: ...

    @property
    def metrics(self) -> MetricsSink: ...

    @property
    def clock(self) -> Clock:
        """Every timestamp and timer of the coordinators."""
        ...

    @property
    def stopping(self) -> bool:
        """True once the broker has begun its shutdown."""
        ...

    @property
    def elected(self) -> bool:
        """True when this broker owns a coordinator partition only while it leads it (one of
        several brokers: ``on_election`` / ``on_resignation``); False on a single node, which owns
        every partition from the start."""
        ...

    def feature_level(self, name: str) -> int:
        """The finalized level of a feature (``transaction.version``, ``group.version``)."""
        ...

    def group_configs(self, group_id: str) -> Mapping[str, str]:
        """A group's dynamic configs (IncrementalAlterConfigs on a GROUP resource)."""
        ...

    def generate_producer_id(self) -> int:
        """The next producer id from the durably reserved block."""
        ...


class PartitionWriter(Protocol):
    def partitions(self, topic: str) -> int | None:
        """The topic's partition count; None when it does not exist."""
        ...

    def ensure_internal_topic(self, name: str, partitions: int, configs: dict[str, str]) -> None:
        """Create an internal topic if it does not exist yet (raises KafkaError)."""
        ...

    def log(self, topic: str, partition: int) -> PartitionLog | None:
        """The partition's log on this node, to load from (None when there is none)."""
        ...

    def append(self, topic: str, partition: int, batch: bytearray,
               verification_guard: object | None = None) -> AppendResult:
        """Append a batch the coordinator built, as the partition's leader (origin COORDINATOR for a
        transactional one, checked against ``verification_guard`` when given); raises KafkaError."""
        ...

    async def committed(self, topic: str, partition: int, end_offset: int) -> ErrorCode:
        """Wait until every in-sync replica holds the partition up to ``end_offset`` (Kafka's
        coordinators answer once their write is replicated: acks=all). NONE at once for a
        partition with one replica; REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS(_AFTER_APPEND) or
        NOT_LEADER_OR_FOLLOWER as a produce with acks=all would get."""
        ...


class TransactionVerifier(Protocol):
    def verify(self, plog: PartitionLog, transactional_id: str | None, producer_id: int, producer_epoch: int,
               sequence: int, operation: int) -> tuple[ErrorCode, object | None]:
        """Is the partition in the producer's ongoing transaction: (error, guard to append with)."""
        ...

    async def add_partitions(self, transactional_id: str | None, producer_id: int, producer_epoch: int,
                             targets: dict[TopicPartition, tuple[PartitionLog, int]],
                             retry_concurrent: bool) -> dict[TopicPartition, ErrorCode]:
        """Transactions V2: add the partitions to the producer's transaction; errors per partition."""
        ...


class TransactionObserver(Protocol):
    """What the transaction coordinator reports as it happens, for whoever watches (the broker's
    inspector). Called on the event loop, after the fact; must be cheap and must not raise."""

    def transaction_state_changed(self, transactional_id: str, previous_state: int, transit: TxnTransitMetadata,
                                  state_partition: int, coordinator_epoch: int, offset: int) -> None:
        """A transition is durable in ``__transaction_state-state_partition`` at ``offset`` and applied."""
        ...

    def markers_answered(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                         results: Mapping[TopicPartition, ErrorCode]) -> None:
        """One round of markers was answered by the partitions' leaders (an error code per partition)."""
        ...
