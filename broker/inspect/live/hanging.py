"""Hanging transactions, found as ``kafka-transactions.sh find-hanging`` finds them, and aborted as
``kafka-transactions.sh abort`` aborts them (Kafka 4.3's TransactionsCommand).

find-hanging asks each partition leader for its producers (DescribeProducers) and keeps those
with an open transaction (``currentTransactionStartOffset``) whose producer last wrote more than
``--max-transaction-timeout`` ago (15 minutes; here the broker's ``transaction.max.timeout.ms``
unless given). It then asks the coordinators which transactional id holds each producer id
(ListTransactions with a producer-id filter) and what that id's current transaction holds
(DescribeTransactions). The open transaction is hanging when no transactional id has the
producer id, when the id is not found, or when its transaction does not list the partition: no
coordinator will ever write that partition's marker, and the partition's last stable offset
stays where the transaction began, so read_committed consumers stop there.

Here every broker of the process is read directly, at one instant, so the answer is the same
without the tool's races; while a coordinator is still loading ``__transaction_state`` nothing is
called hanging (the tool would fail with COORDINATOR_LOAD_IN_PROGRESS). Every open transaction is
listed with its status: ``ongoing`` (its coordinator will write the marker), ``hanging``,
``unverified`` (no coordinator holds it, but the producer wrote within the threshold) or
``unknown`` (a coordinator is loading).

``abort`` writes the ABORT marker for the producer id and epoch on the partition, with the
coordinator epoch the partition last saw from it (0 when it saw none, as the tool does), through
the leader's own marker path (``broker.replica.txn_markers.write_txn_markers``), exactly what the
WriteTxnMarkers request of ``kafka-transactions.sh abort`` makes the leader do: answered once the
partition's ISR holds the marker.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from broker.replica.txn_markers import write_txn_markers
from coordinator.txn.state import TransactionState
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.services import Services
    from coordinator.txn.state import TransactionMetadata

TRANSACTION_MARKER_TV0 = 0  # the admin tool's markers carry no transaction version (WriteTxnMarkers v1)


@dataclass(frozen=True, slots=True)
class OpenTransaction:
    """One producer's open transaction on one partition (a DescribeProducers row with a
    currentTransactionStartOffset), on the partition's leader."""

    topic: str
    partition: int
    broker: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    start_offset: int
    last_timestamp: int


@dataclass(frozen=True, slots=True)
class CoordinatorView:
    """What ListTransactions + DescribeTransactions say of a producer id: the transactional id that
    holds it, its state, the partitions its current transaction lists, and where it lives."""

    transactional_id: str
    state: str
    partitions: frozenset[tuple[str, int]]
    coordinator: int
    producer_epoch: int


def classify(open_txns: Iterable[OpenTransaction], lookup: Callable[[int], CoordinatorView | None],
             now_ms: int, max_transaction_timeout_ms: int, coordinators_loading: bool = False) -> list[dict[str, Any]]:
    """Each open transaction with its ``status`` and, unless ongoing, the ``reason`` (see the module)."""
    out = []
    for t in open_txns:
        duration = now_ms - t.last_timestamp
        view = lookup(t.producer_id)
        row: dict[str, Any] = {
            "topic": t.topic, "partition": t.partition, "broker": t.broker, "producerId": t.producer_id,
            "producerEpoch": t.producer_epoch, "coordinatorEpoch": t.coordinator_epoch, "startOffset": t.start_offset,
            "lastTimestamp": t.last_timestamp, "durationMs": duration, "durationMin": max(duration, 0) // 60_000,
            "transactionalId": view.transactional_id if view is not None else None,
            "coordinatorState": view.state if view is not None else None,
            "coordinator": view.coordinator if view is not None else None,
        }
        if view is not None and (t.topic, t.partition) in view.partitions:
            row["status"], row["reason"] = "ongoing", None
        else:
            if view is None:
                reason = f"no transactional id has producer id {t.producer_id}"
            else:
                reason = (f"the transaction of {view.transactional_id} ({view.state}) does not include "
                          f"{t.topic}-{t.partition}")
            if coordinators_loading:
                row["status"] = "unknown"
                reason += " (a coordinator is still loading: not judged)"
            elif duration > max_transaction_timeout_ms:
                row["status"] = "hanging"
            else:
                row["status"] = "unverified"
                reason += f" (the producer wrote {duration} ms ago: hanging after {max_transaction_timeout_ms} ms)"
            row["reason"] = reason
        out.append(row)
    return out


# --- reading the brokers of this process -------------------------------------------------------

def members(broker: Services) -> list[Services]:
    """The running brokers of this process, by id (this one alone when it runs alone)."""
    shared = broker.shared
    if shared is None or not shared.members:
        return [broker]
    return [shared.members[k] for k in sorted(shared.members)]


def leader_of(broker: Services, topic: str, partition: int) -> Services | None:
    """The running broker of this process that leads the partition (and has its log)."""
    reg = broker.metadata.partition(topic, partition)
    for b in members(broker):
        if (reg is None or reg.leader == b.node_id) and b.log_manager.get(topic, partition) is not None:
            return b
    return None


def open_transactions(broker: Services, topic: str | None = None,
                      partition: int | None = None) -> list[OpenTransaction]:
    """Every open transaction on the partitions led by a broker of this process."""
    out = []
    for b in members(broker):
        for plog in b.log_manager.logs():
            if (topic is not None and plog.topic != topic) or (partition is not None and plog.partition != partition):
                continue
            state = plog.producer_state
            if state is None or state.manager.first_unstable_offset() is None:
                continue
            reg = b.metadata.partition(plog.topic, plog.partition)
            if reg is not None and reg.leader != b.node_id:
                continue  # a follower's copy: DescribeProducers asks the leader
            for pid, entry in state.manager.producers.items():
                if entry.current_txn_first_offset is not None:
                    out.append(OpenTransaction(plog.topic, plog.partition, b.node_id, pid, entry.producer_epoch,
                                               entry.coordinator_epoch, entry.current_txn_first_offset,
                                               entry.last_timestamp))
    return sorted(out, key=lambda t: (t.topic, t.partition, t.start_offset))


def coordinator_index(broker: Services) -> tuple[dict[int, CoordinatorView], bool]:
    """Producer id -> what its coordinator holds (Dead ids left out, as ListTransactions leaves them),
    and whether some coordinator is still loading."""
    index: dict[int, CoordinatorView] = {}
    loading = False
    for b in members(broker):
        sm = b.txn_coordinator.state_manager
        loading = loading or bool(sm.loading)
        for entries in list(sm.cache.values()):
            for m in entries.values():
                if m.state != TransactionState.DEAD:
                    index[m.producer_id] = _view(m, b.node_id)
    return index, loading


def _view(m: TransactionMetadata, node: int) -> CoordinatorView:
    return CoordinatorView(m.transactional_id, m.state.state_name, frozenset(m.topic_partitions), node,
                           m.producer_epoch)


def find_hanging(broker: Services, max_transaction_timeout_ms: int | None = None, topic: str | None = None,
                 partition: int | None = None) -> dict[str, Any]:
    """``{"maxTransactionTimeoutMs", "hanging": [...], "open": [...every open transaction...],
    "coordinatorsLoading"}``."""
    if max_transaction_timeout_ms is None:
        max_transaction_timeout_ms = int(broker.config.get("transaction.max.timeout.ms"))
    index, loading = coordinator_index(broker)
    rows = classify(open_transactions(broker, topic, partition), index.get, broker.clock.now_ms(),
                    max_transaction_timeout_ms, loading)
    return {"maxTransactionTimeoutMs": max_transaction_timeout_ms, "coordinatorsLoading": loading,
            "hanging": [r for r in rows if r["status"] == "hanging"], "open": rows}


class AbortError(ValueError):
    """The abort cannot be attempted (no such open transaction, no leader here); the message says why."""


async def abort(broker: Services, topic: str, partition: int, *, start_offset: int | None = None,
                producer_id: int | None = None, producer_epoch: int | None = None,
                coordinator_epoch: int | None = None) -> dict[str, Any]:
    """``kafka-transactions.sh abort``: by ``start_offset`` (the producer whose open transaction
    begins there, as for brokers 3.0+), or by producer id, epoch and coordinator epoch."""
    leader = leader_of(broker, topic, partition)
    if leader is None:
        raise AbortError(f"no broker of this process leads {topic}-{partition}")
    plog = leader.log_manager.get(topic, partition)
    assert plog is not None
    manager = plog.producer_state.manager if plog.producer_state is not None else None
    if start_offset is not None:
        found = None
        if manager is not None:
            found = next((e for e in manager.producers.values() if e.current_txn_first_offset == start_offset), None)
        if found is None:
            raise AbortError(f"Could not find any open transactions starting at offset {start_offset} on "
                             f"partition {topic}-{partition}")
        producer_id, producer_epoch, coordinator_epoch = found.producer_id, found.producer_epoch, found.coordinator_epoch
    elif producer_id is None or producer_epoch is None or coordinator_epoch is None:
        raise AbortError("The transaction to abort must be identified either with a start offset or with "
                         "a producer id, producer epoch and coordinator epoch")
    # TransactionsCommand: a producer that never saw a marker shows -1; 0 is at most any real epoch
    coordinator_epoch = max(coordinator_epoch, 0)
    before = plog.last_stable_offset
    answers = await write_txn_markers(leader, [(topic, partition)], producer_id, producer_epoch, False,
                                      coordinator_epoch, TRANSACTION_MARKER_TV0, via="inspector")
    code = answers[(topic, partition)]
    return {"topic": topic, "partition": partition, "broker": leader.node_id, "producerId": producer_id,
            "producerEpoch": producer_epoch, "coordinatorEpoch": coordinator_epoch, "error": code.name,
            "lastStableOffsetBefore": before, "lastStableOffsetAfter": plog.last_stable_offset,
            "highWatermark": plog.high_watermark, "ok": code == ErrorCode.NONE}
