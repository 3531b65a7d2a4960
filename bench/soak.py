"""Soak: hostile clients beside well-behaved ones (issue 18). Not a test: it prints numbers.

    .venv/bin/python bench/soak.py [--before 20] [--during 180] [--after 20]

A broker from the runtime install (tests/support/runtime_env.py) serves, for the whole run, a
transactional producer (confluent-kafka, 20 records per transaction, committed one after the
other) and a read_committed consumer. During the middle phase every attack of issue 18 runs at
once, in a loop: gzip bombs (1 MB -> 1,000 MiB), produce and fetch naming unknown topics, a Fetch
naming one partition 5,000 times, connections pipelining 1 MiB requests behind a parked Fetch,
CreateTopics of 500 topics, Metadata auto-creating 300, DescribeGroups of a million ids, SCRAM
upserts one per request, oversized frames before SASL authentication, connection churn and
metrics scrapers that never read. Printed per phase: the broker's RSS and open descriptors
(max), and the well-behaved clients' commit latency and end-to-end latency (p50/p99/max); at the
end, whether every committed record was consumed exactly once.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import struct
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from protocol.messages import request_class  # noqa: E402
from protocol.records import build_batch  # noqa: E402
from tests.differential.wire import WireClient, build  # noqa: E402
from tests.e2e.test_hardening import gzip_bomb, raw_batch  # noqa: E402
from tests.support.broker_process import BrokerProcess, free_port  # noqa: E402

CreateTopics, Metadata, Fetch, Produce = request_class(19), request_class(3), request_class(1), request_class(0)
DescribeGroups, Scram = request_class(15), request_class(51)


def proc_stats(pid: int) -> tuple[int, int]:
    """(RSS in MiB, open descriptors) of the broker."""
    rss = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) // 1024
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


class WellBehaved:
    """A transactional producer and a read_committed consumer; latencies per phase."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap, self.topic = bootstrap, topic
        self.phase = "before"
        self.commit_ms: dict[str, list[float]] = {}
        self.e2e_ms: dict[str, list[float]] = {}
        self.committed: list[bytes] = []
        self.consumed: list[bytes] = []
        self.stop = threading.Event()
        self.errors: list[str] = []

    def produce(self) -> None:
        p = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": f"soak-{uuid.uuid4().hex[:6]}",
                      "linger.ms": 1})
        p.init_transactions(30)
        n = 0
        while not self.stop.is_set():
            values = [b"%d:%f" % (n + i, time.time()) for i in range(20)]
            started = time.monotonic()
            try:
                p.begin_transaction()
                for v in values:
                    p.produce(self.topic, value=v, partition=n % 3)
                p.commit_transaction(60)
            except Exception as e:  # noqa: BLE001 - reported, and the run goes on
                self.errors.append(f"produce: {e}")
                p.abort_transaction(60)
                continue
            self.commit_ms.setdefault(self.phase, []).append((time.monotonic() - started) * 1000)
            self.committed += values
            n += 20
            time.sleep(0.02)

    def consume(self) -> None:
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"soak-{uuid.uuid4().hex[:6]}",
                      "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                      "fetch.wait.max.ms": 50})
        c.subscribe([self.topic])
        quiet_since = None
        while True:
            msgs = c.consume(500, 0.2)
            now = time.time()
            for m in msgs:
                if m.error():
                    self.errors.append(f"consume: {m.error()}")
                    continue
                self.consumed.append(m.value())
                sent = float(m.value().split(b":")[1])
                self.e2e_ms.setdefault(self.phase, []).append((now - sent) * 1000)
            if self.stop.is_set():
                quiet_since = quiet_since or time.monotonic()
                if len(self.consumed) >= len(self.committed) or time.monotonic() - quiet_since > 30:
                    break
        c.close()


def gzip_bomb_batch(mib: int) -> bytes:
    """Three records declared, 1 MB of gzip inflating to ``mib`` MiB of zeros."""
    return raw_batch(gzip_bomb(b"", mib << 20), 3, 1)


class Attacks:
    def __init__(self, b: BrokerProcess, sasl_port: int, metrics_port: int, topic: str) -> None:
        self.b, self.sasl_port, self.metrics_port, self.topic = b, sasl_port, metrics_port, topic
        self.stop = threading.Event()
        self.counts: dict[str, int] = {}
        self.bomb = gzip_bomb_batch(1000)

    def _loop(self, name: str, fn) -> None:
        while not self.stop.is_set():
            try:
                fn()
            except Exception:  # noqa: BLE001 - attacks are expected to be refused or cut off
                time.sleep(0.1)
            self.counts[name] = self.counts.get(name, 0) + 1

    def bombs(self) -> None:
        with WireClient(self.b.bootstrap, timeout=60) as c:
            c.send(build(Produce, 9, transactional_id=None, acks=-1, timeout_ms=30000, topic_data=[dict(
                name=self.topic, partition_data=[dict(index=0, records=self.bomb)])]), 9)

    def unknown_topics(self) -> None:
        names = [f"ghost-{uuid.uuid4().hex}" for _ in range(200)]
        batch = bytes(build_batch([(b"k", b"v")], timestamp=int(time.time() * 1000)))
        with WireClient(self.b.bootstrap, timeout=60) as c:
            c.send(build(Produce, 9, transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
                dict(name=n, partition_data=[dict(index=0, records=batch)]) for n in names]), 9)

    def duplicate_fetch(self) -> None:
        part = dict(partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                    log_start_offset=-1, partition_max_bytes=1 << 20)
        with WireClient(self.b.bootstrap, timeout=60) as c:
            c.send(build(Fetch, 12, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=300 << 20,
                         isolation_level=0, session_id=0, session_epoch=-1,
                         topics=[dict(topic=self.topic, partitions=[part] * 5000)], forgotten_topics_data=[],
                         rack_id=""), 12)

    def pipelined(self) -> None:
        frame = build(Produce, 9, transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[dict(
            name="flood", partition_data=[dict(index=0, records=bytes(build_batch(
                [(b"k", os.urandom(1 << 20))], timestamp=int(time.time() * 1000))))])])
        frame.with_header(correlation_id=1, client_id="flood")
        data = bytes(frame.encode(version=9, header=True, framed=True)) * 32
        socks = [socket.create_connection(("127.0.0.1", self.b.port)) for _ in range(10)]
        for s in socks:
            s.settimeout(5)
            try:
                s.sendall(data)
            except OSError:
                pass
        for s in socks:
            s.close()

    def admin(self) -> None:
        prefix = uuid.uuid4().hex[:6]
        with WireClient(self.b.bootstrap, timeout=300) as c:
            c.send(build(CreateTopics, 7, topics=[dict(name=f"soak-{prefix}-{i}", num_partitions=1,
                                                       replication_factor=1, assignments=[], configs=[])
                                                  for i in range(500)], timeout_ms=600000, validate_only=False), 7)
            c.send(build(Metadata, 12, topics=[dict(name=f"auto-{prefix}-{i}", topic_id=None) for i in range(300)],
                         allow_auto_topic_creation=True, include_topic_authorized_operations=False), 12)
            c.send(build(DescribeGroups, 5, groups=[""] * 1_000_000, include_authorized_operations=False), 5)
            for i in range(100):
                c.send(build(Scram, 0, deletions=[], upsertions=[dict(
                    name=f"u-{prefix}-{i}", mechanism=1, iterations=4096, salt=os.urandom(16),
                    salted_password=os.urandom(32))]), 0)

    def sasl_frames(self) -> None:
        with socket.create_connection(("127.0.0.1", self.sasl_port)) as s:
            s.settimeout(5)
            s.sendall(struct.pack(">i", 100 << 20) + os.urandom(64 << 10))
            s.recv(1)

    def churn(self) -> None:
        for _ in range(50):
            socket.create_connection(("127.0.0.1", self.b.port)).close()

    def lazy_scrapers(self) -> None:
        socks = []
        for _ in range(50):
            s = socket.create_connection(("127.0.0.1", self.metrics_port))
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            socks.append(s)
        time.sleep(15)
        for s in socks:
            s.close()

    ALL = ("bombs", "unknown_topics", "duplicate_fetch", "pipelined", "admin", "sasl_frames", "churn",
           "lazy_scrapers")

    def start(self, names: tuple[str, ...] = ALL) -> list[threading.Thread]:
        threads = []
        for name in names:
            t = threading.Thread(target=self._loop, args=(name, getattr(self, name)), daemon=True)
            t.start()
            threads.append(t)
        return threads


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(p / 100 * len(values)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", type=float, default=20)
    ap.add_argument("--during", type=float, default=180)
    ap.add_argument("--after", type=float, default=20)
    ap.add_argument("--attacks", default=",".join(Attacks.ALL), help="which attacks (comma separated)")
    args = ap.parse_args()
    sasl_port, metrics_port = free_port(), free_port()
    b = BrokerProcess(Path(tempfile.mkdtemp(prefix="soak-")) / "data", overrides={
        "sasl.enabled.mechanisms": "PLAIN", "metrics.port": str(metrics_port),
        "max.connections.per.ip": "2000", "queued.max.request.bytes": str(256 << 20)})
    b.overrides["listeners"] = f"PLAINTEXT://127.0.0.1:{b.port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}"
    b.start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    for name, parts in (("soak", 3), ("flood", 1)):
        admin.create_topics([NewTopic(name, parts, 1, config={"max.message.bytes": "2000000"})])[name].result(30)
    good = WellBehaved(b.bootstrap, "soak")
    attacks = Attacks(b, sasl_port, metrics_port, "soak")
    workers = [threading.Thread(target=good.produce, daemon=True), threading.Thread(target=good.consume, daemon=True)]
    for w in workers:
        w.start()
    stats: dict[str, list[tuple[int, int]]] = {}

    def watch(phase: str, seconds: float) -> None:
        good.phase = phase
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            stats.setdefault(phase, []).append(proc_stats(b.proc.pid))
            time.sleep(1)

    watch("before", args.before)
    threads = attacks.start(tuple(a for a in args.attacks.split(",") if a))
    watch("during", args.during)
    attacks.stop.set()
    for t in threads:
        t.join(60)
    watch("after", args.after)
    good.stop.set()
    for w in workers:
        w.join(120)
    print(f"{'phase':8} {'RSS MiB':>9} {'fds':>6} {'commit p50/p99/max ms':>24} {'end-to-end p50/p99/max ms':>27}")
    for phase in ("before", "during", "after"):
        rss = max(s[0] for s in stats[phase])
        fds = max(s[1] for s in stats[phase])
        cm, e2e = good.commit_ms.get(phase, []), good.e2e_ms.get(phase, [])
        print(f"{phase:8} {rss:9d} {fds:6d} {pct(cm, 50):8.1f}/{pct(cm, 99):7.1f}/{max(cm or [0]):7.1f}"
              f" {pct(e2e, 50):9.1f}/{pct(e2e, 99):7.1f}/{max(e2e or [0]):8.1f}")
    print("attacks run:", dict(sorted(attacks.counts.items())))
    committed, consumed = good.committed, good.consumed
    print(f"committed records {len(committed)}, consumed {len(consumed)}, "
          f"every committed record consumed exactly once: {sorted(committed) == sorted(consumed)}")
    if good.errors:
        print("well-behaved client errors:", len(good.errors), good.errors[:3])
    print("mean commit ms overall:", round(statistics.mean(sum(good.commit_ms.values(), [])), 1))
    b.stop()


if __name__ == "__main__":
    main()
