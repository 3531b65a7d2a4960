"""Expiry that takes days in production, in a second of wall time: our broker on its virtual clock
(``control.clock=virtual``) with Kafka's DEFAULT expiry settings, the clock advanced through the
control endpoint, against Apache Kafka 4.3.1 configured to expire within a second. The stock
client (confluent-kafka) and the raw answers must be the same on both.

- A transactional id expires after ``transactional.id.expiration.ms`` (7 days) once its last
  transaction completed: DescribeTransactions answers TRANSACTIONAL_ID_NOT_FOUND, and the
  producer's next transaction fails as Kafka fails it (AddPartitionsToTxn:
  INVALID_PRODUCER_ID_MAPPING).
- A producer id expires after ``producer.id.expiration.ms`` (1 day) of silence: DescribeProducers
  no longer lists it, and its next batch (sequence 3, from a producer the partition does not know)
  is accepted, as KIP-360 has Kafka accept it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer
from kafka.protocol.admin import DescribeProducersRequest, DescribeTransactionsRequest

from broker.testing import KafkaCluster
from tests.differential.conftest import SHARED_SETTINGS
from tests.differential.harness import Target, build, unique
from tests.support.kafka_reference import KafkaReference
from tests.support.runtime_env import runtime_python

pytestmark = pytest.mark.timeout(240)

# Apache Kafka told to expire at once (the same checks, every 200 ms, after 1 s of silence)
KAFKA_FAST_EXPIRY = {
    "transactional.id.expiration.ms": 1000,
    "transaction.remove.expired.transaction.cleanup.interval.ms": 200,
    "producer.id.expiration.ms": 1000,
    "producer.id.expiration.check.interval.ms": 200,
}
TXN_EXPIRY = {"days": 7, "hours": 1}  # transactional.id.expiration.ms + one cleanup interval (defaults)
PRODUCER_EXPIRY = {"days": 1, "minutes": 10}  # producer.id.expiration.ms + one check interval (defaults)


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Any:
    ref = KafkaReference(extra_props=KAFKA_FAST_EXPIRY)
    try:
        ref.start(tmp_path_factory.mktemp("kafka-expiry"))
        yield ref
    finally:
        ref.stop()


@pytest.fixture(scope="module")
def ours(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with KafkaCluster(virtual_clock=True, python=runtime_python(), data_dir=tmp_path_factory.mktemp("ours-expiry"),
                      config=SHARED_SETTINGS) as cluster:
        yield cluster


def _advance(cluster: KafkaCluster, amount: dict[str, int]) -> Callable[[], float]:
    def expire() -> float:
        started = time.monotonic()
        cluster.clock.advance(**amount)
        return time.monotonic() - started
    return expire


def _wait(seconds: float) -> Callable[[], float]:
    def expire() -> float:
        time.sleep(seconds)
        return seconds
    return expire


def _describe_transaction(t: Target, txn: str) -> tuple[int, str]:
    t.find_transaction_coordinator(txn)
    with t.client() as c:
        r = c.send(build(DescribeTransactionsRequest, 0, transactional_ids=[txn]), 0)
    (state,) = r.transaction_states
    return state.error_code, state.transaction_state


def _completed(t: Target, txn: str) -> tuple[int, str]:
    """The transaction's state once its markers are written (PrepareCommit until then)."""
    deadline = time.monotonic() + 30
    while True:
        described = _describe_transaction(t, txn)
        if not described[1].startswith("Prepare") or time.monotonic() > deadline:
            return described
        time.sleep(0.05)


def _producers(t: Target, topic: str) -> list[int]:
    with t.client() as c:
        r = c.send(build(DescribeProducersRequest, 0, topics=[dict(name=topic, partition_indexes=[0])]), 0)
    (part,) = r.topics[0].partitions
    assert part.error_code == 0
    return [p.last_sequence for p in part.active_producers]


def _outcome(call: Callable[[], Any]) -> tuple[Any, ...]:
    try:
        call()
        return ("ok",)
    except KafkaException as e:
        err = e.args[0]
        return err.name(), err.fatal(), err.txn_requires_abort(), err.retriable()


def transactional_id_expiry(t: Target, expire: Callable[[], float]) -> tuple[Any, ...]:
    topic = unique("expiry-txn")
    t.create_topic(topic)
    txn = unique("tx")
    producer = Producer({"bootstrap.servers": t.bootstrap, "transactional.id": txn, "linger.ms": 0,
                         "transaction.timeout.ms": 60000})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, b"committed")
    producer.commit_transaction(30)
    before = _completed(t, txn)
    took = expire()
    after = _describe_transaction(t, txn)
    producer.begin_transaction()
    producer.produce(topic, b"after expiry")
    commit = _outcome(lambda: producer.commit_transaction(30))
    abort = _outcome(lambda: producer.abort_transaction(30)) if commit != ("ok",) else None
    return (before, after, commit, abort), took


def producer_id_expiry(t: Target, expire: Callable[[], float]) -> tuple[Any, ...]:
    topic = unique("expiry-pid")
    t.create_topic(topic)
    producer = Producer({"bootstrap.servers": t.bootstrap, "enable.idempotence": True, "linger.ms": 0})
    reports: list[tuple[Any, int]] = []

    def send(value: bytes) -> None:
        producer.produce(topic, value, partition=0,
                         on_delivery=lambda err, msg: reports.append((err and err.name(), msg.offset())))
        assert producer.flush(30) == 0

    for i in range(3):
        send(b"%d" % i)
    before = _producers(t, topic)
    took = expire()
    after = _producers(t, topic)
    send(b"after expiry")
    return (reports, before, after, _producers(t, topic)), took


def test_a_transactional_id_expires_as_kafka_expires_it(kafka: KafkaReference, ours: KafkaCluster) -> None:
    k, _ = transactional_id_expiry(Target("kafka", kafka.bootstrap), _wait(2.5))
    o, took = transactional_id_expiry(Target("ours", ours.bootstrap), _advance(ours, TXN_EXPIRY))
    before, after, commit, _ = k
    assert before == (0, "CompleteCommit")
    assert after[0] == 105  # TRANSACTIONAL_ID_NOT_FOUND
    assert commit != ("ok",)
    assert o == k
    print(f"\n[time] a transactional id expired in {took:.3f} s of wall time: {o}")
    assert took < 1.0, f"a week of broker time took {took:.2f} s"


def test_a_producer_id_expires_as_kafka_expires_it(kafka: KafkaReference, ours: KafkaCluster) -> None:
    k, _ = producer_id_expiry(Target("kafka", kafka.bootstrap), _wait(2.0))
    o, took = producer_id_expiry(Target("ours", ours.bootstrap), _advance(ours, PRODUCER_EXPIRY))
    reports, before, after, again = k
    assert reports == [(None, 0), (None, 1), (None, 2), (None, 3)]
    assert (before, after, again) == ([2], [], [3])
    assert o == k
    print(f"\n[time] a producer id expired in {took:.3f} s of wall time: {o}")
    assert took < 1.0, f"a day of broker time took {took:.2f} s"
