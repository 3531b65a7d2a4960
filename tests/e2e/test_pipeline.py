"""The PySpark exactly-once pipeline (pipelines/) against the broker, with stock Spark and Kafka clients.

Seeds an input topic the way transactional producers write it: committed transactions interleaved with
aborted ones (aborted records sit between committed records in the log), malformed events inside committed
transactions, and a last event far in the future that moves the watermark past every test window. Then runs
the job (trigger availableNow, several micro-batches through maxOffsetsPerTrigger) and checks that

* the Parquet table (read through Spark, so through the file sink's _spark_metadata log) and
* the output topic (read_committed)

hold exactly the expected per-key, per-minute aggregates: nothing aborted counted, nothing twice, and the
dead-letter table holds every malformed record once with its reason.

The crash test runs the driver in a subprocess and SIGKILLs its process group (Python driver + JVM)
twice: once right after a micro-batch's Kafka transaction committed but before Spark wrote the batch to its
commit log (so the restart replays that batch and the progress record must stop the second write), once
from outside as soon as the sink's commit log advanced; a third run finishes. Outputs: each result once.

Needs pyspark (the test extras), java 17 and mvn (the connector jars are fetched once and cached, see
pipelines/jars.py). Against our broker the tests need transactions; they skip, naming what is missing,
when ApiVersions does not advertise InitProducerId/AddPartitionsToTxn/EndTxn. Set PIPELINE_TEST_APACHE_KAFKA=1
to also run the end-to-end test against Apache Kafka (tests/support/kafka_reference.py): the same job,
only the bootstrap address differs.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

pyspark = pytest.importorskip("pyspark")

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from tests.support.broker_process import ROOT  # noqa: E402
from tests.support.kafka_reference import probe_kafka_api  # noqa: E402

pytestmark = [
    pytest.mark.slow,
    pytest.mark.java,
    pytest.mark.skipif(shutil.which("java") is None, reason="needs java 17+ on PATH"),
    pytest.mark.timeout(600),
]

T0 = 1704067200000  # 2024-01-01T00:00:00Z, a minute boundary
MINUTE = 60_000
MINUTES = 6
KEYS = ("k0", "k1", "k2", "k3")  # key i lives in partition i % 2 (symmetric partitions, same layout)
PARTITIONS = 2
TXN_APIS = {22: "InitProducerId", 24: "AddPartitionsToTxn", 25: "AddOffsetsToTxn", 26: "EndTxn"}


def _bad_records() -> list[tuple[bytes | None, str]]:
    t = str(T0 + 30_000).encode()
    return [
        (b"not json at all", "malformed_json"),
        (b"[1, 2, 3]", "malformed_json"),
        (b'{"id": "b2", "key": "k0", "ts": "yesterday", "amount": 1}', "type_mismatch"),
        (b'{"id": "b3", "key": "", "ts": ' + t + b', "amount": 1}', "missing_key"),
        (b'{"id": "b4", "key": "k1", "ts": ' + t + b"}", "missing_amount"),
        (None, "null_value"),
        (b'{"id": "b6", "key": "k2", "amount": 3}', "missing_ts"),
        (b'{"key": "k3", "ts": ' + t + b', "amount": 3}', "missing_id"),
        (b'{"id": "b8", "key": "k0", "ts": ' + t + b', "amount": "12"}', "type_mismatch"),
        (b'{"id": "b9", "key": "k1", "ts": -5, "amount": 1}', "bad_ts"),
        (b'{"id": "b10", "key": "' + b"x" * 300 + b'", "ts": ' + t + b', "amount": 1}', "key_too_long"),
        (b'{"id": "b11", "key": "k2", "ts": ' + t + b', "amount": 1', "malformed_json"),
    ]


@dataclass
class Seeded:
    topic: str
    aggregates: list[tuple]  # (key, window_start_ms, window_end_ms, events, total, min, max), sorted
    dead_letters: Counter  # reason -> count
    offsets: int  # total offsets in the input (records + control markers)


def _event(i: str, key: str, ts: int, amount: float) -> bytes:
    return json.dumps({"id": i, "key": key, "ts": ts, "amount": amount}).encode()


def create_topic(bootstrap: str, topic: str, partitions: int, config: dict | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})], operation_timeout=30)
    futures[topic].result(30)


def seed_input(bootstrap: str, topic: str) -> Seeded:
    """Per event-time minute m: producer A opens a transaction and writes one event per key with a huge
    amount; producer B writes two events per key plus one malformed record per partition and commits;
    then A aborts. So each partition's log holds, per minute, A's records, B's records, B's COMMIT marker,
    A's ABORT marker. Finally B commits one event per partition at T0 + 1 hour (closes every window)."""
    create_topic(bootstrap, topic, PARTITIONS)
    committer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-committer", "linger.ms": 0})
    aborter = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-aborter", "linger.ms": 0})
    committer.init_transactions(30)
    aborter.init_transactions(30)
    bad = _bad_records()
    expected: dict[tuple[str, int], list[float]] = {}
    dead: Counter = Counter()
    n = 0
    for m in range(MINUTES):
        aborter.begin_transaction()
        for ki, key in enumerate(KEYS):
            ts = T0 + m * MINUTE + 5_000 + ki * 1_000
            aborter.produce(topic, _event(f"a{m}-{key}", key, ts, 1_000_000.0), key=key, partition=ki % PARTITIONS)
        aborter.flush(30)  # A's records are in the log before B's
        committer.begin_transaction()
        for j in range(2):
            for ki, key in enumerate(KEYS):
                ts = T0 + m * MINUTE + 10_000 + j * 20_000 + ki * 1_000
                amount = float((m + 1) * 10 + ki) + j * 0.5
                committer.produce(topic, _event(f"c{m}-{j}-{key}", key, ts, amount), key=key,
                                  partition=ki % PARTITIONS)
                expected.setdefault((key, T0 + m * MINUTE), []).append(amount)
        for p in range(PARTITIONS):
            value, reason = bad[n % len(bad)]
            n += 1
            committer.produce(topic, value, key=b"bad", partition=p)
            dead[reason] += 1
        committer.commit_transaction(30)
        aborter.abort_transaction(30)
    committer.begin_transaction()
    for p in range(PARTITIONS):
        key = KEYS[p]
        committer.produce(topic, _event(f"flush-{p}", key, T0 + 60 * MINUTE, 0.0), key=key, partition=p)
    committer.commit_transaction(30)
    aggregates = sorted(
        (key, ws, ws + MINUTE, len(v), sum(v), min(v), max(v)) for (key, ws), v in expected.items())
    per_partition = MINUTES * (len(KEYS) // PARTITIONS * 3 + 1 + 2) + 2
    return Seeded(topic, aggregates, dead, per_partition * PARTITIONS)


class HangingTransaction:
    """An open transaction that holds the input's last stable offset back, with committed records above it.

    Producer C opens a transaction and writes one event per key at T0 + 70 min; producer B then commits
    one event per key at T0 + 71 min. Until C commits, a read_committed reader sees none of it (the LSO
    is C's first offset): Spark's offset planning (ListOffsets, isolation level READ_COMMITTED) must
    stop there. ``commit()`` adds an event per partition at T0 + 3 h (closing the 60/70/71-minute
    windows) and commits; the aggregates then expected on top of the first phase are ``aggregates``."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.c = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-hanging",
                           "transaction.timeout.ms": 600_000, "linger.ms": 0})
        self.c.init_transactions(30)
        self.c.begin_transaction()
        rows = []
        for ki, key in enumerate(KEYS):
            ws = T0 + 70 * MINUTE
            self.c.produce(topic, _event(f"h70-{key}", key, ws + ki * 1_000, 100.0 + ki), key=key,
                           partition=ki % PARTITIONS)
            rows.append((key, ws, ws + MINUTE, 1, 100.0 + ki, 100.0 + ki, 100.0 + ki))
        self.c.flush(30)
        b = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-committer", "linger.ms": 0})
        b.init_transactions(30)
        b.begin_transaction()
        for ki, key in enumerate(KEYS):
            ws = T0 + 71 * MINUTE
            b.produce(topic, _event(f"b71-{key}", key, ws + ki * 1_000, 200.0 + ki), key=key,
                      partition=ki % PARTITIONS)
            rows.append((key, ws, ws + MINUTE, 1, 200.0 + ki, 200.0 + ki, 200.0 + ki))
        b.commit_transaction(30)
        # the first phase's closing events (amount 0 at T0 + 60 min) get their windows closed too
        for p in range(PARTITIONS):
            ws = T0 + 60 * MINUTE
            rows.append((KEYS[p], ws, ws + MINUTE, 1, 0.0, 0.0, 0.0))
        self.aggregates = sorted(rows)

    def commit(self) -> None:
        for p in range(PARTITIONS):
            key = KEYS[p]
            self.c.produce(self.topic, _event(f"flush2-{p}", key, T0 + 180 * MINUTE, 0.0), key=key, partition=p)
        self.c.commit_transaction(30)


# -- reading the outputs --------------------------------------------------------------------------------


def read_topic(bootstrap: str, topic: str, isolation: str = "read_committed", timeout: float = 60) -> list:
    """Every record of ``topic`` (all partitions, from the beginning to the end) as (key, value, headers)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"verify-{topic}-{time.monotonic_ns()}",
                  "enable.auto.commit": False, "isolation.level": isolation, "enable.partition.eof": True})
    try:
        md = c.list_topics(topic, timeout=30).topics[topic]
        parts = set(md.partitions)
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
        out = []
        deadline = time.monotonic() + timeout
        while parts:
            assert time.monotonic() < deadline, f"reading {topic}: partitions {parts} never reached their end"
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                parts.discard(msg.partition())
                continue
            out.append((msg.key(), msg.value(), dict(msg.headers() or [])))
        return out
    finally:
        c.close()


def topic_aggregates(bootstrap: str, topic: str, isolation: str = "read_committed") -> list[tuple]:
    rows = []
    for key, value, _ in read_topic(bootstrap, topic, isolation):
        v = json.loads(value)
        assert key == f"{v['key']}@{v['window_start_ms']}".encode()
        rows.append((v["key"], v["window_start_ms"], v["window_end_ms"], v["events"], v["total"],
                     v["min_amount"], v["max_amount"]))
    return sorted(rows)


def parquet_aggregates(spark, path: str) -> list[tuple]:
    from pyspark.sql import functions as F

    df = spark.read.parquet(path).select(
        "key", F.unix_millis("window_start"), F.unix_millis("window_end"), "events", "total", "min_amount",
        "max_amount")
    return sorted(tuple(r) for r in df.collect())


def parquet_dead_letters(spark, path: str) -> list[tuple]:
    return sorted(tuple(r) for r in spark.read.parquet(path).select("partition", "offset", "error").collect())


def progress_records(bootstrap: str, topic: str) -> list[dict]:
    return [json.loads(v) for _, v, _ in read_topic(bootstrap, topic)]


# -- fixtures ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def spark_jars() -> str:
    from pipelines.jars import JarFetchError, spark_jars_conf

    t0 = time.monotonic()
    try:
        jars = spark_jars_conf()
    except JarFetchError as e:
        if shutil.which("mvn") is None:
            pytest.skip(f"Spark's Kafka connector jars are not cached and mvn is missing: {e}")
        raise
    print(f"\n[pipeline] connector jars ready in {time.monotonic() - t0:.1f}s")
    return jars


@pytest.fixture(scope="module")
def spark(spark_jars, tmp_path_factory):
    """The test's own SparkSession (local[2]); also the pipeline's session for the in-process run."""
    from pipelines.job import PipelineConfig, build_session

    t0 = time.monotonic()
    local_dir = tmp_path_factory.mktemp("spark-local")
    cfg = PipelineConfig(bootstrap="unused:9092", input_topic="-", output_topic="-", output_path="-",
                         checkpoint_path="-",
                         spark_conf={"spark.jars": spark_jars, "spark.local.dir": str(local_dir), **FAST_START})
    session = build_session(cfg)
    print(f"\n[pipeline] SparkSession {session.version} up in {time.monotonic() - t0:.1f}s")
    yield session
    session.stop()


def require_transactions(bootstrap: str) -> None:
    host, _, port = bootstrap.rpartition(":")
    keys = probe_kafka_api(host, int(port))["api_keys"]
    missing = [f"{name} ({key})" for key, name in TXN_APIS.items() if key not in keys]
    if missing:
        pytest.skip("broker does not advertise " + ", ".join(missing) + ": transactions not landed yet")


@pytest.fixture(scope="module")
def apache_kafka(tmp_path_factory):
    from tests.support.kafka_reference import KafkaReference

    ref = KafkaReference()
    ref.start(tmp_path_factory.mktemp("pipeline-kafka-ref"))
    yield ref.bootstrap
    ref.stop()


@pytest.fixture(params=["pykafka", "apache-kafka"])
def bootstrap(request) -> str:
    if request.param == "apache-kafka":
        if os.environ.get("PIPELINE_TEST_APACHE_KAFKA") != "1":
            pytest.skip("set PIPELINE_TEST_APACHE_KAFKA=1 to run the pipeline against Apache Kafka too")
        return request.getfixturevalue("apache_kafka")
    b = request.getfixturevalue("broker").bootstrap
    require_transactions(b)
    return b


# Settings for short runs on 2 cores (no effect on results): C1-only JIT and no whole-stage codegen
# roughly halve the first micro-batch (class loading + compilation dominate; the data are tiny).
FAST_START = {
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    "spark.sql.codegen.wholeStage": "false",
}


def _config(bootstrap: str, seeded: Seeded, tmp: Path, jars: str, max_offsets: int):
    from pipelines.job import PipelineConfig

    return PipelineConfig(
        bootstrap=bootstrap, input_topic=seeded.topic, output_topic=f"{seeded.topic}-aggregates",
        output_path=str(tmp / "out"), checkpoint_path=str(tmp / "checkpoints"),
        max_offsets_per_trigger=max_offsets,
        spark_conf={"spark.jars": jars, "spark.local.dir": str(tmp / "spark-local"), **FAST_START})


def _check_outputs(spark, bootstrap: str, cfg, aggregates: list[tuple], dead_letters: Counter) -> None:
    got_parquet = parquet_aggregates(spark, cfg.path("aggregates"))
    assert got_parquet == aggregates, "Parquet table differs from the expected aggregates"
    got_topic = topic_aggregates(bootstrap, cfg.output_topic)
    assert got_topic == aggregates, "output topic (read_committed) differs from the expected aggregates"
    dead = parquet_dead_letters(spark, cfg.path("dead_letter"))
    assert len(dead) == len(set((p, o) for p, o, _ in dead)) == sum(dead_letters.values())
    assert Counter(reason for _, _, reason in dead) == dead_letters


# -- tests ---------------------------------------------------------------------------------------------------


def test_pipeline_exactly_once(spark, spark_jars, bootstrap, tmp_path, topic_name):
    from pipelines.job import run

    t0 = time.monotonic()
    seeded = seed_input(bootstrap, topic_name)
    hanging = HangingTransaction(bootstrap, topic_name)
    t_seed = time.monotonic() - t0
    assert len(seeded.aggregates) == len(KEYS) * MINUTES
    # About 3 data micro-batches: windows close progressively as the watermark moves.
    cfg = _config(bootstrap, seeded, tmp_path, spark_jars, max_offsets=seeded.offsets // 3 + 1)
    result = run(spark, cfg)
    print(f"\n[pipeline] seed {t_seed:.1f}s, run {result.seconds:.1f}s, Kafka sink committed batches "
          f"{result.committed_batches}")
    assert result.skipped_batches == []
    assert len(result.committed_batches) >= 2, "expected the aggregates to span several micro-batches"
    # Nothing at or above the open transaction's first offset was read: only the first phase is there.
    _check_outputs(spark, bootstrap, cfg, seeded.aggregates, seeded.dead_letters)
    progress = progress_records(bootstrap, cfg.progress)
    assert [p["batch_id"] for p in progress] == result.committed_batches
    assert sum(p["records"] for p in progress) == len(seeded.aggregates)

    # The open transaction commits; a second run over the same checkpoint adds exactly what it released.
    hanging.commit()
    again = run(spark, cfg)
    print(f"[pipeline] second run {again.seconds:.1f}s, committed batches {again.committed_batches}")
    assert again.skipped_batches == [] and again.committed_batches
    assert min(again.committed_batches) > max(result.committed_batches)
    _check_outputs(spark, bootstrap, cfg, sorted(seeded.aggregates + hanging.aggregates), seeded.dead_letters)
    progress = progress_records(bootstrap, cfg.progress)
    assert [p["batch_id"] for p in progress] == result.committed_batches + again.committed_batches


DRIVER = r"""
import os, signal, sys
from pipelines.job import main
crash_after = int(os.environ.get("PIPELINE_TEST_CRASH_AFTER_COMMITS", "0"))
commits = []
def on_committed(batch_id):
    commits.append(batch_id)
    if crash_after and len(commits) >= crash_after:
        print(f"CRASH after committing batch {batch_id}", flush=True)
        os.killpg(os.getpgrp(), signal.SIGKILL)
sys.exit(main(sys.argv[1:], on_committed=on_committed))
"""


def _driver_args(cfg) -> list[str]:
    return ["--bootstrap", cfg.bootstrap, "--input-topic", cfg.input_topic, "--output-topic", cfg.output_topic,
            "--output-path", cfg.output_path, "--checkpoint-path", cfg.checkpoint_path,
            "--max-offsets-per-trigger", str(cfg.max_offsets_per_trigger),
            *[a for k, v in cfg.spark_conf.items() for a in ("--conf", f"{k}={v}")]]


class Driver:
    """The pipeline's driver (Python + its JVM) in a process group of its own, to kill as a whole."""

    def __init__(self, cfg, log: Path, env: dict | None = None) -> None:
        self.log = log
        full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
        self._out = open(log, "wb")  # noqa: SIM115 - closed in wait()
        self.proc = subprocess.Popen([sys.executable, "-c", DRIVER, *_driver_args(cfg)], cwd=ROOT, env=full_env,
                                     stdout=self._out, stderr=subprocess.STDOUT, start_new_session=True)

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(30)

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout)
        finally:
            self.kill()  # whatever is left of the group (the JVM dies with its stdin anyway)
            self._out.close()

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def summary(self) -> dict:
        lines = [ln for ln in self.output().splitlines() if ln.startswith('{"committed_batches"')]
        assert lines, f"driver printed no summary:\n{self.output()[-5000:]}"
        return json.loads(lines[-1])


def _commits(checkpoint: Path) -> int:
    d = checkpoint / "commits"
    return len([p for p in d.iterdir() if p.name.isdigit()]) if d.exists() else 0


def test_pipeline_crash_restart(spark, spark_jars, bootstrap, tmp_path, topic_name):
    seeded = seed_input(bootstrap, topic_name)
    # Many small micro-batches, so there is something to crash between.
    cfg = _config(bootstrap, seeded, tmp_path, spark_jars, max_offsets=seeded.offsets // 6 + 1)
    timings = {}

    # 1. Crash right after the first Kafka transaction committed, before Spark's commit log has the batch.
    t0 = time.monotonic()
    d1 = Driver(cfg, tmp_path / "driver1.log", env={"PIPELINE_TEST_CRASH_AFTER_COMMITS": "1"})
    code = d1.wait(300)
    timings["run1"] = time.monotonic() - t0
    assert code == -signal.SIGKILL, f"driver 1 exited {code}:\n{d1.output()[-5000:]}"
    assert "CRASH after committing batch" in d1.output()
    crashed_batch = int(d1.output().split("CRASH after committing batch ")[1].split()[0])
    first = topic_aggregates(bootstrap, cfg.output_topic)
    assert 0 < len(first) < len(seeded.aggregates)
    assert set(first) <= set(seeded.aggregates)
    kafka_ckpt = Path(cfg.checkpoint("aggregates_kafka"))
    assert _commits(kafka_ckpt) <= crashed_batch, "Spark committed the batch the crash should have cut off"

    # 2. Restart; kill the whole driver from outside as soon as the Kafka sink's query committed 1 more batch.
    t0 = time.monotonic()
    before = _commits(kafka_ckpt)
    d2 = Driver(cfg, tmp_path / "driver2.log")
    deadline = time.monotonic() + 300
    while _commits(kafka_ckpt) <= before and d2.proc.poll() is None:
        assert time.monotonic() < deadline, f"no progress after restart:\n{d2.output()[-5000:]}"
        time.sleep(0.05)
    d2.kill()
    d2.wait(30)
    timings["run2"] = time.monotonic() - t0
    assert "replay skipped" in d2.output(), f"the replayed batch {crashed_batch} was not detected:\n" \
                                            f"{d2.output()[-5000:]}"

    # 3. Run to completion.
    t0 = time.monotonic()
    d3 = Driver(cfg, tmp_path / "driver3.log")
    code = d3.wait(300)
    timings["run3"] = time.monotonic() - t0
    assert code == 0, f"driver 3 exited {code}:\n{d3.output()[-5000:]}"
    print("\n[pipeline] crash test runs: " + ", ".join(f"{k} {v:.1f}s" for k, v in timings.items())
          + f"; final run summary {d3.summary()}")

    _check_outputs(spark, bootstrap, cfg, seeded.aggregates, seeded.dead_letters)
    # The progress topic: one committed record per committed batch, batch ids strictly increasing.
    ids = [p["batch_id"] for p in progress_records(bootstrap, cfg.progress)]
    assert ids == sorted(set(ids)) and crashed_batch in ids
