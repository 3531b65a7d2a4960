"""Prometheus metrics, named after the Kafka JMX exporter's conventions (``kafka_server_...``).

Each broker owns its own registry, so several brokers in one test process don't collide.
Per-partition gauges are collected on scrape from the live logs instead of being updated on
every append.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily

from protocol.messages import request_class

_LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


def api_name(api_key: int) -> str:
    cls = request_class(api_key)
    return cls.name.removesuffix("Request") if cls is not None else str(api_key)


class BrokerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "kafka_network_requestmetrics_requests", "Requests handled, by API and version",
            ["request", "version"], registry=r)
        self.errors = Counter(
            "kafka_network_requestmetrics_errors", "Error codes returned, by API and error",
            ["request", "error"], registry=r)
        self.latency = Histogram(
            "kafka_network_requestmetrics_totaltimems_seconds", "Request processing time in seconds",
            ["request"], buckets=_LATENCY_BUCKETS, registry=r)
        self.connections = Gauge(
            "kafka_server_socketservermetrics_connection_count", "Open client connections",
            ["listener"], registry=r)
        self.connections_created = Counter(
            "kafka_server_socketservermetrics_connection_creation", "Connections accepted",
            ["listener"], registry=r)
        self.bytes_in = Counter(
            "kafka_server_brokertopicmetrics_bytesin", "Bytes appended from clients", ["topic"], registry=r)
        self.bytes_out = Counter(
            "kafka_server_brokertopicmetrics_bytesout", "Bytes returned to fetchers", ["topic"], registry=r)
        self.messages_in = Counter(
            "kafka_server_brokertopicmetrics_messagesin", "Records appended from clients", ["topic"], registry=r)
        self.failed_produce = Counter(
            "kafka_server_brokertopicmetrics_failedproducerequests", "Produce partition errors", ["topic"], registry=r)
        self.failed_fetch = Counter(
            "kafka_server_brokertopicmetrics_failedfetchrequests", "Fetch partition errors", ["topic"], registry=r)
        self._request_labels: dict[tuple[int, int], Any] = {}
        self._latency_labels: dict[int, Any] = {}

    def request_done(self, api_key: int, version: int, seconds: float) -> None:
        counter = self._request_labels.get((api_key, version))
        if counter is None:
            counter = self.requests.labels(api_name(api_key), str(version))
            self._request_labels[(api_key, version)] = counter
        counter.inc()
        hist = self._latency_labels.get(api_key)
        if hist is None:
            hist = self.latency.labels(api_name(api_key))
            self._latency_labels[api_key] = hist
        hist.observe(seconds)

    def error(self, api_key: int, error_name: str) -> None:
        self.errors.labels(api_name(api_key), error_name).inc()

    def connection_opened(self, listener: str) -> None:
        self.connections.labels(listener).inc()
        self.connections_created.labels(listener).inc()

    def connection_closed(self, listener: str) -> None:
        self.connections.labels(listener).dec()

    def add_collector(self, collect: Callable[[], Iterable[GaugeMetricFamily]]) -> None:
        """Register a scrape-time collector (partition offsets, groups, transactions)."""

        class _Collector:
            def collect(self_inner):  # noqa: N805
                return collect()

            def describe(self_inner):  # noqa: N805
                return []

        self.registry.register(_Collector())
