"""A broker's worth of transactions for the inspector's tests, made by stock clients and one raw one:

- ``tx-committed``: a committed transaction on orders-0 and orders-1 (confluent-kafka);
- ``tx-aborted``: an aborted one on orders-1;
- ``tx-open``: an open one on orders-2 that also sent offsets of group ``copier`` to the transaction,
  so the group has pending transactional offsets (TxnOffsetCommit) until it ends;
- ``tx-hanging``: a hanging transaction on orders-0, made the way hanging transactions happen (KIP-664):
  a transactional Produce that reaches the partition while the coordinator never added it, here a raw
  Produce v11 with no AddPartitionsToTxn, which a broker with
  ``transaction.partition.verification.enable=false`` accepts as pre-KIP-890 brokers did. Its
  coordinator holds the id as Empty, so no marker will ever come: the LSO of orders-0 stays at its
  first offset;
- ``tx-after``: a committed transaction on orders-0 after it, which read_committed consumers cannot
  see until the hanging one is aborted;
- group ``readers``: a consumer that joined, was assigned orders and committed offsets (lag > 0); it
  stays in the group until ``close()``.

The broker must run with ``transaction.partition.verification.enable=false``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest

from protocol.records import build_batch
from tests.support.raw_client import RawClient

TOPIC = "orders"


@dataclass
class Scenario:
    bootstrap: str
    open_producer: Producer
    readers: Consumer
    hanging_producer_id: int = -1
    hanging_epoch: int = -1
    hanging_offset: int = -1  # orders-0
    after_offsets: list[int] = field(default_factory=list)  # tx-after's records on orders-0
    closed: bool = False

    def close(self) -> None:
        """Abort tx-open and let the readers leave (once)."""
        if self.closed:
            return
        self.closed = True
        try:
            self.open_producer.abort_transaction(10)
        finally:
            self.readers.close()


def _producer(bootstrap: str, txn_id: str, **extra: object) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 0,
                  "transaction.timeout.ms": 300_000, **extra})
    p.init_transactions(30)
    return p


def _committed(bootstrap: str, txn_id: str, records: list[tuple[int, bytes]], commit: bool = True) -> list[int]:
    p = _producer(bootstrap, txn_id)
    p.begin_transaction()
    offsets: list[int] = []
    for partition, value in records:
        p.produce(TOPIC, value, key=b"k", partition=partition,
                  on_delivery=lambda err, msg: offsets.append(msg.offset()) if err is None else None)
    p.flush(30)
    if commit:
        p.commit_transaction(30)
    else:
        p.abort_transaction(30)
    return offsets


def _raw_hanging(bootstrap: str, txn_id: str) -> tuple[int, int, int]:
    """InitProducerId, then a transactional batch straight to orders-0 (no AddPartitionsToTxn)."""
    with RawClient(bootstrap) as c:
        assert c.send(FindCoordinatorRequest[3](key=txn_id, key_type=1), 3).error_code == 0
        r = c.send(InitProducerIdRequest[3](transactional_id=txn_id, transaction_timeout_ms=60000,
                                            producer_id=-1, producer_epoch=-1), 3)
        assert r.error_code == 0, r
        pid, epoch = r.producer_id, r.producer_epoch
        batch = bytes(build_batch([(b"k", b"hanging-%d" % i) for i in range(2)], timestamp=int(time.time() * 1000),
                                  producer_id=pid, producer_epoch=epoch, base_sequence=0, transactional=True))
        req = ProduceRequest[11](transactional_id=txn_id, acks=-1, timeout_ms=5000, topic_data=[
            ProduceRequest.TopicProduceData(name=TOPIC, partition_data=[
                ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=batch)])])
        part = c.send(req, 11).responses[0].partition_responses[0]
        assert part.error_code == 0, part
        return pid, epoch, part.base_offset


def build_scenario(bootstrap: str) -> Scenario:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 3, 1)])[TOPIC].result(30)
    _committed(bootstrap, "tx-committed", [(0, b"c0"), (0, b"c1"), (1, b"c2")])
    _committed(bootstrap, "tx-aborted", [(1, b"a0"), (1, b"a1")], commit=False)
    # a consumer group with members, an assignment and committed offsets (lag: the records after them)
    readers = Consumer({"bootstrap.servers": bootstrap, "group.id": "readers", "auto.offset.reset": "earliest",
                        "enable.auto.commit": False, "isolation.level": "read_committed"})
    readers.subscribe([TOPIC])
    deadline = time.monotonic() + 30
    while not readers.assignment() and time.monotonic() < deadline:
        readers.poll(0.2)
    readers.commit(offsets=[TopicPartition(TOPIC, 0, 1), TopicPartition(TOPIC, 1, 1)], asynchronous=False)
    # tx-open: open on orders-2, with group copier's offsets sent to it (pending until it ends)
    open_producer = _producer(bootstrap, "tx-open")
    open_producer.begin_transaction()
    open_producer.produce(TOPIC, b"open-0", key=b"k", partition=2)
    open_producer.flush(30)
    copier = Consumer({"bootstrap.servers": bootstrap, "group.id": "copier", "enable.auto.commit": False})
    open_producer.send_offsets_to_transaction([TopicPartition(TOPIC, 2, 7)], copier.consumer_group_metadata(), 30)
    copier.close()
    scenario = Scenario(bootstrap, open_producer, readers)
    scenario.hanging_producer_id, scenario.hanging_epoch, scenario.hanging_offset = _raw_hanging(bootstrap, "tx-hanging")
    scenario.after_offsets = _committed(bootstrap, "tx-after", [(0, b"after-0"), (0, b"after-1")])
    return scenario


def read_committed(bootstrap: str, partition: int, timeout: float = 3.0, expect: int | None = None) -> list[bytes]:
    """What a read_committed consumer gets from ``orders-<partition>`` within ``timeout`` (or as soon
    as it has ``expect`` records)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{time.monotonic_ns()}",
                  "isolation.level": "read_committed", "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(TOPIC, partition, 0)])
    out: list[bytes] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and (expect is None or len(out) < expect):
        m = c.poll(0.2)
        if m is not None and m.error() is None:
            out.append(m.value())
    c.close()
    return out
