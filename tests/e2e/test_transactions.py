"""Exactly-once through the real wire with the stock clients: confluent-kafka (librdkafka),
kafka-python and aiokafka, each as transactional producer *and* read_committed consumer.

- multi-topic, multi-partition transactions with seeded random commits and aborts: a
  read_committed consumer sees every committed record exactly once and no aborted one, a
  read_uncommitted consumer sees both;
- consume-transform-produce with send_offsets_to_transaction, every third transaction aborted
  and its input reprocessed: the output holds each input exactly once and the group's committed
  offsets equal the input's end;
- zombie fencing: a second producer with the same transactional.id aborts the first one's open
  transaction, and the first can no longer commit;
- the LSO holds a later non-transactional record back until the open transaction ends;
- a transaction that times out is aborted by the coordinator, which unblocks read_committed.

All tests share one broker of this module, with a short abort-scan interval.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
import zlib
from collections import Counter

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as AioTP
from aiokafka.errors import ProducerFenced
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTP
from kafka.errors import KafkaError as KpKafkaError
from kafka.structs import OffsetAndMetadata

from tests.support.broker_process import BrokerProcess

CLIENTS = ["confluent", "kafka-python", "aiokafka"]
GROUP_TIMEOUTS = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500, "max.poll.interval.ms": 20000}


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory) -> BrokerProcess:
    b = BrokerProcess(tmp_path_factory.mktemp("txn-broker") / "data", overrides={
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
    }).start()
    yield b
    code = b.stop()
    assert code == 0, f"broker exited with {code} on SIGTERM:\n{b.log_tail()}"


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topics(bootstrap: str, topics: dict[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(t, n, 1) for t, n in topics.items()]).values():
        fut.result(15)


# --- reading back, with each client's own consumer ---------------------------------------------


def read_values(client: str, bootstrap: str, tps: list[tuple[str, int]], isolation: str, expected: int,
                quiet: float = 1.0, timeout: float = 30.0) -> list[str]:
    """Everything from the start of ``tps`` until ``expected`` values arrived and nothing more came."""
    if client == "confluent":
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": uid("reader"), "isolation.level": isolation,
                      "auto.offset.reset": "earliest", "enable.auto.commit": False})
        c.assign([TopicPartition(t, p, 0) for t, p in tps])

        def poll() -> list[str]:
            return [m.value().decode() for m in c.consume(500, 0.2) if m.error() is None]
    elif client == "kafka-python":
        c = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation, auto_offset_reset="earliest",
                          enable_auto_commit=False)
        c.assign([KpTP(t, p) for t, p in tps])

        def poll() -> list[str]:
            return [r.value.decode() for recs in c.poll(200).values() for r in recs]
    else:
        return asyncio.run(_aio_read(bootstrap, tps, isolation, expected, quiet, timeout))
    got: list[str] = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < expected and time.monotonic() < deadline:
            got += poll()
        end = time.monotonic() + quiet
        while time.monotonic() < end:
            got += poll()
    finally:
        c.close()
    return got


async def _aio_read(bootstrap, tps, isolation, expected, quiet, timeout) -> list[str]:
    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation, auto_offset_reset="earliest",
                         enable_auto_commit=False)
    await c.start()
    got: list[str] = []
    try:
        c.assign([AioTP(t, p) for t, p in tps])
        deadline = time.monotonic() + timeout
        while len(got) < expected and time.monotonic() < deadline:
            for recs in (await c.getmany(timeout_ms=200)).values():
                got += [r.value.decode() for r in recs]
        end = time.monotonic() + quiet
        while time.monotonic() < end:
            for recs in (await c.getmany(timeout_ms=200)).values():
                got += [r.value.decode() for r in recs]
    finally:
        await c.stop()
    return got


def committed_only(client: str, bootstrap: str, tps, committed: list[str], everything: list[str]) -> None:
    rc = read_values(client, bootstrap, tps, "read_committed", len(committed))
    assert Counter(rc) == Counter(committed), (
        f"read_committed: missing {sorted(set(committed) - set(rc))[:10]}, "
        f"aborted seen {sorted(set(rc) - set(committed))[:10]}, "
        f"duplicates {[v for v, n in Counter(rc).items() if n > 1][:10]}")
    ru = read_values(client, bootstrap, tps, "read_uncommitted", len(everything))
    assert Counter(ru) == Counter(everything)


# --- multi-partition, multi-topic transactions -------------------------------------------------


def _plan(seed: int, tps: list[tuple[str, int]], tag: str, txns: int = 16):
    """[(commit?, [(topic, partition, value)])]: seeded random sizes, partitions and outcomes."""
    rnd = random.Random(seed)
    plan = []
    for t in range(txns):
        sends = [(*rnd.choice(tps), f"{tag}-{t}-{i}") for i in range(rnd.randint(1, 12))]
        # the outcomes are random, but both kinds are always there (the first two transactions)
        plan.append((t == 0 or (t != 1 and rnd.random() < 0.6), sends))
    return plan


@pytest.mark.parametrize("client", CLIENTS)
def test_random_commits_and_aborts(txn_broker, client):
    bootstrap = txn_broker.bootstrap
    a, b = uid("txa"), uid("txb")
    create_topics(bootstrap, {a: 3, b: 2})
    tps = [(a, 0), (a, 1), (a, 2), (b, 0), (b, 1)]
    plan = _plan(zlib.crc32(client.encode()), tps, client)  # str hash() changes per process: seeds must not
    txn_id = uid("tid")
    if client == "aiokafka":
        asyncio.run(_aio_run_plan(bootstrap, txn_id, plan))
    else:
        producer = CkTxn(bootstrap, txn_id) if client == "confluent" else KpTxn(bootstrap, txn_id)
        producer.init()
        for commit, sends in plan:
            producer.begin()
            for topic, partition, value in sends:
                producer.send(topic, partition, value)
            producer.commit() if commit else producer.abort()
        producer.close()
    committed = [v for commit, sends in plan if commit for _, _, v in sends]
    everything = [v for _, sends in plan for _, _, v in sends]
    assert 0 < len(committed) < len(everything)
    committed_only(client, bootstrap, tps, committed, everything)


class CkTxn:
    def __init__(self, bootstrap: str, txn_id: str, **conf) -> None:
        self.p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5, **conf})

    def init(self) -> None:
        self.p.init_transactions(30)

    def begin(self) -> None:
        self.p.begin_transaction()

    def send(self, topic: str, partition: int, value: str) -> None:
        self.p.produce(topic, value=value.encode(), partition=partition)
        self.p.poll(0)

    def commit(self) -> None:
        self.p.commit_transaction(30)

    def abort(self) -> None:
        self.p.flush(30)  # the aborted records really reach the log
        self.p.abort_transaction(30)

    def close(self) -> None:
        self.p.flush(10)


class KpTxn:
    def __init__(self, bootstrap: str, txn_id: str, **conf) -> None:
        self.p = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id, linger_ms=5, **conf)

    def init(self) -> None:
        self.p.init_transactions()

    def begin(self) -> None:
        self.p.begin_transaction()

    def send(self, topic: str, partition: int, value: str) -> None:
        self.p.send(topic, value=value.encode(), partition=partition)

    def commit(self) -> None:
        self.p.commit_transaction()

    def abort(self) -> None:
        self.p.flush()
        self.p.abort_transaction()

    def close(self) -> None:
        self.p.close(10)


async def _aio_run_plan(bootstrap: str, txn_id: str, plan) -> None:
    p = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id, linger_ms=5)
    await p.start()
    try:
        for commit, sends in plan:
            await p.begin_transaction()
            futures = [await p.send(topic, value=value.encode(), partition=partition)
                       for topic, partition, value in sends]
            if commit:
                await p.commit_transaction()
            else:
                await asyncio.gather(*futures)  # the aborted records really reach the log
                await p.abort_transaction()
    finally:
        await p.stop()


# --- consume-transform-produce ------------------------------------------------------------------

CTP_RECORDS = 120


def _seed_input(bootstrap: str, topic: str) -> list[str]:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    values = [f"in-{i}" for i in range(CTP_RECORDS)]
    for i, v in enumerate(values):
        p.produce(topic, value=v.encode(), partition=i % 2)
    assert p.flush(15) == 0
    return values


def _check_ctp(client: str, bootstrap: str, inp: str, out: str, group: str, values: list[str], aborted: int) -> None:
    assert aborted > 0, "the run should have aborted (and reprocessed) some transactions"
    expected = [f"out-{v}" for v in values]
    rc = read_values(client, bootstrap, [(out, 0), (out, 1)], "read_committed", len(expected))
    assert Counter(rc) == Counter(expected), (
        f"missing {sorted(set(expected) - set(rc))[:5]}, duplicates {[v for v, n in Counter(rc).items() if n > 1][:5]}")
    ru = read_values(client, bootstrap, [(out, 0), (out, 1)], "read_uncommitted", len(expected) + 1)
    assert len(ru) > len(expected), "aborted output should still be in the log"
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed"})
    try:
        committed = c.committed([TopicPartition(inp, 0), TopicPartition(inp, 1)], timeout=15)
    finally:
        c.close()
    assert {tp.partition: tp.offset for tp in committed} == {0: CTP_RECORDS // 2, 1: CTP_RECORDS // 2}


@pytest.mark.parametrize("client", CLIENTS)
def test_consume_transform_produce(txn_broker, client):
    bootstrap = txn_broker.bootstrap
    inp, out, group = uid("ctp-in"), uid("ctp-out"), uid("ctp-g")
    create_topics(bootstrap, {inp: 2, out: 2})
    values = _seed_input(bootstrap, inp)
    runner = {"confluent": _ctp_confluent, "kafka-python": _ctp_kafka_python}.get(client)
    aborted = runner(bootstrap, inp, out, group) if runner else asyncio.run(_ctp_aiokafka(bootstrap, inp, out, group))
    _check_ctp(client, bootstrap, inp, out, group, values, aborted)


def _ctp_confluent(bootstrap: str, inp: str, out: str, group: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False, **GROUP_TIMEOUTS})
    consumer.subscribe([inp])
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": uid("ctp-tid"), "linger.ms": 5})
    producer.init_transactions(30)
    done: set[str] = set()
    safe = {0: 0, 1: 0}  # positions of the last committed transaction: where an abort rewinds to
    n = aborted = 0
    deadline = time.monotonic() + 90
    try:
        while len(done) < CTP_RECORDS:
            assert time.monotonic() < deadline, f"stuck at {len(done)} records"
            msgs = [m for m in consumer.consume(17, 0.5) if m.error() is None]
            if not msgs:
                continue
            producer.begin_transaction()
            for m in msgs:
                producer.produce(out, value=b"out-" + m.value(), partition=m.partition())
            positions = [tp for tp in consumer.position(consumer.assignment()) if tp.offset >= 0]
            producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
            n += 1
            if n % 3 == 0:
                producer.flush(30)  # abort purges unsent messages; flush so the aborted output is in the log
                producer.abort_transaction(30)
                aborted += 1
                for tp in consumer.assignment():
                    consumer.seek(TopicPartition(tp.topic, tp.partition, safe[tp.partition]))
            else:
                producer.commit_transaction(30)
                done.update(m.value().decode() for m in msgs)
                safe.update({tp.partition: tp.offset for tp in positions})
    finally:
        consumer.close()
    return aborted


def _ctp_kafka_python(bootstrap: str, inp: str, out: str, group: str) -> int:
    consumer = KafkaConsumer(inp, bootstrap_servers=bootstrap, group_id=group, isolation_level="read_committed",
                             auto_offset_reset="earliest", enable_auto_commit=False, session_timeout_ms=6000,
                             heartbeat_interval_ms=500)
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=uid("ctp-tid"), linger_ms=5)
    producer.init_transactions()
    done: set[str] = set()
    safe = {0: 0, 1: 0}
    n = aborted = 0
    deadline = time.monotonic() + 90
    try:
        while len(done) < CTP_RECORDS:
            assert time.monotonic() < deadline, f"stuck at {len(done)} records"
            batch = consumer.poll(500, max_records=17)
            msgs = [r for recs in batch.values() for r in recs]
            if not msgs:
                continue
            producer.begin_transaction()
            for r in msgs:
                producer.send(out, value=b"out-" + r.value, partition=r.partition)
            positions = {tp: OffsetAndMetadata(consumer.position(tp), "", -1) for tp in consumer.assignment()}
            producer.send_offsets_to_transaction(positions, consumer.group_metadata())
            n += 1
            if n % 3 == 0:
                producer.flush()  # abort drops unsent batches; flush so the aborted data is in the log
                producer.abort_transaction()
                aborted += 1
                for tp in consumer.assignment():
                    consumer.seek(tp, safe[tp.partition])
            else:
                producer.commit_transaction()
                done.update(r.value.decode() for r in msgs)
                safe.update({tp.partition: om.offset for tp, om in positions.items()})
    finally:
        consumer.close()
        producer.close(10)
    return aborted


async def _ctp_aiokafka(bootstrap: str, inp: str, out: str, group: str) -> int:
    consumer = AIOKafkaConsumer(inp, bootstrap_servers=bootstrap, group_id=group, isolation_level="read_committed",
                                auto_offset_reset="earliest", enable_auto_commit=False, session_timeout_ms=6000,
                                heartbeat_interval_ms=500)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=uid("ctp-tid"), linger_ms=5)
    await consumer.start()
    await producer.start()
    done: set[str] = set()
    safe = {0: 0, 1: 0}
    n = aborted = 0
    deadline = time.monotonic() + 90
    try:
        while len(done) < CTP_RECORDS:
            assert time.monotonic() < deadline, f"stuck at {len(done)} records"
            batch = await consumer.getmany(timeout_ms=500, max_records=17)
            msgs = [r for recs in batch.values() for r in recs]
            if not msgs:
                continue
            await producer.begin_transaction()
            for r in msgs:
                await producer.send(out, value=b"out-" + r.value, partition=r.partition)
            positions = {tp: await consumer.position(tp) for tp in consumer.assignment()}
            await producer.send_offsets_to_transaction(positions, group)
            n += 1
            if n % 3 == 0:
                await producer.flush()  # as above: the aborted output must reach the log
                await producer.abort_transaction()
                aborted += 1
                for tp in consumer.assignment():
                    consumer.seek(tp, safe[tp.partition])
            else:
                await producer.commit_transaction()
                done.update(r.value.decode() for r in msgs)
                safe.update({tp.partition: off for tp, off in positions.items()})
    finally:
        await consumer.stop()
        await producer.stop()
    return aborted


# --- fencing ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("client", CLIENTS)
def test_zombie_fencing(txn_broker, client):
    bootstrap = txn_broker.bootstrap
    topic, txn_id = uid("fence"), uid("fence-tid")
    create_topics(bootstrap, {topic: 2})
    if client == "aiokafka":
        asyncio.run(_aio_fencing(bootstrap, topic, txn_id))
    else:
        cls = CkTxn if client == "confluent" else KpTxn
        zombie = cls(bootstrap, txn_id)
        zombie.init()
        zombie.begin()
        zombie.send(topic, 0, "zombie-0")
        zombie.send(topic, 1, "zombie-1")
        zombie.p.flush()
        fresh = cls(bootstrap, txn_id)
        fresh.init()  # aborts the zombie's open transaction and bumps the epoch
        with pytest.raises((KafkaException, KpKafkaError)) as info:
            zombie.send(topic, 0, "zombie-2")
            zombie.commit()
        assert "fence" in str(info.value).lower() or "epoch" in str(info.value).lower(), info.value
        fresh.begin()
        fresh.send(topic, 0, "fresh-0")
        fresh.send(topic, 1, "fresh-1")
        fresh.commit()
        fresh.close()
    committed_only(client, bootstrap, [(topic, 0), (topic, 1)], ["fresh-0", "fresh-1"],
                   ["zombie-0", "zombie-1", "fresh-0", "fresh-1"])


async def _aio_fencing(bootstrap: str, topic: str, txn_id: str) -> None:
    zombie = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id)
    fresh = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id)
    await zombie.start()
    try:
        await zombie.begin_transaction()
        await zombie.send_and_wait(topic, b"zombie-0", partition=0)
        await zombie.send_and_wait(topic, b"zombie-1", partition=1)
        await fresh.start()
        with pytest.raises(ProducerFenced):
            await zombie.commit_transaction()
        async with fresh.transaction():
            await fresh.send_and_wait(topic, b"fresh-0", partition=0)
            await fresh.send_and_wait(topic, b"fresh-1", partition=1)
    finally:
        await fresh.stop()
        try:
            await zombie.stop()
        except Exception:  # noqa: BLE001 - a fenced producer may complain on close
            pass


# --- LSO and timeouts -------------------------------------------------------------------------------


def _committed_end(bootstrap: str, topic: str, partition: int) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": uid("lso"), "isolation.level": "read_committed"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10, cached=False)[1]
    finally:
        c.close()


def test_lso_holds_back_later_records(txn_broker):
    bootstrap = txn_broker.bootstrap
    topic = uid("lso")
    create_topics(bootstrap, {topic: 1})
    plain = Producer({"bootstrap.servers": bootstrap})
    plain.produce(topic, value=b"before", partition=0)
    plain.flush(10)
    txn = CkTxn(bootstrap, uid("lso-tid"))
    txn.init()
    txn.begin()
    for i in range(3):
        txn.send(topic, 0, f"txn-{i}")
    txn.p.flush(10)
    plain.produce(topic, value=b"after", partition=0)  # offset 4, after the open transaction
    plain.flush(10)
    assert _committed_end(bootstrap, topic, 0) == 1, "LSO = first offset of the open transaction"
    kc = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed", auto_offset_reset="earliest",
                       enable_auto_commit=False)
    kc.assign([KpTP(topic, 0)])
    seen: list[str] = []
    end = time.monotonic() + 2
    while time.monotonic() < end:
        seen += [r.value.decode() for recs in kc.poll(200).values() for r in recs]
    assert seen == ["before"], "nothing past the LSO while the transaction is open"
    txn.commit()
    end = time.monotonic() + 15
    while len(seen) < 5 and time.monotonic() < end:
        seen += [r.value.decode() for recs in kc.poll(200).values() for r in recs]
    kc.close()
    assert seen == ["before", "txn-0", "txn-1", "txn-2", "after"]
    assert _committed_end(bootstrap, topic, 0) == 6  # + the COMMIT marker


def test_timed_out_transaction_is_aborted_and_unblocks_consumers(txn_broker):
    bootstrap = txn_broker.bootstrap
    topic = uid("timeout")
    create_topics(bootstrap, {topic: 1})
    zombie = CkTxn(bootstrap, uid("timeout-tid"), **{"transaction.timeout.ms": 1500})
    zombie.init()
    zombie.begin()
    zombie.send(topic, 0, "doomed-0")
    zombie.send(topic, 0, "doomed-1")
    zombie.p.flush(10)
    plain = Producer({"bootstrap.servers": bootstrap})
    plain.produce(topic, value=b"after", partition=0)
    plain.flush(10)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": uid("timeout-g"), "isolation.level": "read_committed",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    started = time.monotonic()
    got = []
    try:
        while not got and time.monotonic() - started < 20:
            got = [m.value().decode() for m in c.consume(10, 0.2) if m.error() is None]
    finally:
        c.close()
    waited = time.monotonic() - started
    assert got == ["after"], "the coordinator's abort moved the LSO; the aborted records stay hidden"
    assert waited < 10, f"the abort scan took {waited:.1f}s"
    with pytest.raises(KafkaException):  # the abort bumped the epoch: the zombie is fenced
        zombie.commit()
