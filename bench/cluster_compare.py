"""Three brokers against three: Apache Kafka 4.3.1 as three JVMs (tests/support KafkaReferenceCluster,
node 1 also the KRaft controller) and ours as ``--brokers 3`` in one process, on this machine, in
the same run, measured with Kafka's own tools where Kafka has one.

    python bench/cluster_compare.py                  # about 6 minutes on 2 CPUs
    python bench/cluster_compare.py --records 30000  # a quick look

Figures (the median of --runs runs, Kafka and ours alternating):

- start-up: the first process spawned to a Metadata answer listing all three brokers, on empty
  data directories (Kafka's storage format excluded, as for one broker);
- idle RSS: the sum of Kafka's three JVMs' VmRSS against our one process, a few seconds after
  start-up;
- produce MB/s with ProducerPerformance: RF 3, min.insync.replicas 2, acks=all, idempotent, 3
  partitions (one led by each broker), --record-size bytes;
- transactions/s: ProducerPerformance --transaction-duration-ms 1 on a RF 3 partition, counted
  from the log (high watermark minus records: one commit marker per transaction);
- failover: a producer (confluent-kafka, acks=all, idempotent) sends one record every 5 ms to a
  RF 3 partition; the partition's leader is stopped cleanly (Kafka: SIGTERM, its controlled
  shutdown; ours: the control endpoint's down); the figure is the longest time the producer went
  without an acknowledgement from just before the stop until 10 s after it (about 5 ms when
  nothing is felt).

Prints a table of ours/Kafka ratios. Not a test.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.kafka_compare import end_offsets, log, producer_perf, spawn_ours, vm_rss_mb  # noqa: E402
from tests.support.broker_process import free_port_block  # noqa: E402
from tests.support.kafka_reference import KafkaReferenceCluster, probe_kafka_api  # noqa: E402

SETTINGS = {
    "num.partitions": "1", "default.replication.factor": "3", "min.insync.replicas": "2",
    "offsets.topic.replication.factor": "3", "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2", "group.initial.rebalance.delay.ms": "0",
}


class KafkaCluster:
    name = "kafka"

    def __init__(self, workdir: Path, heap: str) -> None:
        self.ref = KafkaReferenceCluster(3, heap=heap, extra_props=SETTINGS)
        self.ref.start(workdir)
        self.bootstrap = self.ref.bootstrap
        self.startup_s = self.ref.timings["start"]

    def pids(self) -> list[int]:
        return [p.pid for p in self.ref.procs.values()]

    def stop_node(self, node: int) -> None:
        self.ref.stop_node(node)

    def start_node(self, node: int) -> None:
        self.ref.start_node(node)
        self.ref.wait_for_brokers(3)

    def node_of_port(self, port: int) -> int:
        return next(n for n, p in self.ref.ports.items() if p == port)

    def stop(self) -> None:
        self.ref.stop()


class OurCluster:
    name = "ours"

    def __init__(self, workdir: Path) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        base = free_port_block(4)
        self.ports = {i: base + i - 1 for i in (1, 2, 3)}
        self.control = f"http://127.0.0.1:{base + 3}"
        self.bootstrap = ",".join(f"127.0.0.1:{p}" for p in self.ports.values())
        t0 = time.monotonic()
        self.proc, self._log = spawn_ours(workdir, base, {"log.level": "WARNING", "control.port": str(base + 3),
                                                          **SETTINGS}, ("--brokers", "3"))
        while True:  # Metadata from broker 1 listing all three, polled every 10 ms as Kafka's
            try:
                if len(probe_kafka_api("127.0.0.1", base, timeout=1.0)["brokers"]) >= 3:
                    break
            except Exception:  # noqa: BLE001 - still starting
                pass
            if self.proc.poll() is not None or time.monotonic() - t0 > 60:
                raise RuntimeError(f"our cluster did not start; see {workdir / 'broker.log'}")
            time.sleep(0.01)
        self.startup_s = time.monotonic() - t0

    def pids(self) -> list[int]:
        return [self.proc.pid]

    def _post(self, path: str) -> None:
        urllib.request.urlopen(urllib.request.Request(self.control + path, data=b"{}", method="POST"), timeout=60)

    def stop_node(self, node: int) -> None:
        self._post(f"/brokers/{node}/down")

    def start_node(self, node: int) -> None:
        self._post(f"/brokers/{node}/up")

    def node_of_port(self, port: int) -> int:
        return next(n for n, p in self.ports.items() if p == port)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self._log.close()


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 3, config={"min.insync.replicas": "2"})])[name].result(60)
    deadline = time.monotonic() + 60
    while True:  # every partition led and fully in sync
        md = admin.list_topics(name, timeout=10).topics[name]
        if len(md.partitions) == partitions and all(p.leader >= 0 and len(p.isrs) == 3 for p in md.partitions.values()):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{name} not in sync")
        time.sleep(0.1)


def leader_of(bootstrap: str, topic: str, partition: int) -> int:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10).topics[topic] \
        .partitions[partition].leader


def failover_s(c) -> float:
    """The longest gap between acknowledgements around stopping a partition's leader."""
    from confluent_kafka import Producer

    topic = f"failover-{uuid.uuid4().hex[:6]}"
    create_topic(c.bootstrap, topic, 1)
    acks: list[float] = []
    errors: list[str] = []
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 0,
                  "retry.backoff.ms": 10, "retry.backoff.max.ms": 100, "topic.metadata.refresh.interval.ms": 1000})

    def delivered(err, _msg) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            acks.append(time.monotonic())

    stop = threading.Event()

    def send() -> None:
        while not stop.is_set():
            p.produce(topic, b"x" * 100, partition=0, on_delivery=delivered)
            p.poll(0.005)

    sender = threading.Thread(target=send)
    sender.start()
    time.sleep(2.0)
    leader = leader_of(c.bootstrap, topic, 0)
    stopped = time.monotonic()
    c.stop_node(leader)
    time.sleep(max(0.0, stopped + 10 - time.monotonic()))
    stop.set()
    sender.join()
    p.flush(30)
    c.start_node(leader)
    window = [t for t in acks if stopped - 0.5 <= t <= stopped + 10]
    if len(window) < 2 or errors:
        raise RuntimeError(f"{c.name}: too few acks around the failover (errors {errors[:3]})")
    return max(b - a for a, b in zip(window, window[1:], strict=False))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--txn-records", type=int, default=3000)
    ap.add_argument("--kafka-heap", default="512m")
    ap.add_argument("--json", help="write the raw figures here")
    a = ap.parse_args(argv)
    figures: dict[str, dict[str, list[float]]] = {"kafka": {}, "ours": {}}

    def add(who: str, key: str, value: float) -> None:
        figures[who].setdefault(key, []).append(value)

    with tempfile.TemporaryDirectory(prefix="cluster-bench-") as tmp:
        tools = KafkaReferenceCluster(3).reference  # the tools' classpath
        for run in range(a.runs):
            for who in ("kafka", "ours") if run % 2 == 0 else ("ours", "kafka"):
                workdir = Path(tmp) / f"{who}-{run}"
                c = KafkaCluster(workdir, a.kafka_heap) if who == "kafka" else OurCluster(workdir)
                try:
                    add(who, "startup_s", c.startup_s)
                    time.sleep(5)
                    add(who, "idle_rss_mb", sum(vm_rss_mb(pid) or 0 for pid in c.pids()))
                    topic = f"perf-{uuid.uuid4().hex[:6]}"
                    create_topic(c.bootstrap, topic, 3)
                    r = producer_perf(tools, c.bootstrap, topic, a.records, a.record_size,
                                      {"acks": "all", "enable.idempotence": "true"}, [], 600)
                    add(who, "produce_rf3_mb_s", r["mb_per_s"])
                    t = f"txn-{uuid.uuid4().hex[:6]}"
                    create_topic(c.bootstrap, t, 1)
                    r = producer_perf(tools, c.bootstrap, t, a.txn_records, 100,
                                      {"acks": "all", "enable.idempotence": "true"},
                                      ["--transactional-id", f"tx-{t}", "--transaction-duration-ms", 1], 600)
                    txns = end_offsets(c.bootstrap.split(",")[0], t, 1) - a.txn_records
                    add(who, "transactions_per_s", txns / r["elapsed_s"])
                    add(who, "failover_s", failover_s(c))
                    log(f"{who} run {run}: " + ", ".join(f"{k}={v[-1]:.3g}" for k, v in figures[who].items()))
                finally:
                    c.stop()
    rows = [("startup_s", "start-up to Metadata with 3 brokers", "s"), ("idle_rss_mb", "idle RSS (all brokers)", "MB"),
            ("produce_rf3_mb_s", "produce RF 3 acks=all, idempotent", "MB/s"),
            ("transactions_per_s", "transactions (1 record each), RF 3", "txn/s"),
            ("failover_s", "failover: longest wait for an ack", "s")]
    print(f"\n{'figure':42} {'kafka':>10} {'ours':>10} {'ours/kafka':>11}")
    for key, label, unit in rows:
        k, o = statistics.median(figures["kafka"][key]), statistics.median(figures["ours"][key])
        print(f"{label + ' (' + unit + ')':42} {k:10.3f} {o:10.3f} {o / k:11.2f}")
    if a.json:
        Path(a.json).write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
