"""/metrics after real workloads: a broker subprocess with ``metrics.port`` set, stock clients
(confluent-kafka) producing and consuming, then a scrape checked against what was done. The
transactional part runs when the broker serves EndTxn; the rest needs nothing optional.
Also unit tests of the collectors' duck typing and of the HTTP endpoint."""

from __future__ import annotations

import asyncio
import time
import urllib.request
import uuid
from enum import Enum, IntEnum
from types import SimpleNamespace

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from broker.ops.healthcheck import api_versions
from broker.ops.metrics import BrokerMetrics, cleaner_metrics, group_metrics, transaction_metrics
from broker.ops.metrics_http import render, start_metrics
from storage.clock import SYSTEM_CLOCK
from tests.broker_process import BrokerProcess, free_port

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

class _State(Enum):
    ONGOING = "Ongoing"
    EMPTY = "Empty"


def test_transaction_collector_duck_types_the_coordinator() -> None:
    assert transaction_metrics(None) == []
    by_method = SimpleNamespace(transaction_counts_by_state=lambda: {"Ongoing": 2, _State.EMPTY: 1},
                                marker_channel=SimpleNamespace(pending_count=lambda: 4))
    fams = {f.name: f for f in transaction_metrics(by_method)}
    states = {s.labels["state"]: s.value for s in fams["kafka_coordinator_transaction_transactions"].samples}
    assert states["Ongoing"] == 2 and states["Empty"] == 1 and states["PrepareCommit"] == 0
    pending = fams["kafka_coordinator_transaction_transactionmarkerchannelmanager_pendingmarkers"]
    assert pending.samples[0].value == 4
    by_map = SimpleNamespace(state_manager=SimpleNamespace(transactions={
        "a": SimpleNamespace(state=_State.ONGOING), "b": SimpleNamespace(state="Ongoing"),
        "c": SimpleNamespace(state=_State.EMPTY)}), marker_channel=SimpleNamespace(pending=[1, 2]))
    fams = {f.name: f for f in transaction_metrics(by_map)}
    states = {s.labels["state"]: s.value for s in fams["kafka_coordinator_transaction_transactions"].samples}
    assert states["Ongoing"] == 2 and states["Empty"] == 1
    assert fams["kafka_coordinator_transaction_transactionmarkerchannelmanager_pendingmarkers"].samples[0].value == 2
    assert transaction_metrics(SimpleNamespace()) == []  # nothing recognisable: no metrics, no error


class _TxnState(IntEnum):
    ONGOING = 1
    PREPARE_COMMIT = 2


def test_transaction_collector_reads_all_metadata_and_derives_pending_markers() -> None:
    def meta(state, start_ms: int, parts: int) -> SimpleNamespace:
        return SimpleNamespace(state=state, txn_start_timestamp=start_ms,
                               topic_partitions={("t", i) for i in range(parts)})

    entries = [(0, meta(_TxnState.ONGOING, 10_000, 1)), (0, meta(_TxnState.PREPARE_COMMIT, 40_000, 3)),
               (1, meta(_State.EMPTY, -1, 0))]
    tc = SimpleNamespace(state_manager=SimpleNamespace(all_metadata=lambda: iter(entries)),
                         markers=SimpleNamespace())
    fams = {f.name: f for f in transaction_metrics(tc, now=50.0)}
    states = {s.labels["state"]: s.value for s in fams["kafka_coordinator_transaction_transactions"].samples}
    assert states["Ongoing"] == 1 and states["PrepareCommit"] == 1 and states["Empty"] == 1
    assert fams["kafka_coordinator_transaction_oldest_open_seconds"].samples[0].value == 40.0
    assert fams["kafka_coordinator_transaction_transactionmarkerchannelmanager_pendingmarkers"].samples[0].value == 3


def test_group_collector_counts_groups_by_state() -> None:
    groups = {"a": SimpleNamespace(state=SimpleNamespace(value="Stable")),
              "b": SimpleNamespace(state=SimpleNamespace(value="Stable")),
              "c": SimpleNamespace(state=SimpleNamespace(value="Empty"))}
    offsets = SimpleNamespace(committed={"a": {"t": {0: 1, 1: 2}}, "c": {"u": {0: 3}}})
    fams = {f.name: f.samples[0].value for f in group_metrics(SimpleNamespace(manager=SimpleNamespace(
        groups=groups, offsets=offsets)))}
    p = "kafka_coordinator_group_groupmetadatamanager_"
    assert fams[p + "numgroups"] == 3 and fams[p + "numgroupsstable"] == 2 and fams[p + "numgroupsempty"] == 1
    assert fams[p + "numgroupspreparingrebalance"] == 0 and fams[p + "numoffsets"] == 3
    assert group_metrics(None) == []


def test_cleaner_collector_reports_the_last_cleaning() -> None:
    assert cleaner_metrics(None) == []
    idle = {f.name: f.samples[0].value for f in cleaner_metrics(SimpleNamespace(dirtiest_ratio=0.5, cleanings=0,
                                                                                  last_stats=None))}
    assert idle == {"kafka_log_logcleanermanager_max_dirty_percent": 50.0, "kafka_log_logcleaner_cleanings": 0}
    stats = SimpleNamespace(buffer_utilization=0.25, bytes_read=1000, bytes_written=400, elapsed=1.5)
    fams = {f.name: f.samples[0].value for f in cleaner_metrics(SimpleNamespace(dirtiest_ratio=0.0, cleanings=2,
                                                                                  last_stats=stats))}
    assert fams["kafka_log_logcleaner_max_buffer_utilization_percent"] == 25.0
    assert fams["kafka_log_logcleaner_cleaner_recopy_percent"] == 40.0
    assert fams["kafka_log_logcleaner_max_clean_time_secs"] == 1.5 and fams["kafka_log_logcleaner_cleanings"] == 2


def test_push_api_for_coordinators() -> None:
    m = BrokerMetrics()
    m.txn_completed("CompleteCommit", 0.2)
    m.txn_completed("CompleteAbort", 3.0)
    m.txn_timed_out()
    m.marker_written("commit")
    m.marker_retry()
    m.group_rebalanced("g")
    body = render(m.registry)[0].decode()
    assert 'kafka_coordinator_transaction_duration_seconds_count{state="CompleteCommit"} 1.0' in body
    assert 'kafka_coordinator_transaction_duration_seconds_bucket{le="0.25",state="CompleteCommit"} 1.0' in body
    assert "kafka_coordinator_transaction_timedout_total 1.0" in body
    assert 'kafka_coordinator_transaction_transactionmarkerchannelmanager_markerswritten_total{result="COMMIT"} 1.0' \
        in body
    assert "kafka_coordinator_transaction_transactionmarkerchannelmanager_markerretries_total 1.0" in body
    assert "kafka_coordinator_group_groupmetadatamanager_rebalances_total 1.0" in body


def test_a_failing_collector_does_not_break_the_scrape() -> None:
    m = BrokerMetrics()
    m.add_collector(lambda: 1 / 0)
    m.request_done(18, 3, 0.001)
    assert b'kafka_network_requestmetrics_requests_total{request="ApiVersions",version="3"} 1.0' in render(m.registry)[0]


async def test_metrics_server_starts_only_with_a_port_and_closes_on_shutdown() -> None:
    def fake(port: int) -> SimpleNamespace:
        return SimpleNamespace(metrics=BrokerMetrics(), config={"metrics.port": port, "metrics.host": "127.0.0.1"},
                               shutdown_hooks=[], node_id=1, cluster_id="c", log_manager=None,
                               txn_coordinator=None, group_coordinator=None, clock=SYSTEM_CLOCK)

    off = fake(0)
    assert await start_metrics(off) is None and off.metrics_port is None and off.shutdown_hooks == []
    on = fake(free_port())
    server = await start_metrics(on)
    assert server is not None and on.metrics_port == on.config["metrics.port"]
    reader, writer = await asyncio.open_connection("127.0.0.1", on.metrics_port)
    writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    data = await reader.read()
    writer.close()
    assert data.startswith(b"HTTP/1.1 200 OK") and b"kafka_server_app_info" in data
    for hook in on.shutdown_hooks:
        await hook(on)
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", on.metrics_port)


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


async def test_a_scraper_that_never_reads_is_cut_off(monkeypatch) -> None:
    """The endpoint answers each scrape within _WRITE_TIMEOUT or drops the connection, so clients
    that never read cannot keep answers (and connections) piling up."""
    from prometheus_client import CollectorRegistry, Gauge

    from broker.ops import metrics_http

    monkeypatch.setattr(metrics_http, "_WRITE_TIMEOUT", 0.5)
    registry = CollectorRegistry()
    gauge = Gauge("big", "a large answer", ["n"], registry=registry)
    gauge.labels("x" * 12_000_000).set(1)  # an answer of 12 MB: more than the socket buffers hold
    metrics = SimpleNamespace(registry=registry, prepare_scrape=lambda: None)
    server = await asyncio.start_server(lambda r, w: metrics_http._serve(metrics, r, w), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    import socket

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    reader, writer = await asyncio.open_connection(sock=sock, limit=1 << 16)
    writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    await asyncio.sleep(2.0)  # never reading, past the timeout
    received = 0
    try:
        while chunk := await asyncio.wait_for(reader.read(1 << 16), 5):
            received += len(chunk)
    except ConnectionResetError:
        pass
    body = render(registry)[0]
    assert received < len(body), "the whole answer went out: the scraper was not cut off"
    writer.close()
    server.close()
    await server.wait_closed()
