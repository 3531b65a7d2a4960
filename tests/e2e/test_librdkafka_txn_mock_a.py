"""librdkafka's ``tests/0105-transactions_mock.c``, sub-tests #1-#22 (the numbering of
``/work/notes/0105.md``), ported to confluent-kafka against our brokers.

The C test drives librdkafka's mock cluster; here the same calls go through our control endpoint
(``broker.testing.KafkaCluster``), one to one:

=============================================  ==============================================
rd_kafka_mock_push_request_errors               ``kafka.faults.push(api, *errors)``
rd_kafka_mock_broker_push_request_error_rtts    ``kafka.faults.push(api, {"error":..,"delay_ms":..}, broker=N)``
rd_kafka_mock_coordinator_set                   ``kafka.set_coordinator(kind, key, broker)``
rd_kafka_mock_partition_set_leader              ``kafka.set_partition_leader(topic, p, broker)``
rd_kafka_mock_broker_set_down / _up / _rtt      ``kafka.broker(N).down() / .up() / .rtt(ms)`` (#19: a
                                                delay rule for the test's client, ``client_rtt``)
rd_kafka_mock_set_apiversion                    ``kafka.set_api_version(api, min, max)``
interceptors, rd_kafka_fatal_error()            the request log (``kafka.requests.list``) and
                                                ``poll()`` / ``produce()`` raising the fatal error
=============================================  ==============================================

Every pushed fault is scoped to the test's own ``client.id`` (the C harness names each client
after its test too): with one client per scenario that is the mock's cluster-wide stack, and a
client left over from an earlier scenario cannot consume it.

Our brokers have Kafka's semantics where the mock is lenient (AddOffsetsToTxn opens the
transaction, TxnOffsetCommit stores offsets, a coordinator moved is loaded, a broker taken down
hands its leaderships over, transactions time out); each test says where that changes the
scenario. Where the C test uses ``-1`` (infinite) for commit/abort/flush/send_offsets the port
uses ``INFINITE`` (30 s) so that a hang fails rather than blocks. A few pure waits (a 10 s
answer delay, ``rd_sleep``) are scaled down to keep the file fast; each is marked ``scaled``
and keeps the ordering the C test relies on (delay longer than the call timeout, sleep longer than
the delay, ...).
"""

from __future__ import annotations

import json
import struct
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.testing import KafkaCluster
from tests.support.librdkafka_calls import error_of
from tests.support.runtime_env import runtime_python

INFINITE = 30.0  # stands for the C test's -1 timeouts
NO_ERROR = KafkaError.NO_ERROR

pytestmark = pytest.mark.timeout(120)

# --- the harness: create_txn_producer(), test_dr_msg_cb, test_error_cb ---------------------------

def cgmetadata(group_id: str) -> bytes:
    """rd_kafka_consumer_group_metadata_new(group_id), serialized as
    rd_kafka_consumer_group_metadata_write() does (confluent-kafka has no constructor for it and a
    Consumer would send FindCoordinator requests of its own)."""
    return b"CGMDv2:" + struct.pack("<i", -1) + group_id.encode() + b"\0" + b"\0" + b"\1"


class TxnProducer:
    """create_txn_producer(): a transactional producer with the harness's settings.

    Delivery reports are checked as ``test_dr_msg_cb`` checks them (``ignore_dr_err``,
    ``exp_dr_err`` read when the report arrives; a ``remains`` counter decremented), and error_cb
    errors are collected for ``check_errors`` (``test_error_cb`` with ``error_is_fatal_cb``)."""

    def __init__(self, kafka: KafkaCluster, txnid: str, name: str, **conf: Any) -> None:
        self.kafka = kafka
        self.name = name
        self.txnid = txnid
        self.errors: list[KafkaError] = []
        self.ignore_dr_err = False
        self.exp_dr_err = NO_ERROR
        self.dr_mismatch: list[str] = []
        self.dr_count = 0
        config: dict[str, Any] = {
            "bootstrap.servers": kafka.bootstrap,
            "client.id": name,
            "transactional.id": txnid,
            "socket.connection.setup.timeout.ms": 5000,
            "reconnect.backoff.max.ms": 2000,
            "error_cb": self.errors.append,
        }
        config.update(conf)
        self.p = Producer(config)

    def produce(self, topic: str, partition: int | None = None, value: bytes = b"hi",
                remains: list[int] | None = None) -> None:
        def on_delivery(err: KafkaError | None, msg: Any) -> None:
            code = err.code() if err is not None else NO_ERROR
            self.dr_count += 1
            if not self.ignore_dr_err and code != self.exp_dr_err:
                self.dr_mismatch.append(f"{msg.topic()}[{msg.partition()}]: {err} (expected {self.exp_dr_err})")
            if remains is not None:
                assert remains[0] > 0, "more delivery reports than messages"
                remains[0] -= 1

        kwargs: dict[str, Any] = {"value": value, "on_delivery": on_delivery}
        if partition is not None:
            kwargs["partition"] = partition
        self.p.produce(topic, **kwargs)

    def produce_msgs(self, topic: str, base: int, count: int, remains: list[int]) -> None:
        """test_produce_msgs2_nowait(rk, topic, 0, RD_KAFKA_PARTITION_UA, base, count, NULL, 0, &remains)."""
        remains[0] += count
        for i in range(base, base + count):
            self.produce(topic, None, f"testid=0, partition=-1, msg={i}".encode(), remains)

    def test_flush(self, timeout: float) -> None:
        """test_flush(): everything delivered (successfully or not) within the timeout."""
        left = self.p.flush(timeout)
        assert left == 0, f"{left} message(s) still queued after flush({timeout})"

    def send_offsets(self, offsets: list[tuple[str, int, int]], group: str = "mygroupid",
                     timeout: float = INFINITE) -> KafkaError | None:
        tps = [TopicPartition(t, p, o) for t, p, o in offsets]
        return error_of(self.p.send_offsets_to_transaction, tps, cgmetadata(group), timeout)

    def serve(self) -> KafkaError | None:
        """Serve queued callbacks; a raised fatal error (confluent-kafka raises it from poll())."""
        try:
            self.p.poll(0)
        except KafkaException as e:
            return e.args[0]
        return None

    def check_errors(self, *allowed: int) -> None:
        """error_is_fatal_cb: every error_cb error is one of ``allowed`` (none: test_error_cb with
        is_fatal_cb NULL fails on any), _ALL_BROKERS_DOWN going with an allowed _TRANSPORT."""
        self.serve()
        ok = set(allowed)
        if KafkaError._TRANSPORT in ok:
            ok.add(KafkaError._ALL_BROKERS_DOWN)
        bad = [e for e in self.errors if e.code() not in ok]
        assert not bad, f"unexpected error_cb errors: {bad}"

    def check_drs(self) -> None:
        self.serve()
        assert not self.dr_mismatch, f"delivery reports with unexpected errors: {self.dr_mismatch}"

    def push(self, api: str, *errors: Any, broker: int | None = None) -> None:
        """rd_kafka_mock_push_request_errors (broker: ..._broker_push_request_error_rtts)."""
        self.kafka.faults.push(api, *errors, broker=broker, client_id=self.name)

    def client_rtt(self, broker: int, ms: int) -> int:
        """rd_kafka_mock_broker_set_rtt as the mock has it: every answer of ``broker`` to this
        client held ``ms``; returns the rule's id (remove it to end the delay)."""
        rule = {"broker": broker, "client_id": self.name, "delay_ms": ms, "count": -1}
        return int(self.kafka.faults.add(rule)[0]["id"])

    def log(self, api: str) -> list[dict[str, Any]]:
        """What this client sent of ``api``, oldest first."""
        return self.kafka.requests.list(api=api, client_id=self.name)

    def trail(self, *apis: str) -> list[str]:
        """The last few requests of ``apis`` this client sent, for an assertion's message: which
        broker answered what, and when (a hang shows as a missing or late answer)."""
        entries = sorted((e for api in apis for e in self.log(api)), key=lambda e: e["seq"])
        keep = ("seq", "at_ms", "api", "broker", "topics", "error", "duration_ms", "answered", "fault")
        return [str({k: e[k] for k in keep if k in e}) for e in entries[-12:]]

    def errors_seen(self, api: str) -> list[str]:
        return [e.get("error", "?") for e in self.log(api)]

    def destroy(self) -> None:
        """rd_kafka_destroy(): no flush, no abort (Producer.close() would abort the transaction)."""
        self.p = None  # type: ignore[assignment]


def control(kafka: KafkaCluster, method: str, path: str, body: Any) -> Any:
    """The control endpoint itself, for what ``KafkaCluster`` has no method for."""
    req = urllib.request.Request(f"http://127.0.0.1:{kafka.control_port}{path}", data=json.dumps(body).encode(),
                                 method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def create_topics(kafka: KafkaCluster, *topics: NewTopic) -> None:
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    for fut in admin.create_topics(list(topics), operation_timeout=30).values():
        fut.result()


def wait_for(what: str, cond: Callable[[], Any], timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def reset(kafka: KafkaCluster) -> None:
    """What a fresh mock cluster per scenario gives: no fault, no RTT, every broker up, every API
    at its own versions."""
    kafka.faults.clear()
    control(kafka, "POST", "/versions", {"reset": True})
    for b in kafka.describe()["brokers"]:
        if not b["alive"]:
            kafka.broker(b["id"]).up()


@pytest.fixture(scope="module")
def kafka() -> Iterator[KafkaCluster]:
    """Three brokers for the whole module, with create_txn_producer()'s topics (srctopic4,
    srctopic64, RF 1) and ``mytopic`` as the mock auto-creates it (4 partitions, RF 3).
    __transaction_state and __consumer_offsets are created up front so coordinators can be set."""
    with KafkaCluster(brokers=3, python=runtime_python()) as k:
        create_topics(k, NewTopic("srctopic4", 4, 1), NewTopic("srctopic64", 64, 1), NewTopic("mytopic", 4, 3))
        warm = Producer({"bootstrap.servers": k.bootstrap, "transactional.id": "warm-up", "client.id": "warm-up"})
        warm.init_transactions(30)
        warm.begin_transaction()
        warm.send_offsets_to_transaction([TopicPartition("srctopic4", 0, 0)], cgmetadata("warm-up"), 30)
        warm.commit_transaction(30)
        warm.close()
        yield k


@pytest.fixture(autouse=True)
def clean(kafka: KafkaCluster) -> Iterator[None]:
    reset(kafka)
    yield
    reset(kafka)


# --- #1 -----------------------------------------------------------------------------------------

def test_recoverable_errors_on_every_transactional_api_are_retried(kafka: KafkaCluster) -> None:
    """do_test_txn_recoverable_errors(): retriable errors on InitProducerId, Produce,
    TxnOffsetCommit and EndTxn are retried inside the client; every call succeeds, every
    delivery report is a success and error_cb is never called."""
    txnid = "myTxnId-recoverable"
    rk = TxnProducer(kafka, txnid, "recoverable_errors", **{"batch.num.messages": 1})
    # "Make sure transaction and group coordinators are different" (the C test sets myGroupId but
    # sends offsets for mygroupid: kept as written).
    kafka.set_coordinator("group", "myGroupId", 1)
    kafka.set_coordinator("transaction", txnid, 2)

    rk.push("InitProducerId", "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS")
    rk.p.init_transactions(5)

    rk.p.begin_transaction()
    rk.produce("mytopic", 0)
    rk.p.flush(INFINITE)

    rk.push("Produce", "NOT_ENOUGH_REPLICAS")
    rk.produce("mytopic", 0)
    rk.p.flush(INFINITE)

    offsets = [("srctopic4", 3, 12), ("srctopic64", 39, 999999111), ("srctopic4", 0, 999),
               ("srctopic64", 19, 123456789)]
    rk.push("AddPartitionsToTxn", "UNKNOWN_TOPIC_OR_PARTITION")
    rk.push("TxnOffsetCommit", "NOT_COORDINATOR", "CONCURRENT_TRANSACTIONS")
    assert rk.send_offsets(offsets, "mygroupid") is None

    rk.push("EndTxn", "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS")
    assert error_of(rk.p.commit_transaction, 5) is None

    assert rk.dr_count == 2
    rk.check_drs()
    rk.check_errors()
    # what the client sent: each injected error, then the retry that succeeded
    assert rk.errors_seen("InitProducerId") == ["COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR",
                                                "COORDINATOR_LOAD_IN_PROGRESS", "NONE"]
    assert rk.errors_seen("Produce") == ["NONE", "NOT_ENOUGH_REPLICAS", "NONE"]
    assert rk.errors_seen("TxnOffsetCommit") == ["NOT_COORDINATOR", "CONCURRENT_TRANSACTIONS", "NONE"]
    assert rk.errors_seen("EndTxn") == ["COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR",
                                        "COORDINATOR_LOAD_IN_PROGRESS", "NONE"]
    # the AddPartitionsToTxn error is never consumed (nothing new is produced to after it), as in C
    assert [r["api"] for r in kafka.faults.list()["rules"]] == ["AddPartitionsToTxn"]
    rk.destroy()


# --- #2 -----------------------------------------------------------------------------------------

def test_unknown_producer_id_on_produce_is_abortable_and_abort_bumps_the_epoch(kafka: KafkaCluster) -> None:
    """do_test_txn_fatal_idempo_errors() (KIP-360): UNKNOWN_PRODUCER_ID on Produce makes commit
    fail with an abortable, non-fatal error; abort bumps the epoch and the next transaction
    commits."""
    rk = TxnProducer(kafka, "myTxnId-fatal-idempo", "fatal_idempo_errors", **{"batch.num.messages": 1})
    rk.ignore_dr_err = True

    rk.p.init_transactions(5)
    rk.p.begin_transaction()
    rk.produce("mytopic", 0)
    rk.push("Produce", "UNKNOWN_PRODUCER_ID")
    rk.produce("mytopic", 0)

    error = error_of(rk.p.commit_transaction, INFINITE)
    assert error is not None, "expected commit_transaction() to fail"
    assert not error.fatal(), error
    assert error.txn_requires_abort(), error

    assert error_of(rk.p.abort_transaction, INFINITE) is None

    rk.p.begin_transaction()
    rk.produce("mytopic", 0)
    assert error_of(rk.p.commit_transaction, INFINITE) is None

    rk.check_errors(KafkaError.UNKNOWN_PRODUCER_ID)
    assert "UNKNOWN_PRODUCER_ID" in rk.errors_seen("Produce")
    inits = rk.log("InitProducerId")
    first = inits[0]
    assert first["producer_id"] == -1 and first["error"] == "NONE"
    bumps = [r for r in inits[1:] if r.get("producer_id", -1) >= 0 and r["error"] == "NONE"]
    assert bumps, f"abort did not bump the epoch with InitProducerId: {inits}"
    produces = rk.log("Produce")
    assert produces[-1]["error"] == "NONE"
    assert produces[-1]["producer_epoch"] > produces[0]["producer_epoch"], "the new transaction has a new epoch"
    rk.destroy()


def bump_after_unknown_producer_id(kafka: KafkaCluster, txnid: str, name: str,
                                   bump_answer: dict[str, Any]) -> TxnProducer:
    """What #3-#5 share: a transaction (coordinator on broker 2) with one record delivered, then a
    second record answered UNKNOWN_PRODUCER_ID, so that the next transactional call bumps the epoch
    (KIP-360) with an InitProducerId that broker 2 answers ``bump_answer``."""
    rk = TxnProducer(kafka, txnid, name, **{"batch.num.messages": 1})
    kafka.set_coordinator("transaction", txnid, 2)
    rk.ignore_dr_err = True
    rk.p.init_transactions(INFINITE)
    rk.p.begin_transaction()
    rk.produce("mytopic", 0)
    rk.test_flush(INFINITE)
    rk.push("InitProducerId", bump_answer, broker=2)
    rk.push("Produce", "UNKNOWN_PRODUCER_ID")
    rk.produce("mytopic", 0)
    return rk


# --- #3, #4 -------------------------------------------------------------------------------------

@pytest.mark.parametrize("error_code", ["INVALID_PRODUCER_EPOCH", "PRODUCER_FENCED"])
def test_fencing_error_on_the_epoch_bump_is_fatal(kafka: KafkaCluster, error_code: str) -> None:
    """do_test_txn_fenced_reinit(INVALID_PRODUCER_EPOCH) (#3) and (PRODUCER_FENCED) (#4): the
    KIP-360 epoch bump after UNKNOWN_PRODUCER_ID fails with a fencing error, so abort fails
    with a fatal error and the producer is in fatal state."""
    rk = bump_after_unknown_producer_id(kafka, f"myTxnId-fenced-reinit-{error_code}",
                                        f"fenced_reinit_{error_code}", {"error": error_code, "delay_ms": 0})
    rk.test_flush(INFINITE)

    error = error_of(rk.p.abort_transaction, INFINITE)
    assert error is not None, "expected abort_transaction() to fail"
    assert error.fatal(), error

    # rd_kafka_fatal_error(rk) != 0: confluent-kafka raises the fatal error from poll(), and
    # every produce() fails with _FATAL
    raised = rk.serve()
    assert raised is None or raised.fatal(), raised
    with pytest.raises(KafkaException) as produce_error:
        rk.produce("mytopic", 0)
    assert produce_error.value.args[0].code() == KafkaError._FATAL
    rk.check_errors(KafkaError._FENCED, KafkaError._FATAL)
    bump = [r for r in rk.log("InitProducerId") if r.get("producer_id", -1) >= 0]
    assert bump and bump[0]["broker"] == 2 and bump[0]["error"] in (error_code, "INVALID_PRODUCER_EPOCH")
    rk.destroy()


# --- #5 -----------------------------------------------------------------------------------------

def test_abort_ends_a_transaction_whose_only_request_was_a_retried_add_offsets_to_txn(kafka: KafkaCluster) -> None:
    """do_test_txn_req_cnt(): with no message produced and AddOffsetsToTxn retried, abort must
    still send EndTxn (a txn_req_cnt regression) and succeed.

    Real Kafka: AddOffsetsToTxn adds __consumer_offsets to the transaction (the mock does not
    open it), so this EndTxn(abort) really ends an ongoing transaction; the request log shows it
    was sent and answered NONE, which the C test only infers from abort not hanging."""
    rk = TxnProducer(kafka, "myTxnId-req-cnt", "txn_req_cnt")
    rk.ignore_dr_err = True
    rk.p.init_transactions(5)
    rk.p.begin_transaction()

    rk.push("AddOffsetsToTxn", "REQUEST_TIMED_OUT", "NOT_COORDINATOR")
    rk.push("TxnOffsetCommit", "COORDINATOR_LOAD_IN_PROGRESS", "UNKNOWN_TOPIC_OR_PARTITION")
    assert rk.send_offsets([("srctopic4", 3, 12), ("srctopic64", 40, 999999111)]) is None

    assert error_of(rk.p.abort_transaction, 5) is None

    rk.check_errors()
    assert rk.errors_seen("AddOffsetsToTxn") == ["REQUEST_TIMED_OUT", "NOT_COORDINATOR", "NONE"]
    assert rk.errors_seen("TxnOffsetCommit") == ["COORDINATOR_LOAD_IN_PROGRESS", "UNKNOWN_TOPIC_OR_PARTITION", "NONE"]
    assert rk.errors_seen("EndTxn") == ["NONE"]
    rk.destroy()


# --- #6 -----------------------------------------------------------------------------------------

def test_produce_add_partitions_and_add_offsets_errors_require_abort(kafka: KafkaCluster) -> None:
    """do_test_txn_requires_abort_errors(): TOPIC_AUTHORIZATION_FAILED on Produce and on
    AddPartitionsToTxn, and GROUP_AUTHORIZATION_FAILED on AddOffsetsToTxn, each make the
    transaction abortable; abort succeeds each time."""
    rk = TxnProducer(kafka, "txnid-requires-abort", "txn_requires_abort_errors")
    rk.ignore_dr_err = True
    rk.p.init_transactions(5)
    rk.p.begin_transaction()

    # 1. Fail on produce
    rk.push("Produce", "TOPIC_AUTHORIZATION_FAILED")
    rk.produce("mytopic")
    rk.test_flush(5)
    error = rk.send_offsets([("srctopic4", 3, 12)])
    assert error is not None, "expected send_offsets_to_transaction() to fail"
    assert error.txn_requires_abort(), error
    assert error_of(rk.p.abort_transaction, INFINITE) is None

    # 2. Fail on AddPartitionsToTxn (after a Metadata refresh clears the topic's auth error)
    assert len(rk.p.list_topics("mytopic", timeout=5).topics["mytopic"].partitions) > 0
    rk.p.begin_transaction()
    rk.push("AddPartitionsToTxn", "TOPIC_AUTHORIZATION_FAILED")
    rk.produce("mytopic")
    assert error_of(rk.p.commit_transaction, 5) is not None, "commit_transaction should have failed"
    assert error_of(rk.p.abort_transaction, INFINITE) is None

    # 3. Fail on AddOffsetsToTxn
    rk.p.begin_transaction()
    rk.produce("mytopic")
    rk.push("AddOffsetsToTxn", "GROUP_AUTHORIZATION_FAILED")
    error = rk.send_offsets([("srctopic4", 3, 12)])
    assert error is not None and error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, error
    assert error_of(rk.p.commit_transaction, 5) is not None, "commit_transaction should have failed"
    error = error_of(rk.p.abort_transaction, INFINITE)
    assert error is None, f"{error}; what the client sent: {rk.trail('Produce', 'AddPartitionsToTxn', 'EndTxn')}"

    rk.check_errors()
    assert "TOPIC_AUTHORIZATION_FAILED" in rk.errors_seen("Produce")
    assert "TOPIC_AUTHORIZATION_FAILED" in rk.errors_seen("AddPartitionsToTxn")
    assert "GROUP_AUTHORIZATION_FAILED" in rk.errors_seen("AddOffsetsToTxn")
    assert rk.errors_seen("EndTxn")[-1] == "NONE"
    rk.destroy()


# --- #7, #8 -------------------------------------------------------------------------------------

SLOW_REINIT_MS = 3000  # scaled: the C test holds the bump's answer 10 s and sleeps 12 s


@pytest.mark.parametrize("with_sleep", [False, True], ids=["without_sleep", "with_sleep"])
def test_abort_times_out_retriably_while_the_epoch_bump_is_slow_and_then_resumes(
        kafka: KafkaCluster, with_sleep: bool) -> None:
    """do_test_txn_slow_reinit(false) (#7) and (true) (#8): the KIP-360 epoch bump is answered
    later than abort_transaction(100 ms) waits, so abort fails with a retriable, non-fatal
    error; abort called again (after a sleep longer than the delay, or at once) succeeds and the
    producer runs a new transaction. The delay is scaled from 10 s to 3 s, the sleep from 12 s
    to 4 s."""
    txnid = f"myTxnId-slow-reinit-{with_sleep}"
    rk = bump_after_unknown_producer_id(kafka, txnid, f"txn_slow_reinit_{with_sleep}",
                                        {"error": "NONE", "delay_ms": SLOW_REINIT_MS})

    error = error_of(rk.p.commit_transaction, INFINITE)
    assert error is not None, "expected commit_transaction() to fail"
    assert not error.fatal(), error
    assert error.txn_requires_abort(), error

    started = time.monotonic()
    error = error_of(rk.p.abort_transaction, 0.1)
    assert error is not None, "expected abort_transaction() to fail"
    assert not error.fatal(), error
    assert error.retriable(), error
    assert time.monotonic() - started < SLOW_REINIT_MS / 1000

    if with_sleep:
        time.sleep(SLOW_REINIT_MS / 1000 + 1)

    assert error_of(rk.p.abort_transaction, INFINITE) is None
    rk.p.begin_transaction()
    rk.produce("mytopic", 0)
    assert error_of(rk.p.commit_transaction, INFINITE) is None

    rk.check_errors()
    slow = [r for r in rk.log("InitProducerId") if r.get("fault") == "delay"]
    assert len(slow) == 1 and slow[0]["broker"] == 2 and slow[0]["producer_id"] >= 0  # the bump, held
    rk.destroy()


# --- #9 -----------------------------------------------------------------------------------------

# (errors injected on EndTxn, expected code, retriable, abortable, fatal, abort succeeds anyway)
ENDTXN_SCENARIOS: list[tuple[list[str], int, bool, bool, bool, bool]] = [
    (["COORDINATOR_NOT_AVAILABLE"] * 2, NO_ERROR, False, False, False, False),
    (["NOT_COORDINATOR"] * 2, NO_ERROR, False, False, False, False),
    (["COORDINATOR_LOAD_IN_PROGRESS"], NO_ERROR, False, False, False, False),
    (["CONCURRENT_TRANSACTIONS"] * 3, NO_ERROR, False, False, False, False),
    (["UNKNOWN_PRODUCER_ID"], KafkaError.UNKNOWN_PRODUCER_ID, False, True, False, True),
    (["INVALID_PRODUCER_ID_MAPPING"], KafkaError.INVALID_PRODUCER_ID_MAPPING, False, True, False, True),
    (["INVALID_PRODUCER_EPOCH"], KafkaError._FENCED, False, False, True, False),
    (["PRODUCER_FENCED"], KafkaError._FENCED, False, False, True, False),
    (["TRANSACTIONAL_ID_AUTHORIZATION_FAILED"], KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
     False, False, True, False),
    (["GROUP_AUTHORIZATION_FAILED"], KafkaError.GROUP_AUTHORIZATION_FAILED, False, True, False, False),
    # librdkafka's INVALID_MSG_SIZE is Kafka's code 4, INVALID_FETCH_SIZE ("any other error")
    (["INVALID_FETCH_SIZE"], KafkaError.INVALID_MSG_SIZE, False, True, False, False),
    (["PRODUCER_FENCED"], KafkaError._FENCED, False, False, True, False),
]


def test_end_txn_errors_give_the_expected_error_and_flags_on_commit_and_abort(kafka: KafkaCluster) -> None:
    """do_test_txn_endtxn_errors(): each EndTxn error of the table, for commit, flush+commit,
    abort and flush+abort: retriable coordinator errors recover, UNKNOWN_PRODUCER_ID and
    INVALID_PRODUCER_ID_MAPPING are abortable (an abort recovers through an epoch bump), fencing
    and TRANSACTIONAL_ID_AUTHORIZATION_FAILED are fatal, the rest abortable.

    After a fatal error the C test gets a new producer *and a new mock cluster*; here the new
    producer reuses the transactional id on the same brokers, so its InitProducerId fences the
    dead producer and aborts its open transaction first, as Kafka does."""
    txnid = "myTxnId-endtxn-errors"
    rk: TxnProducer | None = None
    created = 0
    for i, (errors, exp_err, exp_retriable, exp_abortable, exp_fatal, abort_recovers) in enumerate(ENDTXN_SCENARIOS):
        for j in range(4):
            commit, with_flush = j < 2, bool(j & 1)
            what = f"scenario #{i} {'commit' if commit else 'abort'}{'&flush' if with_flush else ''} ({errors})"
            if rk is None:
                created += 1
                rk = TxnProducer(kafka, txnid, "txn_endtxn_errors")
                assert error_of(rk.p.init_transactions, 5) is None, what
            assert error_of(rk.p.begin_transaction) is None, what
            rk.ignore_dr_err = not commit
            rk.produce("mytopic")
            if with_flush:
                rk.test_flush(INFINITE)
            assert rk.send_offsets([("srctopic4", 3, 12), ("srctopic64", 60, 99999)]) is None, what

            rk.push("EndTxn", *errors)
            error = error_of(rk.p.commit_transaction if commit else rk.p.abort_transaction, 5)

            if exp_err == NO_ERROR or (not commit and abort_recovers):
                assert error is None, f"{what}: expected success, got {error}"
                continue
            assert error is not None, f"{what}: expected {exp_err}"
            assert error.code() == exp_err, f"{what}: expected {exp_err}, not {error}"
            assert error.retriable() == exp_retriable, f"{what}: retriable mismatch: {error}"
            assert error.txn_requires_abort() == exp_abortable, f"{what}: abortable mismatch: {error}"
            assert error.fatal() == exp_fatal, f"{what}: fatal mismatch: {error}"
            if error.fatal():
                rk.check_drs()
                rk.check_errors(KafkaError._FENCED, KafkaError._FATAL, KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
                rk.destroy()
                rk = None
            elif error.txn_requires_abort():
                assert error_of(rk.p.abort_transaction, INFINITE) is None, f"{what}: abort after abortable error"
            else:
                pytest.fail(f"{what}: permanent error without enough hints to proceed: {error}")
    # the last sub-case (#11 flush+abort) is fatal; every fatal sub-case but the last was followed
    # by a new producer
    assert rk is None and created == 1 + 4 * 4 - 1
    endtxn = [r["error"] for r in kafka.requests.list(api="EndTxn", client_id="txn_endtxn_errors")]
    assert endtxn.count("INVALID_FETCH_SIZE") == 4
    # PRODUCER_FENCED is INVALID_PRODUCER_EPOCH to EndTxn v0-1 (Kafka's KIP-588 mapping)
    assert endtxn.count("PRODUCER_FENCED") + endtxn.count("INVALID_PRODUCER_EPOCH") == 12


# --- #10, #11 -----------------------------------------------------------------------------------

ENDTXN_RETRIABLE = ["COORDINATOR_NOT_AVAILABLE"] + ["NOT_COORDINATOR"] * 6 + ["COORDINATOR_LOAD_IN_PROGRESS"] \
    + ["NOT_COORDINATOR"] * 2


def test_end_txn_retriable_errors_are_retried_until_commit_and_abort_succeed(kafka: KafkaCluster) -> None:
    """do_test_txn_endtxn_infinite(): ten retriable EndTxn errors (coordinator not available, not
    coordinator, loading) before success; commit and then abort, each with an infinite timeout,
    succeed."""
    rk = TxnProducer(kafka, "myTxnId-endtxn-infinite", "txn_endtxn_infinite")
    rk.p.init_transactions(5)
    for commit in (True, False):
        rk.ignore_dr_err = True
        rk.p.begin_transaction()
        rk.produce("mytopic")
        rk.push("EndTxn", *ENDTXN_RETRIABLE)
        time.sleep(1)
        error = error_of(rk.p.commit_transaction if commit else rk.p.abort_transaction, INFINITE)
        assert error is None, f"expected {'commit' if commit else 'abort'} to succeed, got {error}"
    rk.check_errors()
    assert rk.errors_seen("EndTxn") == (ENDTXN_RETRIABLE + ["NONE"]) * 2
    rk.destroy()


def test_end_txn_retries_longer_than_the_call_timeout_give_a_retriable_timeout_and_resume(
        kafka: KafkaCluster) -> None:
    """do_test_txn_endtxn_timeout(): the same ten EndTxn errors, with commit/abort given 100 ms:
    the call fails with a retriable _TIMED_OUT, and the same call again (infinite timeout)
    succeeds, the retries having carried on."""
    rk = TxnProducer(kafka, "myTxnId-endtxn-timeout", "txn_endtxn_timeout")
    rk.p.init_transactions(5)
    for commit in (True, False):
        call = rk.p.commit_transaction if commit else rk.p.abort_transaction
        rk.ignore_dr_err = True
        rk.p.begin_transaction()
        rk.produce("mytopic")
        rk.push("EndTxn", *ENDTXN_RETRIABLE)
        time.sleep(1)
        error = error_of(call, 0.1)
        assert error is not None, "expected the call to fail"
        assert error.code() == KafkaError._TIMED_OUT, error
        assert error.retriable(), error
        assert error_of(call, INFINITE) is None
    rk.check_errors()
    assert rk.errors_seen("EndTxn") == (ENDTXN_RETRIABLE + ["NONE"]) * 2
    rk.destroy()


# --- #12 ----------------------------------------------------------------------------------------

def test_end_txn_answered_later_than_the_call_timeout_gives_a_retriable_timeout_and_resumes() -> None:
    """do_test_txn_endtxn_timeout_inflight(): on one broker, the answers to EndTxn and its first
    retry are held longer than the request timeout, so commit/abort fails with a retriable
    _TIMED_OUT while EndTxn is in flight; called again it succeeds.

    Scaled: transaction.timeout.ms 5000 -> 2000 (socket.timeout.ms 4900 -> 1900), the answers
    held 10 s -> 4 s, the call timeout 4000 -> 1500 ms: still call timeout < request timeout <
    hold. Real Kafka: the first EndTxn is carried out when it arrives (the hold only delays its
    answer, as in the mock), and the retries are answered NONE because the transaction already
    completed in that direction (Kafka's idempotent EndTxn retry)."""
    with KafkaCluster(brokers=1, python=runtime_python()) as k1:
        create_topics(k1, NewTopic("mytopic", 4, 1))
        rk = TxnProducer(k1, "myTxnId", "txn_endtxn_timeout_inflight", **{"transaction.timeout.ms": 2000})
        rk.p.init_transactions(INFINITE)
        for commit in (True, False):
            call = rk.p.commit_transaction if commit else rk.p.abort_transaction
            rk.ignore_dr_err = True
            rk.p.begin_transaction()
            rk.produce("mytopic")
            rk.push("EndTxn", {"error": "NONE", "delay_ms": 4000}, {"error": "NONE", "delay_ms": 4000}, broker=1)
            time.sleep(1)
            error = error_of(call, 1.5)
            assert error is not None, "expected the call to fail"
            assert error.code() == KafkaError._TIMED_OUT, error
            assert error.retriable(), error
            assert error_of(call, INFINITE) is None
        rk.check_errors(KafkaError._TIMED_OUT)
        endtxn = rk.log("EndTxn")
        assert [e.get("fault") for e in endtxn] == ["delay", "delay", None] * 2, endtxn
        assert all(e["error"] == "NONE" for e in endtxn)
        rk.destroy()


# --- #13, #14 -----------------------------------------------------------------------------------

@pytest.mark.parametrize("down_coord", [
    True,
    # The client drops its coordinator connection while the AddPartitionsToTxn append waits for
    # the ISR that still holds the broker going down: the request is carried out all the same
    # (broker/net/server.py keeps a closed connection's request running, as Kafka's handlers do).
    False,
], ids=["coordinator_down", "leader_down"])
def test_every_message_is_delivered_and_committed_when_a_broker_was_down_in_the_transaction(
        kafka: KafkaCluster, down_coord: bool) -> None:
    """do_test_txn_broker_down_in_txn(true) (#13, the transaction coordinator down) and (false)
    (#14, the partition leader down): 500 messages, the broker down, flush(3 s), 500 more, 2 s,
    the broker up; commit succeeds and all 1000 delivery reports are successes.

    Real Kafka: a broker taken down hands its leaderships (the partition, or the coordinator's
    __transaction_state partition) to another in-sync replica, where the mock keeps the down
    broker as leader; the assertions are the C test's."""
    what = "coordinator" if down_coord else "leader"
    topic, txnid = f"test-{what}-down", f"txnid-{what}-down"
    coord_id, leader_id = 1, 2
    down_id = coord_id if down_coord else leader_id
    create_topics(kafka, NewTopic(topic, 1, 3))
    rk = TxnProducer(kafka, txnid, f"txn_broker_down_in_txn_{what}")
    kafka.set_coordinator("transaction", txnid, coord_id)
    kafka.set_partition_leader(topic, 0, leader_id)

    rk.p.init_transactions(5)
    rk.p.begin_transaction()
    remains = [0]
    rk.produce_msgs(topic, 0, 500, remains)
    kafka.broker(down_id).down()
    rk.p.flush(3)
    rk.produce_msgs(topic, 500, 500, remains)
    time.sleep(2)
    kafka.broker(down_id).up()

    assert error_of(rk.p.commit_transaction, INFINITE) is None
    assert remains[0] == 0, f"{remains[0]} message(s) were not produced"
    assert rk.dr_count == 1000
    rk.check_drs()
    rk.check_errors(KafkaError._TRANSPORT)
    assert rk.errors_seen("EndTxn")[-1] == "NONE"
    rk.destroy()


# --- #15 ----------------------------------------------------------------------------------------

def test_init_transactions_fails_fatally_when_the_brokers_do_not_offer_init_producer_id(kafka: KafkaCluster) -> None:
    """do_test_txns_not_supported(): InitProducerId left out of ApiVersions
    (rd_kafka_mock_set_apiversion(22, -1, -1)): init_transactions fails with
    _UNSUPPORTED_FEATURE and produce then fails with _FATAL.

    The C test adds the brokers after hiding the API (rd_kafka_brokers_add); Python cannot, so
    the API is hidden before the producer is created."""
    kafka.set_api_version("InitProducerId", -1, -1)
    errors: list[KafkaError] = []
    p = Producer({"bootstrap.servers": kafka.bootstrap, "transactional.id": "myxnid",
                  "client.id": "txns_not_supported", "error_cb": errors.append})
    error = error_of(p.init_transactions, 5)
    assert error is not None, "expected init_transactions() to fail"
    assert error.code() == KafkaError._UNSUPPORTED_FEATURE, error
    with pytest.raises(KafkaException) as produce_error:
        p.produce("test", key=b"test")
    assert produce_error.value.args[0].code() == KafkaError._FATAL
    # the C test never serves error_cb here; served, it carries only the fatal error
    try:
        p.poll(0)
    except KafkaException as e:
        assert e.args[0].fatal()
    assert all(e.code() in (KafkaError._FATAL, KafkaError._UNSUPPORTED_FEATURE) for e in errors), errors
    assert kafka.requests.list(api="InitProducerId", client_id="txns_not_supported") == []
    assert kafka.requests.list(api="ApiVersions", client_id="txns_not_supported")


# --- #16, #17 -----------------------------------------------------------------------------------

def test_concurrent_transactions_on_add_offsets_to_txn_is_retried(kafka: KafkaCluster) -> None:
    """do_test_txns_send_offsets_concurrent_is_retried(): six CONCURRENT_TRANSACTIONS answers to
    AddOffsetsToTxn are retried; send_offsets and commit succeed."""
    rk = TxnProducer(kafka, "txnid-send-offsets-concurrent", "txns_send_offsets_concurrent_is_retried")
    rk.ignore_dr_err = True
    rk.p.init_transactions(5)
    rk.p.begin_transaction()
    rk.produce("mytopic")
    rk.test_flush(5)
    rk.push("AddOffsetsToTxn", *["CONCURRENT_TRANSACTIONS"] * 6)
    assert rk.send_offsets([("srctopic4", 3, 12)]) is None
    assert error_of(rk.p.commit_transaction, 5) is None
    rk.check_errors()
    assert rk.errors_seen("AddOffsetsToTxn") == ["CONCURRENT_TRANSACTIONS"] * 6 + ["NONE"]
    assert rk.errors_seen("TxnOffsetCommit") == ["NONE"]
    rk.destroy()


def test_send_offsets_with_no_offsets_succeeds_twice_and_sends_nothing(kafka: KafkaCluster) -> None:
    """do_test_txns_send_offsets_non_eligible(): send_offsets_to_transaction() with an empty
    offset list succeeds at once, twice, and commit succeeds; no AddOffsetsToTxn or
    TxnOffsetCommit is sent."""
    rk = TxnProducer(kafka, "txnid-send-offsets-non-eligible", "txns_send_offsets_non_eligible")
    rk.ignore_dr_err = True
    rk.p.init_transactions(5)
    rk.p.begin_transaction()
    rk.produce("mytopic")
    rk.test_flush(5)
    assert rk.send_offsets([]) is None
    assert rk.send_offsets([]) is None
    assert error_of(rk.p.commit_transaction, 5) is None
    rk.check_errors()
    assert rk.log("AddOffsetsToTxn") == [] and rk.log("TxnOffsetCommit") == []
    assert rk.errors_seen("EndTxn") == ["NONE"]
    rk.destroy()


# --- #18 ----------------------------------------------------------------------------------------

def test_send_offsets_fails_abortably_while_its_requests_are_retried(kafka: KafkaCluster) -> None:
    """do_test_txn_coord_req_destroy() (ESC-4424): CONCURRENT_TRANSACTIONS on AddPartitionsToTxn
    and AddOffsetsToTxn and REQUEST_TIMED_OUT then TOPIC_AUTHORIZATION_FAILED on Produce, round
    after round; send_offsets fails at least once, always with an abortable error, and every abort
    succeeds. The pushed errors pile up from one round to the next, as on the mock's stacks.
    Scaled: five rounds instead of fifteen (each waits the C test's 2 s)."""
    rk = TxnProducer(kafka, "txnid-coord-req-destroy", "txn_coord_req_destroy")
    rk.ignore_dr_err = True
    rk.p.init_transactions(5)
    errcnt = 0
    for i in range(5):
        rk.p.begin_transaction()
        rk.push("AddPartitionsToTxn", "CONCURRENT_TRANSACTIONS", "CONCURRENT_TRANSACTIONS")
        rk.push("AddOffsetsToTxn", "CONCURRENT_TRANSACTIONS", "CONCURRENT_TRANSACTIONS", "CONCURRENT_TRANSACTIONS")
        rk.produce("mytopic")
        rk.push("Produce", "REQUEST_TIMED_OUT", "REQUEST_TIMED_OUT", "TOPIC_AUTHORIZATION_FAILED",
                "TOPIC_AUTHORIZATION_FAILED")
        rk.produce("mytopic")
        error = rk.send_offsets([("srctopic4", 3, 12)])
        if error is not None:
            assert error.txn_requires_abort(), f"expected an abortable error for #{i}: {error}"
            errcnt += 1
        time.sleep(2)  # "Allow time for internal retries" (and the Metadata refresh that clears the
        # topic's authorization error, or the next produce() fails at once)
        assert error_of(rk.p.abort_transaction, 5) is None, f"abort #{i}"
    assert errcnt > 0, "expected at least one send_offsets_to_transaction() failure"
    rk.check_errors()
    rk.destroy()


# --- #19 ----------------------------------------------------------------------------------------

MULTI_FIND_RTT_MS = 2000  # scaled from 4000 (and the settling sleep from 5 s to 2.5 s)


def test_send_offsets_succeeds_when_brokers_bounce_as_its_slow_add_offsets_answer_arrives(
        kafka: KafkaCluster) -> None:
    """do_test_txn_coord_req_multi_find() (ESC-4444): every broker answers late (4 s in C, 2 s
    here); when the AddOffsetsToTxn answer reaches the client, broker 2 goes down and up, then
    broker 3 goes down and up and loses its delay; send_offsets and the commit succeed.

    The C test bounces the brokers from an on_response_received interceptor, which Python does
    not have: here the request log gives the time AddOffsetsToTxn arrived, and the bounces are
    made when its held answer is released (arrival + handling + the delay). The C check that the
    interceptor ran becomes: the bounces happened while send_offsets was still running.

    Adapted: the mock's rtt delays what the client is answered, and the mock has no replication.
    Our ``broker(n).rtt()`` also holds the answers to the other brokers' replica fetches, so with
    every broker 2-4 s late a TxnOffsetCommit waits for its __consumer_offsets write to reach the
    ISR longer than offsets.commit.timeout.ms (5 s) and is answered COORDINATOR_NOT_AVAILABLE
    (Kafka's mapping of the REQUEST_TIMED_OUT), again on every retry, and send_offsets never
    succeeds. The delay is therefore a fault rule holding every answer of that broker *to this
    client* (what the mock's rtt is). Real Kafka also: the RF 1 partitions of a broker that is
    down are offline until it is back."""
    txnid, groupid, topic = "txnid-multi-find", "mygroupid", "mytopic-multi-find"
    create_topics(kafka, NewTopic(topic, num_partitions=3, replica_assignment=[[1], [2], [3]]))
    rk = TxnProducer(kafka, txnid, "txn_coord_req_multi_find", **{"enable.sparse.connections": False})
    kafka.set_coordinator("transaction", txnid, 1)
    kafka.set_coordinator("group", groupid, 1)
    for p in range(3):
        assert kafka.topic(topic)["partitions"][p]["leader"] == p + 1

    rk.p.init_transactions(5)
    rk.p.begin_transaction()
    for p in range(3):
        rk.produce(topic, p)
    rk.test_flush(5)

    delays = {b: rk.client_rtt(b, MULTI_FIND_RTT_MS) for b in (1, 2, 3)}
    result: list[KafkaError | None] = []
    call = threading.Thread(target=lambda: result.append(rk.send_offsets([("srctopic4", 3, 12)], groupid)))
    call.start()
    add_offsets = wait_for("the AddOffsetsToTxn answer", lambda: [r for r in rk.log("AddOffsetsToTxn")
                                                                  if r["answered"] != "pending"])[0]
    released = (add_offsets["at_ms"] + add_offsets["duration_ms"] + MULTI_FIND_RTT_MS) / 1000
    time.sleep(max(0.0, released - time.time()))
    kafka.broker(2).down()
    kafka.broker(2).up()
    kafka.broker(3).down()
    kafka.broker(3).up()
    kafka.faults.remove(delays.pop(3))
    bounced_during_call = call.is_alive()
    call.join(INFINITE)
    assert not call.is_alive() and result == [None], f"send_offsets_to_transaction() failed: {result}"

    for rule in delays.values():
        kafka.faults.remove(rule)
    time.sleep(2.5)
    assert error_of(rk.p.commit_transaction, 5) is None
    assert bounced_during_call, "the brokers were bounced after send_offsets had returned"
    rk.check_drs()
    rk.check_errors(KafkaError._TRANSPORT)
    rk.destroy()


# --- #20 ----------------------------------------------------------------------------------------

def test_a_third_partition_is_added_while_add_partitions_requests_are_outstanding(kafka: KafkaCluster) -> None:
    """do_test_txn_addparts_req_multi() (ESC-4410): the transaction coordinator answers 1 s late;
    produce to p0, 0.5 s later to p1, then (once the first AddPartitionsToTxn answer is back)
    to p2; commit(10 s) succeeds, all three partitions are in the transaction.

    The C test waits for "two" AddPartitionsToTxn answers counted by an on_response_received
    interceptor, which fires twice per answer: it waits for the first answer. Here the request
    log gives the first AddPartitionsToTxn's arrival and handling time, and the wait ends when
    its held answer is released. (Our rtt also holds broker 2's answers to the followers of its
    __transaction_state partition, so each transaction state change takes 1-2 s longer than in
    the mock; the scenario only gets slower.)"""
    txnid, topic, txn_coord = "txnid-addparts-multi", "mytopic-addparts-multi", 2
    create_topics(kafka, NewTopic(topic, num_partitions=3, replica_assignment=[[1], [1], [1]]))
    rk = TxnProducer(kafka, txnid, "txn_addparts_req_multi", **{"linger.ms": 0, "message.timeout.ms": 9000})
    kafka.set_coordinator("transaction", txnid, txn_coord)

    rk.p.init_transactions(5)
    rk.p.begin_transaction()
    rk.produce(topic, value=b"seed")
    assert error_of(rk.p.commit_transaction, 5) is None

    rk.p.begin_transaction()
    since = max(r["seq"] for r in kafka.requests.list(client_id=rk.name))
    kafka.broker(txn_coord).rtt(1000)
    rk.produce(topic, 0)
    time.sleep(0.5)
    rk.produce(topic, 1)
    first = wait_for("the first AddPartitionsToTxn answer", lambda: [
        r for r in kafka.requests.list(api="AddPartitionsToTxn", client_id=rk.name, since=since)
        if r["answered"] != "pending"])[0]
    time.sleep(max(0.0, (first["at_ms"] + first["duration_ms"] + 1000) / 1000 - time.time()))
    rk.produce(topic, 2)
    time.sleep(1)
    assert error_of(rk.p.commit_transaction, 10) is None

    added = {p for r in kafka.requests.list(api="AddPartitionsToTxn", client_id=rk.name, since=since)
             if r["error"] == "NONE" for p in r["topics"][topic]}
    assert added == {0, 1, 2}
    assert rk.dr_count == 4
    rk.check_drs()
    rk.check_errors()
    rk.destroy()


# --- #21 ----------------------------------------------------------------------------------------

def test_request_timeouts_in_send_offsets_give_a_retriable_timeout(kafka: KafkaCluster) -> None:
    """do_test_txns_no_timeout_crash() (#2913): with socket.timeout.ms 1 s and every broker
    answering 2 s late, send_offsets fails with a retriable _TIMED_OUT (no crash); with the delay
    gone the same send_offsets succeeds. The producer is destroyed without ending the
    transaction."""
    # transaction.timeout.ms 30 s rather than the C test's 5 s: the mock has no transaction timeout,
    # Kafka's coordinator would abort (and fence) a 5 s transaction while every answer is held 2 s
    rk = TxnProducer(kafka, "txnid-no-timeout-crash", "txns_no_timeout_crash",
                     **{"socket.timeout.ms": 1000, "transaction.timeout.ms": 30000})
    rk.p.init_transactions(5)
    rk.p.begin_transaction()
    rk.produce("mytopic")
    rk.test_flush(INFINITE)

    for b in (1, 2, 3):
        kafka.broker(b).rtt(2000)
    # C: timeout -1, which librdkafka caps at what remains of the transaction's timeout (5 s there)
    error = rk.send_offsets([("srctopic4", 3, 12)], timeout=5)
    assert error is not None, "expected send_offsets_to_transaction() to fail"
    assert error.code() == KafkaError._TIMED_OUT, error
    assert error.retriable(), error

    for b in (1, 2, 3):
        kafka.broker(b).rtt(0)
    assert rk.send_offsets([("srctopic4", 3, 12)]) is None
    rk.check_drs()
    rk.destroy()


def test_a_transactional_request_abandoned_by_its_client_still_completes_on_the_broker(kafka: KafkaCluster) -> None:
    """Minimal reproduction of the broker bug #21 ran into (not a 0105 scenario): the client
    gives up on an AddOffsetsToTxn (socket.timeout.ms 1 s) while the coordinator still waits for
    its __transaction_state write to replicate (broker 1 answers the followers' fetches 1.5 s
    late too). The first one completes on the broker all the same, as in Kafka: once the delay is
    gone, the same AddOffsetsToTxn succeeds (the group's partition is in the transaction). Before
    broker/net/server.py stopped cancelling a closed connection's request, the transition stayed
    pending and every later call was answered CONCURRENT_TRANSACTIONS."""
    txnid = "txnid-abandoned-add-offsets"
    rk = TxnProducer(kafka, txnid, "abandoned_add_offsets", **{"socket.timeout.ms": 1000})
    kafka.set_coordinator("transaction", txnid, 1)
    rk.p.init_transactions(5)
    rk.p.begin_transaction()
    kafka.broker(1).rtt(1500)
    error = rk.send_offsets([("srctopic4", 3, 12)], timeout=2)
    assert error is not None and error.code() in (KafkaError._TIMED_OUT, KafkaError._TRANSPORT), error
    kafka.broker(1).rtt(0)
    time.sleep(2)  # every held answer released, the followers caught up
    first = rk.log("AddOffsetsToTxn")[0]
    assert first["error"] == "NONE", first  # carried out to the end though the client had left
    error = rk.send_offsets([("srctopic4", 3, 12)], timeout=3)
    assert error is None, f"{error}; AddOffsetsToTxn answers: {rk.errors_seen('AddOffsetsToTxn')}"
    rk.destroy()


# --- #22 ----------------------------------------------------------------------------------------

def test_cluster_authorization_failure_on_init_producer_id_is_fatal(kafka: KafkaCluster) -> None:
    """do_test_txn_auth_failure(InitProducerId, CLUSTER_AUTHORIZATION_FAILED):
    init_transactions fails with CLUSTER_AUTHORIZATION_FAILED, fatal and not retriable."""
    rk = TxnProducer(kafka, "txnid-auth-failure", "txn_auth_failure_InitProducerId")
    rk.push("InitProducerId", "CLUSTER_AUTHORIZATION_FAILED")
    error = error_of(rk.p.init_transactions, 5)
    assert error is not None, "expected init_transactions() to fail"
    assert error.code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED, error
    assert error.fatal(), error
    assert not error.retriable(), error
    assert rk.errors_seen("InitProducerId") == ["CLUSTER_AUTHORIZATION_FAILED"]
    rk.destroy()
