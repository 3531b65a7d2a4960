"""Transaction throughput and commit latency with confluent-kafka (librdkafka, TV1).

Each transaction writes 10 records (100 B) spread over 3 partitions, then commits:
begin -> 10 x produce -> commit_transaction. Measured per producer: transactions/s and the
latency of commit_transaction() (flush of the records + EndTxn, which the coordinator answers
once PrepareCommit is written to __transaction_state, flushed as its log's flush settings say).
``--producers N`` runs N transactional producers in threads at once (different transactional
ids), which shows how concurrent transactions share the coordinator and the marker channel.

    python bench/txn_bench.py                      # starts its own broker in a temp dir
    python bench/txn_bench.py --bootstrap host:port --txns 500 --producers 4

Not a test: numbers on a shared machine are noisy; the median of --runs is printed last.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

RECORDS_PER_TXN = 10
PARTITIONS = 3


def run_producer(bootstrap: str, topic: str, txns: int, latencies: list[float]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-{uuid.uuid4().hex[:8]}",
                  "linger.ms": 0, "acks": "all"})
    p.init_transactions(30)
    value = b"x" * 100
    for _ in range(txns):
        p.begin_transaction()
        for i in range(RECORDS_PER_TXN):
            p.produce(topic, value=value, partition=i % PARTITIONS)
        t = time.perf_counter()
        p.commit_transaction(30)
        latencies.append(time.perf_counter() - t)
    p.flush(10)


def one_run(bootstrap: str, txns: int, producers: int) -> tuple[float, list[float]]:
    topic = f"txn-bench-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(15)
    per = [[] for _ in range(producers)]
    threads = [threading.Thread(target=run_producer, args=(bootstrap, topic, txns, per[i])) for i in range(producers)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    latencies = [x for lat in per for x in lat]
    return len(latencies) / elapsed, latencies


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap")
    ap.add_argument("--txns", type=int, default=300, help="transactions per producer and run")
    ap.add_argument("--producers", type=int, default=1)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    broker = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        from tests.support.broker_process import BrokerProcess

        broker = BrokerProcess(Path(tempfile.mkdtemp(prefix="txn-bench-")) / "data").start()
        bootstrap = broker.bootstrap
    try:
        # Warm-up: creates __transaction_state and the producer id block outside the timings.
        one_run(bootstrap, 5, 1)
        rates = []
        for run in range(args.runs):
            rate, lat = one_run(bootstrap, args.txns, args.producers)
            rates.append(rate)
            print(f"run {run + 1}: {rate:8.1f} txn/s ({rate * RECORDS_PER_TXN:8.0f} records/s)  commit latency "
                  f"p50 {pct(lat, 0.5) * 1000:6.2f} ms  p99 {pct(lat, 0.99) * 1000:6.2f} ms  "
                  f"max {max(lat) * 1000:6.2f} ms", flush=True)
        print(f"median: {statistics.median(rates):.1f} txn/s with {args.producers} producer(s), "
              f"{RECORDS_PER_TXN} records over {PARTITIONS} partitions per transaction")
    finally:
        if broker is not None:
            broker.stop()


if __name__ == "__main__":
    main()
