"""``--brokers 3`` as users run it (the runtime install, a separate process), driven by stock
clients and the control endpoint: confluent-kafka (librdkafka) produces idempotently with
acks=all to a topic with RF 3 and min.insync.replicas=2 while a follower and then the leader go
down; a transactional producer commits while its coordinator's broker is down; read_committed
sees every acknowledged record exactly once, in order."""

from __future__ import annotations

import json
import time
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker_process import BrokerProcess, free_port_block

pytestmark = pytest.mark.timeout(180)


def _control(port: int, method: str, path: str, body: dict | None = None) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


@pytest.fixture
def cluster(tmp_path):
    base = free_port_block(4)  # three brokers and the control endpoint
    control_port = base + 3
    process = BrokerProcess(tmp_path / "data", port=base, overrides={
        "cluster.brokers": "3", "control.port": str(control_port), "replica.lag.time.max.ms": "3000",
        "transaction.state.log.num.partitions": "5", "offsets.topic.num.partitions": "5"}).start()
    process.wait_for_cluster(control_port)
    process.control_port = control_port  # type: ignore[attr-defined]
    yield process
    assert process.stop() == 0, process.log_tail()


def _bootstrap(process: BrokerProcess) -> str:
    return ",".join(f"127.0.0.1:{process.port + i}" for i in range(3))


def _read_all(bootstrap: str, topic: str, partitions: int, expected: int) -> list[tuple[int, bytes]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "isolation.level": "read_committed",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 30
    while len(out) < expected and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            out.append((msg.partition(), msg.value()))
    consumer.close()
    return out


def _confluent_producer(bootstrap: str, acked: list[tuple[int, int, bytes]]):
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                         "linger.ms": 5})

    def on_delivery(err, msg):
        assert err is None, err
        acked.append((msg.partition(), msg.offset(), msg.value()))

    def produce(start: int, end: int) -> None:
        for i in range(start, end):
            producer.produce("events", f"e{i}".encode(), partition=i % 3, on_delivery=on_delivery)
            producer.poll(0)
        assert producer.flush(60) == 0

    return produce, lambda: None


def _kafka_python_producer(bootstrap: str, acked: list[tuple[int, int, bytes]]):
    from kafka import KafkaProducer

    # metadata_max_age_ms: kafka-python only ever asks the brokers its last Metadata listed (no
    # re-bootstrap, KIP-899); after two of three were down that is one broker, and when that one
    # goes down in turn it would be left with nobody to ask. Kafka lists live brokers alone too.
    producer = KafkaProducer(bootstrap_servers=bootstrap.split(","), enable_idempotence=True, acks="all",
                             linger_ms=5, retries=2**31 - 1, request_timeout_ms=10000, metadata_max_age_ms=1000)

    def produce(start: int, end: int) -> None:
        futures = [(producer.send("events", f"e{i}".encode(), partition=i % 3), f"e{i}".encode())
                   for i in range(start, end)]
        for future, value in futures:
            md = future.get(timeout=60)
            acked.append((md.partition, md.offset, value))

    return produce, producer.close


def _refused_with_one_in_sync(client: str, bootstrap: str) -> str:
    """The error a producer that does not retry gets for an acks=all record with one replica in sync."""
    if client == "confluent-kafka":
        errors: list[str] = []
        once = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": False, "acks": "all",
                         "retries": 0, "message.timeout.ms": 20000})
        once.produce("events", b"refused", partition=0,
                     on_delivery=lambda err, _msg: errors.append(err.name() if err else "NONE"))
        once.flush(30)
        return errors[0]
    from kafka import KafkaProducer
    from kafka.errors import KafkaError as KafkaPythonError

    once = KafkaProducer(bootstrap_servers=bootstrap.split(","), acks="all", retries=0, enable_idempotence=False)
    try:
        once.send("events", b"refused", partition=0).get(timeout=30)
        return "NONE"
    except KafkaPythonError as e:
        return type(e).__name__
    finally:
        once.close()


def _wait_full_isr(port: int, topic: str = "events") -> None:
    deadline = time.monotonic() + 30
    while any(len(p["isr"]) < 3 for p in _control(port, "GET", f"/topics/{topic}")["partitions"]):
        assert time.monotonic() < deadline, "the brokers never rejoined the ISR"
        time.sleep(0.2)


@pytest.mark.parametrize("client", ["confluent-kafka", "kafka-python"])
def test_idempotent_acks_all_through_a_follower_and_a_leader_going_down(cluster, client):
    port = cluster.control_port
    admin = AdminClient({"bootstrap.servers": _bootstrap(cluster)})
    admin.create_topics([NewTopic("events", 3, 3, config={"min.insync.replicas": "2"})])["events"].result(30)
    acked: list[tuple[int, int, bytes]] = []
    make = _confluent_producer if client == "confluent-kafka" else _kafka_python_producer
    produce, close = make(_bootstrap(cluster), acked)

    produce(0, 300)
    leader0 = _control(port, "GET", "/topics/events")["partitions"][0]["leader"]
    follower = next(b for b in (1, 2, 3) if b != leader0)
    _control(port, "POST", f"/brokers/{follower}/down")  # the ISR shrinks; acks=all goes on with 2 of 3
    produce(300, 600)
    _control(port, "POST", f"/brokers/{follower}/up")
    _wait_full_isr(port)
    other = 6 - leader0 - follower  # two of three down: NOT_ENOUGH_REPLICAS, nothing appended
    _control(port, "POST", f"/brokers/{follower}/down")
    _control(port, "POST", f"/brokers/{other}/down")
    assert _refused_with_one_in_sync(client, _bootstrap(cluster)) in ("NOT_ENOUGH_REPLICAS", "NotEnoughReplicasError")
    _control(port, "POST", f"/brokers/{follower}/up")
    _control(port, "POST", f"/brokers/{other}/up")
    _wait_full_isr(port)
    time.sleep(1.5)  # kafka-python learns the returned brokers from its next Metadata (metadata_max_age_ms)
    _control(port, "POST", f"/brokers/{leader0}/down")  # clients fail over to the new leader
    produce(600, 900)
    close()
    assert len(acked) == 900
    got = _read_all(_bootstrap(cluster), "events", 3, 900)
    assert sorted(got) == sorted((p, v) for p, _o, v in acked)  # every acknowledged record, once
    for p in range(3):  # in the order they were acknowledged
        assert [v for q, v in got if q == p] == [v for q, _o, v in sorted(acked) if q == p]


def test_a_transaction_commits_while_its_coordinator_broker_is_down(cluster):
    port = cluster.control_port
    admin = AdminClient({"bootstrap.servers": _bootstrap(cluster)})
    admin.create_topics([NewTopic("orders", 2, 3, config={"min.insync.replicas": "2"})])["orders"].result(30)
    producer = Producer({"bootstrap.servers": _bootstrap(cluster), "transactional.id": "orders-tx"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(10):
        producer.produce("orders", f"a{i}".encode(), partition=i % 2)
    producer.commit_transaction(30)
    coordinator = _control(port, "GET", "/coordinators/transaction/orders-tx")["leader"]
    _control(port, "POST", f"/brokers/{coordinator}/down")  # the client finds the new coordinator
    assert _control(port, "GET", "/coordinators/transaction/orders-tx")["leader"] not in (coordinator, -1)
    producer.begin_transaction()
    for i in range(10):
        producer.produce("orders", f"b{i}".encode(), partition=i % 2)
    producer.commit_transaction(60)
    producer.begin_transaction()
    producer.produce("orders", b"aborted", partition=0)
    producer.abort_transaction(30)
    got = _read_all(_bootstrap(cluster), "orders", 2, 20)
    assert sorted(v for _p, v in got) == sorted([f"a{i}".encode() for i in range(10)]
                                                + [f"b{i}".encode() for i in range(10)])


def test_a_commit_survives_its_partition_leader_dying_before_followers_have_the_marker(cluster):
    """The coordinator completes a transaction only once the ISR of every partition holds its
    marker (Kafka writes markers with acks=-1). Here the followers of the partition receive the
    leader's data 2 s late; the leader gets the COMMIT marker and dies before they do. The new
    leader has the records without the marker, so the coordinator must write it there again:
    had it taken the dead leader's append as done, the transaction would stay open on the new
    leader forever and read_committed would never pass its first record."""
    port = cluster.control_port
    bootstrap = _bootstrap(cluster)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("ledger", 1, 3, config={"min.insync.replicas": "2"})])["ledger"].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "ledger-tx"})
    producer.init_transactions(30)
    coordinator = _control(port, "GET", "/coordinators/transaction/ledger-tx")["leader"]
    leader = _control(port, "GET", "/topics/ledger")["partitions"][0]["leader"]
    if leader == coordinator:  # the coordinator must outlive the leader, or it would reload PrepareCommit
        leader = next(b for b in (1, 2, 3) if b != coordinator)
        _control(port, "POST", "/topics/ledger/partitions/0/leader", {"broker": leader})
    _wait_full_isr(port, "ledger")
    producer.begin_transaction()
    for i in range(5):
        producer.produce("ledger", f"entry-{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    _control(port, "POST", "/faults", {"api": "Fetch", "broker": leader, "action": "delay", "delay_ms": 2000,
                                       "probability": 1.0})
    time.sleep(1.0)  # the fetches already waiting at the leader (replica.fetch.wait.max.ms) come back
    producer.commit_transaction(30)
    time.sleep(0.5)  # the marker is in the leader's log, not yet in its followers'
    _control(port, "POST", f"/brokers/{leader}/down", {"clean": False})
    _control(port, "DELETE", "/faults")
    got = _read_all(bootstrap, "ledger", 1, 5)
    assert sorted(v for _p, v in got) == [f"entry-{i}".encode() for i in range(5)]
    producer.begin_transaction()  # and the producer goes on
    producer.produce("ledger", b"entry-5", partition=0)
    producer.commit_transaction(30)
    _control(port, "POST", f"/brokers/{leader}/up")
    assert [v for _p, v in _read_all(bootstrap, "ledger", 1, 6)][-1] == b"entry-5"


def test_franz_go_produces_through_broker_failures(cluster):
    """tests/go/failover_test.go: franz-go (idempotent, acks=all) through a follower down, two down
    (NOT_ENOUGH_REPLICAS) and the leader down mid-stream."""
    import os
    import subprocess

    from tests.e2e.test_franz_go import GO, GO_MODULE

    if GO is None:
        pytest.skip("needs Go 1.21+")
    env = {**os.environ, "GOFLAGS": "-mod=mod -buildvcs=false", "FAILOVER_SEEDS": _bootstrap(cluster),
           "FAILOVER_CONTROL": f"http://127.0.0.1:{cluster.control_port}"}
    run = subprocess.run([GO, "test", "-run", "^TestFailover$", "-count=1", "-v", "."], cwd=GO_MODULE, env=env,
                         capture_output=True, text=True, timeout=300)
    out = run.stdout + run.stderr
    assert run.returncode == 0 and "--- PASS: TestFailover" in out, out[-4000:] + cluster.log_tail()
