"""/metrics after real workloads: a broker subprocess with ``metrics.port`` set, stock clients
(confluent-kafka) producing and consuming, then a scrape checked against what was done. The
transactional part runs when the broker serves EndTxn; the rest needs nothing optional.
The collectors and the endpoint in-process: tests/unit/broker/test_metrics.py."""

from __future__ import annotations

import time
import urllib.request
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from broker.ops.healthcheck import api_versions
from tests.support.broker_process import BrokerProcess, free_port

INIT_PRODUCER_ID, END_TXN = 22, 26


def scrape(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        assert r.headers["Content-Type"].startswith("text/plain")
        text = r.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def total(samples: dict[str, float], name: str, **labels: str) -> float:
    """Sum of the samples of ``name`` whose labels include ``labels``."""
    want = [f'{k}="{v}"' for k, v in labels.items()]
    return sum(v for k, v in samples.items()
               if (k == name or k.startswith(name + "{")) and all(w in k for w in want))


def by_partition(samples: dict[str, float], name: str, topic: str) -> dict[int, float]:
    out = {}
    for k, v in samples.items():
        if k.startswith(name + "{") and f'topic="{topic}"' in k:
            out[int(k.split('partition="')[1].split('"')[0])] = v
    return out


def create_topic(b: BrokerProcess, new: NewTopic) -> None:
    admin = AdminClient({"bootstrap.servers": b.bootstrap})  # kept alive until the result is in
    admin.create_topics([new])[new.topic].result(30)


@pytest.fixture(scope="module")
def metrics_broker(tmp_path_factory) -> BrokerProcess:
    b = BrokerProcess(tmp_path_factory.mktemp("metrics-broker") / "data",
                      overrides={"metrics.port": str(free_port())})
    b.metrics_port = int(b.overrides["metrics.port"])
    b.start()
    yield b
    assert b.stop() == 0, b.log_tail()


def _consume(bootstrap: str, topic: str, expect: int, isolation: str = "read_uncommitted") -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                  "auto.offset.reset": "earliest", "isolation.level": isolation})
    c.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < expect and time.monotonic() < deadline:
            got.extend(m.value() for m in c.consume(500, 0.5) if not m.error())
        end = time.monotonic() + 0.5
        while time.monotonic() < end:
            got.extend(m.value() for m in c.consume(500, 0.1) if not m.error())
    finally:
        c.close()
    return got


def test_counters_and_offsets_follow_a_produce_consume_workload(metrics_broker: BrokerProcess) -> None:
    b, port = metrics_broker, metrics_broker.metrics_port
    topic = f"m-{uuid.uuid4().hex[:8]}"
    create_topic(b, NewTopic(topic, 3, 1))
    before = scrape(port)
    idempotent = INIT_PRODUCER_ID in api_versions("127.0.0.1", b.port)
    n = 600
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5, "enable.idempotence": idempotent})
    for i in range(n):
        p.produce(topic, key=str(i).encode(), value=b"x" * 100)
    assert p.flush(30) == 0
    assert len(_consume(b.bootstrap, topic, n)) == n

    s = scrape(port)
    produces = total(s, "kafka_network_requestmetrics_requests_total", request="Produce") - \
        total(before, "kafka_network_requestmetrics_requests_total", request="Produce")
    assert produces >= 1
    assert total(s, "kafka_network_requestmetrics_requests_total", request="Fetch") > \
        total(before, "kafka_network_requestmetrics_requests_total", request="Fetch")
    for api in ("ApiVersions", "Metadata", "JoinGroup", "SyncGroup"):
        assert total(s, "kafka_network_requestmetrics_requests_total", request=api) >= 1, api
    # every request is timed once: histogram count == request count, per API
    assert total(s, "kafka_network_requestmetrics_totaltime_seconds_count", request="Produce") == \
        total(s, "kafka_network_requestmetrics_requests_total", request="Produce")
    assert total(s, "kafka_network_requestmetrics_totaltime_seconds_bucket", request="Produce", le="+Inf") == \
        total(s, "kafka_network_requestmetrics_totaltime_seconds_count", request="Produce")

    # bytes and records in/out of this topic
    size = sum(by_partition(s, "kafka_log_log_size", topic).values())
    assert total(s, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == n
    assert total(s, "kafka_server_brokertopicmetrics_bytesin_total", topic=topic) == size > n * 100
    assert not [k for k in s if k.startswith("kafka_server_brokertopicmetrics_messagesout")]  # not a Kafka metric
    assert total(s, "kafka_server_brokertopicmetrics_bytesout_total", topic=topic) >= size

    # per-partition offsets: log end offsets add up to the records produced; no transactions
    leo = by_partition(s, "kafka_log_log_logendoffset", topic)
    assert set(leo) == {0, 1, 2} and sum(leo.values()) == n
    assert by_partition(s, "kafka_log_log_highwatermark", topic) == leo
    assert by_partition(s, "kafka_log_log_laststableoffset", topic) == leo
    assert set(by_partition(s, "kafka_cluster_partition_laststableoffsetlag", topic).values()) == {0}
    assert set(by_partition(s, "kafka_log_log_logstartoffset", topic).values()) == {0}
    if idempotent:
        assert total(s, "kafka_server_replicamanager_produceridcount") >= 1
    assert total(s, "kafka_server_replicamanager_partitioncount") >= 3

    # connections and groups
    assert total(s, "kafka_server_socketservermetrics_connection_creation_total") >= 3
    assert total(s, "kafka_server_socketservermetrics_connection_count") >= 0
    assert total(s, "kafka_coordinator_group_groupmetadatamanager_numgroups") >= 1
    assert total(s, "kafka_coordinator_group_groupmetadatamanager_numoffsets") >= 1
    assert total(s, "kafka_coordinator_group_groupmetadatamanager_rebalances_total") >= 1  # the consumer's join
    assert total(s, "kafka_server_app_info") == 1


def test_produce_errors_are_counted_per_api_and_topic(metrics_broker: BrokerProcess) -> None:
    b, port = metrics_broker, metrics_broker.metrics_port
    topic = f"small-{uuid.uuid4().hex[:8]}"
    create_topic(b, NewTopic(topic, 1, 1, config={"max.message.bytes": "1000"}))
    errors: list = []
    p = Producer({"bootstrap.servers": b.bootstrap, "retries": 0})
    p.produce(topic, value=b"y" * 5000, on_delivery=lambda err, _m: errors.append(err))
    p.flush(30)
    assert errors and errors[0] is not None
    s = scrape(port)
    assert total(s, "kafka_network_requestmetrics_errors_total", request="Produce", error="MESSAGE_TOO_LARGE") >= 1
    assert total(s, "kafka_server_brokertopicmetrics_failedproducerequests_total", topic=topic) >= 1
    assert by_partition(s, "kafka_log_log_logendoffset", topic) == {0: 0}


def test_transactional_workload_moves_lso_and_transaction_metrics(metrics_broker: BrokerProcess) -> None:
    b, port = metrics_broker, metrics_broker.metrics_port
    if END_TXN not in api_versions("127.0.0.1", b.port):
        pytest.skip("this broker build does not serve EndTxn (transactions) yet")
    topic = f"txn-{uuid.uuid4().hex[:8]}"
    create_topic(b, NewTopic(topic, 1, 1))
    p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": f"tid-{topic}"})
    p.init_transactions(30)
    # an open transaction holds the LSO back: lag = records written since it began
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, value=f"c{i}".encode())
    p.flush(30)
    s = scrape(port)
    assert by_partition(s, "kafka_log_log_laststableoffset", topic) == {0: 0}
    assert by_partition(s, "kafka_cluster_partition_laststableoffsetlag", topic) == {0: 10}
    assert total(s, "kafka_server_replicamanager_produceridcount") >= 1
    assert s['kafka_coordinator_transaction_transactions{state="Ongoing"}'] >= 1
    assert s["kafka_coordinator_transaction_oldest_open_seconds"] > 0
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, value=f"a{i}".encode())
    p.flush(30)
    p.abort_transaction(30)
    got = _consume(b.bootstrap, topic, 10, isolation="read_committed")
    assert sorted(got) == sorted(f"c{i}".encode() for i in range(10))

    deadline = time.monotonic() + 10
    while True:  # markers and the completion are written after EndTxn is answered
        s = scrape(port)
        leo = by_partition(s, "kafka_log_log_logendoffset", topic)
        done = s.get('kafka_coordinator_transaction_transactions{state="CompleteAbort"}', 0) >= 1
        if (leo == {0: 17} and done) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert leo == {0: 17}  # 10 + commit marker + 5 + abort marker
    assert by_partition(s, "kafka_log_log_laststableoffset", topic) == {0: 17}
    assert by_partition(s, "kafka_cluster_partition_laststableoffsetlag", topic) == {0: 0}
    assert total(s, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == 15
    assert s['kafka_coordinator_transaction_transactions{state="Ongoing"}'] == 0
    assert s['kafka_coordinator_transaction_transactions{state="CompleteAbort"}'] >= 1
    assert s["kafka_coordinator_transaction_transactionmarkerchannelmanager_pendingmarkers"] == 0
    # pushed by the coordinator: one duration per completed transaction, one marker per partition
    assert total(s, "kafka_coordinator_transaction_duration_seconds_count", state="CompleteCommit") >= 1
    assert total(s, "kafka_coordinator_transaction_duration_seconds_count", state="CompleteAbort") >= 1
    assert total(s, "kafka_coordinator_transaction_transactionmarkerchannelmanager_markerswritten_total",
                 result="COMMIT") >= 1
    assert total(s, "kafka_coordinator_transaction_transactionmarkerchannelmanager_markerswritten_total",
                 result="ABORT") >= 1
    # the coordinator's own log: __transaction_state has the records of this transactional id
    assert total(s, "kafka_log_log_logendoffset", topic="__transaction_state") >= 4


def test_a_deleted_topic_leaves_no_series(metrics_broker: BrokerProcess) -> None:
    b, port = metrics_broker, metrics_broker.metrics_port
    topic = f"gone-{uuid.uuid4().hex[:8]}"
    create_topic(b, NewTopic(topic, 2, 1))
    p = Producer({"bootstrap.servers": b.bootstrap})
    p.produce(topic, value=b"v")
    assert p.flush(30) == 0
    s = scrape(port)
    assert total(s, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == 1
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.delete_topics([topic])[topic].result(30)
    s = scrape(port)
    assert not [k for k in s if f'topic="{topic}"' in k]


def test_endpoint_serves_openmetrics_gzip_filters_and_404(metrics_broker: BrokerProcess) -> None:
    port = metrics_broker.metrics_port
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/metrics?name[]=kafka_server_app_info",
        headers={"Accept": "application/openmetrics-text; version=1.0.0"})
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.headers["Content-Type"].startswith("application/openmetrics-text")
        body = r.read().decode()
    assert "kafka_server_app_info" in body and "kafka_log_log" not in body and body.endswith("# EOF\n")
    req = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers={"Accept-Encoding": "gzip"})
    with urllib.request.urlopen(req, timeout=10) as r:
        import gzip

        assert r.headers["Content-Encoding"] == "gzip"
        assert b"kafka_network_requestmetrics_requests_total" in gzip.decompress(r.read())
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/nope", timeout=10)
    assert e.value.code == 404


def test_broker_logs_are_json_lines_with_ids(metrics_broker: BrokerProcess) -> None:
    import json

    lines = [line for line in metrics_broker.log_path.read_text().splitlines() if line.strip()]
    events = [json.loads(line) for line in lines]  # every line is one JSON object
    assert all({"timestamp", "level", "logger", "event"} <= e.keys() for e in events)
    created = [e for e in events if e["event"] == "topic created"]
    assert created and all("topic" in e and "topic_id" in e for e in created)
    started = [e for e in events if e["event"] == "broker started"]
    assert started and started[0]["node_id"] == 1
    assert any(e["event"] == "metrics endpoint listening" and e["port"] == metrics_broker.metrics_port
               for e in events)


# --- units --------------------------------------------------------------------------------------


def test_kafka_python_consumer_uses_an_incremental_fetch_session(metrics_broker: BrokerProcess) -> None:
    """kafka-python fetches through a KIP-227 session: the cache gauge sees it, every record arrives."""
    from kafka import KafkaConsumer, KafkaProducer

    topic = f"fs-{uuid.uuid4().hex[:8]}"
    create_topic(metrics_broker, NewTopic(topic, 3, 1))
    producer = KafkaProducer(bootstrap_servers=metrics_broker.bootstrap)
    for i in range(300):
        producer.send(topic, str(i).encode(), partition=i % 3)
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=metrics_broker.bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=15000, fetch_max_wait_ms=100)
    try:
        got = set()
        deadline = time.monotonic() + 30
        for m in consumer:
            got.add(m.value)
            if len(got) == 300 or time.monotonic() > deadline:
                break
        assert got == {str(i).encode() for i in range(300)}
        s = scrape(metrics_broker.metrics_port)
        assert total(s, "kafka_server_fetchsessioncache_numincrementalfetchsessions") >= 1
        assert total(s, "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached") >= 3
    finally:
        consumer.close()
