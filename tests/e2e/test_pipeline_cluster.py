"""The PySpark pipeline (pipelines/) on a real Spark standalone cluster, against the broker, through failures.

A master and two workers, each its own JVM on loopback (tests/support/spark_cluster.py), run the job's
executors: Spark's Kafka source reads on the executors, in other processes than the driver, and the
connector jars reach them through ``spark.jars``. Each application takes one 1-core executor per worker.
The broker is ours, started from the runtime install (``KafkaCluster(python=runtime_python())``, with
the control endpoint on). The input is seeded as in tests/e2e/test_pipeline.py: committed transactions
interleaved with aborted ones, malformed records, and an open transaction with committed records above it.

* ``test_cluster_exactly_once``: the local[2] test's assertions on the cluster (driver in this process):
  aggregates in Parquet (read through Spark) and in the output topic (read_committed), every dead-letter
  row once, nothing behind the open transaction until it commits, then exactly what it released.
* ``test_cluster_worker_killed_mid_batch``: while a micro-batch runs (each Fetch of the input answered
  2 s late through the control endpoint, so tasks are caught running), ``kill -9`` of one worker's JVM
  and of its executor JVM; the interrupted task runs again on the other worker; results exactly once.
* ``test_cluster_driver_killed_and_restarted``: the driver submitted with ``spark-submit --master
  spark://...`` (as the README shows), SIGKILLed with its JVM right after a micro-batch's Kafka
  transaction committed (before Spark's commit log has it), then from outside between micro-batches;
  the third submission finishes. The replay is detected, each result is in both outputs once.
* ``test_cluster_broker_failures``: against ``--brokers 3``, RF 3, min.insync.replicas 2, the job running
  with a processing-time trigger while input keeps arriving: the leader of an input partition is taken
  down (``POST /brokers/<id>/down``), brought back, then the broker coordinating the sink's
  transactional id (``GET /coordinators/transaction/<id>``); the job keeps going (or restarts from its
  checkpoint if a query fails) and every result is in both outputs exactly once.

Markers ``slow`` and ``java`` (java 17 and mvn, pyspark from the test extras).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from broker.testing import KafkaCluster  # noqa: E402
from tests.e2e.test_pipeline import (  # noqa: E402
    DRIVER,
    FAST_START,
    KEYS,
    MINUTE,
    PARTITIONS,
    T0,
    HangingTransaction,
    _bad_records,
    _check_outputs,
    _commits,
    _driver_args,
    _event,
    parquet_aggregates,
    progress_records,
    require_transactions,
    seed_input,
    spark_jars,  # noqa: F401 - the module-scoped fixture
    topic_aggregates,
)
from tests.support.broker_process import ROOT  # noqa: E402
from tests.support.runtime_env import runtime_python  # noqa: E402
from tests.support.spark_cluster import SparkStandaloneCluster  # noqa: E402

pytestmark = [
    pytest.mark.slow,
    pytest.mark.java,
    pytest.mark.skipif(shutil.which("java") is None, reason="needs java 17+ on PATH"),
    pytest.mark.timeout(420),
]


# -- fixtures ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory):
    t0 = time.monotonic()
    cluster = SparkStandaloneCluster(tmp_path_factory.mktemp("spark-standalone"), workers=2).start()
    print(f"\n[cluster] Spark master + 2 workers up in {time.monotonic() - t0:.1f}s ({cluster.master_url})")
    yield cluster
    cluster.stop()


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    """Our broker from the runtime install, control endpoint on."""
    with KafkaCluster(python=runtime_python(), data_dir=tmp_path_factory.mktemp("pipeline-cluster-broker")) as k:
        require_transactions(k.bootstrap)
        yield k


def _cluster_conf(cluster: SparkStandaloneCluster, jars: str, local_dir: Path) -> dict[str, str]:
    return {"spark.jars": jars, "spark.local.dir": str(local_dir), **FAST_START, **cluster.session_conf()}


@pytest.fixture(scope="module")
def cluster_spark(spark_cluster, spark_jars, tmp_path_factory):  # noqa: F811
    """A driver in this process on the standalone cluster: runs the job in three tests and reads the
    Parquet outputs back (through Spark, so through the file sink's _spark_metadata log)."""
    from pipelines.job import PipelineConfig, build_session

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # for this process's driver JVM, if it starts here
    t0 = time.monotonic()
    cfg = PipelineConfig(bootstrap="unused:9092", input_topic="-", output_topic="-", output_path="-",
                         checkpoint_path="-", master=spark_cluster.master_url, app_name="pipeline-cluster-tests",
                         spark_conf=_cluster_conf(spark_cluster, spark_jars,
                                                  tmp_path_factory.mktemp("spark-driver-local")))
    session = build_session(cfg)
    assert session.sparkContext.master == spark_cluster.master_url, session.sparkContext.master
    print(f"\n[cluster] driver session on {session.sparkContext.master} up in {time.monotonic() - t0:.1f}s")
    yield session
    session.stop()


def _config(bootstrap: str, topic: str, tmp: Path, max_offsets: int | None, **kw):
    from pipelines.job import PipelineConfig

    return PipelineConfig(bootstrap=bootstrap, input_topic=topic, output_topic=f"{topic}-aggregates",
                          output_path=str(tmp / "out"), checkpoint_path=str(tmp / "checkpoints"),
                          max_offsets_per_trigger=max_offsets, **kw)


# -- executor logs: which tasks ran where -------------------------------------------------------------------

RUNNING = re.compile(r"Running task (\d+)\.(\d+) in stage (\d+)\.(\d+) \(TID (\d+)\)")
FINISHED = re.compile(r"Finished task (\d+)\.(\d+) in stage (\d+)\.(\d+) \(TID (\d+)\)")


def _tasks(logs: list[Path]) -> tuple[dict[int, tuple[int, int, int, int]], set[int]]:
    """Started tasks (TID -> partition, attempt, stage, stage attempt) and finished TIDs in these logs."""
    started, finished = {}, set()
    for path in logs:
        text = path.read_text(errors="replace")
        for m in RUNNING.finditer(text):
            started[int(m.group(5))] = tuple(int(g) for g in m.groups()[:4])
        finished |= {int(m.group(5)) for m in FINISHED.finditer(text)}
    return started, finished


def _app_logs(cluster: SparkStandaloneCluster, worker: int, app_id: str) -> list[Path]:
    return [p for p in cluster.executor_logs(worker) if p.parent.parent.name == app_id]


class JobThread(threading.Thread):
    """``pipelines.job.run`` in a thread (the driver is this process); a query that fails is started again
    from its checkpoint, as an operator's restart would, up to ``restarts`` times."""

    def __init__(self, spark, cfg, restarts: int = 0, on_committed=None) -> None:
        super().__init__(daemon=True)
        self.spark, self.cfg, self.restarts = spark, cfg, restarts
        self.on_committed = on_committed
        self.stop_event = threading.Event()
        self.results: list = []
        self.failures: list[str] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        from pipelines.job import run

        while True:
            try:
                self.results.append(run(self.spark, self.cfg, on_committed=self.on_committed,
                                        stop_event=self.stop_event))
                return
            except BaseException as e:  # noqa: BLE001 - reported to the test
                self.failures.append(repr(e)[:2000])
                if len(self.failures) > self.restarts or self.stop_event.is_set():
                    self.error = e
                    return

    def finish(self, timeout: float) -> None:
        self.join(timeout)
        assert not self.is_alive(), f"the job did not finish in {timeout}s"
        if self.error is not None:
            raise AssertionError(f"the job failed: {self.failures}") from self.error

    @property
    def committed(self) -> list[int]:
        return [b for r in self.results for b in r.committed_batches]


# -- a: exactly once on the cluster ------------------------------------------------------------------------


def test_cluster_exactly_once(cluster_spark, spark_cluster, kafka, tmp_path, topic_name):
    from pipelines.job import run

    bootstrap = kafka.bootstrap
    seeded = seed_input(bootstrap, topic_name)
    hanging = HangingTransaction(bootstrap, topic_name)
    cfg = _config(bootstrap, topic_name, tmp_path, max_offsets=seeded.offsets // 3 + 1)
    result = run(cluster_spark, cfg)
    print(f"\n[cluster] first run {result.seconds:.1f}s, Kafka sink committed batches {result.committed_batches}")
    assert result.skipped_batches == []
    assert len(result.committed_batches) >= 2, "expected the aggregates to span several micro-batches"
    _check_outputs(cluster_spark, bootstrap, cfg, seeded.aggregates, seeded.dead_letters)
    progress = progress_records(bootstrap, cfg.progress)
    assert [p["batch_id"] for p in progress] == result.committed_batches
    assert sum(p["records"] for p in progress) == len(seeded.aggregates)

    # Both workers ran this application's tasks: the Kafka source read on executors in other JVMs.
    app = cluster_spark.sparkContext.applicationId
    for w in (1, 2):
        started, _ = _tasks(_app_logs(spark_cluster, w, app))
        assert started, f"worker {w}'s executor ran no task of {app}"

    hanging.commit()
    again = run(cluster_spark, cfg)
    print(f"[cluster] second run {again.seconds:.1f}s, committed batches {again.committed_batches}")
    assert again.skipped_batches == [] and again.committed_batches
    assert min(again.committed_batches) > max(result.committed_batches)
    _check_outputs(cluster_spark, bootstrap, cfg, sorted(seeded.aggregates + hanging.aggregates),
                   seeded.dead_letters)
    progress = progress_records(bootstrap, cfg.progress)
    assert [p["batch_id"] for p in progress] == result.committed_batches + again.committed_batches


# -- b: a worker killed in the middle of a micro-batch ----------------------------------------------------


def test_cluster_worker_killed_mid_batch(cluster_spark, spark_cluster, kafka, tmp_path, topic_name):
    spark_cluster.start_worker(1)
    spark_cluster.start_worker(2)
    bootstrap = kafka.bootstrap
    seeded = seed_input(bootstrap, topic_name)
    cfg = _config(bootstrap, topic_name, tmp_path, max_offsets=seeded.offsets // 5 + 1)
    app = cluster_spark.sparkContext.applicationId
    assert _app_logs(spark_cluster, 1, app) and _app_logs(spark_cluster, 2, app), "an executor on each worker"

    first_commit = threading.Event()
    job = JobThread(cluster_spark, cfg, on_committed=lambda _batch: first_commit.set())
    t0 = time.monotonic()
    job.start()
    assert first_commit.wait(180), f"no micro-batch committed: {job.failures}"
    # From now on every Fetch of the input is answered 2 s late: a task reading it is caught running.
    (rule,) = kafka.faults.add({"api": "Fetch", "topic": topic_name, "action": "delay", "delay_ms": 2000,
                                "count": -1})
    try:
        logs = _app_logs(spark_cluster, 1, app)
        deadline = time.monotonic() + 120
        while True:
            assert time.monotonic() < deadline, "no task of this job ran on worker 1"
            started, finished = _tasks(logs)
            running = {tid: t for tid, t in started.items() if tid not in finished}
            if running:
                time.sleep(0.3)  # still running 300 ms later: inside a delayed fetch
                started, finished = _tasks(logs)
                if any(tid not in finished for tid in running):
                    break
            time.sleep(0.05)
        killed = spark_cluster.kill_worker(1)
        killed_at = time.monotonic()
    finally:
        kafka.faults.remove(rule["id"])
    started, finished = _tasks(logs)  # the killed executor's log is final
    interrupted = {(t[2], t[0]) for tid, t in started.items() if tid not in finished}  # (stage, partition)
    assert interrupted, "the worker was killed between tasks"
    print(f"\n[cluster] killed worker 1 (pids {killed}) {killed_at - t0:.1f}s into the job, "
          f"interrupting (stage, partition) {sorted(interrupted)}")

    job.finish(240)
    print(f"[cluster] job done {time.monotonic() - t0:.1f}s after start; committed batches {job.committed}")
    # The interrupted tasks ran again on worker 2 (stage retried or the same stage, a later attempt).
    started2, finished2 = _tasks(_app_logs(spark_cluster, 2, app))
    rerun = {(t[2], t[0]) for tid, t in started2.items() if tid in finished2}
    assert interrupted <= rerun, f"interrupted {interrupted}, ran on worker 2 {sorted(rerun)}"
    assert len(spark_cluster.alive_workers()) == 1, "the master still lists the killed worker"
    _check_outputs(cluster_spark, bootstrap, cfg, seeded.aggregates, seeded.dead_letters)
    ids = [p["batch_id"] for p in progress_records(bootstrap, cfg.progress)]
    assert ids == job.committed
    spark_cluster.start_worker(1)


# -- c: the driver killed and restarted, submitted with spark-submit ---------------------------------------


# The driver with test_pipeline's crash hook, submitted as a script. Under spark-submit the Python driver's
# output goes through a pipe to the SparkSubmit JVM, which dies with it: its last lines would be lost, so
# this driver writes to its own file (PIPELINE_TEST_DRIVER_LOG).
HOOKED_DRIVER = r"""
import os, sys
fd = os.open(os.environ["PIPELINE_TEST_DRIVER_LOG"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
os.dup2(fd, 1)
os.dup2(fd, 2)
sys.stdout.reconfigure(line_buffering=True)
""" + DRIVER


class SubmittedDriver:
    """``spark-submit --master spark://... <script> <job args>`` in a process group of its own (the
    SparkSubmit JVM and the Python driver it runs), to be killed as a whole. ``own_log``: the script is
    HOOKED_DRIVER, whose Python output goes to ``<log>.driver`` directly."""

    def __init__(self, cluster: SparkStandaloneCluster, conf: dict[str, str], script: str, job_args: list[str],
                 log: Path, env: dict[str, str] | None = None, own_log: bool = False) -> None:
        self.log = log
        self.driver_log = log.with_name(log.name + ".driver") if own_log else None
        env = {"PYTHONPATH": str(ROOT), **(env or {})}
        if self.driver_log is not None:
            env["PIPELINE_TEST_DRIVER_LOG"] = str(self.driver_log)
        args = [a for k, v in conf.items() for a in ("--conf", f"{k}={v}")]
        self.proc = cluster.submit([*args, script, *job_args], log=log, env=env, cwd=ROOT)

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
            self.kill()

    def output(self) -> str:
        out = self.log.read_text(errors="replace")
        if self.driver_log is not None and self.driver_log.exists():
            out += "\n--- the Python driver ---\n" + self.driver_log.read_text(errors="replace")
        return out

    def summary(self) -> dict:
        lines = [ln for ln in self.output().splitlines() if ln.startswith('{"committed_batches"')]
        assert lines, f"driver printed no summary:\n{self.output()[-5000:]}"
        return json.loads(lines[-1])


def test_cluster_driver_killed_and_restarted(cluster_spark, spark_cluster, kafka, spark_jars,  # noqa: F811
                                             tmp_path, topic_name):
    spark_cluster.start_worker(1)
    spark_cluster.start_worker(2)
    bootstrap = kafka.bootstrap
    seeded = seed_input(bootstrap, topic_name)
    cfg = _config(bootstrap, topic_name, tmp_path, max_offsets=seeded.offsets // 6 + 1)
    # The job's own arguments, without --master (spark-submit's) or Spark settings (spark-submit's --conf).
    job_args = _driver_args(cfg)
    conf = {"spark.jars": spark_jars, **FAST_START, **spark_cluster.session_conf(),
            "spark.app.name": "pipeline-cluster-crash"}
    crash_script = tmp_path / "driver_with_crash_hook.py"
    crash_script.write_text(HOOKED_DRIVER)
    job_py = str(ROOT / "pipelines" / "job.py")
    timings = {}

    # 1. The driver kills itself (Python + JVM) right after the first Kafka transaction committed.
    t0 = time.monotonic()
    d1 = SubmittedDriver(spark_cluster, conf, str(crash_script), job_args, tmp_path / "driver1.log",
                         env={"PIPELINE_TEST_CRASH_AFTER_COMMITS": "1"}, own_log=True)
    code = d1.wait(240)
    timings["run1"] = time.monotonic() - t0
    assert code in (-signal.SIGKILL, 137), f"driver 1 exited {code}:\n{d1.output()[-5000:]}"
    out = d1.output()
    assert "CRASH after committing batch" in out, out[-5000:]
    assert f"master {spark_cluster.master_url}" in out, "the driver did not run on the cluster"
    crashed_batch = int(out.split("CRASH after committing batch ")[1].split()[0])
    first = topic_aggregates(bootstrap, cfg.output_topic)
    assert 0 < len(first) < len(seeded.aggregates)
    kafka_ckpt = Path(cfg.checkpoint("aggregates_kafka"))
    assert _commits(kafka_ckpt) <= crashed_batch, "Spark committed the batch the crash should have cut off"

    # 2. Resubmitted; killed from outside (its process group: JVM and Python) once the sink's query
    #    committed one more micro-batch.
    t0 = time.monotonic()
    before = _commits(kafka_ckpt)
    d2 = SubmittedDriver(spark_cluster, conf, str(crash_script), job_args, tmp_path / "driver2.log",
                         own_log=True)
    deadline = time.monotonic() + 240
    while _commits(kafka_ckpt) <= before and d2.proc.poll() is None:
        assert time.monotonic() < deadline, f"no progress after restart:\n{d2.output()[-5000:]}"
        time.sleep(0.05)
    d2.kill()
    timings["run2"] = time.monotonic() - t0
    assert "replay skipped" in d2.output(), f"the replayed batch {crashed_batch} was not detected:\n" \
                                            f"{d2.output()[-5000:]}"

    # 3. Resubmitted as the README shows (spark-submit ... pipelines/job.py ...); runs to the end.
    t0 = time.monotonic()
    d3 = SubmittedDriver(spark_cluster, conf, job_py, job_args, tmp_path / "driver3.log")
    code = d3.wait(240)
    timings["run3"] = time.monotonic() - t0
    assert code == 0, f"driver 3 exited {code}:\n{d3.output()[-5000:]}"
    print("\n[cluster] spark-submit crash test runs: " + ", ".join(f"{k} {v:.1f}s" for k, v in timings.items())
          + f"; final run summary {d3.summary()}")

    _check_outputs(cluster_spark, bootstrap, cfg, seeded.aggregates, seeded.dead_letters)
    ids = [p["batch_id"] for p in progress_records(bootstrap, cfg.progress)]
    assert ids == sorted(set(ids)) and crashed_batch in ids


# -- d: broker failures under a running job, three brokers, RF 3 -------------------------------------------


def write_minutes(bootstrap: str, topic: str, tag: str, minutes: range, close_at: int) -> tuple[list, Counter]:
    """seed_input's pattern for ``minutes`` (event-time minutes after T0): per minute an aborted transaction
    interleaved with a committed one (two events per key, one malformed record per partition), then one
    committed event per partition at ``close_at`` minutes, which closes every earlier window (its own
    stays open). Returns the aggregates of ``minutes`` and the dead-letter reasons."""
    committer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-{tag}-committer",
                          "linger.ms": 0})
    aborter = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-{tag}-aborter",
                        "linger.ms": 0})
    committer.init_transactions(60)
    aborter.init_transactions(60)
    bad = _bad_records()
    expected: dict[tuple[str, int], list[float]] = {}
    dead: Counter = Counter()
    for n, m in enumerate(minutes):
        aborter.begin_transaction()
        for ki, key in enumerate(KEYS):
            aborter.produce(topic, _event(f"{tag}a{m}-{key}", key, T0 + m * MINUTE + 5_000 + ki * 1_000, 1e6),
                            key=key, partition=ki % PARTITIONS)
        aborter.flush(60)
        committer.begin_transaction()
        for j in range(2):
            for ki, key in enumerate(KEYS):
                amount = float((m + 1) * 10 + ki) + j * 0.5
                committer.produce(topic, _event(f"{tag}c{m}-{j}-{key}", key,
                                                T0 + m * MINUTE + 10_000 + j * 20_000 + ki * 1_000, amount),
                                  key=key, partition=ki % PARTITIONS)
                expected.setdefault((key, T0 + m * MINUTE), []).append(amount)
        for p in range(PARTITIONS):
            value, reason = bad[(n * PARTITIONS + p) % len(bad)]
            committer.produce(topic, value, key=b"bad", partition=p)
            dead[reason] += 1
        committer.commit_transaction(60)
        aborter.abort_transaction(60)
    committer.begin_transaction()
    for p in range(PARTITIONS):
        committer.produce(topic, _event(f"{tag}-close-{p}", KEYS[p], T0 + close_at * MINUTE, 0.0), key=KEYS[p],
                          partition=p)
    committer.commit_transaction(60)
    rows = [(key, ws, ws + MINUTE, len(v), sum(v), min(v), max(v)) for (key, ws), v in expected.items()]
    return rows, dead


def _closing_rows(close_at: int) -> list[tuple]:
    """The windows of write_minutes' closing events, once a later close has closed them."""
    ws = T0 + close_at * MINUTE
    return [(KEYS[p], ws, ws + MINUTE, 1, 0.0, 0.0, 0.0) for p in range(PARTITIONS)]


def _wait_isr_full(kafka: KafkaCluster, topics: list[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        short = [(t, p["partition"], p["isr"]) for t in topics for p in kafka.topic(t)["partitions"]
                 if len(p["isr"]) < len(p["replicas"])]
        if not short:
            return
        assert time.monotonic() < deadline, f"ISR not full after {timeout}s: {short}"
        time.sleep(0.2)


def test_cluster_broker_failures(cluster_spark, spark_cluster, tmp_path, tmp_path_factory, topic_name):
    spark_cluster.start_worker(1)
    spark_cluster.start_worker(2)
    t_start = time.monotonic()
    with KafkaCluster(brokers=3, python=runtime_python(), data_dir=tmp_path_factory.mktemp("pipeline-rf3"),
                      config={"default.replication.factor": "3", "min.insync.replicas": "2"}) as kafka:
        bootstrap = kafka.bootstrap  # all three brokers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic_name, PARTITIONS, 3)])[topic_name].result(60)
        rows, dead = write_minutes(bootstrap, topic_name, "p1", range(0, 6), close_at=60)
        cfg = _config(bootstrap, topic_name, tmp_path, max_offsets=20, trigger="processing-time=1 second")
        txn_id = f"{cfg.app_name}.{cfg.output_topic}.sink"
        kafka_ckpt = Path(cfg.checkpoint("aggregates_kafka"))
        job = JobThread(cluster_spark, cfg, restarts=2)
        job.start()
        events = []

        def wait_batches(n: int, timeout: float = 180) -> None:
            target = _commits(kafka_ckpt) + n
            deadline = time.monotonic() + timeout
            while _commits(kafka_ckpt) < target:
                assert job.is_alive(), f"the job stopped: {job.failures}"
                assert time.monotonic() < deadline, f"the job made no progress: {job.failures}"
                time.sleep(0.1)

        try:
            wait_batches(2)
            # 1. The leader of input partition 0 goes down mid-stream; more input arrives meanwhile.
            leader = next(p["leader"] for p in kafka.topic(topic_name)["partitions"] if p["partition"] == 0)
            kafka.broker(leader).down()
            events.append(f"input partition 0 leader {leader} down at batch {_commits(kafka_ckpt)}")
            more, more_dead = write_minutes(bootstrap, topic_name, "p2", range(70, 74), close_at=120)
            rows += more + _closing_rows(60)
            dead += more_dead
            wait_batches(2)
            new_leader = next(p["leader"] for p in kafka.topic(topic_name)["partitions"] if p["partition"] == 0)
            assert new_leader != leader
            # The executors' consumers (Spark's Kafka source) followed the partition to its new leader.
            assert [r for r in kafka.requests.list(api="Fetch", topic=topic_name, broker=new_leader)
                    if "spark-kafka-source" in (r.get("client_id") or "")], "no executor fetched from the new leader"
            kafka.broker(leader).up()
            _wait_isr_full(kafka, [topic_name, cfg.output_topic, cfg.progress, "__transaction_state"])
            events.append(f"broker {leader} up, ISRs full at batch {_commits(kafka_ckpt)}")

            # 2. The sink's transaction coordinator goes down mid-stream; more input arrives.
            coordinator = kafka.coordinator("transaction", txn_id)
            kafka.broker(coordinator).down()
            events.append(f"transaction coordinator {coordinator} down at batch {_commits(kafka_ckpt)}")
            more, more_dead = write_minutes(bootstrap, topic_name, "p3", range(130, 134), close_at=180)
            rows += more + _closing_rows(120)
            dead += more_dead
            expected = sorted(rows)

            # Until both outputs hold everything (the job keeps running; a failed query restarts).
            deadline = time.monotonic() + 240
            while True:
                assert job.is_alive(), f"the job stopped: {job.failures}"
                got = topic_aggregates(bootstrap, cfg.output_topic)
                if len(got) >= len(expected) and len(parquet_aggregates(cluster_spark, cfg.path("aggregates"))) \
                        >= len(expected):
                    break
                assert time.monotonic() < deadline, f"outputs incomplete: {len(got)} of {len(expected)}"
                time.sleep(1)
            new_coordinator = kafka.coordinator("transaction", txn_id)
            assert new_coordinator != coordinator
            ended = [r for r in kafka.requests.list(api="EndTxn", transactional_id=txn_id)
                     if r.get("error") == "NONE" and r.get("broker") == new_coordinator]
            assert ended, "no transaction of the sink was committed at the new coordinator"
        finally:
            job.stop_event.set()
            job.finish(120)
        print(f"\n[cluster] RF 3 broker failures ({time.monotonic() - t_start:.1f}s): " + "; ".join(events)
              + f"; query restarts {len(job.failures)} {job.failures}; committed batches {job.committed}")
        _check_outputs(cluster_spark, bootstrap, cfg, expected, dead)
        ids = [p["batch_id"] for p in progress_records(bootstrap, cfg.progress)]
        assert ids == sorted(set(ids))
