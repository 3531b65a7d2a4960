"""Events per second through the whole PySpark pipeline (pipelines/) on a two-worker Spark standalone
cluster: our broker against Apache Kafka 4.3.1 as the broker, in the same run.

    python bench/pipeline_cluster.py                      # about 4 minutes on 2 CPUs
    python bench/pipeline_cluster.py --events 50000 --rounds 1

One Spark standalone cluster on loopback (tests/support/spark_cluster.py: a master and two workers, each
its own JVM; the application gets one 1-core executor per worker, default JIT) and one driver, this
process. Our broker runs from the runtime install (tests/support/broker_process.py), Apache Kafka as one
KRaft node (tests/support/kafka_reference.py); both up for the whole run.

Per broker and round, a fresh input topic (``--partitions``) gets ``--events`` valid events, written by a
transactional producer (one transaction per event-time minute, ``--keys`` keys, ``--minutes`` minutes, and
one closing event per partition far ahead); then the job runs with trigger availableNow over a fresh
checkpoint, ``--max-offsets-per-trigger`` per micro-batch, all three queries (Parquet aggregates, Kafka
aggregates through one transaction per micro-batch, dead letters). The figure is events / the job's wall
time (``pipelines.job.run``: queries started to all three finished, the sink's transactions committed).
The output topic is checked to hold every window once with every event counted. The broker's CPU time
during the job is shown too: on a small machine the broker and the executors share the cores. One
warm-up run of the same size per broker first (JIT and class loading on the executors) is not counted;
then the brokers alternate (ours first in odd rounds, Kafka in even ones); the median of --rounds.

Not a test: numbers on a shared machine are noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from tests.support.broker_process import BrokerProcess  # noqa: E402
from tests.support.kafka_reference import KafkaReference  # noqa: E402
from tests.support.spark_cluster import SparkStandaloneCluster  # noqa: E402

T0 = 1704067200000  # 2024-01-01T00:00:00Z
MINUTE = 60_000


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def seed(bootstrap: str, topic: str, events: int, keys: int, minutes: int, partitions: int) -> float:
    """``events`` valid events in ``minutes`` transactions, key k in partition k % partitions; returns
    the seconds it took."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-seed", "linger.ms": 20,
                  "batch.size": 262144, "queue.buffering.max.messages": 1_000_000})
    p.init_transactions(30)
    t0 = time.monotonic()
    per_minute = events // minutes
    n = 0
    for m in range(minutes):
        p.begin_transaction()
        count = per_minute if m < minutes - 1 else events - n
        for i in range(count):
            k = i % keys
            value = json.dumps({"id": f"e{n}", "key": f"k{k}", "ts": T0 + m * MINUTE + (i * 59_000) // count,
                                "amount": float(i % 100)}).encode()
            while True:
                try:
                    p.produce(topic, value, key=f"k{k}".encode(), partition=k % partitions)
                    break
                except BufferError:
                    p.poll(0.05)
            n += 1
        p.commit_transaction(60)
    p.begin_transaction()  # closes every window: the watermark passes them all
    for part in range(partitions):
        p.produce(topic, json.dumps({"id": f"close{part}", "key": "close", "ts": T0 + (minutes + 60) * MINUTE,
                                     "amount": 0.0}).encode(), partition=part)
    p.commit_transaction(60)
    return time.monotonic() - t0


def output_totals(bootstrap: str, topic: str) -> tuple[int, int]:
    """(aggregate records, events counted in them) in the output topic, read_committed."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-verify-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False, "isolation.level": "read_committed", "enable.partition.eof": True})
    try:
        parts = set(c.list_topics(topic, timeout=30).topics[topic].partitions)
        c.assign([TopicPartition(topic, q, OFFSET_BEGINNING) for q in parts])
        records = counted = 0
        deadline = time.monotonic() + 120
        while parts and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    parts.discard(msg.partition())
                continue
            records += 1
            counted += json.loads(msg.value())["events"]
        return records, counted
    finally:
        c.close()


def cpu_seconds(pid: int) -> float:
    """user + system CPU time of a process (and its reaped children), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def run_once(spark, name: str, bootstrap: str, pid: int, work: Path, a, events: int) -> dict:
    from pipelines.job import PipelineConfig, run

    topic = f"pipe-{name}-{uuid.uuid4().hex[:6]}"
    seed_s = seed(bootstrap, topic, events, a.keys, a.minutes, a.partitions)
    cfg = PipelineConfig(bootstrap=bootstrap, input_topic=topic, output_topic=f"{topic}-aggregates",
                         output_path=str(work / topic / "out"), checkpoint_path=str(work / topic / "ckpt"),
                         max_offsets_per_trigger=a.max_offsets_per_trigger, app_name=f"bench-{topic}")
    cpu0 = cpu_seconds(pid)
    result = run(spark, cfg)
    broker_cpu = cpu_seconds(pid) - cpu0
    records, counted = output_totals(bootstrap, cfg.output_topic)
    windows = a.keys * a.minutes if events >= a.keys * a.minutes else None
    ok = counted == events and (windows is None or records == windows)
    batches = 1 + max(int(p.get("batchId", -1)) for p in result.progress.values())  # fresh checkpoint
    return {"broker": name, "events": events, "seconds": result.seconds, "rate": events / result.seconds,
            "seed_s": seed_s, "broker_cpu_s": broker_cpu, "batches": batches,
            "sink_txns": len(result.committed_batches), "ok": ok, "records": records, "counted": counted}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--keys", type=int, default=64)
    ap.add_argument("--minutes", type=int, default=30)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--max-offsets-per-trigger", type=int, default=50_000)
    ap.add_argument("--executor-memory", default="1g")
    a = ap.parse_args(argv)

    from pipelines.jars import spark_jars_conf
    from pipelines.job import PipelineConfig, build_session

    with tempfile.TemporaryDirectory(prefix="pipeline-bench-") as tmp:
        work = Path(tmp)
        t = time.monotonic()
        cluster = SparkStandaloneCluster(work / "spark", workers=2, cores=1, memory="1536m", java_opts="").start()
        log(f"spark standalone cluster (master + 2 workers) up in {time.monotonic() - t:.1f}s")
        ours = BrokerProcess(work / "ours" / "data").start()
        ref = KafkaReference()
        ref.start(work / "kafka")
        brokers = {"ours": ours.bootstrap, "kafka": ref.bootstrap}
        assert ours.proc is not None and ref.proc is not None
        pids = {"ours": ours.proc.pid, "kafka": ref.proc.pid}
        log(f"brokers: {brokers}")
        try:
            spark = build_session(PipelineConfig(
                bootstrap="-", input_topic="-", output_topic="-", output_path="-", checkpoint_path="-",
                master=cluster.master_url, app_name="pipeline-bench",
                spark_conf={"spark.jars": spark_jars_conf(),
                            **cluster.session_conf(executor_memory=a.executor_memory)}))
            for name in ("ours", "kafka"):  # JIT and class loading on the executors, and each broker's
                warm = run_once(spark, name, brokers[name], pids[name], work, a, a.events)
                log(f"warm-up {name}: {warm}")
            rows = []
            for r in range(a.rounds):
                order = ["ours", "kafka"] if r % 2 == 0 else ["kafka", "ours"]
                for name in order:
                    row = run_once(spark, name, brokers[name], pids[name], work, a, a.events)
                    log(f"round {r + 1} {name}: {row}")
                    rows.append(row)
            spark.stop()
        finally:
            ref.stop()
            ours.stop()
            cluster.stop()

    print(f"\nPySpark pipeline on a 2-worker Spark standalone cluster (1 core, 1 executor each), "
          f"{a.events} events, {a.partitions} input partitions, {a.max_offsets_per_trigger} offsets per "
          f"micro-batch, median of {a.rounds}:\n")
    print("| broker | job wall time (s) | events/s | broker CPU during the job (s) | micro-batches "
          "| sink transactions | seed (s) | outputs ok |")
    print("|---|---|---|---|---|---|---|---|")
    med = {}
    for name in ("ours", "kafka"):
        mine = [r for r in rows if r["broker"] == name]
        secs = statistics.median(r["seconds"] for r in mine)
        med[name] = a.events / secs
        label = "ours" if name == "ours" else f"Apache Kafka {ref.version}"
        cpu = statistics.median(r["broker_cpu_s"] for r in mine)
        print(f"| {label} | {secs:.1f} | {med[name]:,.0f} | {cpu:.1f} | {mine[0]['batches']} | {mine[0]['sink_txns']} | "
              f"{statistics.median(r['seed_s'] for r in mine):.1f} | {all(r['ok'] for r in mine)} |")
    print(f"\nours / Kafka: {med['ours'] / med['kafka']:.2f}")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
