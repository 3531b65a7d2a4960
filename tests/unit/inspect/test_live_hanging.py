"""find-hanging's decision, as Kafka 4.3's FindHangingTransactionsCommand makes it: an open
transaction on a partition whose producer has been idle longer than the maximum transaction
timeout is hanging when no transactional id holds its producer id, or when that id's current
transaction does not list the partition. Younger ones are not judged (``unverified``), nor is
anything while a coordinator is still loading."""

from __future__ import annotations

from broker.inspect.live.hanging import CoordinatorView, OpenTransaction, classify

NOW = 10_000_000
MAX = 900_000  # 15 minutes


def _open(topic: str = "orders", partition: int = 0, pid: int = 7, idle_ms: int = MAX + 1) -> OpenTransaction:
    return OpenTransaction(topic, partition, 1, pid, 3, 2, 40, NOW - idle_ms)


def _view(state: str, *tps: tuple[str, int], txn_id: str = "tx") -> CoordinatorView:
    return CoordinatorView(txn_id, state, frozenset(tps), 1, 3)


def test_a_partition_the_coordinator_still_lists_is_an_ongoing_transaction_whatever_its_age():
    rows = classify([_open(idle_ms=10 * MAX)], {7: _view("PrepareCommit", ("orders", 0))}.get, NOW, MAX)
    assert [(r["status"], r["reason"], r["transactionalId"]) for r in rows] == [("ongoing", None, "tx")]


def test_no_transactional_id_for_the_producer_id_is_hanging():
    [row] = classify([_open()], {}.get, NOW, MAX)
    assert row["status"] == "hanging"
    assert row["reason"] == "no transactional id has producer id 7"
    assert row["transactionalId"] is None


def test_a_transaction_that_does_not_list_the_partition_is_hanging():
    lookup = {7: _view("Ongoing", ("orders", 1))}.get  # a later transaction of the same producer
    [row] = classify([_open()], lookup, NOW, MAX)
    assert (row["status"], row["coordinatorState"]) == ("hanging", "Ongoing")
    assert row["reason"] == "the transaction of tx (Ongoing) does not include orders-0"
    [row] = classify([_open()], {7: _view("Empty")}.get, NOW, MAX)
    assert row["status"] == "hanging"


def test_only_producers_idle_longer_than_the_maximum_timeout_are_judged():
    [row] = classify([_open(idle_ms=MAX)], {}.get, NOW, MAX)  # Kafka: strictly longer
    assert row["status"] == "unverified" and "hanging after 900000 ms" in row["reason"]
    [row] = classify([_open(idle_ms=1)], {}.get, NOW, 0)
    assert row["status"] == "hanging"


def test_nothing_is_judged_while_a_coordinator_loads():
    [row] = classify([_open()], {}.get, NOW, MAX, coordinators_loading=True)
    assert row["status"] == "unknown"


def test_the_row_carries_what_find_hanging_prints_and_what_abort_needs():
    [row] = classify([_open(idle_ms=3 * 60_000 + 5)], {}.get, NOW, 0)
    assert {k: row[k] for k in ("topic", "partition", "producerId", "producerEpoch", "coordinatorEpoch",
                                "startOffset", "lastTimestamp", "durationMin")} == {
        "topic": "orders", "partition": 0, "producerId": 7, "producerEpoch": 3, "coordinatorEpoch": 2,
        "startOffset": 40, "lastTimestamp": NOW - 3 * 60_000 - 5, "durationMin": 3}
