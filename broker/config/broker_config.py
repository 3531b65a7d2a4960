"""Broker configuration the way Kafka reads it.

Sources, lowest precedence first: Kafka's defaults, a ``server.properties`` file,
``KAFKA_*`` environment variables (the apache/kafka image convention: ``.`` -> ``_``,
``_`` -> ``__``, ``-`` -> ``___``, upper case), then ``--override key=value``. Unknown
properties are logged and kept (DescribeConfigs shows them), never fatal.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from broker.config.kafka_defaults import DYNAMIC

log = structlog.get_logger(__name__)

LONG_MAX = 9223372036854775807


@dataclass(frozen=True, slots=True)
class BrokerConfigDef:
    name: str
    type: str  # int, long, short, string, boolean, list, double, password
    default: Any
    read_only: bool = True
    sensitive: bool = False
    internal: bool = False  # Kafka's defineInternal: settable, never listed by DescribeConfigs


def _defs(*rows: tuple) -> dict[str, BrokerConfigDef]:
    return {r[0]: BrokerConfigDef(*r) for r in rows}


# Kafka's names and defaults (server/ServerConfigs, ServerLogConfigs, GroupCoordinatorConfig,
# TransactionStateManagerConfig, ...). read_only=False marks the dynamically alterable ones.
BROKER_CONFIGS: dict[str, BrokerConfigDef] = _defs(
    ("node.id", "int", 1),
    ("broker.id", "int", -1),
    ("process.roles", "list", "broker,controller"),
    ("listeners", "list", "PLAINTEXT://127.0.0.1:9092"),
    ("advertised.listeners", "list", None),
    ("listener.security.protocol.map", "list",
     "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"),
    ("inter.broker.listener.name", "string", None),
    ("controller.listener.names", "string", None),
    ("cluster.id", "string", None),
    ("broker.rack", "string", None),
    ("log.dirs", "list", None),
    ("log.dir", "string", "./data"),
    ("num.partitions", "int", 1),
    ("default.replication.factor", "int", 1),
    ("min.insync.replicas", "int", 1),
    ("auto.create.topics.enable", "boolean", True),
    ("delete.topic.enable", "boolean", True),
    ("log.segment.bytes", "int", 1073741824),
    ("log.roll.ms", "long", None),
    ("log.roll.hours", "int", 168),
    ("log.roll.jitter.ms", "long", None),
    ("log.roll.jitter.hours", "int", 0),
    ("log.retention.ms", "long", None),
    ("log.retention.minutes", "int", None),
    ("log.retention.hours", "int", 168),
    ("log.retention.bytes", "long", -1),
    ("log.retention.check.interval.ms", "long", 300000),
    ("log.index.interval.bytes", "int", 4096),
    ("log.index.size.max.bytes", "int", 10485760),
    ("log.flush.interval.messages", "long", LONG_MAX),
    ("log.flush.interval.ms", "long", None),
    ("log.flush.scheduler.interval.ms", "long", LONG_MAX),
    ("log.flush.offset.checkpoint.interval.ms", "int", 60000),
    ("log.cleanup.policy", "list", "delete"),
    ("log.message.timestamp.type", "string", "CreateTime"),
    ("log.message.timestamp.before.max.ms", "long", LONG_MAX),
    ("log.message.timestamp.after.max.ms", "long", 3600000),
    ("log.preallocate", "boolean", False),
    ("log.cleaner.enable", "boolean", True),
    ("log.cleaner.delete.retention.ms", "long", 86400000),
    ("log.cleaner.min.compaction.lag.ms", "long", 0),
    ("log.cleaner.max.compaction.lag.ms", "long", LONG_MAX),
    ("log.cleaner.min.cleanable.ratio", "double", 0.5),
    ("log.cleaner.backoff.ms", "long", 15000),
    ("log.cleaner.threads", "int", 1),
    ("log.cleaner.dedupe.buffer.size", "long", 134217728),
    ("log.cleaner.io.buffer.size", "int", 524288),
    ("log.cleaner.io.buffer.load.factor", "double", 0.9),
    ("log.cleaner.io.max.bytes.per.second", "double", 1.7976931348623157e308),
    ("log.segment.delete.delay.ms", "long", 60000),
    ("compression.type", "string", "producer"),
    ("message.max.bytes", "int", 1048588),
    ("socket.request.max.bytes", "int", 104857600),
    ("fetch.max.bytes", "int", 57671680),
    ("max.connections", "int", 2147483647),
    ("max.connections.per.ip", "int", 2147483647),
    ("max.connections.per.ip.overrides", "string", ""),
    ("queued.max.request.bytes", "long", -1),
    ("sasl.server.max.receive.size", "int", 524288),
    ("max.incremental.fetch.session.cache.slots", "int", 1000),
    ("max.request.partition.size.limit", "int", 2000),
    # Kafka's default is 102400; ours leaves SO_SNDBUF to the OS (autotuned) since one sendfile can then
    # queue a whole 1 MiB Fetch answer and the kernel feeds the client's window without waking the broker
    # (ConsumerPerformance read_committed: fetch latency 1.32 -> 1.00 ms, 433 -> 507 MB/s; Kafka itself
    # gains nothing from -1). Setting it still sets SO_SNDBUF as Kafka's acceptor does.
    ("socket.send.buffer.bytes", "int", -1),
    ("socket.receive.buffer.bytes", "int", 102400),
    ("queued.max.requests", "int", 500),
    ("num.network.threads", "int", 3),
    ("num.io.threads", "int", 8),
    ("background.threads", "int", 10),
    ("num.replica.fetchers", "int", 1),
    # replication (brokers in one process): the follower's fetches, the leader's ISR lag
    ("replica.lag.time.max.ms", "long", 30000),
    ("replica.fetch.max.bytes", "int", 1048576),
    ("replica.fetch.min.bytes", "int", 1),
    ("replica.fetch.wait.max.ms", "int", 500),
    ("replica.fetch.response.max.bytes", "int", 10485760),
    ("replica.fetch.backoff.ms", "int", 1000),
    ("replica.socket.timeout.ms", "int", 30000),
    ("request.timeout.ms", "int", 30000),  # how long WriteTxnMarkers waits for the ISR (Kafka's acks=-1 append)
    # the controller's preferred-leader balance (QuorumController.maybeBalancePartitionLeaders)
    ("auto.leader.rebalance.enable", "boolean", True),
    ("leader.imbalance.check.interval.seconds", "long", 300),
    ("leader.imbalance.per.broker.percentage", "int", 10),  # ZooKeeper mode's; KRaft ignores it
    ("num.recovery.threads.per.data.dir", "int", 2),
    ("connections.max.idle.ms", "long", 600000),
    ("offsets.topic.num.partitions", "int", 50),
    ("offsets.topic.replication.factor", "short", 3),
    ("offsets.topic.segment.bytes", "int", 104857600),
    ("offsets.retention.minutes", "int", 10080),
    ("offsets.retention.check.interval.ms", "long", 600000),
    ("offsets.commit.timeout.ms", "int", 5000),
    ("offset.metadata.max.bytes", "int", 4096),
    ("group.initial.rebalance.delay.ms", "int", 3000),
    ("group.min.session.timeout.ms", "int", 6000),
    ("group.max.session.timeout.ms", "int", 1800000),
    ("group.max.size", "int", 2147483647),
    ("sasl.enabled.mechanisms", "list", "GSSAPI"),
    ("quota.window.num", "int", 11),
    ("quota.window.size.seconds", "int", 1),
    # KIP-848 consumer groups (ConsumerGroupHeartbeat); streams groups are not implemented.
    ("group.coordinator.rebalance.protocols", "list", "classic,consumer"),
    ("group.consumer.session.timeout.ms", "int", 45000),
    ("group.consumer.min.session.timeout.ms", "int", 45000),
    ("group.consumer.max.session.timeout.ms", "int", 60000),
    ("group.consumer.heartbeat.interval.ms", "int", 5000),
    ("group.consumer.min.heartbeat.interval.ms", "int", 5000),
    ("group.consumer.max.heartbeat.interval.ms", "int", 15000),
    ("group.consumer.max.size", "int", 2147483647),
    ("group.consumer.assignors", "list", "uniform,range"),
    ("group.consumer.assignment.interval.ms", "int", 1000),
    ("transaction.state.log.num.partitions", "int", 50),
    ("transaction.state.log.replication.factor", "short", 3),
    ("transaction.state.log.segment.bytes", "int", 104857600),
    ("transaction.state.log.min.isr", "int", 2),
    ("transaction.max.timeout.ms", "int", 900000),
    ("transactional.id.expiration.ms", "int", 604800000),
    ("transaction.abort.timed.out.transaction.cleanup.interval.ms", "int", 10000),
    ("transaction.remove.expired.transaction.cleanup.interval.ms", "int", 3600000),
    ("transaction.partition.verification.enable", "boolean", True),
    # Not a Kafka property: Kafka finalizes transaction.version at format time (kafka-storage
    # format / kafka-features upgrade). 2 = Transactions V2 (KIP-890), 0/1 = TV1 clients only.
    ("transaction.version", "short", 2),
    ("add.partitions.to.txn.retry.backoff.ms", "int", 20),
    ("add.partitions.to.txn.retry.backoff.max.ms", "int", 100),
    ("producer.id.expiration.ms", "int", 86400000),
    ("producer.id.expiration.check.interval.ms", "int", 600000),
    ("unstable.api.versions.enable", "boolean", False),
    # Not Kafka's: the Prometheus endpoint and the log level of this broker.
    ("metrics.port", "int", 0),
    ("metrics.host", "string", "127.0.0.1"),
    # Not Kafka's: the transaction inspector served beside /metrics (broker.inspect.live): on with the
    # metrics endpoint, its abort action only on a loopback metrics.host unless enabled, and the bounds
    # of the events kept for transactions' timelines
    ("inspector.enable", "boolean", True),
    ("inspector.actions.enable", "boolean", False),
    ("inspector.timeline.events.per.id", "int", 200),
    ("inspector.timeline.max.events", "int", 100000),
    ("log.level", "string", "INFO"),
    # Not Kafka's: how many brokers this process runs (--brokers; node ids 1..N, ports +0..N-1)
    ("cluster.brokers", "int", 1),
    # Not Kafka's: the HTTP/JSON control endpoint (0: off) and what it steers (broker.control):
    # the clock (system, or virtual: moved by the endpoint), fault rules loaded at start-up (--faults),
    # how many requests the request log keeps, the Apache Kafka release whose API versions are advertised
    ("control.port", "int", 0),
    ("control.host", "string", "127.0.0.1"),
    ("control.clock", "string", "system"),
    ("control.faults.file", "string", ""),
    ("control.request.log.size", "int", 10000),
    ("control.kafka.version", "string", ""),
)
# LogManager's first run of retention, checkpoints and flushes (Kafka: "for testing only").
BROKER_CONFIGS["log.initial.task.delay.ms"] = BrokerConfigDef(
    "log.initial.task.delay.ms", "long", 30000, internal=True)

# Environment variables that Kafka's images use for the JVM, not as broker properties.
_ENV_NOT_PROPERTIES = {
    "KAFKA_HOME", "KAFKA_OPTS", "KAFKA_HEAP_OPTS", "KAFKA_JVM_PERFORMANCE_OPTS", "KAFKA_LOG4J_OPTS",
    "KAFKA_JMX_OPTS", "KAFKA_GC_LOG_OPTS", "KAFKA_DEBUG", "KAFKA_LOG_DIR_ROOT", "KAFKA_VERSION",
}


def env_to_property(name: str) -> str:
    """KAFKA_LOG_DIRS -> log.dirs, with __ -> _ and ___ -> - as the apache/kafka image does."""
    body = name[len("KAFKA_"):]
    return body.replace("___", "\0dash\0").replace("__", "\0us\0").replace("_", ".") \
        .replace("\0dash\0", "-").replace("\0us\0", "_").lower()


def parse_properties(text: str) -> dict[str, str]:
    """Java .properties: '#'/'!' comments, '=' or ':' separators, backslash line continuation."""
    props: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending = line[:-1]
            continue
        for i, ch in enumerate(line):
            if ch in "=:":
                key, value = line[:i].strip(), line[i + 1:].strip()
                break
            if ch.isspace():
                key, value = line[:i].strip(), line[i:].strip().lstrip("=:").strip()
                break
        else:
            key, value = line, ""
        props[key] = value
    return props


def _convert(d: BrokerConfigDef, value: str) -> Any:
    if d.type in ("int", "long", "short"):
        return int(value.strip())
    if d.type == "double":
        return float(value)
    if d.type == "boolean":
        v = value.strip().lower()
        if v not in ("true", "false"):
            raise ValueError(f"{d.name}: expected true or false, got {value!r}")
        return v == "true"
    return value.strip()


class BrokerConfig:
    """Resolved broker properties; values keep their Kafka types (int, bool, str).

    Three layers, as Kafka's DynamicBrokerConfig has them, highest first: this broker's dynamic
    configs, the cluster-wide dynamic defaults (both set with AlterConfigs and kept in the cluster
    metadata), then the static properties; Kafka's defaults under all three.
    """

    def __init__(self, props: Mapping[str, str] | None = None, *, sources: Mapping[str, str] | None = None) -> None:
        self.originals: dict[str, str] = dict(props or {})
        self.sources: dict[str, str] = dict(sources or {})
        self._static: dict[str, Any] = {}
        for name, value in self.originals.items():
            d = BROKER_CONFIGS.get(name)
            if d is None:
                continue
            try:
                self._static[name] = _convert(d, value)
            except ValueError as e:
                raise ValueError(f"Invalid value {value!r} for configuration {name}: {e}") from None
        self.dynamic_default: dict[str, str] = {}
        self.dynamic_broker: dict[str, str] = {}
        self._values: dict[str, Any] = dict(self._static)

    def set_dynamic(self, cluster_default: Mapping[str, str], this_broker: Mapping[str, str]) -> None:
        """Replace both dynamic layers (validated by broker.config.dynamic_config). Only names Kafka can change
        dynamically take effect; names only this broker has (transaction.version, metrics.port) are
        unknown to Kafka, which keeps and ignores them, and so do we."""
        def effective(layer: Mapping[str, str]) -> dict[str, str]:
            return {n: v for n, v in layer.items() if n in DYNAMIC or n not in BROKER_CONFIGS}

        self.dynamic_default, self.dynamic_broker = effective(cluster_default), effective(this_broker)
        values = dict(self._static)
        for layer in (self.dynamic_default, self.dynamic_broker):
            for name, value in layer.items():
                d = BROKER_CONFIGS.get(name)
                if d is not None:
                    values[name] = _convert(d, value)
        self._values = values

    def source_of(self, name: str) -> str:
        if name in self.dynamic_broker:
            return "DYNAMIC_BROKER_CONFIG"
        if name in self.dynamic_default:
            return "DYNAMIC_DEFAULT_BROKER_CONFIG"
        if name in self._static:
            return self.sources.get(name, "STATIC_BROKER_CONFIG")
        return "DEFAULT_CONFIG"

    def layers(self, name: str) -> list[tuple[Any, str]]:
        """Every value ``name`` has, highest precedence first (DescribeConfigs synonyms)."""
        out: list[tuple[Any, str]] = []
        d = BROKER_CONFIGS.get(name)
        for layer, source in ((self.dynamic_broker, "DYNAMIC_BROKER_CONFIG"),
                              (self.dynamic_default, "DYNAMIC_DEFAULT_BROKER_CONFIG")):
            if name in layer:
                out.append((_convert(d, layer[name]) if d is not None else layer[name], source))
        if name in self._static:
            out.append((self._static[name], self.sources.get(name, "STATIC_BROKER_CONFIG")))
        elif d is None and name in self.originals:
            out.append((self.originals[name], self.sources.get(name, "STATIC_BROKER_CONFIG")))
        if d is not None and d.default is not None:
            out.append((d.default, "DEFAULT_CONFIG"))
        return out

    @classmethod
    def load(
        cls,
        config_file: str | os.PathLike | None = None,
        overrides: Iterable[str] = (),
        environ: Mapping[str, str] | None = None,
    ) -> BrokerConfig:
        props: dict[str, str] = {}
        sources: dict[str, str] = {}
        if config_file:
            for k, v in parse_properties(Path(config_file).read_text()).items():
                props[k], sources[k] = v, "STATIC_BROKER_CONFIG"
        env = os.environ if environ is None else environ
        for name, value in env.items():
            if name.startswith("KAFKA_") and name not in _ENV_NOT_PROPERTIES:
                key = env_to_property(name)
                props[key], sources[key] = value, "STATIC_BROKER_CONFIG"
        for item in overrides:
            if "=" not in item:
                raise ValueError(f"--override expects key=value, got {item!r}")
            k, v = item.split("=", 1)
            props[k.strip()], sources[k.strip()] = v.strip(), "STATIC_BROKER_CONFIG"
        cfg = cls(props, sources=sources)
        for name in props:
            if name not in BROKER_CONFIGS:
                log.warning("unknown broker property ignored", property=name)
        return cfg

    def get(self, name: str) -> Any:
        if name in self._values:
            return self._values[name]
        d = BROKER_CONFIGS.get(name)
        if d is None:
            for layer in (self.dynamic_broker, self.dynamic_default, self.originals):
                if name in layer:
                    return layer[name]
            return None
        return d.default

    def is_set(self, name: str) -> bool:
        return name in self._values

    def __getitem__(self, name: str) -> Any:
        return self.get(name)

    # --- derived values, resolved the way KafkaConfig does -------------------------------

    @property
    def node_id(self) -> int:
        if self.is_set("node.id"):
            return self.get("node.id")
        broker_id = self.get("broker.id")
        return broker_id if broker_id >= 0 else self.get("node.id")

    @property
    def log_dirs(self) -> list[str]:
        dirs = self.get("log.dirs")
        if dirs:
            return [d.strip() for d in dirs.split(",") if d.strip()]
        return [self.get("log.dir")]

    def _ms(self, ms: str, minutes: str | None, hours: str) -> int:
        if self.is_set(ms):
            return self.get(ms)
        if minutes and self.is_set(minutes):
            return self.get(minutes) * 60_000
        return self.get(hours) * 3_600_000

    @property
    def log_retention_ms(self) -> int:
        value = self._ms("log.retention.ms", "log.retention.minutes", "log.retention.hours")
        return -1 if value < 0 else value

    @property
    def log_roll_ms(self) -> int:
        return self._ms("log.roll.ms", None, "log.roll.hours")

    @property
    def log_roll_jitter_ms(self) -> int:
        return self._ms("log.roll.jitter.ms", None, "log.roll.jitter.hours")

    @property
    def log_flush_interval_ms(self) -> int:
        if self.is_set("log.flush.interval.ms"):
            return self.get("log.flush.interval.ms")
        return self.get("log.flush.scheduler.interval.ms")

    def topic_defaults(self) -> dict[str, str]:
        """Broker-level defaults of the topic configs, keyed by the topic config name."""
        return {
            "segment.bytes": str(self.get("log.segment.bytes")),
            "segment.ms": str(self.log_roll_ms),
            "segment.jitter.ms": str(self.log_roll_jitter_ms),
            "retention.ms": str(self.log_retention_ms),
            "retention.bytes": str(self.get("log.retention.bytes")),
            "index.interval.bytes": str(self.get("log.index.interval.bytes")),
            "segment.index.bytes": str(self.get("log.index.size.max.bytes")),
            "flush.messages": str(self.get("log.flush.interval.messages")),
            "flush.ms": str(self.log_flush_interval_ms),
            "cleanup.policy": str(self.get("log.cleanup.policy")),
            "max.message.bytes": str(self.get("message.max.bytes")),
            "message.timestamp.type": str(self.get("log.message.timestamp.type")),
            "message.timestamp.before.max.ms": str(self.get("log.message.timestamp.before.max.ms")),
            "message.timestamp.after.max.ms": str(self.get("log.message.timestamp.after.max.ms")),
            "min.insync.replicas": str(self.get("min.insync.replicas")),
            "compression.type": str(self.get("compression.type")),
            "delete.retention.ms": str(self.get("log.cleaner.delete.retention.ms")),
            "min.compaction.lag.ms": str(self.get("log.cleaner.min.compaction.lag.ms")),
            "max.compaction.lag.ms": str(self.get("log.cleaner.max.compaction.lag.ms")),
            "min.cleanable.dirty.ratio": str(self.get("log.cleaner.min.cleanable.ratio")),
            "file.delete.delay.ms": str(self.get("log.segment.delete.delay.ms")),
            "preallocate": str(self.get("log.preallocate")).lower(),
        }

    def listeners(self) -> list[tuple[str, str, int]]:
        return parse_listeners(self.get("listeners"))

    def advertised_listeners(self) -> list[tuple[str, str, int]]:
        adv = self.get("advertised.listeners")
        return parse_listeners(adv) if adv else self.listeners()

    def listener_security_protocols(self) -> dict[str, str]:
        """``listener.security.protocol.map`` as {LISTENER: PROTOCOL} ('INTERNAL:PLAINTEXT,...')."""
        out = {}
        for item in str(self.get("listener.security.protocol.map") or "").split(","):
            name, sep, protocol = item.strip().partition(":")
            if sep and name.strip():
                out[name.strip().upper()] = protocol.strip().upper()
        return out

    def validate_listeners(self) -> None:
        """Kafka's start-up checks on listeners (KafkaConfig.validateValues), and ours: every
        listener needs a security protocol in the map (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL), and
        a SASL listener's mechanisms must be ones we support (TLS settings: broker.net.tls);
        advertised listener names must be listener names. Raises ValueError."""
        protocols = self.listener_security_protocols()
        names = set()
        for name, _host, _port in self.listeners():
            if name in names:
                raise ValueError(f"Each listener must have a different name, {name} appears twice")
            names.add(name)
            protocol = protocols.get(name)
            if protocol is None:
                raise ValueError(f"No security protocol defined for listener {name} "
                                 f"(add {name}:PLAINTEXT to listener.security.protocol.map)")
            if protocol not in ("PLAINTEXT", "SASL_PLAINTEXT", "SSL", "SASL_SSL") and name != "CONTROLLER":
                raise ValueError(f"Listener {name} uses security protocol {protocol}; this broker serves "
                                 f"PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL")
            if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
                check_listener(self, name)
        extra = {n for n, _h, _p in self.advertised_listeners()} - names
        if extra:
            raise ValueError(f"advertised.listeners names {sorted(extra)} are not in listeners {sorted(names)}")

    def items(self) -> Iterable[tuple[str, Any, str]]:
        """(name, value, source) for every known property, and every other dynamically set one,
        as DescribeConfigs lists them."""
        for name, d in BROKER_CONFIGS.items():
            if not d.internal:
                yield name, self.get(name), self.source_of(name)
        for name in sorted((self.dynamic_broker.keys() | self.dynamic_default.keys()) - BROKER_CONFIGS.keys()):
            yield name, self.get(name), self.source_of(name)


def pinned_listeners(value: str, bound: dict[str, int]) -> str:
    """``listeners`` with each "any free port" (0) replaced by the port it was bound to: a broker
    brought back up listens where its clients knew it."""
    out = []
    for name, host, port in parse_listeners(value):
        host = f"[{host}]" if ":" in host else host
        out.append(f"{name}://{host}:{bound.get(name, port) if port == 0 else port}")
    return ",".join(out)


def parse_listeners(value: str) -> list[tuple[str, str, int]]:
    """'PLAINTEXT://host:9092,CTRL://:9093' -> [(name, host, port)]; empty host = all interfaces."""
    out = []
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        if "://" not in item:
            raise ValueError(f"listener {item!r} lacks a name://host:port form")
        name, rest = item.split("://", 1)
        host, _, port = rest.rpartition(":")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        out.append((name.upper(), host, int(port)))
    return out


SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")  # what broker.net.sasl serves


def listener_mechanisms(config: BrokerConfig, listener: str) -> tuple[str, ...]:
    """``listener.name.<listener>.sasl.enabled.mechanisms``, else ``sasl.enabled.mechanisms``."""
    value = config.get(f"listener.name.{listener.lower()}.sasl.enabled.mechanisms") or \
        config.get("sasl.enabled.mechanisms") or ""
    names = value.split(",") if isinstance(value, str) else list(value)
    return tuple(n.strip().upper() for n in names if n.strip())


def check_listener(config: BrokerConfig, listener: str) -> None:
    """Start-up check of a SASL listener's mechanisms; raises ValueError."""
    mechanisms = listener_mechanisms(config, listener)
    if not mechanisms:
        raise ValueError(f"Listener {listener} uses SASL but sasl.enabled.mechanisms is empty")
    unsupported = [m for m in mechanisms if m not in SASL_MECHANISMS]
    if unsupported:
        raise ValueError(f"SASL mechanisms {unsupported} of listener {listener} are not supported; this broker "
                         f"supports {', '.join(SASL_MECHANISMS)} (set sasl.enabled.mechanisms)")
