"""Prometheus metrics, named after the Kafka JMX exporter's conventions (``kafka_server_...``).

Each broker owns its own registry, so several brokers in one test process don't collide. Two
kinds of metric:

* **pushed**: counters and histograms that the request path and the coordinators update as
  things happen, through the small API below (or the metric objects' ``labels(...)``);
* **collected on scrape**: gauges read from the live state when /metrics is asked for
  (per-partition offsets, producer ids, transactions and groups by state, marker-channel
  backlog), so nothing is updated per append. Scrapes run on the event loop thread
  (``broker.ops.metrics_http``), so collectors may read broker state without locks.

The push API (all cheap, called on the event loop)::

    metrics.request_done(api_key, version, seconds) / metrics.error(api_key, error_name)
    metrics.produced(topic, nbytes, nrecords) / metrics.fetched(topic, nbytes)
    metrics.connection_opened(listener) / metrics.connection_closed(listener)
    metrics.txn_completed(state, duration_s)   # state: "CompleteCommit" / "CompleteAbort"
    metrics.txn_timed_out()                    # the coordinator aborted a timed-out transaction
    metrics.marker_written(result)             # a COMMIT/ABORT marker acknowledged ("COMMIT"/"ABORT")
    metrics.marker_retry()                     # a marker write to a partition is retried
    metrics.group_rebalanced(group_id)         # a group completed a rebalance (new generation)

What the scrape-time collectors read, duck-typed and defensive (a missing or failing accessor
only drops that metric, never the scrape):

* ``broker.txn_coordinator`` (if not None): ``transaction_counts_by_state() -> {state: n}``,
  else the transaction metadata from ``all_metadata()`` (yielding metadata or
  ``(epoch, metadata)``) or a ``transactions`` / ``metadata`` / ``txn_metadata`` mapping,
  looked for on the coordinator and on its ``state_manager`` / ``manager``; each metadata has
  a ``state`` (``state_name``, a str value, or an enum named like PREPARE_COMMIT) and,
  optionally, ``txn_start_timestamp`` (ms) and ``topic_partitions``. The marker backlog is
  ``pending_count()`` or ``len(pending)`` of ``marker_channel`` / ``markers`` if it has one,
  else the partitions still listed by PrepareCommit/PrepareAbort transactions.
* ``broker.group_coordinator`` (if not None): ``manager.groups`` (group id -> group with a
  ``state``) and ``manager.offsets`` (``count()``, a ``committed`` mapping or ``__len__``).

The names and labels are listed in README.md ("Metrics").
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics
from prometheus_client.core import GaugeMetricFamily, Metric

from protocol.messages import api_name

if TYPE_CHECKING:
    from broker.services import Services

log = structlog.get_logger(__name__)

_LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
_TXN_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900)

# Kafka's transaction states and classic group states, reported even when zero.
TXN_STATES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort",
              "Dead", "PrepareEpochFence")
GROUP_STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty")

_I32 = struct.Struct(">i")
_RECORDS_COUNT_AT = 57  # records count: the last int32 of the 61-byte batch header
_BATCH_LENGTH_AT = 8


def _state_name(state: Any) -> str:
    """Kafka's name of a state: ``state_name``, a str value, or PREPARE_COMMIT -> PrepareCommit."""
    name = getattr(state, "state_name", None)
    if isinstance(name, str):
        return name
    value = getattr(state, "value", state)
    if isinstance(value, str):
        return value
    enum_name = getattr(state, "name", None)
    if isinstance(enum_name, str):
        return "".join(part.capitalize() for part in enum_name.split("_"))
    return str(state)


class _FnCollector:
    """Adapts a ``collect()`` function to the registry's collector protocol."""

    def __init__(self, collect: Callable[[], Iterable[Metric]]) -> None:
        self._collect = collect

    def collect(self) -> Iterable[Metric]:
        try:
            return list(self._collect())
        except Exception:  # a collector bug must not break the whole scrape
            log.exception("metrics collector failed", collector=getattr(self._collect, "__name__", "?"))
            return []

    def describe(self) -> list[Metric]:
        return []


class BrokerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        # --- requests (kafka.network:type=RequestMetrics) ---
        self.requests = Counter(
            "kafka_network_requestmetrics_requests", "Requests handled, by API and version",
            ["request", "version"], registry=r)
        self.errors = Counter(
            "kafka_network_requestmetrics_errors", "Error codes returned, by API and error",
            ["request", "error"], registry=r)
        self.latency = Histogram(
            "kafka_network_requestmetrics_totaltime_seconds",
            "Request time from decode to response, in seconds (Kafka's TotalTimeMs)",
            ["request"], buckets=_LATENCY_BUCKETS, registry=r)
        # --- connections (kafka.server:type=socket-server-metrics) ---
        self.connections = Gauge(
            "kafka_server_socketservermetrics_connection_count", "Open client connections",
            ["listener"], registry=r)
        self.connections_created = Counter(
            "kafka_server_socketservermetrics_connection_creation", "Connections accepted",
            ["listener"], registry=r)
        # --- per topic (kafka.server:type=BrokerTopicMetrics) ---
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
        # --- transactions (kafka.coordinator.transaction) ---
        self.txn_duration = Histogram(
            "kafka_coordinator_transaction_duration_seconds",
            "Transaction duration from its first partition to its completion, by final state",
            ["state"], buckets=_TXN_BUCKETS, registry=r)
        self.txn_timeouts = Counter(
            "kafka_coordinator_transaction_timedout", "Transactions aborted by the coordinator on timeout",
            registry=r)
        self.markers_written = Counter(
            "kafka_coordinator_transaction_transactionmarkerchannelmanager_markerswritten",
            "COMMIT/ABORT markers acknowledged by partition leaders", ["result"], registry=r)
        self.marker_retries = Counter(
            "kafka_coordinator_transaction_transactionmarkerchannelmanager_markerretries",
            "Marker writes retried", registry=r)
        # --- groups (kafka.coordinator.group) ---
        self.group_rebalances = Counter(
            "kafka_coordinator_group_groupmetadatamanager_rebalances",
            "Rebalances completed (a new generation)", registry=r)
        self._request_labels: dict[tuple[int, int], Any] = {}
        self._latency_labels: dict[int, Any] = {}
        self._pre_scrape: list[Callable[[], None]] = []
        self._topic_in: dict[str, tuple[Any, Any]] = {}
        self._topic_out: dict[str, Any] = {}
        # Per-topic series only for topics that exist (set by the broker): a client naming
        # made-up topics must not create a series per name, which would never be removed.
        self.topic_exists: Callable[[str], bool] = lambda topic: True

    # --- the request path -----------------------------------------------------------------

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

    def produced(self, topic: str, nbytes: int, nrecords: int) -> None:
        """Bytes and records appended to ``topic`` from a client's Produce."""
        pair = self._topic_in.get(topic)
        if pair is None:
            pair = self._topic_in[topic] = (self.bytes_in.labels(topic), self.messages_in.labels(topic))
        pair[0].inc(nbytes)
        pair[1].inc(nrecords)

    def produce_failed(self, topic: str) -> None:
        if self.topic_exists(topic):
            self.failed_produce.labels(topic).inc()

    def fetch_failed(self, topic: str) -> None:
        if self.topic_exists(topic):
            self.failed_fetch.labels(topic).inc()

    def fetched(self, topic: str, nbytes: int) -> None:
        """Bytes of record batches returned to a fetcher from ``topic`` (Kafka's BytesOutPerSec;
        like Kafka, no records count: large reads are sent from the file unread)."""
        counter = self._topic_out.get(topic)
        if counter is None:
            counter = self._topic_out[topic] = self.bytes_out.labels(topic)
        counter.inc(nbytes)

    def forget_topics(self, live: set[str]) -> None:
        """Drop the per-topic series of topics that no longer exist (Kafka removes a deleted
        topic's BrokerTopicMetrics too), so short-lived test topics don't pile up."""
        for topic in [t for t in set(self._topic_in) | set(self._topic_out) if t not in live]:
            self._topic_in.pop(topic, None)
            self._topic_out.pop(topic, None)
            for counter in (self.bytes_in, self.messages_in, self.bytes_out,
                            self.failed_produce, self.failed_fetch):
                try:
                    counter.remove(topic)
                except KeyError:
                    pass

    # --- the coordinators' API ------------------------------------------------------------

    def txn_completed(self, state: str, duration_s: float) -> None:
        """A transaction reached CompleteCommit/CompleteAbort ``duration_s`` after it started."""
        self.txn_duration.labels(_state_name(state)).observe(max(duration_s, 0.0))

    def txn_timed_out(self) -> None:
        self.txn_timeouts.inc()

    def marker_written(self, result: str = "COMMIT") -> None:
        self.markers_written.labels(str(result).upper()).inc()

    def marker_retry(self) -> None:
        self.marker_retries.inc()

    def group_rebalanced(self, group_id: str | None = None) -> None:
        self.group_rebalances.inc()

    # --- scrape-time collectors -----------------------------------------------------------

    def prepare_scrape(self) -> None:
        """Run before each scrape (by the /metrics endpoint): housekeeping such as dropping the
        series of deleted topics, done before any collector reads."""
        for fn in self._pre_scrape:
            try:
                fn()
            except Exception:  # noqa: BLE001
                log.exception("metrics pre-scrape hook failed")

    def add_collector(self, collect: Callable[[], Iterable[Metric]]) -> None:
        """Register a scrape-time collector (a function returning metric families)."""
        self.registry.register(_FnCollector(collect))

    def bind(self, broker: Services) -> None:
        """Register the collectors that read ``broker``'s live state on each scrape.

        Also turns off prometheus-client's ``*_created`` series process-wide, as the Kafka
        JMX exporter has none (called once per broker process, from Services.start).
        """
        disable_created_metrics()
        started = broker.wire_clock.monotonic()

        def broker_info() -> Iterable[Metric]:
            info = GaugeMetricFamily("kafka_server_app_info", "This broker", labels=["node_id", "cluster_id", "version"])
            info.add_metric([str(broker.node_id), broker.cluster_id, _version()], 1)
            uptime = GaugeMetricFamily("kafka_server_kafkaserver_uptime_seconds", "Seconds since the broker started")
            uptime.add_metric([], broker.wire_clock.monotonic() - started)
            return [info, uptime]

        self.add_collector(broker_info)

        def forget_deleted_topics() -> None:
            lm = getattr(broker, "log_manager", None)
            if lm is not None:
                self.forget_topics({plog.topic for plog in list(lm.logs())})

        self._pre_scrape.append(forget_deleted_topics)
        self.add_collector(lambda: partition_metrics(broker))
        self.add_collector(lambda: transaction_metrics(broker.txn_coordinator, broker.clock.now_ms() / 1000))
        self.add_collector(lambda: group_metrics(broker.group_coordinator))
        self.add_collector(lambda: cleaner_metrics(getattr(broker, "log_cleaner", None)))
        self.add_collector(lambda: fetch_session_metrics(getattr(broker, "fetch_sessions", None)))


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("pykafka-broker")
    except Exception:  # noqa: BLE001 - running from a source tree
        return "dev"


def partition_metrics(broker: Any) -> list[Metric]:
    """Per-partition offsets and sizes (kafka.log:type=Log, kafka.cluster:type=Partition) and
    the broker's partition and producer-id counts (kafka.server:type=ReplicaManager)."""
    lm = getattr(broker, "log_manager", None)
    if lm is None:
        return []
    labels = ["topic", "partition"]
    leo = GaugeMetricFamily("kafka_log_log_logendoffset", "Log end offset", labels=labels)
    lso_start = GaugeMetricFamily("kafka_log_log_logstartoffset", "Log start offset", labels=labels)
    hw = GaugeMetricFamily("kafka_log_log_highwatermark", "High watermark", labels=labels)
    lso = GaugeMetricFamily("kafka_log_log_laststableoffset", "Last stable offset (LSO)", labels=labels)
    lag = GaugeMetricFamily("kafka_cluster_partition_laststableoffsetlag",
                            "High watermark minus LSO: records held back by open transactions", labels=labels)
    size = GaugeMetricFamily("kafka_log_log_size", "Bytes in the partition's segments", labels=labels)
    segs = GaugeMetricFamily("kafka_log_log_numlogsegments", "Segments of the partition", labels=labels)
    pids = GaugeMetricFamily("kafka_log_log_produceridcount", "Producer ids with state in the partition",
                             labels=labels)
    total_pids = 0
    count = offline = 0
    for plog in list(lm.logs()):
        key = [plog.topic, str(plog.partition)]
        count += 1
        if plog.offline is not None:
            offline += 1
        high = plog.high_watermark
        leo.add_metric(key, plog.log_end_offset)
        lso_start.add_metric(key, plog.log_start_offset)
        hw.add_metric(key, high)
        stable = plog.last_stable_offset
        n = plog.producer_state.manager.producer_id_count if plog.producer_state is not None else 0
        lso.add_metric(key, stable)
        lag.add_metric(key, high - stable)
        if n:
            pids.add_metric(key, n)
        total_pids += n
        size.add_metric(key, plog.size)
        segs.add_metric(key, len(plog.segments))
    total = GaugeMetricFamily("kafka_server_replicamanager_produceridcount",
                              "Producer ids with state, over all partitions")
    total.add_metric([], total_pids)
    parts = GaugeMetricFamily("kafka_server_replicamanager_partitioncount", "Partitions on this broker")
    parts.add_metric([], count)
    leaders = GaugeMetricFamily("kafka_server_replicamanager_leadercount", "Partitions this broker leads")
    leaders.add_metric([], count - offline)
    offline_replicas = GaugeMetricFamily("kafka_server_replicamanager_offlinereplicacount",
                                         "Partitions offline after an I/O error (until a restart recovers them)")
    offline_replicas.add_metric([], offline)
    return [leo, lso_start, hw, lso, lag, size, segs, pids, total, parts, leaders, offline_replicas]


def _first_attr(objs: Iterable[Any], names: Iterable[str]) -> Any:
    for obj in objs:
        if obj is None:
            continue
        for name in names:
            value = getattr(obj, name, None)
            if value is not None:
                return value
    return None


def _objects(value: Any) -> list[Any]:
    """The objects of a mapping's values, an iterable, or a callable returning either; tuples
    such as ``(coordinator_epoch, metadata)`` contribute their last element."""
    if callable(value):
        value = value()
    items = list(value.values() if isinstance(value, Mapping) else value)
    return [item[-1] if isinstance(item, tuple) and item else item for item in items]


def _counts(value: Any) -> dict[str, int] | None:
    """{state: n} over objects with a ``state`` (see ``_objects``)."""
    if value is None:
        return None
    out: dict[str, int] = {}
    for item in _objects(value):
        state = getattr(item, "state", None)
        if state is not None:
            name = _state_name(state)
            out[name] = out.get(name, 0) + 1
    return out


def _txn_metadata(tc: Any) -> list[Any] | None:
    """The transaction metadata objects a coordinator holds, found by duck typing."""
    holders = [tc, getattr(tc, "state_manager", None), getattr(tc, "manager", None)]
    source = _first_attr(holders, ("all_metadata", "transactions", "metadata", "txn_metadata",
                                   "transaction_metadata"))
    return None if source is None else _objects(source)


def transaction_metrics(tc: Any, now: float | None = None) -> list[Metric]:
    """Transactions per state, the oldest open one's age, and the marker backlog, if a
    transaction coordinator is running."""
    if tc is None:
        return []
    now = time.time() if now is None else now
    out: list[Metric] = []
    metadata: list[Any] | None = None
    try:
        fn = getattr(tc, "transaction_counts_by_state", None)
        if fn is not None:
            counts: dict[str, int] | None = {_state_name(k): int(v) for k, v in dict(fn()).items()}
        else:
            metadata = _txn_metadata(tc)
            counts = None if metadata is None else _counts(metadata)
        if counts is not None:
            fam = GaugeMetricFamily("kafka_coordinator_transaction_transactions",
                                    "Transactional ids known to the coordinator, by state", labels=["state"])
            for state in (*TXN_STATES, *sorted(set(counts) - set(TXN_STATES))):
                fam.add_metric([state], counts.get(state, 0))
            out.append(fam)
        if metadata is not None:
            starts = [getattr(m, "txn_start_timestamp", -1) for m in metadata
                      if _state_name(getattr(m, "state", "")) in _OPEN_STATES]
            starts = [t for t in starts if isinstance(t, int | float) and t > 0]
            fam = GaugeMetricFamily("kafka_coordinator_transaction_oldest_open_seconds",
                                    "Age of the oldest transaction not yet complete (0 when none)")
            fam.add_metric([], max(now - min(starts) / 1000, 0.0) if starts else 0)
            out.append(fam)
    except Exception:  # noqa: BLE001 - the coordinator is somebody else's moving target
        log.debug("transaction state metrics unavailable", exc_info=True)
    try:
        pending = _pending_markers(tc, metadata)
        if pending is not None:
            fam = GaugeMetricFamily(
                "kafka_coordinator_transaction_transactionmarkerchannelmanager_pendingmarkers",
                "Partitions of prepared transactions whose COMMIT/ABORT marker is not yet written")
            fam.add_metric([], pending)
            out.append(fam)
    except Exception:  # noqa: BLE001
        log.debug("marker channel metrics unavailable", exc_info=True)
    return out


_OPEN_STATES = {"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"}
_PREPARED_STATES = {"PrepareCommit", "PrepareAbort"}


def _pending_markers(tc: Any, metadata: list[Any] | None) -> int | None:
    """``pending_count()`` or ``len(pending)`` of the marker channel, else the partitions still
    listed by Prepare* transactions (a partition leaves the set when its marker is written)."""
    channel = _first_attr([tc], ("marker_channel", "markers", "txn_marker_channel"))
    if channel is not None:
        fn = getattr(channel, "pending_count", None)
        if callable(fn):
            return int(fn())
        if getattr(channel, "pending", None) is not None:
            return len(channel.pending)
    if metadata is None:
        return None
    return sum(len(getattr(m, "topic_partitions", ()) or ()) for m in metadata
               if _state_name(getattr(m, "state", "")) in _PREPARED_STATES)


def group_metrics(gc: Any) -> list[Metric]:
    """Kafka's GroupMetadataManager gauges: NumGroups, NumGroups<State>, NumOffsets."""
    if gc is None:
        return []
    manager = getattr(gc, "manager", gc)
    groups = getattr(manager, "groups", None)
    if groups is None:
        return []
    counts = _counts(groups) or {}
    prefix = "kafka_coordinator_group_groupmetadatamanager_"
    consumer = getattr(manager, "consumer", None)
    total = GaugeMetricFamily(prefix + "numgroups", "Groups known to the coordinator (classic and consumer)")
    total.add_metric([], sum(counts.values()) + len(getattr(consumer, "groups", ())))
    out: list[Metric] = [total]
    for state in GROUP_STATES:
        fam = GaugeMetricFamily(prefix + "numgroups" + state.lower(), f"Groups in state {state}")
        fam.add_metric([], counts.get(state, 0))
        out.append(fam)
    n = _offset_count(getattr(manager, "offsets", None))
    if n is not None:
        fam = GaugeMetricFamily(prefix + "numoffsets", "Committed offsets held by the coordinator")
        fam.add_metric([], n)
        out.append(fam)
    return out


def fetch_session_metrics(cache: Any) -> list[Metric]:
    """Kafka's FetchSessionCache gauges (KIP-227 incremental fetch sessions)."""
    if cache is None:
        return []
    sessions = GaugeMetricFamily("kafka_server_fetchsessioncache_numincrementalfetchsessions",
                                 "Incremental fetch sessions cached")
    sessions.add_metric([], len(cache))
    partitions = GaugeMetricFamily("kafka_server_fetchsessioncache_numincrementalfetchpartitionscached",
                                   "Partitions in all cached fetch sessions")
    partitions.add_metric([], cache.total_partitions())
    return [sessions, partitions]


def cleaner_metrics(cleaner: Any) -> list[Metric]:
    """Kafka's LogCleaner / LogCleanerManager gauges, from the last cleaning (none before one)."""
    if cleaner is None:
        return []
    out: list[Metric] = []

    def gauge(name: str, doc: str, value: float) -> None:
        fam = GaugeMetricFamily(name, doc)
        fam.add_metric([], value)
        out.append(fam)

    gauge("kafka_log_logcleanermanager_max_dirty_percent", "Dirty share of the dirtiest compacted log, percent",
          round(100 * float(getattr(cleaner, "dirtiest_ratio", 0.0)), 3))
    gauge("kafka_log_logcleaner_cleanings", "Log cleanings completed since start", getattr(cleaner, "cleanings", 0))
    stats = getattr(cleaner, "last_stats", None)
    if stats is not None:
        gauge("kafka_log_logcleaner_max_buffer_utilization_percent",
              "Offset map utilization of the last cleaning, percent", round(100 * stats.buffer_utilization, 3))
        gauge("kafka_log_logcleaner_cleaner_recopy_percent", "Bytes written / bytes read by the last cleaning, percent",
              round(100 * stats.bytes_written / stats.bytes_read, 3) if stats.bytes_read else 0.0)
        gauge("kafka_log_logcleaner_max_clean_time_secs", "Duration of the last cleaning, seconds",
              round(stats.elapsed, 3))
    return out


def _offset_count(offsets: Any) -> int | None:
    """Committed offsets in an OffsetStore-like object: ``count()``, ``committed`` or ``len``."""
    if offsets is None:
        return None
    count = getattr(offsets, "count", None)
    if callable(count):
        return int(count())
    committed = getattr(offsets, "committed", None)
    if isinstance(committed, Mapping):
        return sum(len(parts) for topics in list(committed.values()) for parts in list(topics.values()))
    return len(offsets) if hasattr(offsets, "__len__") else None
