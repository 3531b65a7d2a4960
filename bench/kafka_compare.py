"""Side-by-side benchmark: Apache Kafka (the reference, tests/support/kafka_reference.py) and our broker,
on this machine, in the same run, measured with Kafka's own tools.

    python bench/kafka_compare.py                       # about 10 minutes on 2 CPUs
    python bench/kafka_compare.py --records 50000 --txn-records 2000   # a quick look
    python bench/kafka_compare.py --runs 5 --records 500000 --record-size 1024 --partitions 3
    python bench/kafka_compare.py --json results.json   # also write every raw figure
    python bench/kafka_compare.py --ours-before /tmp/before --ours-control   # what a change costs

Figures (each the median of --runs runs, after --warmup-rounds untimed rounds; Kafka and ours
alternate run by run so that machine noise hits both alike):

- produce MB/s with ProducerPerformance: plain (acks=all, no idempotence), idempotent (the Java
  default: enable.idempotence=true, acks=all) and transactional (--transaction-duration-ms, default
  100 ms); also the producer's p99 send latency of the plain run;
- consume MB/s, read_committed, with ConsumerPerformance over the transactional run's topic
  (fetch.MB.sec: the time after the group join), --consume-runs times per round, the two brokers'
  runs alternating (A B B A ...) once both have produced; also the consumer's own fetch-latency-avg
  (--print-metrics), the broker's service as the consumer saw it;
- fetch loop MB/s and round trip (bench/raw_fetch.py): the same topic read with raw Fetch requests, one
  at a time, 1 MiB each: the broker's read path without the Java consumer's CPU in the figure; once
  with the OS's receive buffer and once with the Java consumer's 64 KiB (receive.buffer.bytes);
- transactions/s: ProducerPerformance with --transaction-duration-ms 1, i.e. about one record per
  transaction; the number of transactions is counted exactly from the log (high watermark minus
  records: one commit marker per transaction on a one-partition topic);
- end-to-end latency (EndToEndLatency: produce acks=all, then consume each record) p50/p99;
- start-up: process spawn to the first answered Metadata request (ApiVersions + Metadata listing the
  broker), on an empty data directory; Kafka's storage format is a separate one-time step, not counted,
  and our sources are byte-compiled first, as an install has them;
- RSS (VmRSS from /proc/<pid>/status): idle a few seconds after start-up, and the peak sampled every
  100 ms during the load phase.

Prints a table with the ratio ours/Kafka and the issue's target for each figure. Needs java 17+ and mvn
(for the first fetch of Kafka's jars); not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.raw_fetch import fetch_mb_per_s  # noqa: E402
from tests.support.kafka_reference import (  # noqa: E402
    KafkaReference,
    free_port,
    probe_kafka_api,
)

TOOLS = "org.apache.kafka.tools."
PRODUCER_RE = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th")
E2E_AVG_RE = re.compile(r"Avg latency: ([\d.]+) ms")
# --print-metrics: the consumer's own view of the broker (its Fetch round trips, in ms)
CONSUMER_METRIC_RE = re.compile(r"^consumer-fetch-manager-metrics:(fetch-latency-avg):\{[^}]*\}\s*:\s*([\d.]+)$", re.M)
E2E_PCT_RE = re.compile(r"Percentiles: 50th = ([\d.]+), 99th = ([\d.]+), 99.9th = ([\d.]+)")

# The settings KafkaReference gives Apache Kafka, given to ours as well.
OUR_OVERRIDES = {
    "num.partitions": "1", "default.replication.factor": "1", "min.insync.replicas": "1",
    "offsets.topic.replication.factor": "1", "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1", "group.initial.rebalance.delay.ms": "0",
}


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def vm_rss_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


class RssSampler:
    """Samples a process's VmRSS every ``interval`` seconds while active; keeps the peak."""

    def __init__(self, pid: int, interval: float = 0.1) -> None:
        self.pid, self.interval = pid, interval
        self.peak = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            rss = vm_rss_mb(self.pid)
            if rss is not None:
                self.peak = max(self.peak, rss)
            self._stop.wait(self.interval)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


# -- the two brokers ---------------------------------------------------------------------------------

class Broker:
    name: str
    bootstrap: str
    pid: int

    def stop(self) -> None:
        raise NotImplementedError


class KafkaBroker(Broker):
    name = "kafka"

    def __init__(self, ref: KafkaReference, workdir: Path) -> None:
        self.ref = ref
        ref.start(workdir)
        self.bootstrap = ref.bootstrap
        self.pid = ref.proc.pid
        # Popen -> ApiVersions + Metadata answered, polled every 10 ms as for ours; format excluded
        self.startup_s = ref.timings["start"]

    def stop(self) -> None:
        self.ref.stop()


def spawn_ours(workdir: Path, port: int, overrides: dict[str, str], extra: tuple[str, ...] = (),
               tree: Path = ROOT) -> tuple[subprocess.Popen, IO[bytes]]:
    """Our broker from the source tree (``tree``: this one, or another checkout) on ``port`` with
    data in ``workdir``, without the caller's KAFKA_* environment; its output goes to
    ``workdir/broker.log`` (the returned file)."""
    args = [sys.executable, "-m", "broker", *extra, "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
            "--override", f"log.dirs={workdir / 'data'}"]
    for k, v in overrides.items():
        args += ["--override", f"{k}={v}"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_")}
    env["PYTHONPATH"] = str(tree)
    log_file = open(workdir / "broker.log", "ab")  # noqa: SIM115 - the caller closes it
    return subprocess.Popen(args, cwd=tree, stdout=log_file, stderr=subprocess.STDOUT, env=env), log_file


class OurBroker(Broker):
    name = "ours"

    def __init__(self, workdir: Path, log_level: str = os.environ.get("BENCH_LOG_LEVEL", "WARNING"),
                 name: str = "ours", tree: Path = ROOT, overrides: dict[str, str] | None = None) -> None:
        """``name``/``tree``/``overrides``: a variant of ours (another checkout, other settings)."""
        self.name = name
        workdir.mkdir(parents=True, exist_ok=True)
        port = free_port()
        self.bootstrap = f"127.0.0.1:{port}"
        t0 = time.monotonic()
        self.proc, self._log = spawn_ours(workdir, port, {"log.level": log_level, **OUR_OVERRIDES,
                                                          **(overrides or {})}, tree=tree)
        self.pid = self.proc.pid
        host, _, p = self.bootstrap.rpartition(":")
        deadline = t0 + 60
        while True:  # the same probe as Kafka's (ApiVersions, then Metadata listing a broker), every 10 ms
            if self.proc.poll() is not None:
                raise RuntimeError(f"our broker exited with {self.proc.returncode}; see {workdir / 'broker.log'}")
            try:
                probe_kafka_api(host, int(p), timeout=1.0)
                break
            except Exception:  # noqa: BLE001
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)
        self.startup_s = time.monotonic() - t0

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


# -- measurements -------------------------------------------------------------------------------------

def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    try:
        admin.create_topics([NewTopic(name, partitions, 1)], timeout_ms=30000)
    finally:
        admin.close()
    # wait until a producer would find a leader
    host, _, port = bootstrap.rpartition(":")
    from kafka import KafkaConsumer

    c = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        deadline = time.monotonic() + 30
        while not c.partitions_for_topic(name) or len(c.partitions_for_topic(name)) < partitions:
            if time.monotonic() > deadline:
                raise RuntimeError(f"topic {name} not visible on {bootstrap}")
            time.sleep(0.1)
            c.topics()
    finally:
        c.close()


def end_offsets(bootstrap: str, topic: str, partitions: int) -> int:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        return sum(c.end_offsets(tps).values())
    finally:
        c.close()


def tool(ref: KafkaReference, main: str, args: list, timeout: float) -> str:
    r = ref.run_tool(TOOLS + main, args, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"{main} exited {r.returncode}:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return r.stdout


def producer_perf(ref, bootstrap, topic, records, size, props: dict, extra: list, timeout: float) -> dict:
    out = tool(ref, "ProducerPerformance", [
        "--bootstrap-server", bootstrap, "--topic", topic, "--num-records", records, "--record-size", size,
        "--throughput", -1, "--reporting-interval", 600000,
        "--command-property", *[f"{k}={v}" for k, v in props.items()], *extra], timeout)
    m = None
    for line in out.splitlines():
        m = PRODUCER_RE.search(line) or m
    if m is None:
        raise RuntimeError(f"no summary in ProducerPerformance output:\n{out[-2000:]}")
    n, rps, mbps, avg, mx, p50, p95, p99, p999 = m.groups()
    return {"records": int(n), "records_per_s": float(rps), "mb_per_s": float(mbps), "avg_ms": float(avg),
            "p50_ms": float(p50), "p99_ms": float(p99), "elapsed_s": int(n) / float(rps) if float(rps) else None}


def consumer_perf_args(bootstrap: str, topic: str, records: int, props: dict[str, str] | None = None) -> list:
    """ConsumerPerformance's arguments; its --command-property takes one key=value each time."""
    props = {"isolation.level": "read_committed", "auto.offset.reset": "earliest", **(props or {})}
    return ["--bootstrap-server", bootstrap, "--topic", topic, "--num-records", records, "--timeout", 30000,
            "--group", f"perf-{uuid.uuid4().hex[:8]}", "--print-metrics",
            *[arg for k, v in props.items() for arg in ("--command-property", f"{k}={v}")]]


def consumer_perf(ref, bootstrap, topic, records, timeout: float) -> dict:
    out = tool(ref, "ConsumerPerformance", consumer_perf_args(bootstrap, topic, records), timeout)
    lines = [ln for ln in out.splitlines() if ln.strip()]
    at = next(i for i, ln in enumerate(lines) if ln.startswith("start.time"))
    header, row = lines[at], lines[at + 1]
    stats = dict(zip([h.strip() for h in header.split(",")], [v.strip() for v in row.split(",")], strict=False))
    metrics = {m.group(1): float(m.group(2)) for m in CONSUMER_METRIC_RE.finditer(out)}
    return {"records": int(stats["data.consumed.in.nMsg"]), "mb_per_s": float(stats["MB.sec"]),
            "fetch_mb_per_s": float(stats["fetch.MB.sec"]), "rebalance_ms": float(stats["rebalance.time.ms"]),
            "fetch_latency_ms": metrics.get("fetch-latency-avg")}


def e2e_latency(ref, bootstrap, topic, records, size, timeout: float) -> dict:
    out = tool(ref, "EndToEndLatency", [
        "--bootstrap-server", bootstrap, "--topic", topic, "--num-records", records, "--producer-acks", "all",
        "--record-size", size], timeout)
    avg, pct = E2E_AVG_RE.search(out), E2E_PCT_RE.search(out)
    if not (avg and pct):
        raise RuntimeError(f"no latency summary in EndToEndLatency output:\n{out[-2000:]}")
    return {"avg_ms": float(avg.group(1)), "p50_ms": float(pct.group(1)), "p99_ms": float(pct.group(2)),
            "p999_ms": float(pct.group(3))}


def producer_props(a) -> dict:
    """acks=all plus the --producer-prop settings, for every ProducerPerformance run."""
    return {"acks": "all", **dict(kv.split("=", 1) for kv in a.producer_prop)}


def produce_phase(ref: KafkaReference, b: Broker, run: int, a, figures: dict) -> str:
    """The three produce figures against broker ``b``; returns the transactional run's topic, which
    the consume phase reads."""
    tag = f"{run}-{uuid.uuid4().hex[:6]}"
    base = producer_props(a)
    to = a.tool_timeout

    t = f"perf-plain-{tag}"
    create_topic(b.bootstrap, t, a.partitions)
    r = producer_perf(ref, b.bootstrap, t, a.records, a.record_size, {**base, "enable.idempotence": "false"}, [], to)
    figures["produce_plain_mb_s"].append(r["mb_per_s"])
    figures["produce_plain_p99_ms"].append(r["p99_ms"])
    log(f"  {b.name} plain: {r['mb_per_s']:.1f} MB/s, p99 {r['p99_ms']:.0f} ms")

    t = f"perf-idem-{tag}"
    create_topic(b.bootstrap, t, a.partitions)
    r = producer_perf(ref, b.bootstrap, t, a.records, a.record_size, {**base, "enable.idempotence": "true"}, [], to)
    figures["produce_idempotent_mb_s"].append(r["mb_per_s"])
    log(f"  {b.name} idempotent: {r['mb_per_s']:.1f} MB/s")

    t = f"perf-txn-{tag}"
    create_topic(b.bootstrap, t, a.partitions)
    r = producer_perf(ref, b.bootstrap, t, a.records, a.record_size, {**base, "enable.idempotence": "true"},
                      ["--transactional-id", f"perf-txn-{tag}", "--transaction-duration-ms", a.txn_duration_ms], to)
    figures["produce_transactional_mb_s"].append(r["mb_per_s"])
    log(f"  {b.name} transactional ({a.txn_duration_ms} ms): {r['mb_per_s']:.1f} MB/s")
    return t


def consume_once(ref: KafkaReference, b: Broker, topic: str, a, figures: dict) -> None:
    c = consumer_perf(ref, b.bootstrap, topic, a.records, a.tool_timeout)
    if c["records"] < a.records:
        raise RuntimeError(f"{b.name}: ConsumerPerformance read {c['records']} of {a.records}")
    figures["consume_read_committed_mb_s"].append(c["fetch_mb_per_s"])
    if c["fetch_latency_ms"] is not None:
        figures["consumer_fetch_latency_ms"].append(c["fetch_latency_ms"])
    log(f"  {b.name} consume read_committed: {c['fetch_mb_per_s']:.1f} MB/s (fetch), {c['mb_per_s']:.1f} overall, "
        f"consumer's fetch latency {c['fetch_latency_ms']} ms")


def latency_phase(ref: KafkaReference, b: Broker, run: int, topic: str, a, figures: dict) -> None:
    """The raw fetch loop over the consume topic, transactions/s and end-to-end latency."""
    tag = f"{run}-{uuid.uuid4().hex[:6]}"
    base = producer_props(a)
    to = a.tool_timeout
    if a.partitions == 1:
        end = end_offsets(b.bootstrap, topic, 1)
        f = fetch_mb_per_s(b.bootstrap, topic, end)
        figures["raw_fetch_mb_s"].append(f["mb_per_s"])
        figures["raw_fetch_rtt_ms"].append(f["rtt_p50_ms"])
        log(f"  {b.name} raw Fetch loop: {f['mb_per_s']:.1f} MB/s, {f['fetches']} fetches, "
            f"round trip p50 {f['rtt_p50_ms']:.3f} ms")
        # the Java consumer's receive.buffer.bytes: the answer comes in 64 KiB windows, so how fast
        # the broker refills the socket counts as well
        f = fetch_mb_per_s(b.bootstrap, topic, end, receive_buffer=65536)
        figures["raw_fetch_64k_mb_s"].append(f["mb_per_s"])
        figures["raw_fetch_64k_rtt_ms"].append(f["rtt_p50_ms"])
        log(f"  {b.name} raw Fetch loop, 64 KiB receive buffer: {f['mb_per_s']:.1f} MB/s, "
            f"round trip p50 {f['rtt_p50_ms']:.3f} ms")

    for attempt in (1, 2):  # a run the tool itself aborts (seen from Apache Kafka too) is tried once more
        t = f"perf-txrate-{tag}-{attempt}"
        create_topic(b.bootstrap, t, 1)
        try:
            r = producer_perf(ref, b.bootstrap, t, a.txn_records, 100, {**base, "enable.idempotence": "true"},
                              ["--transactional-id", t, "--transaction-duration-ms", 1], to)
        except RuntimeError as e:
            log(f"  {b.name} transactions: run {attempt} failed: {str(e).strip().splitlines()[-1]}")
            figures["transaction_run_failures"].append(1)
            continue
        txns = end_offsets(b.bootstrap, t, 1) - a.txn_records  # one commit marker per transaction
        figures["transactions_per_s"].append(txns / r["elapsed_s"])
        log(f"  {b.name} transactions: {txns} in {r['elapsed_s']:.1f}s = {txns / r['elapsed_s']:.0f}/s")
        break

    t = f"perf-e2e-{tag}"
    create_topic(b.bootstrap, t, 1)
    e = e2e_latency(ref, b.bootstrap, t, a.e2e_records, a.e2e_record_size, to)
    figures["e2e_p50_ms"].append(e["p50_ms"])
    figures["e2e_p99_ms"].append(e["p99_ms"])
    log(f"  {b.name} end-to-end: p50 {e['p50_ms']:.1f} ms, p99 {e['p99_ms']:.1f} ms")


def one_round(ref: KafkaReference, order: list[Broker], run: int, a, figures: dict[str, dict]) -> None:
    """Every load measurement once per broker, in ``order``; appends to figures[name][metric].

    The consume samples alternate between the brokers (A B B A A B ...) instead of coming in one
    block per broker: a single ConsumerPerformance run spreads by +-20% and the machine's load and
    Kafka's JIT drift over minutes, so samples taken side by side compare the brokers, not the
    moments they were measured at.
    """
    topics = {}
    for b in order:
        log(f"run {run + 1 if run >= 0 else 'warm-up'}: {b.name} produce")
        topics[b.name] = produce_phase(ref, b, run, a, figures[b.name])
    for i in range(a.consume_runs):
        for b in (order if i % 2 == 0 else order[::-1]):
            consume_once(ref, b, topics[b.name], a, figures[b.name])
    for b in order:
        latency_phase(ref, b, run, topics[b.name], a, figures[b.name])


# -- report --------------------------------------------------------------------------------------------

ROWS = [  # key, label, unit, target ratio text, higher is better
    ("produce_plain_mb_s", "produce, plain (acks=all)", "MB/s", ">= 1.0", True),
    ("produce_idempotent_mb_s", "produce, idempotent", "MB/s", ">= 1.0", True),
    ("produce_transactional_mb_s", "produce, transactional", "MB/s", ">= 1.0", True),
    ("consume_read_committed_mb_s", "consume, read_committed", "MB/s", ">= 1.0", True),
    ("consumer_fetch_latency_ms", "consumer's fetch latency avg", "ms", "", False),
    ("raw_fetch_mb_s", "fetch loop, read_committed", "MB/s", "", True),
    ("raw_fetch_rtt_ms", "fetch round trip p50 (1 MiB)", "ms", "", False),
    ("raw_fetch_64k_mb_s", "fetch loop, 64 KiB rcvbuf", "MB/s", "", True),
    ("raw_fetch_64k_rtt_ms", "fetch round trip p50, 64 KiB", "ms", "", False),
    ("transactions_per_s", "transactions (1 record each)", "txn/s", ">= 1.0", True),
    ("produce_plain_p99_ms", "produce p99 latency (plain)", "ms", "<= 1.0", False),
    ("e2e_p50_ms", "end-to-end latency p50", "ms", "", False),
    ("e2e_p99_ms", "end-to-end latency p99", "ms", "<= 1.0", False),
    ("startup_s", "start-up to first Metadata", "s", "<= 0.1", False),
    ("rss_idle_mb", "RSS idle", "MB", "<= 0.2", False),
    ("rss_load_mb", "RSS under load (peak)", "MB", "<= 0.2", False),
]


def meets(ratio: float, target: str) -> str:
    if not target or ratio != ratio:  # NaN
        return ""
    op, val = target.split()
    ok = ratio >= float(val) if op == ">=" else ratio <= float(val)
    return "yes" if ok else "NO"


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:10.1f}" if x >= 10 else f"{x:10.3f}"


def print_table(results: dict, a) -> None:
    print()
    print(f"Apache Kafka {KafkaReference().version} vs ours; medians of {a.runs} runs after "
          f"{a.warmup_rounds} warm-up round(s) "
          f"({a.records} x {a.record_size} B records, {a.partitions} partition(s)), "
          f"start-up median of {a.startup_runs}; {os.cpu_count()} CPUs, load average now "
          f"{os.getloadavg()[0]:.1f} (at start {a.load_at_start:.1f})")
    variants = [n for n in results if n not in ("kafka", "ours")]  # e.g. ours-before, ours-control
    head = f"{'figure':<32} {'unit':>6} {'Kafka':>10} {'ours':>10} {'ours/Kafka':>11} {'target':>8} {'met':>4}"
    head += "".join(f" {v:>13} {v.removeprefix('ours-') + '/ours':>13}" for v in variants)
    print(head)
    print("-" * len(head))

    def median(name: str, key: str) -> float | None:
        values = results[name].get(key)
        return statistics.median(values) if values else None

    for key, label, unit, target, _ in ROWS:
        km, om = median("kafka", key), median("ours", key)
        ratio = om / km if (km and om is not None) else float("nan")
        line = f"{label:<32} {unit:>6} {_fmt(km):>10} {_fmt(om):>10} {ratio:11.2f} {target:>8} {meets(ratio, target):>4}"
        for v in variants:
            vm = median(v, key)
            line += f" {_fmt(vm):>13} {(vm / om if (om and vm is not None) else float('nan')):13.3f}"
        print(line)
    for name in ("kafka", "ours"):
        if results[name].get("transaction_run_failures"):
            print(f"{name}: {len(results[name]['transaction_run_failures'])} transactions/s run(s) aborted by the tool"
                  " and run again")
    print()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3, help="runs per load figure (median)")
    ap.add_argument("--warmup-rounds", type=int, default=1,
                    help="untimed rounds per broker first (the JVM's JIT, page cache, Python's caches)")
    # Runs of a few seconds at least: shorter ones measure the tools' JVM start and JIT, not the brokers.
    ap.add_argument("--records", type=int, default=300_000, help="records per produce/consume run")
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--partitions", type=int, default=1)
    # A consume run lasts about a second, most of it the consumer JVM's JIT warm-up, so single runs
    # spread by +-20%: several per round (each a new group) give the median more samples.
    ap.add_argument("--consume-runs", type=int, default=3, help="ConsumerPerformance runs per round")
    ap.add_argument("--txn-duration-ms", type=int, default=100, help="transaction length of the transactional run")
    ap.add_argument("--txn-records", type=int, default=20_000, help="records of the transactions/s run")
    ap.add_argument("--e2e-records", type=int, default=5000)
    ap.add_argument("--e2e-record-size", type=int, default=100)
    ap.add_argument("--startup-runs", type=int, default=3)
    ap.add_argument("--kafka-heap", default="512m", help="Kafka's -Xms/-Xmx (KafkaReference's default)")
    ap.add_argument("--producer-prop", action="append", default=[], metavar="K=V",
                    help="extra producer property for every ProducerPerformance run")
    ap.add_argument("--tool-timeout", type=float, default=600)
    ap.add_argument("--only", choices=("kafka", "ours"), help="measure one broker only")
    ap.add_argument("--ours-before", metavar="TREE",
                    help="also measure our broker from another checkout (e.g. `git worktree add /tmp/before "
                         "<commit>`), as ours-before, alternating with the others")
    ap.add_argument("--ours-control", action="store_true",
                    help="also measure ours with the control endpoint on and no fault rule (the request log "
                         "records), as ours-control")
    ap.add_argument("--json", help="write all raw figures to this file")
    ap.add_argument("--workdir", help="keep data here (default: a temp dir, removed)")
    a = ap.parse_args(argv)

    a.load_at_start = os.getloadavg()[0]  # other work on the machine skews every figure
    ref = KafkaReference(heap=a.kafka_heap)
    log(f"fetching Apache Kafka {ref.version} jars (cached after the first time)")
    ref.fetch()
    # Our bytecode, as an installed package (pip) or scripts/run.sh has it; Kafka's jars are compiled.
    for tree in (ROOT, *([Path(a.ours_before)] if a.ours_before else [])):
        subprocess.run([sys.executable, "-m", "compileall", "-q", "broker", "protocol", "storage", "coordinator"],
                       cwd=tree, check=True, stdout=subprocess.DEVNULL)
    tmp = tempfile.TemporaryDirectory(prefix="kafka-compare-") if not a.workdir else None
    workdir = Path(a.workdir or tmp.name)
    names = [n for n in ("kafka", "ours") if a.only in (None, n)]
    if a.ours_before:
        names.append("ours-before")
    if a.ours_control:
        names.append("ours-control")
    results: dict[str, dict[str, list[float]]] = {n: defaultdict(list) for n in ("kafka", "ours", *names)}

    def start(name: str, where: Path) -> Broker:
        if name == "ours":
            return OurBroker(where)
        if name == "ours-before":
            return OurBroker(where, name=name, tree=Path(a.ours_before).resolve())
        if name == "ours-control":
            return OurBroker(where, name=name, overrides={"control.port": str(free_port())})
        ref = KafkaReference(heap=a.kafka_heap)
        ref.poll_interval = 0.01  # the same readiness poll as OurBroker's
        return KafkaBroker(ref, where)

    running: list[Broker] = []
    try:
        for i in range(a.startup_runs):
            for n in names:
                b = start(n, workdir / f"startup-{n}-{i}")
                running.append(b)
                results[n]["startup_s"].append(b.startup_s)
                log(f"start-up {n} #{i + 1}: {b.startup_s:.3f}s")
                b.stop()
                running.remove(b)

        brokers = {}
        for n in names:
            brokers[n] = start(n, workdir / f"load-{n}")
            running.append(brokers[n])
        time.sleep(5)  # let start-up work (Kafka's JIT, log recovery threads) settle
        for n, b in brokers.items():
            rss = vm_rss_mb(b.pid)
            results[n]["rss_idle_mb"].append(rss)
            log(f"RSS idle {n}: {rss:.0f} MB")
        samplers = {n: RssSampler(b.pid) for n, b in brokers.items()}
        for s in samplers.values():
            s.__enter__()
        try:
            order = list(brokers.values())
            for w in range(a.warmup_rounds):
                log(f"warm-up round {w + 1}/{a.warmup_rounds} (not counted)")
                one_round(ref, order, -1 - w, a, defaultdict(lambda: defaultdict(list)))
            for run in range(a.runs):
                log(f"run {run + 1}/{a.runs}")
                one_round(ref, order if run % 2 == 0 else order[::-1], run, a, results)
        finally:
            for s in samplers.values():
                s.__exit__(None, None, None)
        for n, s in samplers.items():
            results[n]["rss_load_mb"].append(s.peak)
            log(f"RSS peak under load {n}: {s.peak:.0f} MB")
    finally:
        for b in running:
            b.stop()
        print_table(results, a)
        if a.json:
            Path(a.json).write_text(json.dumps({"args": vars(a), "results": results}, indent=2))
        if tmp is not None:
            tmp.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
