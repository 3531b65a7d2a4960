"""The streaming job: Kafka (read_committed) -> validate -> windowed aggregates -> Parquet + Kafka, exactly once.

    python -m pipelines --bootstrap 127.0.0.1:9092 --input-topic events --output-topic event-aggregates \\
        --output-path /data/pipeline --checkpoint-path /data/pipeline/_checkpoints

Three streaming queries share one parsed source definition (each has its own Kafka source and checkpoint):

``aggregates_parquet``  per-key tumbling-window aggregates (count/sum/min/max of ``amount``) with a watermark,
                        append mode, Spark's file sink -> ``<output-path>/aggregates`` (exactly once: the
                        sink's ``_spark_metadata`` log + the checkpoint);
``aggregates_kafka``    the same aggregates -> ``foreachBatch`` -> one Kafka transaction per micro-batch
                        with a progress record (see pipelines/kafka_sink.py) -> ``--output-topic``;
``dead_letter``         records that fail validation, with the reason and their topic/partition/offset ->
                        file sink -> ``<output-path>/dead_letter``.

Everything that ties the job to one machine is an address: ``--master`` (e.g. ``spark://host:7077``,
``yarn``, ``k8s://...``; default spark-submit's ``--master``, else ``local[2]``), ``--bootstrap``, and the
two paths (any Hadoop URI: ``hdfs://``, ``s3a://``, ...; the driver and every executor must see them).
Under spark-submit the script is this file:

    PYTHONPATH=. spark-submit --master spark://host:7077 --conf spark.jars=$(python -m pipelines.jars) \\
        pipelines/job.py --bootstrap ... (the same arguments)

Security settings for a real cluster go in ``--source-option kafka.<prop>=...``
(Spark's Kafka source) and ``--client-config <prop>=...`` (the driver's confluent-kafka clients).
The default trigger ``available-now`` processes what is in the topic and stops; ``processing-time=<interval>``
runs until stopped (SIGTERM/Ctrl-C stop the queries between batches).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

log = logging.getLogger("pipelines.job")

DEFAULT_APP_NAME = "pykafka-windowed-aggregates"


@dataclass
class PipelineConfig:
    bootstrap: str
    input_topic: str
    output_topic: str
    output_path: str
    checkpoint_path: str
    progress_topic: str | None = None  # default: <output_topic>.progress
    app_name: str = DEFAULT_APP_NAME
    master: str | None = None  # None: spark-submit's --master, else local[2]
    window: str = "1 minute"
    watermark: str = "1 minute"
    trigger: str = "available-now"  # or "processing-time=<interval>"
    max_offsets_per_trigger: int | None = None
    starting_offsets: str = "earliest"
    shuffle_partitions: int = 2
    transactional_id: str | None = None
    source_options: dict[str, str] = field(default_factory=dict)
    client_config: dict[str, str] = field(default_factory=dict)
    spark_conf: dict[str, str] = field(default_factory=dict)
    create_topics: bool = True

    @property
    def progress(self) -> str:
        return self.progress_topic or f"{self.output_topic}.progress"

    def path(self, name: str) -> str:
        return f"{self.output_path.rstrip('/')}/{name}"

    def checkpoint(self, query: str) -> str:
        return f"{self.checkpoint_path.rstrip('/')}/{query}"


@dataclass
class RunResult:
    committed_batches: list[int]  # the Kafka sink's micro-batches committed in this run
    skipped_batches: list[int]  # replayed micro-batches the Kafka sink found already committed
    input_rows: dict[str, int]  # per query: Kafka records read in this run (recent progress)
    progress: dict[str, Any]  # per query: the last progress report
    seconds: float


def submitted_conf() -> dict[str, str]:
    """spark-submit's settings (``--master``, ``--conf``, ``--jars``, ``--packages`` ...) when this driver
    runs under spark-submit (its JVM is already up and hands its gateway to Python), else ``{}``."""
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return {}
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()  # connects to spark-submit's JVM; launches nothing
    return dict(SparkConf().getAll())


def build_session(cfg: PipelineConfig):
    """A SparkSession with Spark's Kafka connector on the classpath (spark.jars, fetched with Maven and
    cached unless spark.jars / spark.jars.packages is given, here or to spark-submit), UI off, few
    shuffle partitions, UTC. The master: ``cfg.master``, else spark-submit's ``--master``, else local[2]."""
    from pyspark.sql import SparkSession

    submitted = submitted_conf()
    master = cfg.master or submitted.get("spark.master") or "local[2]"
    conf: dict[str, str] = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(cfg.shuffle_partitions),
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.streaming.metricsEnabled": "false",
    }
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # read by the JVM launcher
        conf["spark.driver.host"] = "127.0.0.1"
        conf["spark.driver.bindAddress"] = "127.0.0.1"
    given = {**submitted, **cfg.spark_conf}
    if not given.get("spark.jars") and not given.get("spark.jars.packages"):
        from pipelines.jars import spark_jars_conf

        conf["spark.jars"] = spark_jars_conf()
    conf.update(cfg.spark_conf)
    builder = SparkSession.builder.master(master).appName(cfg.app_name)
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def kafka_source(spark, cfg: PipelineConfig):
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", cfg.bootstrap)
        .option("subscribe", cfg.input_topic)
        .option("startingOffsets", cfg.starting_offsets)
        # Transactional input: aborted records and open transactions are never read. The same setting
        # makes the driver's offset planning ask ListOffsets for the last stable offset.
        .option("kafka.isolation.level", "read_committed")
        .option("failOnDataLoss", "true")
    )
    if cfg.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(cfg.max_offsets_per_trigger))
    for k, v in cfg.source_options.items():
        reader = reader.option(k, v)
    return reader.load()


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat().replace("+00:00", "Z")


def aggregate_records(df) -> list[tuple[bytes, bytes]]:
    """A micro-batch of aggregates -> Kafka (key, value): key ``<key>@<window start ms>``, JSON value."""
    from pyspark.sql import functions as F

    rows = df.select(
        "key",
        F.unix_millis("window_start").alias("window_start_ms"),
        F.unix_millis("window_end").alias("window_end_ms"),
        "events", "total", "min_amount", "max_amount",
    ).collect()
    out = []
    for r in rows:
        value = {
            "key": r.key,
            "window_start": _iso(r.window_start_ms),
            "window_end": _iso(r.window_end_ms),
            "window_start_ms": r.window_start_ms,
            "window_end_ms": r.window_end_ms,
            "events": r.events,
            "total": r.total,
            "min_amount": r.min_amount,
            "max_amount": r.max_amount,
        }
        out.append((f"{r.key}@{r.window_start_ms}".encode(), json.dumps(value, sort_keys=True).encode()))
    return out


def _trigger(writer, cfg: PipelineConfig):
    if cfg.trigger == "available-now":
        return writer.trigger(availableNow=True)
    if cfg.trigger.startswith("processing-time="):
        return writer.trigger(processingTime=cfg.trigger.split("=", 1)[1])
    raise ValueError(f"unknown trigger {cfg.trigger!r} (available-now | processing-time=<interval>)")


def start_queries(spark, cfg: PipelineConfig, on_committed: Callable[[int], None] | None = None):
    """Start the three queries; returns (queries, kafka sink)."""
    from pipelines.events import dead_letters, parse, valid_events, windowed_aggregates
    from pipelines.kafka_sink import TransactionalBatchSink, ensure_topic

    if cfg.create_topics:
        ensure_topic(cfg.bootstrap, cfg.output_topic, client_config=cfg.client_config)
        ensure_topic(cfg.bootstrap, cfg.progress, partitions=1, config={"cleanup.policy": "compact"},
                     client_config=cfg.client_config)

    def aggregates():
        return windowed_aggregates(valid_events(parse(kafka_source(spark, cfg))), cfg.window, cfg.watermark)

    q_parquet = (
        _trigger(aggregates().writeStream.queryName("aggregates_parquet"), cfg)
        .outputMode("append").format("parquet")
        .option("path", cfg.path("aggregates"))
        .option("checkpointLocation", cfg.checkpoint("aggregates_parquet"))
        .start()
    )
    sink = TransactionalBatchSink(
        cfg.bootstrap, cfg.output_topic, cfg.progress, cfg.app_name, aggregate_records,
        transactional_id=cfg.transactional_id, client_config=cfg.client_config, on_committed=on_committed)
    q_kafka = (
        _trigger(aggregates().writeStream.queryName("aggregates_kafka"), cfg)
        .outputMode("append")
        .foreachBatch(sink)
        .option("checkpointLocation", cfg.checkpoint("aggregates_kafka"))
        .start()
    )
    sink.bind(q_kafka)
    q_dead = (
        _trigger(dead_letters(parse(kafka_source(spark, cfg))).writeStream.queryName("dead_letter"), cfg)
        .outputMode("append").format("parquet")
        .option("path", cfg.path("dead_letter"))
        .option("checkpointLocation", cfg.checkpoint("dead_letter"))
        .start()
    )
    return [q_parquet, q_kafka, q_dead], sink


def run(spark, cfg: PipelineConfig, on_committed: Callable[[int], None] | None = None,
        stop_event: threading.Event | None = None) -> RunResult:
    """Run the queries until they finish (available-now) or ``stop_event`` is set; raise if one fails."""
    t0 = time.monotonic()
    queries, sink = start_queries(spark, cfg, on_committed)
    try:
        while True:
            for q in queries:
                if not q.isActive and q.exception() is not None:
                    raise RuntimeError(f"query {q.name} failed: {q.exception()}")
            if not any(q.isActive for q in queries):
                break
            if stop_event is not None and stop_event.is_set():
                break
            time.sleep(0.2)
    finally:
        for q in queries:
            if q.isActive:
                q.stop()
        sink.close()
    rows = {q.name: sum(p.get("numInputRows", 0) for p in q.recentProgress) for q in queries}
    progress = {q.name: (q.lastProgress or {}) for q in queries}
    return RunResult(list(sink.committed), list(sink.skipped), rows, progress, time.monotonic() - t0)


def _kv(items: Sequence[str] | None) -> dict[str, str]:
    out = {}
    for item in items or ():
        k, sep, v = item.partition("=")
        if not sep:
            raise argparse.ArgumentTypeError(f"expected key=value, got {item!r}")
        out[k] = v
    return out


def parse_args(argv: Sequence[str] | None = None) -> PipelineConfig:
    p = argparse.ArgumentParser(prog="python -m pipelines", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bootstrap", required=True, help="Kafka bootstrap servers, host:port[,host:port]")
    p.add_argument("--input-topic", required=True)
    p.add_argument("--output-topic", required=True)
    p.add_argument("--progress-topic", help="compacted topic for the Kafka sink's progress records "
                                            "(default <output-topic>.progress; one writer only)")
    p.add_argument("--output-path", required=True, help="base path: <path>/aggregates, <path>/dead_letter")
    p.add_argument("--checkpoint-path", required=True)
    p.add_argument("--master", help="default: spark-submit's --master, else local[2]")
    p.add_argument("--app-name", default=DEFAULT_APP_NAME)
    p.add_argument("--window", default="1 minute")
    p.add_argument("--watermark", default="1 minute")
    p.add_argument("--trigger", default="available-now", help="available-now | processing-time=<interval>")
    p.add_argument("--max-offsets-per-trigger", type=int)
    p.add_argument("--starting-offsets", default="earliest")
    p.add_argument("--shuffle-partitions", type=int, default=2)
    p.add_argument("--transactional-id", help="default <app-name>.<output-topic>.sink")
    p.add_argument("--no-create-topics", dest="create_topics", action="store_false",
                   help="do not create the output and progress topics when missing")
    p.add_argument("--source-option", action="append", metavar="K=V", help="extra Spark Kafka source option")
    p.add_argument("--client-config", action="append", metavar="K=V", help="extra librdkafka property")
    p.add_argument("--conf", action="append", metavar="K=V", help="extra Spark configuration")
    a = p.parse_args(argv)
    return PipelineConfig(
        bootstrap=a.bootstrap, input_topic=a.input_topic, output_topic=a.output_topic,
        progress_topic=a.progress_topic, output_path=a.output_path, checkpoint_path=a.checkpoint_path,
        app_name=a.app_name, master=a.master, window=a.window, watermark=a.watermark, trigger=a.trigger,
        max_offsets_per_trigger=a.max_offsets_per_trigger, starting_offsets=a.starting_offsets,
        shuffle_partitions=a.shuffle_partitions, transactional_id=a.transactional_id,
        source_options=_kv(a.source_option), client_config=_kv(a.client_config), spark_conf=_kv(a.conf),
        create_topics=a.create_topics)


def main(argv: Sequence[str] | None = None, on_committed: Callable[[int], None] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    cfg = parse_args(argv)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    t0 = time.monotonic()
    spark = build_session(cfg)
    log.info("spark %s session up in %.1fs (master %s)", spark.version, time.monotonic() - t0,
             spark.sparkContext.master)
    try:
        result = run(spark, cfg, on_committed=on_committed, stop_event=stop)
    finally:
        spark.stop()
    print(json.dumps({
        "committed_batches": result.committed_batches,
        "skipped_batches": result.skipped_batches,
        "seconds": round(result.seconds, 2),
        "input_rows": result.input_rows,
    }), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
