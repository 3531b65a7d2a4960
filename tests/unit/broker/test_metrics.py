"""broker.ops.metrics and metrics_http in-process: the collectors' duck typing, the push API, the
endpoint's start, shutdown and write timeout."""

from __future__ import annotations

import asyncio
from enum import Enum, IntEnum
from types import SimpleNamespace

import pytest

from broker.ops.metrics import BrokerMetrics, cleaner_metrics, group_metrics, transaction_metrics
from broker.ops.metrics_http import render, start_metrics
from storage.clock import SYSTEM_CLOCK
from tests.support.broker_process import free_port


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
                               txn_coordinator=None, group_coordinator=None, clock=SYSTEM_CLOCK,
                               wire_clock=SYSTEM_CLOCK)

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
