"""librdkafka's ``tests/0105-transactions_mock.c`` (v2.15.0; the bundled library is 2.16.0), scenarios
#23-#44 of ``main_0105_transactions_mock()`` (the numbering of /work/notes/0105.md), ported to
confluent-kafka against this broker. Each C mock call is done with the control endpoint's twin
(``broker.testing.KafkaCluster``): ``rd_kafka_mock_push_request_errors`` -> ``faults.push``,
``..._broker_push_request_error_rtts`` -> ``faults.push(..., broker=N)`` with ``{"error", "delay_ms"}``
entries, ``coordinator_set`` -> ``set_coordinator``, ``partition_set_leader`` -> ``set_partition_leader``,
``broker_set_down/up`` -> ``broker(N).down()/up()``, ``broker_set_rtt`` -> ``broker(N).rtt()``,
``topic_set_error`` -> ``faults.set_topic_error``, ``broker_error_stack_cnt`` -> ``faults.list()``.

The C test gives every producer a fresh mock cluster; here most scenarios share a cluster of 3
brokers or of 1 (``kafka3``, ``kafka1``: the fault rules and RTTs are cleared and every broker
brought back and in sync before each scenario), and every scenario uses its own transactional id,
topics and groups (the C names with the scenario's number appended), since a real cluster keeps
producer ids, transactions and offsets. The scenarios that take brokers down or move a coordinator
away from a broker that wrote nothing get a 3-broker cluster of their own (``fresh3``), and #27
starts its 5 brokers.

The mock is lenient where Kafka is not (no transaction timeout, a down broker stays leader and
coordinator, nothing fails over); where a scenario leans on that, its setup is adapted as little
as possible so its own assertions mean the same on real Kafka semantics, and a comment says so.
Faults the C test pushes cluster-wide are scoped here to the client under test
(``client_id``): in the C test no other client exists to consume them; here consumers used for
group metadata, and the brokers themselves, share the cluster.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_STORED,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from broker.testing import KafkaCluster
from tests.support.librdkafka_calls import error_of
from tests.support.runtime_env import runtime_python

NO_ERROR = KafkaError.NO_ERROR


# --- the harness of 0105 (create_txn_producer, test_dr_msg_cb, test_error_cb) ------------------------


class Deliveries:
    """test_dr_msg_cb: every delivery report must carry ``expect`` unless ``ignore``; ``remains``
    counts messages produced and not yet reported (test_produce_msgs2_nowait's counter)."""

    def __init__(self) -> None:
        self.expect = NO_ERROR
        self.ignore = False
        self.produced = 0
        self.reported: list[int] = []
        self.wrong: list[str] = []

    def __call__(self, err: KafkaError | None, msg: Any) -> None:
        code = err.code() if err is not None else NO_ERROR
        self.reported.append(code)
        if not self.ignore and code != self.expect:
            self.wrong.append(f"{msg.topic()}[{msg.partition()}]: {err} (expected {KafkaError(self.expect).name()})")

    @property
    def remains(self) -> int:
        return self.produced - len(self.reported)

    def check(self) -> None:
        assert not self.wrong, f"unexpected delivery reports: {self.wrong[:5]}"


class Txn:
    """create_txn_producer(): a transactional producer with 0105's settings, its delivery reports and
    the errors its error_cb saw."""

    def __init__(self, kafka: KafkaCluster | None, txnid: str, **extra: Any) -> None:
        self.client_id = f"0105b.{txnid}"
        self.dr = Deliveries()
        self.errors: list[KafkaError] = []
        conf: dict[str, Any] = {
            "bootstrap.servers": kafka.bootstrap if kafka is not None else "",
            "transactional.id": txnid,
            "client.id": self.client_id,
            "socket.connection.setup.timeout.ms": 5000,
            "reconnect.backoff.max.ms": 2000,
            "on_delivery": self.dr,
            "error_cb": self.errors.append,
        }
        conf.update(extra)
        self.p = Producer(conf)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.p, name)

    def produce_nowait(self, topic: str, partition: int, cnt: int, size: int = 0) -> None:
        """test_produce_msgs2_nowait (partition -1: RD_KAFKA_PARTITION_UA)."""
        for i in range(cnt):
            self.p.produce(topic, value=(b"%d" % i).ljust(size, b"x") if size else b"hi", partition=partition)
            self.dr.produced += 1

    def produce_sync(self, topic: str, partition: int, cnt: int) -> None:
        """test_produce_msgs2: produce and wait for every delivery report."""
        self.produce_nowait(topic, partition, cnt)
        deadline = time.monotonic() + 60
        while self.dr.remains > 0 and time.monotonic() < deadline:
            self.p.flush(1)
        assert self.dr.remains == 0, f"{self.dr.remains} message(s) not delivered"

    def assert_errors_only(self, allowed: set[int]) -> None:
        """test_error_cb with is_fatal_cb/allowed_error: every error_cb error must be allowed
        (_TRANSPORT also allows _ALL_BROKERS_DOWN, as error_is_fatal_cb does)."""
        if KafkaError._TRANSPORT in allowed:
            allowed = allowed | {KafkaError._ALL_BROKERS_DOWN}
        wrong = [e for e in self.errors if e.code() not in allowed]
        assert not wrong, f"unexpected error_cb errors: {wrong}"

    def assert_not_fatal(self) -> None:
        """rd_kafka_fatal_error(rk) == 0: poll() raises a fatal error once one was raised."""
        try:
            self.p.poll(0)
        except KafkaException as e:
            pytest.fail(f"a fatal error was raised: {e.args[0]}")
        assert not [e for e in self.errors if e.fatal()], self.errors

    def requests(self, kafka: KafkaCluster, api: str, **filters: Any) -> list[dict[str, Any]]:
        return kafka.requests.list(api=api, client_id=self.client_id, **filters)


def group_metadata(kafka: KafkaCluster, group: str) -> Any:
    """rd_kafka_consumer_group_metadata_new(group): a real consumer's metadata (not in a group:
    generation -1, no member id, as the C call makes it)."""
    c = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": group, "client.id": f"0105b.cgmd.{group}"})
    try:
        return c.consumer_group_metadata()
    finally:
        c.close()


def create_topic(kafka: KafkaCluster, name: str, partitions: int = 1, rf: int = 1,
                 assignment: list[list[int]] | None = None) -> None:
    """rd_kafka_mock_topic_create."""
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    topic = NewTopic(name, len(assignment), replica_assignment=assignment) if assignment \
        else NewTopic(name, partitions, rf)
    for future in admin.create_topics([topic], operation_timeout=10).values():
        future.result(15)
    deadline = time.monotonic() + 15
    while True:  # every partition led, in every broker's metadata
        md = admin.list_topics(name, timeout=5).topics[name]
        if md.error is None and len(md.partitions) == (len(assignment) if assignment else partitions) \
                and all(p.leader >= 0 for p in md.partitions.values()):
            return
        assert time.monotonic() < deadline, f"topic {name} not ready: {md}"
        time.sleep(0.05)


def healthy(kafka: KafkaCluster, timeout: float = 60) -> None:
    """Every broker up, every partition led with its whole ISR (what a fresh mock cluster is)."""
    for b in kafka.describe()["brokers"]:
        if not b["alive"]:
            kafka.broker(b["id"]).up()
    deadline = time.monotonic() + timeout
    while True:
        lagging = [f"{t}-{p['partition']}" for t in kafka.describe()["topics"] for p in kafka.topic(t)["partitions"]
                   if p["leader"] < 0 or sorted(p["isr"]) != sorted(p["replicas"])]
        if not lagging:
            return
        assert time.monotonic() < deadline, f"partitions not healthy: {lagging[:10]}"
        time.sleep(0.1)


def busy_fetchers(kafka: KafkaCluster, window_ms: int = 1000, threshold: int = 100) -> dict[str, int]:
    """Replica fetchers that sent more than ``threshold`` Fetch requests in the last ``window_ms``."""
    last = getattr(kafka, "_seen_seq", 0)
    entries = kafka.requests.list(api="Fetch", since=last, limit=10**7)
    if entries:
        kafka._seen_seq = entries[-1]["seq"]  # type: ignore[attr-defined]
    now = kafka.clock.now_ms()
    counts: dict[str, int] = {}
    for e in entries:
        if e["at_ms"] >= now - window_ms and (e["client_id"] or "").startswith("broker-"):
            counts[e["client_id"]] = counts.get(e["client_id"], 0) + 1
    return {c: n for c, n in counts.items() if n > threshold}


def reset(kafka: KafkaCluster) -> None:
    kafka.faults.clear()  # every rule and RTT
    healthy(kafka)
    # A follower spinning on the same Fetch (the broker bug of
    # test_a_leader_that_appended_nothing_in_its_epoch_follows_the_next_leader) would stall the
    # next scenario's writes once it leaves the ISR: say so here rather than there.
    busy = busy_fetchers(kafka)
    assert not busy, f"broker bug: replica fetchers spinning in the shared cluster: {busy}"


SOURCE_TOPICS = {"srctopic4": 4, "srctopic64": 64}


def prepare(kafka: KafkaCluster, source: tuple[str, ...] = tuple(SOURCE_TOPICS)) -> None:
    """What a fresh mock cluster has: create_txn_producer's rd_kafka_mock_topic_create(srctopic4, 4,
    1) and (srctopic64, 64, 1), the topics send_offsets_to_transaction names (Kafka's
    TxnOffsetCommit wants them to exist); and coordinators for every key, which on Kafka means the
    internal topics exist (they are created by the first FindCoordinator), so set_coordinator works
    before the first client asks."""
    for name in source:
        create_topic(kafka, name, SOURCE_TOPICS[name], 1)
    warm = Producer({"bootstrap.servers": kafka.bootstrap, "transactional.id": "0105b.warmup"})
    warm.init_transactions(30)
    c = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": "0105b.warmup"})
    try:
        c.committed([TopicPartition("warmup", 0)], timeout=30)
    finally:
        c.close()
    healthy(kafka)


def cluster(brokers: int, **config: Any) -> KafkaCluster:
    # The mock auto-creates topics with 4 partitions and RF min(3, brokers). Ten partitions for each
    # internal topic rather than 50: quicker to create and to keep in sync (coordinators are set by
    # key anyway).
    return KafkaCluster(brokers, python=runtime_python(), config={
        "num.partitions": 4, "default.replication.factor": min(3, brokers),
        "offsets.topic.num.partitions": 10, "transaction.state.log.num.partitions": 10,
        "control.request.log.size": 200000, **config})


@pytest.fixture(scope="module")
def _three() -> Iterator[KafkaCluster]:
    with cluster(3) as kafka:
        prepare(kafka)
        yield kafka


@pytest.fixture(scope="module")
def _one() -> Iterator[KafkaCluster]:
    with cluster(1) as kafka:
        prepare(kafka)
        yield kafka


@pytest.fixture
def kafka3(_three: KafkaCluster) -> KafkaCluster:
    """test.mock.num.brokers=3, fresh: no fault, no RTT, every broker up."""
    reset(_three)
    return _three


@pytest.fixture
def fresh3() -> Iterator[KafkaCluster]:
    """A 3-broker cluster of its own, for the scenarios that take brokers down or move a
    coordinator away from a broker that wrote nothing while it led, so that what they leave behind
    (a leader that led an epoch without appending, see
    test_a_leader_that_appended_nothing_in_its_epoch_follows_the_next_leader) never meets a later
    scenario."""
    with cluster(3) as kafka:
        prepare(kafka, source=("srctopic4",))  # what they use
        yield kafka


@pytest.fixture
def kafka1(_one: KafkaCluster) -> KafkaCluster:
    """test.mock.num.brokers=1, fresh."""
    reset(_one)
    return _one


# --- #23 -----------------------------------------------------------------------------------------------


def test_a_find_coordinator_authorization_failure_makes_init_transactions_fail_fatally(kafka3: KafkaCluster) -> None:
    """do_test_txn_auth_failure(FindCoordinator, CLUSTER_AUTHORIZATION_FAILED) (#23)."""
    p = Txn(kafka3, "txnid.23")
    kafka3.faults.push("FindCoordinator", "CLUSTER_AUTHORIZATION_FAILED", client_id=p.client_id)

    error = error_of(p.init_transactions, 5)

    assert error is not None, "Expected init_transactions() to fail"
    assert error.code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED, error
    assert error.fatal(), error
    assert not error.retriable(), error
    finds = p.requests(kafka3, "FindCoordinator")
    assert [r["error"] for r in finds][:1] == ["CLUSTER_AUTHORIZATION_FAILED"]
    assert not p.requests(kafka3, "InitProducerId")


# --- #24 -----------------------------------------------------------------------------------------------


def test_messages_timing_out_in_commit_leave_an_abortable_transaction_that_can_be_retried(fresh3: KafkaCluster) -> None:
    """do_test_txn_flush_timeout (#24, issue #3041): the commit fails because the messages time out
    (leaderless partitions) while the coordinator is down; abort, then the same transaction again,
    must work.

    Adaptations: rather than ``partition_set_leader(myTopic, p, -1)`` (the control endpoint's
    leader -1 is its twin), myTopic has its one replica on broker 3, taken down for the first
    attempt and brought up for the retry: leaderless, as a Kafka partition is when no ISR replica
    is alive (the C test moves the leaders to broker 1).
    message.timeout.ms is 3000 rather than 10000, shorter than transaction.timeout.ms (10000):
    the mock has no transaction timeout, but Kafka aborts a transaction older than it and fences the
    producer, which would turn the abort of attempt 1 (at ~12 s in the C timing) into a fatal error.
    The sleeps are 1 s instead of 2 s."""
    kafka = fresh3
    txnid, topic, coord_id, group = "myTxnId.24", "myTopic.24", 2, "mygroupid.24"
    create_topic(kafka, "srctopic64", 64, 1)
    create_topic(kafka, topic, assignment=[[3], [3]])
    kafka.set_coordinator("transaction", txnid, coord_id)
    p = Txn(kafka, txnid, **{"message.timeout.ms": 3000, "transaction.timeout.ms": 10000,
                              "reconnect.backoff.max.ms": 1000})
    cgmd = group_metadata(kafka, group)
    offsets = [TopicPartition("srctopic4", 3, 12), TopicPartition("srctopic64", 49, 999999111),
               TopicPartition("srctopic4", 0, 999), TopicPartition("srctopic64", 34, 123456789)]
    p.init_transactions(5)

    for is_retry in (False, True):
        if not is_retry:
            p.dr.ignore, p.dr.expect = True, KafkaError._MSG_TIMED_OUT
            kafka.broker(3).down()  # leaderless partitions
        else:
            p.dr.ignore, p.dr.expect = False, NO_ERROR
            kafka.broker(3).up()
        reported_before = len(p.dr.reported)
        p.begin_transaction()
        # The C calls pass 0, 1 and UA as *testid*: all 300 messages go to partition 0.
        for _ in range(3):
            p.produce_nowait(topic, 0, 100, size=10)
        p.send_offsets_to_transaction(offsets, cgmd)
        time.sleep(1)
        if not is_retry:
            kafka.broker(coord_id).down()  # disconnect the transaction coordinator

        error = error_of(p.commit_transaction)

        if not is_retry:
            assert error is not None, "Expected commit to fail"
            assert p.dr.remains == 0
            assert set(p.dr.reported[reported_before:]) == {KafkaError._MSG_TIMED_OUT}
            kafka.broker(coord_id).up()
            time.sleep(1)
            p.abort_transaction(60)
        else:
            assert error is None, f"Expected commit to succeed, not: {error}"
            assert p.dr.remains == 0
            assert set(p.dr.reported[reported_before:]) == {NO_ERROR}

    p.dr.check()
    p.assert_errors_only({KafkaError._TRANSPORT})


# --- #25 -----------------------------------------------------------------------------------------------


def _unstable_setup(kafka: KafkaCluster, n: str) -> tuple[str, Txn, Consumer]:
    """do_test_unstable_offset_commit's setup: 100 committed transactional messages in
    srctopic4[0] and a consumer of group "mygroup" (read_committed, partition EOF on,
    auto.offset.reset=error) that committed offset 50 there.

    The C test's topic_create(srctopic4, 2, 3) fails with TOPIC_ALREADY_EXISTS and the test uses
    srctopic4 (4 partitions, RF 1); here it is a topic of its own with that layout."""
    topic = f"srctopic4.{n}"
    create_topic(kafka, topic, 4, 1)
    p = Txn(kafka, f"txnid.{n}")
    c = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": f"mygroup.{n}", "client.id": f"0105b.c.{n}",
                  "security.protocol": "PLAINTEXT", "enable.partition.eof": True, "auto.offset.reset": "error"})
    p.init_transactions()
    p.begin_transaction()
    p.produce_nowait(topic, 0, 100)
    p.commit_transaction()
    p.dr.check()
    assert p.dr.remains == 0
    c.commit(offsets=[TopicPartition(topic, 0, 50)], asynchronous=False)
    return topic, p, c


def _committed(c: Consumer, topic: str, timeout_s: float) -> tuple[int, list[TopicPartition] | None]:
    try:
        return NO_ERROR, c.committed([TopicPartition(topic, 0)], timeout=timeout_s)
    except KafkaException as e:
        return e.args[0].code(), None


def test_unstable_offset_commit_answers_are_retried_by_committed_and_by_assign(kafka3: KafkaCluster) -> None:
    """do_test_unstable_offset_commit (#25): OffsetFetch answering UNSTABLE_OFFSET_COMMIT is retried
    by committed() (until its timeout: 5000 ms succeeds with offset 50, 200 ms gives _TIMED_OUT) and
    by an assign() from the stored offset, which then consumes exactly 50 messages and one EOF.

    Adaptation: the C test pushes six UNSTABLE_OFFSET_COMMIT errors on OffsetFetch, which the mock
    writes on every partition. Kafka answers it on a partition, and only while a transaction holds
    uncommitted offsets for it (OffsetMetadataManager.fetchOffsets with require_stable); so here the
    unstable offsets are made for real (the literal port, errors pushed on the topic's partitions,
    is the next test): another transactional producer
    sends offset 50 for the group to its transaction and commits it a second later (6 errors and
    their retries take about as long in the C test); for the 200 ms call it stays open."""
    topic, p, c = _unstable_setup(kafka3, "25")
    q = Txn(kafka3, "txnid.25.pending")
    q.init_transactions()
    cgmd = c.consumer_group_metadata()

    def pending_offsets() -> None:
        q.begin_transaction()
        q.send_offsets_to_transaction([TopicPartition(topic, 0, 50)], cgmd)

    try:
        for i, (timeout_s, exp_err) in enumerate(((5.0, NO_ERROR), (0.2, KafkaError._TIMED_OUT))):
            pending_offsets()
            commit_later = threading.Timer(1.0, q.commit_transaction) if exp_err == NO_ERROR else None
            if commit_later is not None:
                commit_later.start()
            err, parts = _committed(c, topic, timeout_s)
            if commit_later is not None:
                commit_later.join()
            assert err == exp_err, f"#{i}: expected committed() to return {KafkaError(exp_err).name()}, not {err}"
            if exp_err == NO_ERROR:
                assert parts is not None and len(parts) == 1
                assert parts[0].offset == 50, parts
        fetches = [r["error"] for r in kafka3.requests.list(api="OffsetFetch", client_id="0105b.c.25")]
        assert fetches.count("UNSTABLE_OFFSET_COMMIT") >= 2 and "NONE" in fetches, fetches

        # Phase 2: OffsetFetch lookup through assignment (the second transaction is still open)
        c.incremental_assign([TopicPartition(topic, 0, OFFSET_STORED)])
        commit_later = threading.Timer(1.0, q.commit_transaction)
        commit_later.start()
        consumed, _ = consume_exact(c, exp_eof=1, exp_cnt=50)
        commit_later.join()
        assert [m.offset() for m in consumed] == list(range(50, 100))
    finally:
        c.close()


def test_pushed_unstable_offset_commit_errors_are_retried_by_committed(kafka3: KafkaCluster) -> None:
    """do_test_unstable_offset_commit (#25) as written: six UNSTABLE_OFFSET_COMMIT pushed on
    OffsetFetch, then committed(5000 ms) must retry through them and return offset 50. The rule
    names the topic, so the error is put on its partitions, where Kafka reports it (the mock writes
    it on every partition and at the top; a group-level error librdkafka would not retry)."""
    topic, p, c = _unstable_setup(kafka3, "25b")
    try:
        kafka3.faults.push("OffsetFetch", *["UNSTABLE_OFFSET_COMMIT"] * 6, client_id="0105b.c.25b", topic=topic)
        err, parts = _committed(c, topic, 5.0)
        assert err == NO_ERROR, f"expected committed() to succeed, not {KafkaError(err).name()}"
        assert parts is not None and parts[0].offset == 50
    finally:
        c.close()


def consume_exact(c: Consumer, exp_eof: int, exp_cnt: int, poll_timeout: float = 10) -> tuple[list[Any], int]:
    """test_consumer_poll_exact(exact=true): poll until the expected EOFs and messages were seen
    (each poll with a 10 s timeout), then the counts must be exact."""
    msgs: list[Any] = []
    eofs = 0
    while eofs < exp_eof or len(msgs) < exp_cnt:
        m = c.poll(poll_timeout)
        assert m is not None, f"poll timed out: {len(msgs)}/{exp_cnt} messages, {eofs}/{exp_eof} EOFs"
        if m.error() is None:
            msgs.append(m)
        elif m.error().code() == KafkaError._PARTITION_EOF:
            eofs += 1
        else:
            pytest.fail(f"consumer error: {m.error()}")
    assert (len(msgs), eofs) == (exp_cnt, exp_eof)
    return msgs, eofs


# --- #26 -----------------------------------------------------------------------------------------------


def test_a_message_timing_out_before_it_is_sent_fails_the_commit_with_an_abortable_error(fresh3: KafkaCluster) -> None:
    """do_test_commit_after_msg_timeout (#26, confluent-kafka-dotnet#1568).

    Adaptation: the mock keeps a down broker as the partition leader; a Kafka cluster elects another
    from the ISR, and the message would be delivered. So ``test`` has its one replica on the leader
    broker 2 (the C topic has RF 3), and the partition is leaderless while 2 is down.
    message.timeout.ms is 3000 rather than 5000 (time)."""
    kafka = fresh3
    txnid, topic, coord_id, leader_id = "txnid.26", "test.26", 1, 2
    create_topic(kafka, topic, assignment=[[leader_id]])
    kafka.set_coordinator("transaction", txnid, coord_id)
    p = Txn(kafka, txnid, **{"message.timeout.ms": 3000, "transaction.timeout.ms": 10000})
    p.dr.expect = KafkaError._MSG_TIMED_OUT

    p.init_transactions()
    p.begin_transaction()
    kafka.broker(leader_id).down()
    kafka.broker(coord_id).down()
    p.produce_nowait(topic, 0, 1)

    error = error_of(p.commit_transaction)

    assert error is not None, "expected commit_transaction() to fail"
    assert error.txn_requires_abort(), f"Expected txn_requires_abort error: {error}"
    kafka.broker(coord_id).up()
    kafka.broker(leader_id).up()
    p.abort_transaction()
    assert p.dr.remains == 0, f"{p.dr.remains} message(s) were not flushed"
    p.dr.check()

    p.dr.expect = NO_ERROR
    p.begin_transaction()
    p.produce_nowait(topic, 0, 1)
    p.commit_transaction()
    assert p.dr.remains == 0, f"{p.dr.remains} message(s) were not produced"
    p.dr.check()
    assert p.dr.reported == [KafkaError._MSG_TIMED_OUT, NO_ERROR]
    p.assert_errors_only({KafkaError._TRANSPORT})


# --- #27 -----------------------------------------------------------------------------------------------


def test_a_leader_that_appended_nothing_in_its_epoch_follows_the_next_leader() -> None:
    """A minimal reproduction of the broker bug #27 ran into: a partition's leader moved twice
    (A -> B -> C) with nothing written while B led; B must follow C, so an acks=all write to C is
    answered at once (before the fix it waited until B left the ISR)."""
    with cluster(3) as kafka:
        create_topic(kafka, "moved", 1, 3)
        p = Producer({"bootstrap.servers": kafka.bootstrap, "acks": "all"})
        p.produce("moved", b"before", partition=0)
        assert p.flush(10) == 0
        first = kafka.topic("moved")["partitions"][0]["leader"]
        b, c = 1 + first % 3, 1 + (first + 1) % 3
        kafka.set_partition_leader("moved", 0, b)
        kafka.set_partition_leader("moved", 0, c)
        p.produce("moved", b"after", partition=0)
        assert p.flush(2) == 0, "acks=all write not answered in 2 s"


def test_transactions_go_on_while_the_coordinator_moves_between_five_brokers() -> None:
    """do_test_txn_switch_coordinator (#27): 20 transactions, the transaction coordinator moved
    before, during and after each; every commit and abort must succeed.

    A Kafka coordinator is the leader of the id's ``__transaction_state`` partition and may move
    only to a replica in the ISR: that topic has RF 5 here so every broker can be the coordinator,
    as in the mock. Already in the first transaction broker 3 is coordinator only while nothing is
    written before the move on to 4; as a follower it must drop the epoch it led without appending
    (storage.log.partition_log.truncate_to, as Kafka's UnifiedLog.truncateTo does) or the EndTxn's
    write waits for it. commit/abort get 3 s rather than forever (a healthy one takes well under a
    second), so a regression fails in seconds rather than after 40 s."""
    broker_cnt, iterations, topic, txnid = 5, 20, "test", "txnid"
    with cluster(broker_cnt, **{"transaction.state.log.replication.factor": broker_cnt}) as kafka:
        prepare(kafka, source=())
        coord = 1
        kafka.set_coordinator("transaction", txnid, coord)
        p = Txn(kafka, txnid)
        p.init_transactions(5)

        def next_coord() -> None:
            nonlocal coord
            coord = 1 + (coord % broker_cnt)
            kafka.set_coordinator("transaction", txnid, coord)

        for i in range(iterations):
            next_coord()
            p.begin_transaction()
            p.produce_sync(topic, -1, 50)
            if i % 3 == 0:
                next_coord()
            p.produce_nowait(topic, -1, 50)
            if (i & 1) or i % 8 == 0:
                next_coord()
            if i % 5 == 0:
                p.dr.ignore = False
                p.commit_transaction(3)
            else:
                p.dr.ignore = True
                p.abort_transaction(3)
        p.dr.check()
        # every broker coordinated, and the client followed: its EndTxn went to each of them
        end_brokers = {r["broker"] for r in p.requests(kafka, "EndTxn") if r["error"] == "NONE"}
        assert end_brokers == set(range(1, broker_cnt + 1)), end_brokers


# --- #28 -----------------------------------------------------------------------------------------------


def test_add_offsets_to_txn_answered_not_coordinator_refreshes_the_coordinator(kafka3: KafkaCluster) -> None:
    """do_test_txn_switch_coordinator_refresh (#28, issue #3571): the coordinator moves before
    AddOffsetsToTxn; its NOT_COORDINATOR makes the client look it up again and retry there."""
    txnid, topic = "txnid.28", "test.28"
    kafka3.set_coordinator("transaction", txnid, 1)
    p = Txn(kafka3, txnid)
    p.init_transactions(5)
    p.begin_transaction()

    kafka3.set_coordinator("transaction", txnid, 2)
    p.send_offsets_to_transaction([TopicPartition("srctopic4", 3, 12), TopicPartition("srctopic64", 29, 99999)],
                                  group_metadata(kafka3, "mygroupid.28"), 20)
    p.produce_sync(topic, -1, 10)
    p.commit_transaction()

    p.dr.check()
    adds = [(r["broker"], r["error"]) for r in p.requests(kafka3, "AddOffsetsToTxn")]
    assert adds[0] == (1, "NOT_COORDINATOR"), adds
    assert adds[-1] == (2, "NONE"), adds
    assert [(r["broker"], r["error"]) for r in p.requests(kafka3, "EndTxn")] == [(2, "NONE")]


# --- #29 -----------------------------------------------------------------------------------------------


def test_out_of_order_sequence_makes_the_transaction_abortable_without_an_epoch_bump(kafka3: KafkaCluster) -> None:
    """do_test_out_of_order_seq (#29, issue #3575): OUT_OF_ORDER_SEQUENCE_NUMBER during a
    transaction must not bump the epoch; the transaction becomes abortable. (The sleep while the
    three delayed requests are answered is 3 s rather than 5 s.)"""
    txnid, topic, txn_coord, leader = "myTxnId.29", "mytopic.29", 1, 2
    kafka3.set_coordinator("transaction", txnid, txn_coord)
    create_topic(kafka3, topic, 1, 3)  # partition_set_leader auto-creates it: 1 partition, RF 3
    kafka3.set_partition_leader(topic, 0, leader)
    p = Txn(kafka3, txnid, **{"batch.num.messages": 1})
    p.dr.ignore = True

    p.init_transactions()
    p.begin_transaction()
    p.produce_nowait(topic, 0, 1)  # seed the leader
    assert p.flush(30) == 0

    kafka3.broker(leader).rtt(2000)
    kafka3.faults.push("Produce", "NOT_LEADER_OR_FOLLOWER", "NOT_LEADER_OR_FOLLOWER", "OUT_OF_ORDER_SEQUENCE_NUMBER",
                       client_id=p.client_id)
    p.produce_nowait(topic, 0, 3)
    time.sleep(3)
    kafka3.broker(leader).rtt(0)

    with pytest.raises(KafkaException) as produced:
        p.produce(topic, value=b"hi", partition=0)
    assert produced.value.args[0].code() == KafkaError._STATE, produced.value

    error = error_of(p.commit_transaction)
    assert error is not None, "Expected commit_transaction() to fail"
    assert not error.fatal(), error
    assert error.txn_requires_abort(), error
    # no epoch bump during the transaction: the only InitProducerId so far is init_transactions'
    assert len(p.requests(kafka3, "InitProducerId")) == 1
    assert "OUT_OF_ORDER_SEQUENCE_NUMBER" in [r["error"] for r in p.requests(kafka3, "Produce")]

    p.abort_transaction()
    p.begin_transaction()
    p.produce_nowait(topic, 0, 1)
    p.commit_transaction()
    assert p.dr.remains == 0
    p.assert_errors_only(set())


# --- #30 -----------------------------------------------------------------------------------------------


def test_a_topic_missing_from_metadata_for_a_while_loses_no_message(kafka1: KafkaCluster) -> None:
    """do_test_topic_disappears_for_awhile (#30): after the topic came back to Metadata the producer
    must go on with its sequence numbers, or Kafka refuses (or the mock drops) the next batches."""
    txnid, topic, partition_cnt = "myTxnId.30", "mytopic.30", 10
    create_topic(kafka1, topic, partition_cnt, 1)
    p = Txn(kafka1, txnid, **{"batch.num.messages": 3, "linger.ms": 100,
                              "topic.metadata.refresh.interval.ms": 2000})
    p.init_transactions()
    msgcnt = 0
    for i in range(2):
        p.begin_transaction()
        cnt = 3 * 2 * partition_cnt
        while cnt >= 0:  # C's `while (cnt-- >= 0)`: 61 messages, the last with partition -1 (UA)
            cnt -= 1
            p.produce(topic, value=b"hi", partition=int(math.fmod(cnt, partition_cnt)))
            p.dr.produced += 1
            msgcnt += 1
        p.commit_transaction()
        if i == 0:
            kafka1.faults.set_topic_error(topic, "UNKNOWN_TOPIC_OR_PARTITION")
            md = p.list_topics(topic, timeout=5)
            assert md.topics[topic].error is not None \
                and md.topics[topic].error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART, md.topics[topic].error
            time.sleep(2)
            kafka1.faults.set_topic_error(topic, None)
    p.dr.check()
    assert p.dr.remains == 0

    c = Consumer({"bootstrap.servers": kafka1.bootstrap, "group.id": "mygroup.30", "security.protocol": "PLAINTEXT",
                  "enable.partition.eof": True, "auto.offset.reset": "earliest"})
    try:
        c.subscribe([topic])
        consume_exact(c, exp_eof=partition_cnt, exp_cnt=msgcnt)
    finally:
        c.close()
    assert msgcnt == 122


# --- #31, #32 ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("switch_coord", [False, True], ids=["coordinator_comes_back", "coordinator_switched"])
def test_send_offsets_survives_a_group_coordinator_that_cannot_be_reached(request: pytest.FixtureRequest,
                                                                           switch_coord: bool) -> None:
    """do_test_disconnected_group_coord(switch_coord=false) (#31) and (true) (#32): the group
    coordinator cannot be reached when send_offsets_to_transaction() starts; the call must keep
    retrying and succeed once it comes back (false) or once the coordinator moved (true).

    Adaptation: ``broker_set_down(2)`` leaves broker 2 the group coordinator in the mock, with its
    connections refused; a Kafka cluster would at once elect another coordinator from the
    ``__consumer_offsets`` ISR and the client would never meet a down coordinator. So broker 2 stays
    up and the coordinator, and a fault rule closes every connection of this producer to it, at its
    first request (``"action": "close"``, like the refused connection); "up" removes that rule.
    The switch leaves broker 2 having led the group's partition without writing, so that variant runs
    on a cluster of its own. The waits are 0.5 s and 2 s rather than 1 s and 3 s (the first connection
    attempts fail at once)."""
    kafka3: KafkaCluster = request.getfixturevalue("fresh3" if switch_coord else "kafka3")
    txnid, topic, grpid = "myTxnId.3" + ("2" if switch_coord else "1"), "mytopic.3" + ("2" if switch_coord else "1"), \
        "myGrpId.3" + ("2" if switch_coord else "1")
    create_topic(kafka3, topic, assignment=[[3]])  # topic_create(1, 1) + partition_set_leader(3)
    cgmd = group_metadata(kafka3, grpid)
    kafka3.set_coordinator("transaction", txnid, 1)
    kafka3.set_coordinator("group", grpid, 2)
    p = Txn(kafka3, txnid)
    (down_rule,) = kafka3.faults.add({"api": "*", "broker": 2, "client_id": p.client_id, "action": "close",
                                      "count": -1})

    p.init_transactions()
    p.begin_transaction()
    p.produce_nowait(topic, 0, 1)
    assert p.flush(30) == 0
    time.sleep(0.5)

    def delayed_up() -> None:
        time.sleep(2)
        if switch_coord:
            kafka3.set_coordinator("group", grpid, 3)
        else:
            kafka3.faults.remove(down_rule["id"])

    thread = threading.Thread(target=delayed_up)
    thread.start()
    started = time.monotonic()
    try:
        p.send_offsets_to_transaction([TopicPartition("srctopic4", 0, 1)], cgmd)
        took = time.monotonic() - started
    finally:
        thread.join()
    assert took < 10, f"send_offsets_to_transaction() took {took:.1f} s"
    p.commit_transaction()

    p.dr.check()
    commits = p.requests(kafka3, "TxnOffsetCommit")
    assert commits and commits[-1]["error"] == "NONE" and commits[-1]["broker"] == (3 if switch_coord else 2)
    assert [r for r in kafka3.requests.list(client_id=p.client_id, broker=2) if r["answered"] == "closed"]
    p.assert_errors_only({KafkaError._TRANSPORT})


# --- #33 -----------------------------------------------------------------------------------------------


def test_coordinator_not_available_while_reconnecting_to_the_coordinator_is_not_fatal(kafka1: KafkaCluster) -> None:
    """do_test_txn_coordinator_null_not_fatal (#33): FindCoordinator answering
    COORDINATOR_NOT_AVAILABLE while the idempotence state goes WaitTransport -> WaitPID must not
    raise a fatal error.

    Adaptation: the C producer sets transaction.timeout.ms=1000 for what it implies,
    message.timeout.ms=1000 and socket.timeout.ms=900; those two are set here and the transaction
    timeout kept at its default, since Kafka (unlike the mock) aborts a transaction older than 1 s
    and fences the producer, which would be a fatal error for a reason the scenario is not about.
    As in C the race is not forced: whether the client's next FindCoordinator meets the injected
    COORDINATOR_NOT_AVAILABLE depends on timing (here in about half the runs)."""
    txnid, topic, coord_id = "txnid.33", "test.33", 1
    create_topic(kafka1, topic, 1, 1)
    p = Txn(kafka1, txnid, **{"message.timeout.ms": 1000, "socket.timeout.ms": 900})
    p.dr.expect = KafkaError._MSG_TIMED_OUT

    p.init_transactions(5)
    p.begin_transaction()
    kafka1.faults.push("Produce", {"error": "NONE", "delay_ms": 3000}, broker=coord_id, client_id=p.client_id)
    p.produce_nowait(topic, -1, 1)
    p.flush(1)
    kafka1.faults.push("FindCoordinator", {"error": "COORDINATOR_NOT_AVAILABLE", "delay_ms": 10}, broker=coord_id,
                       client_id=p.client_id)
    kafka1.broker(coord_id).down()
    time.sleep(0.1)
    kafka1.broker(coord_id).up()
    p.flush(1)

    error = error_of(p.commit_transaction)

    assert p.dr.remains == 0, f"{p.dr.remains} message(s) were not produced"
    assert error is not None, "Expected commit_transaction() to fail"
    time.sleep(1)
    p.dr.check()
    p.assert_not_fatal()
    p.assert_errors_only({KafkaError._TRANSPORT, KafkaError._TIMED_OUT})


# --- #34, #35 ------------------------------------------------------------------------------------------


def retry_txn_call(call: Callable[[], Any], intermediate: Callable[[], None], sleep_s: float = 1.0) -> int:
    """RETRY_TXN_CALL__: call until it succeeds; every failure must be retriable and is followed by
    ``intermediate`` and a sleep (1 s in C). Returns the number of failures."""
    failures = 0
    while True:
        error = error_of(call)
        if error is None:
            return failures
        assert error.retriable(), f"Expected retriable error: {error}"
        failures += 1
        intermediate()
        time.sleep(sleep_s)


def expect_error(call: Callable[[], Any], code: int) -> None:
    """TXN_CALL_EXPECT_ERROR__."""
    error = error_of(call)
    assert error is not None, f"Expected {KafkaError(code).name()} error, got success"
    assert error.code() == code, f"Expected {KafkaError(code).name()} error, got {error}"


@pytest.mark.parametrize("do_commit", [True, False], ids=["commit", "abort"])
def test_timed_out_transactional_calls_can_be_resumed(kafka1: KafkaCluster, do_commit: bool) -> None:
    """do_test_txn_resumable_calls_timeout(do_commit=true) (#34) and (false) (#35): a call that
    times out can be resumed by calling it again; another call meanwhile gets _CONFLICT. Every
    delay and the sleep between retries are half the C ones (250/250, 1500, 200 and 600 ms, 0.5 s),
    all still longer than the 100 ms calls."""
    txnid, topic, coord_id = f"txnid.{34 if do_commit else 35}", f"test.{34 if do_commit else 35}", 1
    create_topic(kafka1, topic, 1, 1)
    cgmd = group_metadata(kafka1, f"mygroupid.{34 if do_commit else 35}")
    p = Txn(kafka1, txnid)
    kafka1.faults.push("InitProducerId", {"error": "NONE", "delay_ms": 250}, {"error": "NONE", "delay_ms": 250},
                       broker=coord_id, client_id=p.client_id)

    init_failures = retry_txn_call(lambda: p.init_transactions(0.1),
                                   lambda: expect_error(lambda: p.abort_transaction(), KafkaError._CONFLICT), 0.5)
    retry_txn_call(p.begin_transaction, lambda: None, 0.5)

    kafka1.faults.push("Produce", {"error": "NONE", "delay_ms": 1500}, broker=coord_id, client_id=p.client_id)
    p.produce_nowait(topic, -1, 1)
    kafka1.faults.push("AddOffsetsToTxn", {"error": "NONE", "delay_ms": 200}, broker=coord_id, client_id=p.client_id)
    p.send_offsets_to_transaction([TopicPartition("srctopic4", 0, 12)], cgmd)  # not resumable on timeout
    kafka1.faults.push("EndTxn", {"error": "NONE", "delay_ms": 600}, broker=coord_id, client_id=p.client_id)

    if do_commit:
        end_failures = retry_txn_call(lambda: p.commit_transaction(0.1),
                                      lambda: expect_error(lambda: p.abort_transaction(), KafkaError._CONFLICT), 0.5)
    else:
        end_failures = retry_txn_call(lambda: p.abort_transaction(0.1),
                                      lambda: expect_error(lambda: p.commit_transaction(), KafkaError._CONFLICT), 0.5)

    # the delays made the 100 ms calls time out at least once each, and each was resumed
    assert init_failures >= 1 and end_failures >= 1, (init_failures, end_failures)
    assert [r["error"] for r in p.requests(kafka1, "EndTxn")] == ["NONE"]
    assert len(p.requests(kafka1, "InitProducerId")) == 1
    p.assert_errors_only(set())


# --- #36, #37 ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("do_commit", [True, False], ids=["commit", "abort"])
def test_a_timed_out_call_resumed_after_its_request_failed_returns_that_failure(kafka1: KafkaCluster,
                                                                               do_commit: bool) -> None:
    """do_test_txn_resumable_calls_timeout_error(do_commit=true) (#36) and (false) (#37): EndTxn
    fails (INVALID_TXN_STATE) after the commit call timed out; the resumed call returns that fatal
    error. The C test's abort variant calls commit_transaction() too (a test bug), so #37 runs what
    #36 runs; it is ported as written. The EndTxn answer is held 1000 ms rather than 2000 ms and
    the sleep is 1.5 s rather than 3 s (still past the 500 ms call)."""
    txnid, topic, coord_id = f"txnid.{36 if do_commit else 37}", f"test.{36 if do_commit else 37}", 1
    create_topic(kafka1, topic, 1, 1)
    p = Txn(kafka1, txnid)
    p.init_transactions()
    p.begin_transaction()
    p.produce_nowait(topic, -1, 1)
    kafka1.faults.push("EndTxn", {"error": "INVALID_TXN_STATE", "delay_ms": 1000}, broker=coord_id,
                       client_id=p.client_id)

    expect_error(lambda: p.commit_transaction(0.5), KafkaError._TIMED_OUT)
    time.sleep(1.5)  # the background EndTxn fails meanwhile
    error = error_of(p.commit_transaction)

    assert error is not None and error.fatal(), f"Expected fatal error, not {error}"
    assert error.code() == KafkaError.INVALID_TXN_STATE, error
    assert [r["error"] for r in p.requests(kafka1, "EndTxn")] == ["INVALID_TXN_STATE"]


# --- #38 -----------------------------------------------------------------------------------------------


def test_init_transactions_honours_its_timeout_and_caps_an_infinite_one() -> None:
    """do_test_txn_resumable_init (#38): no broker at all; init_transactions(1000) times out in
    about 1 s, init_transactions(-1) in 2 x transaction.timeout.ms.

    transaction.timeout.ms is 1000 (the minimum) rather than 4000, so the capped call waits 2 s, not
    8 s; the bound checked is the same (2 x transaction.timeout.ms +- 500 ms)."""
    txn_timeout_ms = 1000
    p = Txn(None, "txnid.38", **{"transaction.timeout.ms": txn_timeout_ms})

    started = time.monotonic()
    error = error_of(p.init_transactions, 1.0)
    took = time.monotonic() - started
    assert error is not None and error.code() == KafkaError._TIMED_OUT, f"Expected _TIMED_OUT, not {error}"
    assert 0.9 <= took <= 1.5, took

    started = time.monotonic()
    error = error_of(p.init_transactions)
    took = time.monotonic() - started
    assert error is not None and error.code() == KafkaError._TIMED_OUT, f"Expected _TIMED_OUT, not {error}"
    assert 2 * txn_timeout_ms / 1000 - 0.5 <= took <= 2 * txn_timeout_ms / 1000 + 0.5, took


# --- #39, #40 ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("do_commit", [True, False], ids=["commit", "abort"])
def test_concurrent_transactional_calls_fail_at_once_with_conflict(kafka1: KafkaCluster, do_commit: bool) -> None:
    """do_test_txn_concurrent_operations(do_commit=true) (#39) and (false) (#40): while one
    transactional call blocks, every transactional call from another thread fails at once (within
    100 ms), retriable, with _PREV_IN_PROGRESS for the same API and _CONFLICT for the others.

    The broker RTT is 500 ms rather than 3500 ms and the other thread starts 0.25 s rather than 1 s
    into each call; every blocking call still waits at least one RTT, and the test checks that the
    other thread's calls all ended before the main call returned (the C timing takes about 30 s
    per variant)."""
    n = 39 if do_commit else 40
    txnid, topic, coord_id, rtt_ms, delay_s = f"txnid.{n}", f"test.{n}", 1, 500, 0.25
    create_topic(kafka1, topic, 1, 1)
    cgmd = group_metadata(kafka1, f"mygroupid.{n}")
    p = Txn(kafka1, txnid, **{"socket.connection.setup.timeout.ms": 15000})
    kafka1.broker(coord_id).rtt(rtt_ms)

    apis = ("init_transactions", "begin_transaction", "send_offsets_to_transaction", "commit_transaction",
            "abort_transaction")
    calls: dict[str, Callable[[], Any]] = {
        "init_transactions": lambda: p.init_transactions(10),
        "begin_transaction": p.begin_transaction,
        "send_offsets_to_transaction": lambda: p.send_offsets_to_transaction([TopicPartition("srctopic4", 0, 12)],
                                                                             cgmd),
        "commit_transaction": lambda: p.commit_transaction(10),
        "abort_transaction": lambda: p.abort_transaction(10),
    }
    failures: list[str] = []
    checked: list[str] = []

    def concurrently(main_api: str, main_call: Callable[[], Any]) -> None:
        done_at: list[float] = []

        def other_thread() -> None:
            time.sleep(delay_s)
            for api in apis:
                started = time.monotonic()
                error = error_of(calls[api])
                took = time.monotonic() - started
                exp = KafkaError._PREV_IN_PROGRESS if api == main_api else KafkaError._CONFLICT
                if error is None:
                    failures.append(f"conflicting {api}() during {main_api}() succeeded")
                elif error.code() != exp or not error.retriable():
                    failures.append(f"conflicting {api}() during {main_api}(): {error}")
                elif took > 0.1:
                    failures.append(f"conflicting {api}() during {main_api}() took {took:.3f} s")
                checked.append(f"{main_api}/{api}")
            done_at.append(time.monotonic())

        thread = threading.Thread(target=other_thread)
        thread.start()
        try:
            main_call()
            returned_at = time.monotonic()
        finally:
            thread.join()
        assert done_at and done_at[0] < returned_at, f"{main_api}() returned before the other thread's calls ended"

    concurrently("init_transactions", lambda: p.init_transactions())
    p.begin_transaction()  # this call doesn't block, so can't really be tested concurrently
    p.produce_nowait(topic, -1, 10)
    concurrently("send_offsets_to_transaction",
                 lambda: p.send_offsets_to_transaction([TopicPartition("srctopic4", 0, 12)], cgmd))
    if do_commit:
        concurrently("commit_transaction", lambda: p.commit_transaction())
    else:
        concurrently("abort_transaction", lambda: p.abort_transaction())

    assert not failures, failures
    assert len(checked) == 3 * len(apis)
    assert [r["error"] for r in p.requests(kafka1, "EndTxn")] == ["NONE"]
    assert p.dr.remains == 0
    p.assert_errors_only(set())


# --- #41, #42 ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("error_code", ["INVALID_PRODUCER_EPOCH", "PRODUCER_FENCED"])
def test_a_fenced_abort_is_fatal_and_does_not_bump_the_epoch(kafka3: KafkaCluster, error_code: str) -> None:
    """do_test_txn_fenced_abort(INVALID_PRODUCER_EPOCH) (#41) and (PRODUCER_FENCED) (#42) (KIP-360):
    a fatal idempotence error makes the transaction abortable; the abort's EndTxn is fenced, which
    must be fatal, and the epoch bump (InitProducerId) must not be attempted."""
    n = 41 if error_code == "INVALID_PRODUCER_EPOCH" else 42
    txnid, topic, txn_coord = f"myTxnId.{n}", f"mytopic.{n}", 2
    kafka3.set_coordinator("transaction", txnid, txn_coord)
    create_topic(kafka3, topic, 4, 3)  # auto-created in the mock: 4 partitions, RF 3
    p = Txn(kafka3, txnid, **{"batch.num.messages": 1})
    p.dr.ignore = True

    p.init_transactions()
    p.begin_transaction()
    p.produce_nowait(topic, 0, 1)
    assert p.flush(30) == 0
    end_rule, = kafka3.faults.push("EndTxn", error_code, broker=txn_coord, client_id=p.client_id)
    init_rule, = kafka3.faults.push("InitProducerId", error_code, broker=txn_coord, client_id=p.client_id)
    kafka3.faults.push("Produce", "UNKNOWN_PRODUCER_ID", client_id=p.client_id)
    p.produce_nowait(topic, 0, 1)
    assert p.flush(30) == 0

    error = error_of(p.abort_transaction)

    assert error is not None, "Expected abort_transaction() to fail"
    assert error.fatal(), f"Expected a fatal error: {error}"
    with pytest.raises(KafkaException) as fatal:  # rd_kafka_fatal_error(rk) != 0
        p.produce(topic, value=b"hi", partition=0)
    assert fatal.value.args[0].code() == KafkaError._FATAL, fatal.value
    # rd_kafka_mock_broker_error_stack_cnt: the EndTxn error consumed, the InitProducerId one not
    rules = {r["id"]: r for r in kafka3.faults.list()["rules"]}
    assert end_rule["id"] not in rules
    assert init_rule["id"] in rules and len(rules[init_rule["id"]]["errors"]) == 1, rules.get(init_rule["id"])
    # Kafka answers PRODUCER_FENCED to an EndTxn below v2 as INVALID_PRODUCER_EPOCH (KafkaApis
    # handleEndTxnRequest); librdkafka sends v1, so #42 sees INVALID_PRODUCER_EPOCH on the wire (the
    # mock sends the pushed code as is). Either way the abort is fatal and nothing else is sent.
    ends = p.requests(kafka3, "EndTxn")
    wire_error = "INVALID_PRODUCER_EPOCH" if ends and ends[0]["api_version"] < 2 else error_code
    assert [r["error"] for r in ends] == [wire_error]
    assert len(p.requests(kafka3, "InitProducerId")) == 1
    p.assert_errors_only({KafkaError._FENCED})


# --- #43, #44 ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("times_out", [True, False], ids=["times_out", "succeeds"])
def test_txn_offset_commit_is_not_retried_too_quickly(kafka3: KafkaCluster, times_out: bool) -> None:
    """do_test_txn_offset_commit_doesnt_retry_too_quickly(times_out=true) (#43) and (false) (#44):
    TxnOffsetCommit answered COORDINATOR_NOT_AVAILABLE is retried after a 500 ms backoff, so four
    such answers outlast a 500 ms call (which returns that error, not _TIMED_OUT) and fit in a
    4000 ms one."""
    n = 43 if times_out else 44
    txnid, topic = f"txnid.{n}", f"mytopic.{n}"
    create_topic(kafka3, topic, 4, 3)
    cgmd = group_metadata(kafka3, f"mygroupid.{n}")
    p = Txn(kafka3, txnid)
    p.dr.ignore = True
    p.init_transactions(5)
    p.begin_transaction()
    p.produce_nowait(topic, -1, 1)
    assert p.flush(5) == 0

    kafka3.faults.push("TxnOffsetCommit", *["COORDINATOR_NOT_AVAILABLE"] * 4, client_id=p.client_id)
    error = error_of(p.send_offsets_to_transaction, [TopicPartition("srctopic4", 3, 1)], cgmd,
                     0.5 if times_out else 4.0)

    commits = p.requests(kafka3, "TxnOffsetCommit")
    if times_out:
        assert error is not None and error.code() == KafkaError.COORDINATOR_NOT_AVAILABLE, \
            f"expected COORDINATOR_NOT_AVAILABLE, got: {error}"
        assert 1 <= len(commits) <= 2, commits
    else:
        assert error is None, f'expected "Success", found: {error}'
        assert [r["error"] for r in commits] == ["COORDINATOR_NOT_AVAILABLE"] * 4 + ["NONE"]
    gaps = [b["at_ms"] - a["at_ms"] for a, b in zip(commits, commits[1:], strict=False)]
    assert all(gap >= 400 for gap in gaps), f"TxnOffsetCommit retried too quickly: {gaps} ms apart"
