"""The control endpoint's faults, request log and versions through the wire, against a broker from
the runtime install: an error answer where Kafka puts it, a held answer (delay, RTT) that keeps the
wire's order, a dropped answer (the connection goes silent), a close, rules loaded from a YAML file
at start-up, an emulated release's ApiVersions, and what the request log says a stock client did."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.producer.transaction import InitProducerIdRequest

from broker.testing import ControlError, KafkaCluster
from tests.differential.wire import ConnectionClosed, WireClient, build
from tests.support.runtime_env import runtime_python

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory):
    rules = tmp_path_factory.mktemp("faults") / "rules.yaml"
    rules.write_text("rules:\n"
                     "  - api: DescribeCluster\n"
                     "    error: CLUSTER_AUTHORIZATION_FAILED\n"
                     "    count: -1\n")
    with KafkaCluster(python=runtime_python(), faults=rules, data_dir=tmp_path_factory.mktemp("kafka")) as cluster:
        yield cluster


@pytest.fixture(autouse=True)
def _clean(kafka: KafkaCluster):
    yield
    for rule in kafka.faults.list()["rules"]:
        if rule.get("api") != "DescribeCluster":
            kafka.faults.remove(rule["id"])
    kafka.broker(1).rtt(0)
    kafka.emulate(None)


def _metadata(c: WireClient, version: int = 12):
    return c.send(build(MetadataRequest, version, topics=None, allow_auto_topic_creation=False,
                        include_topic_authorized_operations=False), version)


def test_rules_from_a_yaml_file_are_in_force_from_the_start(kafka: KafkaCluster) -> None:
    [rule] = [r for r in kafka.faults.list()["rules"] if r.get("api") == "DescribeCluster"]
    assert rule["error"] == "CLUSTER_AUTHORIZATION_FAILED" and rule["count"] == -1


def test_an_error_is_answered_where_kafka_puts_it_and_the_request_is_not_carried_out(kafka: KafkaCluster) -> None:
    kafka.faults.push("InitProducerId", "COORDINATOR_LOAD_IN_PROGRESS", {"error": "NOT_COORDINATOR", "delay_ms": 300})
    with WireClient(kafka.bootstrap) as c:
        answers = []
        for _ in range(3):
            started = time.monotonic()
            r = c.send(build(InitProducerIdRequest, 4, transactional_id=None, transaction_timeout_ms=1000,
                             producer_id=-1, producer_epoch=-1), 4)
            answers.append((r.error_code, r.producer_id, r.producer_epoch, time.monotonic() - started >= 0.3))
    assert answers[0] == (14, -1, -1, False)
    assert answers[1] == (16, -1, -1, True)
    assert answers[2][0] == 0 and answers[2][1] >= 0  # the push is used up
    logged = kafka.requests.list(api="InitProducerId")[-3:]
    assert [(e["error"], e.get("fault")) for e in logged] == [
        ("COORDINATOR_LOAD_IN_PROGRESS", "error COORDINATOR_LOAD_IN_PROGRESS"),
        ("NOT_COORDINATOR", "error NOT_COORDINATOR"), ("NONE", None)]
    assert logged[1]["duration_ms"] < 300  # the hold is the wire's, after the answer was made


def test_held_answers_keep_the_wires_order(kafka: KafkaCluster) -> None:
    """An RTT on the broker delays every answer; a request pipelined behind a slow one is answered
    after it, as on a real connection."""
    kafka.faults.add({"api": "Metadata", "delay_ms": 400})
    kafka.broker(1).rtt(100)
    with WireClient(kafka.bootstrap) as c:
        started = time.monotonic()
        c.sock.sendall(_frame(c, 3, 12, MetadataRequest, topics=None, allow_auto_topic_creation=False,
                              include_topic_authorized_operations=False)
                       + _frame(c, 18, 3, ApiVersionsRequest, client_software_name="t", client_software_version="1"))
        first, second = c.recv_frame(), c.recv_frame()
        took = time.monotonic() - started
    assert _correlation(first) < _correlation(second)
    assert 0.5 <= took < 3


def test_a_dropped_answer_leaves_the_connection_silent_and_the_request_carried_out(kafka: KafkaCluster) -> None:
    kafka.faults.add({"api": "InitProducerId", "action": "drop"})
    with WireClient(kafka.bootstrap, timeout=1.0) as c:
        c.sock.sendall(_frame(c, 22, 4, InitProducerIdRequest, transactional_id=None, transaction_timeout_ms=1000,
                              producer_id=-1, producer_epoch=-1))
        with pytest.raises(socket.timeout):
            c.recv_frame()
    [entry] = kafka.requests.list(api="InitProducerId")[-1:]
    assert entry["answered"] == "dropped" and entry["fault"] == "drop"


def test_a_close_instead_of_an_answer(kafka: KafkaCluster) -> None:
    kafka.faults.add({"api": "Metadata", "action": "close"})
    with WireClient(kafka.bootstrap) as c, pytest.raises(ConnectionClosed):
        _metadata(c)
    with WireClient(kafka.bootstrap) as c:  # the rule was for one request
        assert _metadata(c).brokers


def test_a_fault_on_one_topic_describes_only_that_topic_with_the_error(kafka: KafkaCluster) -> None:
    producer = Producer({"bootstrap.servers": kafka.bootstrap})
    for topic in ("visible", "hidden"):
        producer.produce(topic, b"x")
    assert producer.flush(20) == 0
    kafka.faults.set_topic_error("hidden", "UNKNOWN_TOPIC_OR_PARTITION")
    with WireClient(kafka.bootstrap) as c:
        r = _metadata(c)
    topics = {t.name: (t.error_code, len(t.partitions)) for t in r.topics}
    assert topics["hidden"] == (3, 0) and topics["visible"] == (0, 1)
    kafka.faults.set_topic_error("hidden", None)
    with WireClient(kafka.bootstrap) as c:
        assert {t.name: t.error_code for t in _metadata(c).topics}["hidden"] == 0


def test_a_stock_client_retries_and_the_log_shows_what_it_sent(kafka: KafkaCluster) -> None:
    kafka.faults.push("InitProducerId", "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR")
    kafka.requests.clear()
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "transactional.id": "logged-tx", "client.id": "app-1"})
    producer.init_transactions(30)
    inits = kafka.requests.list(api="InitProducerId", transactional_id="logged-tx")
    assert [e["error"] for e in inits] == ["COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR", "NONE"]
    assert {e["client_id"] for e in inits} == {"app-1"}
    assert kafka.requests.list(api="FindCoordinator", transactional_id="logged-tx")


def test_a_fatal_error_reaches_the_client_as_kafka_would_send_it(kafka: KafkaCluster) -> None:
    kafka.faults.add({"api": "InitProducerId", "transactional_id": "fenced-tx", "error": "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"})
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "transactional.id": "fenced-tx"})
    with pytest.raises(KafkaException) as e:
        producer.init_transactions(30)
    assert e.value.args[0].name() == "TRANSACTIONAL_ID_AUTHORIZATION_FAILED" and e.value.args[0].fatal()


def test_an_emulated_release_advertises_its_versions_and_refuses_others(kafka: KafkaCluster) -> None:
    kafka.emulate("3.0")
    with WireClient(kafka.bootstrap) as c:
        r = c.send(build(ApiVersionsRequest, 3, client_software_name="t", client_software_version="1"), 3)
        ranges = {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}
        assert ranges[0][1] == 9 and ranges[1][1] == 12 and 75 not in ranges  # Produce, Fetch; no DescribeTopicPartitions
        assert "transaction.version" not in {f.name for f in r.supported_features}
        with pytest.raises(ConnectionClosed):  # Metadata v12 is 3.0's newest; v13 is refused as 3.0 refuses it
            _metadata(c, 13)
    kafka.emulate(None)
    with WireClient(kafka.bootstrap) as c:
        assert _metadata(c, 13).brokers
    with pytest.raises(ControlError) as e:
        kafka.emulate("2.8")
    assert e.value.status == 400


def test_transaction_version_switches_while_running(kafka: KafkaCluster) -> None:
    def finalized() -> tuple[int, dict[str, int]]:
        with WireClient(kafka.bootstrap) as c:
            r = c.send(build(ApiVersionsRequest, 4, client_software_name="t", client_software_version="1"), 4)
        return r.finalized_features_epoch, {f.name: f.max_version_level for f in r.finalized_features}

    epoch, levels = finalized()
    assert levels["transaction.version"] == 2
    assert kafka.set_features(transaction_version=1)["finalized"]["transaction.version"] == 1
    later, levels = finalized()
    assert levels["transaction.version"] == 1 and later > epoch
    kafka.set_features(transaction_version=2)
    assert finalized()[1]["transaction.version"] == 2
    with pytest.raises(ControlError) as e:
        kafka.set_features(transaction_version=7)
    assert e.value.status == 409 and "INVALID_UPDATE_VERSION" in e.value.message


def _frame(c: WireClient, key: int, version: int, cls, **fields) -> bytes:
    """A request frame with the next correlation id, sent by hand to pipeline several."""
    c.correlation_id += 1
    request = build(cls, version, **fields)
    request.with_header(correlation_id=c.correlation_id, client_id=c.client_id)
    return bytes(request.encode(version=version, header=True, framed=True))


def _correlation(frame: bytes) -> int:
    return int.from_bytes(frame[:4], "big", signed=True)


def test_the_endpoint_is_off_unless_configured(tmp_path: Path) -> None:
    with KafkaCluster(python=runtime_python(), data_dir=tmp_path) as cluster:
        assert cluster.describe()["clock"]["virtual"] is False
        with pytest.raises(ControlError) as e:
            cluster.clock.advance(ms=1)
        assert e.value.status == 409
