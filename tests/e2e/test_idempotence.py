"""Idempotent producers through the real wire, with Kafka 4.3.1 as the oracle.

Raw-protocol tests build InitProducerId / Produce / Fetch / DescribeProducers requests with
kafka-python's message classes and check the exact answers Kafka gives (read from Kafka 4.3.1's
ProducerAppendInfo, UnifiedLog, KafkaApis and TransactionCoordinator, and cross-checked against
a real Kafka 4.3.1 broker with the same requests); the stock clients then show the end-to-end
guarantee: no gap, no duplicate, order kept.
"""

from __future__ import annotations

import asyncio
import json
import struct
import time
from pathlib import Path

import pytest
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.protocol.admin import CreateTopicsRequest, DescribeProducersRequest
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest, ProduceResponse

from protocol.records import BatchInfo, build_batch, iter_batch_positions, read_header
from tests.support.broker_process import BrokerProcess
from tests.support.raw_client import RawClient

INT32_MAX = 0x7FFFFFFF
NONE, UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC = 0, 3, 17
INVALID_REQUEST, OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH = 42, 45, 47


# --- raw protocol helpers ---------------------------------------------------------------------


def create_topic(c: RawClient, name: str, partitions: int = 1) -> None:
    req = CreateTopicsRequest[5](
        topics=[CreateTopicsRequest.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1,
                                                   assignments=[], configs=[])],
        timeout_ms=10000, validate_only=False)
    assert c.send(req, 5).topics[0].error_code == 0


def init_producer_id(c: RawClient, version: int = 4, transactional_id: str | None = None,
                     producer_id: int = -1, producer_epoch: int = -1):
    fields = dict(transactional_id=transactional_id, transaction_timeout_ms=60000)
    if version >= 3:
        fields.update(producer_id=producer_id, producer_epoch=producer_epoch)
    return c.send(InitProducerIdRequest[version](**fields), version)


def batch(pid: int, epoch: int, seq: int, n: int = 3, *, tag: str = "", ts: int | None = None) -> bytes:
    records = [(b"k", f"{tag}{seq}+{i}".encode()) for i in range(n)]
    return bytes(build_batch(records, timestamp=ts if ts is not None else int(time.time() * 1000),
                             producer_id=pid, producer_epoch=epoch, base_sequence=seq))


def produce_request(topic: str, parts: dict[int, bytes], version: int = 9, acks: int = -1):
    return ProduceRequest[version](transactional_id=None, acks=acks, timeout_ms=5000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=p, records=r) for p, r in parts.items()])])


def produce(c: RawClient, topic: str, records: bytes, *, version: int = 9, partition: int = 0):
    return c.send(produce_request(topic, {partition: records}, version), version).responses[0].partition_responses[0]


def log_batches(c: RawClient, topic: str, partition: int = 0) -> list[BatchInfo]:
    """Every batch in the partition, read back with Fetch v11 from offset 0."""
    out: list[BatchInfo] = []
    offset = 0
    while True:
        req = FetchRequest[11](replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=8 << 20, isolation_level=0,
                               session_id=0, session_epoch=-1, topics=[FetchRequest.FetchTopic(
                                   topic=topic, partitions=[FetchRequest.FetchTopic.FetchPartition(
                                       partition=partition, current_leader_epoch=-1, fetch_offset=offset,
                                       log_start_offset=-1, partition_max_bytes=8 << 20)])],
                               forgotten_topics_data=[], rack_id="")
        p = c.send(req, 11).responses[0].partitions[0]
        assert p.error_code == 0
        records = bytes(p.records or b"")
        infos = [read_header(records, pos) for pos, _ in iter_batch_positions(records)]
        out.extend(infos)
        if not infos or infos[-1].next_offset >= p.high_watermark:
            return out
        offset = infos[-1].next_offset


def describe_producers(c: RawClient, topics: dict[str, list[int]]):
    req = DescribeProducersRequest[0](topics=[
        DescribeProducersRequest.TopicRequest(name=t, partition_indexes=ps) for t, ps in topics.items()])
    return c.send(req, 0).topics


def active_producers(c: RawClient, topic: str, partition: int = 0) -> dict[int, object]:
    p = describe_producers(c, {topic: [partition]})[0].partitions[0]
    assert p.error_code == 0
    return {s.producer_id: s for s in p.active_producers}


# --- duplicates, gaps, epochs -----------------------------------------------------------------


def test_identical_batch_twice_is_one_copy_at_the_original_offset(broker, topic_name):
    with RawClient(broker.bootstrap) as c:
        create_topic(c, topic_name)
        r = init_producer_id(c)
        assert (r.error_code, r.producer_epoch) == (NONE, 0)
        pid = r.producer_id
        b0, b1 = batch(pid, 0, 0), batch(pid, 0, 3)
        assert (produce(c, topic_name, b0).error_code, produce(c, topic_name, b0).base_offset) == (NONE, 0)
        first = produce(c, topic_name, b1)
        assert (first.error_code, first.base_offset, first.log_append_time_ms) == (NONE, 3, -1)
        again = produce(c, topic_name, b1)
        # UnifiedLog.append answers a duplicate from the retained BatchMetadata: its first offset,
        # and its timestamp as logAppendTime (so even a CreateTime topic gets a value back here).
        assert (again.error_code, again.base_offset) == (NONE, 3)
        assert again.log_append_time_ms == read_header(b1).max_timestamp
        assert produce(c, topic_name, b0).base_offset == 0  # any of the last 5 batches
        got = log_batches(c, topic_name)
        assert [(b.base_offset, b.base_sequence, b.records_count) for b in got] == [(0, 0, 3), (3, 3, 3)]


def test_only_the_last_five_batches_are_recognised(broker, topic_name):
    with RawClient(broker.bootstrap) as c:
        create_topic(c, topic_name)
        pid = init_producer_id(c).producer_id
        sent = [batch(pid, 0, 2 * i, 2) for i in range(7)]
        for i, b in enumerate(sent):
            assert produce(c, topic_name, b).base_offset == 2 * i
        assert produce(c, topic_name, sent[2]).base_offset == 4  # 5th newest: still retained
        # ProducerStateEntry.NUM_BATCHES_TO_RETAIN = 5: an older retry is just out of order.
        assert produce(c, topic_name, sent[1]).error_code == OUT_OF_ORDER_SEQUENCE_NUMBER
        assert len(log_batches(c, topic_name)) == 7


@pytest.mark.parametrize("version", [3, 7, 9, 12])
def test_sequence_gap_is_out_of_order(broker, topic_name, version):
    with RawClient(broker.bootstrap) as c:
        create_topic(c, topic_name)
        pid = init_producer_id(c).producer_id
        assert produce(c, topic_name, batch(pid, 0, 0), version=version).error_code == NONE
        r = produce(c, topic_name, batch(pid, 0, 4), version=version)  # expected 3
        assert (r.error_code, r.base_offset) == (OUT_OF_ORDER_SEQUENCE_NUMBER, -1)
        assert produce(c, topic_name, batch(pid, 0, 1), version=version).error_code == OUT_OF_ORDER_SEQUENCE_NUMBER
        assert produce(c, topic_name, batch(pid, 0, 3), version=version).base_offset == 3
        assert len(log_batches(c, topic_name)) == 2


@pytest.mark.parametrize("version", [3, 7, 9, 12])
def test_stale_epoch_is_invalid_producer_epoch(broker, topic_name, version):
    # ProducerAppendInfo.checkProducerEpoch throws InvalidProducerEpochException and Kafka 4.3.1's
    # produce path passes it through at every version (PRODUCER_FENCED only comes from the
    # transaction coordinator: InitProducerId, EndTxn, AddPartitionsToTxn, TxnOffsetCommit).
    with RawClient(broker.bootstrap) as c:
        create_topic(c, topic_name)
        pid = init_producer_id(c).producer_id
        assert produce(c, topic_name, batch(pid, 0, 0), version=version).error_code == NONE
        # A new epoch must restart at sequence 0.
        assert produce(c, topic_name, batch(pid, 1, 3), version=version).error_code == OUT_OF_ORDER_SEQUENCE_NUMBER
        assert produce(c, topic_name, batch(pid, 1, 0), version=version).base_offset == 3
        r = produce(c, topic_name, batch(pid, 0, 3), version=version)
        assert (r.error_code, r.base_offset) == (INVALID_PRODUCER_EPOCH, -1)
        # Even a byte-identical retry of the old epoch's batch is fenced, not a duplicate.
        assert produce(c, topic_name, batch(pid, 0, 0), version=version).error_code == INVALID_PRODUCER_EPOCH
        assert len(log_batches(c, topic_name)) == 2


def test_unknown_producer_may_start_at_any_sequence(broker, topic_name):
    # Kafka 4.3.1 ProducerAppendInfo.checkSequence: a producer id the partition has no state for
    # (new, expired, or removed with its segments) is accepted at any sequence ("If there is no
    # current producer epoch ... accept writes with any sequence number"); the broker no longer
    # throws UnknownProducerIdException anywhere (no reference to it in kafka-storage,
    # kafka-server or core 4.3.1). Sequences then continue from there, wrapping at Int32.MAX.
    with RawClient(broker.bootstrap) as c:
        create_topic(c, topic_name)
        pid = init_producer_id(c).producer_id
        assert produce(c, topic_name, batch(pid, 0, 42)).error_code == NONE
        assert produce(c, topic_name, batch(pid, 0, 46)).error_code == OUT_OF_ORDER_SEQUENCE_NUMBER
        assert produce(c, topic_name, batch(pid, 0, 45)).base_offset == 3
        # Wrap: another unknown producer ends a batch at Int32.MAX; the next one starts at 0.
        pid2 = init_producer_id(c).producer_id
        assert produce(c, topic_name, batch(pid2, 0, INT32_MAX - 1, 2)).error_code == NONE
        assert produce(c, topic_name, batch(pid2, 0, 0, 2)).error_code == NONE
        assert active_producers(c, topic_name)[pid2].last_sequence == 1


# --- restarts ---------------------------------------------------------------------------------


@pytest.mark.parametrize("crash", [False, True], ids=["sigterm", "kill-9"])
def test_retry_after_restart_is_still_a_duplicate(fresh_broker, crash):
    b = fresh_broker.start()
    with RawClient(b.bootstrap) as c:
        create_topic(c, "t")
        pid = init_producer_id(c).producer_id
        sent = [batch(pid, 0, 3 * i) for i in range(3)]
        assert [produce(c, "t", x).base_offset for x in sent] == [0, 3, 6]
    b.kill() if crash else b.stop()
    b.start()
    with RawClient(b.bootstrap) as c:
        r = produce(c, "t", sent[-1])
        assert (r.error_code, r.base_offset) == (NONE, 6)
        if crash:
            # Recovery replays the log, so all retained batches come back.
            assert produce(c, "t", sent[0]).base_offset == 0
        else:
            # A clean shutdown leaves a .snapshot, which (as in Kafka) keeps only each producer's
            # last batch: an older retry is now out of order.
            assert produce(c, "t", sent[0]).error_code == OUT_OF_ORDER_SEQUENCE_NUMBER
        assert produce(c, "t", batch(pid, 0, 10)).error_code == OUT_OF_ORDER_SEQUENCE_NUMBER
        assert produce(c, "t", batch(pid, 0, 9)).base_offset == 9
        assert [x.base_offset for x in log_batches(c, "t")] == [0, 3, 6, 9]


def test_producer_ids_strictly_increase_across_restarts_and_crashes(fresh_broker):
    b = fresh_broker.start()
    seen: list[int] = []

    def take(n: int) -> None:
        with RawClient(b.bootstrap) as c:
            for _ in range(n):
                r = init_producer_id(c)
                assert (r.error_code, r.producer_epoch) == (NONE, 0)
                seen.append(r.producer_id)

    take(3)
    assert seen == [0, 1, 2]  # a fresh Kafka cluster's first block starts at 0 too
    b.stop()
    b.start()
    take(2)
    b.kill()
    b.start()
    take(2)
    b.kill()
    b.start()
    take(1)
    assert seen == sorted(set(seen))
    # Every start takes a fresh block of 1000: the rest of the previous block is skipped.
    assert seen[3:] == [1000, 1001, 2000, 2001, 3000]
    state = json.loads((Path(b.data_dir) / "__cluster_metadata" / "producer-ids").read_text())
    assert state["nextProducerId"] == 4000


# --- InitProducerId ---------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4, 5])
def test_init_producer_id_idempotent_every_version(broker, version):
    with RawClient(broker.bootstrap) as c:
        a, b = init_producer_id(c, version), init_producer_id(c, version)
    assert (a.error_code, a.producer_epoch, b.error_code, b.producer_epoch) == (NONE, 0, NONE, 0)
    assert b.producer_id > a.producer_id >= 0


def test_init_producer_id_kip360_fields_without_transactional_id(broker):
    with RawClient(broker.bootstrap) as c:
        first = init_producer_id(c, 4)
        # KafkaApis: exactly one of producer id / epoch set is INVALID_REQUEST (-1 / -1).
        for pid, epoch in ((first.producer_id, -1), (-1, 0)):
            r = init_producer_id(c, 4, producer_id=pid, producer_epoch=epoch)
            assert (r.error_code, r.producer_id, r.producer_epoch) == (INVALID_REQUEST, -1, -1)
        # With a null transactional id the coordinator ignores them: a brand-new id, epoch 0.
        r = init_producer_id(c, 4, producer_id=first.producer_id, producer_epoch=0)
        assert r.error_code == NONE and r.producer_id > first.producer_id and r.producer_epoch == 0


def test_transactional_and_idempotent_ids_come_from_one_allocator(broker):
    """The transactional branch belongs to the transaction coordinator, but every producer id,
    transactional or not, comes from the same blocks (Kafka's ProducerIdManager)."""
    retriable = {14, 15, 16, 51}  # COORDINATOR_LOAD_IN_PROGRESS, _NOT_AVAILABLE, NOT_COORDINATOR, CONCURRENT_TXNS
    with RawClient(broker.bootstrap) as c:
        before = init_producer_id(c, 4).producer_id
        deadline = time.monotonic() + 20
        # As a client does: find the coordinator first (this creates __transaction_state).
        while c.send(FindCoordinatorRequest[3](key=f"tx-{before}", key_type=1), 3).error_code:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        while (r := init_producer_id(c, 4, transactional_id=f"tx-{before}")).error_code in retriable:
            assert time.monotonic() < deadline, r
            time.sleep(0.1)
        after = init_producer_id(c, 4).producer_id
    assert (r.error_code, r.producer_epoch) == (NONE, 0)
    assert before < r.producer_id < after


# --- DescribeProducers ------------------------------------------------------------------------


def test_describe_producers(broker, topic_name):
    with RawClient(broker.bootstrap) as c:
        create_topic(c, topic_name, 2)
        pid = init_producer_id(c).producer_id
        ts = int(time.time() * 1000) - 5000
        produce(c, topic_name, batch(pid, 0, 0, 4, ts=ts), partition=1)
        produce(c, topic_name, batch(-1, -1, -1), partition=1)  # a plain producer is not listed
        topics = describe_producers(c, {topic_name: [0, 1, 7], "no-such-topic": [0], "bad name": [1]})
    parts = {p.partition_index: p for p in topics[0].partitions}
    assert (parts[0].error_code, parts[0].active_producers) == (NONE, [])
    assert parts[1].error_code == NONE
    (state,) = parts[1].active_producers
    assert (state.producer_id, state.producer_epoch, state.last_sequence, state.last_timestamp,
            state.coordinator_epoch, state.current_txn_start_offset) == (pid, 0, 3, ts, -1, -1)
    assert (parts[7].error_code, parts[7].error_message) == (UNKNOWN_TOPIC_OR_PARTITION, None)
    unknown = topics[1].partitions[0]
    assert (unknown.error_code, unknown.error_message) == (
        UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
    bad = topics[2].partitions[0]
    # Topic.validate's message (Kafka 4.3.1 words it "Topic name is invalid: ...").
    assert (bad.partition_index, bad.error_code) == (1, INVALID_TOPIC) and "bad name" in bad.error_message


# --- expiry and memory ------------------------------------------------------------------------


def _rss_anon_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1])
    raise AssertionError("no RssAnon")


def _fill(b: BrokerProcess, topic: str, partitions: int, first_pid: int, count: int) -> None:
    """``count`` idle producer-partitions: one 1-record batch per (new pid, partition), pipelined."""
    requests = []
    pid = first_pid
    now = int(time.time() * 1000)
    for _ in range(count // partitions):
        parts = {}
        for p in range(partitions):
            parts[p] = batch(pid, 0, 0, 1, ts=now)
            pid += 1
        requests.append(produce_request(topic, parts, version=9, acks=1))
    with RawClient(b.bootstrap) as c:
        chunk = 100
        for i in range(0, len(requests), chunk):
            data = b""
            for req in requests[i:i + chunk]:
                c.correlation_id += 1
                req.with_header(correlation_id=c.correlation_id, client_id=c.client_id)
                data += bytes(req.encode(version=9, header=True, framed=True))
            c.send_bytes(data)
            for _ in requests[i:i + chunk]:
                resp = ProduceResponse.decode(c.recv_frame()[5:], version=9)  # flexible: 4 + 1 byte header
                assert {p.error_code for t in resp.responses for p in t.partition_responses} == {NONE}
        # One last request in lock-step so every append above is done.
        last = describe_producers(c, {topic: [partitions - 1]})[0].partitions[0]
        assert last.error_code == NONE


def _listed(b: BrokerProcess, topic: str, partitions: int) -> int:
    with RawClient(b.bootstrap) as c:
        return sum(len(p.active_producers) for p in describe_producers(c, {topic: list(range(partitions))})[0].partitions)


def test_idle_producers_expire_and_memory_stays_bounded(tmp_path, capsys):
    """Producer state is Kafka's biggest per-producer cost (every Java producer is idempotent by
    default); expiry is what bounds it. Measured in the running broker as RssAnon growth."""
    expiration_ms = 6000  # long enough to fill and count 20,000 on a slow CI machine
    b = BrokerProcess(tmp_path / "data", overrides={
        "producer.id.expiration.ms": str(expiration_ms),
        "producer.id.expiration.check.interval.ms": "100",
    }).start()
    try:
        partitions, n = 50, 20_000
        with RawClient(b.bootstrap) as c:
            create_topic(c, "exp", partitions)
        _fill(b, "exp", partitions, 10_000_000, 2_000)  # warm up code paths and the allocator
        before = _rss_anon_kib(b.proc.pid)
        started = time.monotonic()
        _fill(b, "exp", partitions, 20_000_000, n)
        filled = _rss_anon_kib(b.proc.pid)
        fill_s = time.monotonic() - started
        assert _listed(b, "exp", partitions) == n + 2_000
        assert time.monotonic() - started < expiration_ms / 1000 - 0.5, "too slow to count before expiry"
        per_entry = (filled - before) * 1024 / n
        # Nothing is listed any more once producer.id.expiration.ms has passed.
        deadline = time.monotonic() + expiration_ms / 1000 + 10
        while (left := _listed(b, "exp", partitions)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert left == 0
        # A second generation of as many producers reuses the memory the first one gave back.
        expired = _rss_anon_kib(b.proc.pid)
        _fill(b, "exp", partitions, 30_000_000, n)
        again = _rss_anon_kib(b.proc.pid)
        with capsys.disabled():
            print(f"\n[idempotence] {per_entry:.0f} B RssAnon per idle producer-partition "
                  f"({n} in {fill_s:.2f}s, {before} -> {filled} KiB); after expiry {expired} KiB, "
                  f"+{n} new producers {again} KiB")
        assert 100 < per_entry < 1200
        assert again - expired < (filled - before) / 2
    finally:
        assert b.stop() == 0


# --- stock clients ----------------------------------------------------------------------------


def _values_by_partition(records) -> dict[int, list[int]]:
    out: dict[int, list[tuple[int, int]]] = {}
    for partition, offset, value in records:
        out.setdefault(partition, []).append((offset, int(value)))
    result = {}
    for p, rows in out.items():
        rows.sort()
        assert [o for o, _ in rows] == list(range(len(rows))), f"offsets not dense in partition {p}"
        result[p] = [v for _, v in rows]
    return result


def test_confluent_kafka_idempotent_100k(broker, topic_name):
    from confluent_kafka import Consumer, Producer, TopicPartition

    n, parts = 100_000, 3
    with RawClient(broker.bootstrap) as c:
        create_topic(c, topic_name, parts)
    p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "acks": "all",
                  "max.in.flight.requests.per.connection": 5, "linger.ms": 2, "batch.num.messages": 500})
    errors = []
    for i in range(n):
        while True:
            try:
                p.produce(topic_name, value=b"%d" % i, partition=i % parts,
                          on_delivery=lambda err, _m: err and errors.append(err))
                break
            except BufferError:
                p.poll(0.005)
    assert p.flush(60) == 0 and not errors
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{topic_name}",
                  "enable.auto.commit": False, "fetch.max.bytes": 8 << 20})
    c.assign([TopicPartition(topic_name, i, 0) for i in range(parts)])
    got = []
    try:
        while len(got) < n:
            msgs = c.consume(10_000, timeout=10)
            assert msgs, f"stalled after {len(got)}"
            for m in msgs:
                assert m.error() is None, m.error()
                got.append((m.partition(), m.offset(), m.value()))
    finally:
        c.close()
    assert len(got) == n
    by_partition = _values_by_partition(got)
    for part in range(parts):
        assert by_partition[part] == list(range(part, n, parts))  # no gap, no duplicate, in order
    with RawClient(broker.bootstrap) as c:
        for part in range(parts):
            (state,) = active_producers(c, topic_name, part).values()
            assert (state.producer_epoch, state.last_sequence) == (0, len(by_partition[part]) - 1)


def test_kafka_python_idempotent(broker, topic_name):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    n = 5000
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic(topic_name, 2, 1)])
    admin.close()
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=True, acks="all", linger_ms=2,
                      max_in_flight_requests_per_connection=5)
    futures = [p.send(topic_name, value=b"%d" % i, partition=i % 2) for i in range(n)]
    p.flush(30)
    metas = [f.get(10) for f in futures]
    p.close()
    assert sorted((m.partition, m.offset) for m in metas) == sorted((i % 2, i // 2) for i in range(n))
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest", enable_auto_commit=False,
                      consumer_timeout_ms=10000)
    c.assign([TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)])
    got = []
    for m in c:
        got.append((m.partition, m.offset, m.value))
        if len(got) == n:
            break
    c.close()
    by_partition = _values_by_partition(got)
    assert by_partition == {0: list(range(0, n, 2)), 1: list(range(1, n, 2))}
    with RawClient(broker.bootstrap) as c:
        pids = {s.producer_id for part in (0, 1) for s in active_producers(c, topic_name, part).values()}
    assert len(pids) == 1


def test_aiokafka_idempotent(broker, topic_name):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    n = 5000
    with RawClient(broker.bootstrap) as c:
        create_topic(c, topic_name)

    async def run() -> list:
        p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=True, linger_ms=2)
        await p.start()
        try:
            sent = [await p.send(topic_name, value=b"%d" % i) for i in range(n)]
            metas = await asyncio.gather(*sent)
        finally:
            await p.stop()
        assert [m.offset for m in metas] == list(range(n))
        c = AIOKafkaConsumer(topic_name, bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False)
        await c.start()
        got = []
        try:
            while len(got) < n:
                res = await c.getmany(timeout_ms=10000)
                assert res, f"stalled after {len(got)}"
                for msgs in res.values():
                    got.extend((m.partition, m.offset, m.value) for m in msgs)
        finally:
            await c.stop()
        return got

    got = asyncio.run(run())
    assert _values_by_partition(got) == {0: list(range(n))}
    with RawClient(broker.bootstrap) as c:
        (state,) = active_producers(c, topic_name).values()
    assert (state.producer_epoch, state.last_sequence) == (0, n - 1)


def test_batch_header_helper_matches_kafka_layout():
    """The raw tests' batches carry what Kafka reads: pid at 43, epoch at 51, base sequence at 53."""
    b = batch(1234, 7, 99, 4)
    assert struct.unpack_from(">qhii", b, 43) == (1234, 7, 99, 4)
