"""Produce and consume throughput with confluent-kafka: 1 KiB records, 1 partition, acks=all.

    python bench/produce_consume.py                  # starts its own broker in a temp dir
    python bench/produce_consume.py --bootstrap host:port --records 200000 --runs 3

Prints MB/s and records/s per run and the median. Not a test: numbers on a shared machine
are noisy; compare against Apache Kafka in the same run with bench/kafka_compare.py.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402


def produce(bootstrap: str, topic: str, records: int, size: int) -> float:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 1 << 20,
                  "queue.buffering.max.kbytes": 1 << 20, "enable.idempotence": False,
                  "compression.type": "none"})
    value = b"x" * size
    start = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                p.produce(topic, value=value, partition=0)
                break
            except BufferError:
                p.poll(0.001)
    assert p.flush(120) == 0
    return time.perf_counter() - start


def consume(bootstrap: str, topic: str, records: int) -> float:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-" + topic, "enable.auto.commit": False,
                  "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760})
    c.assign([TopicPartition(topic, 0, 0)])
    n = 0
    start = time.perf_counter()
    while n < records:
        for m in c.consume(10000, timeout=5):
            if m.error() is None:
                n += 1
    elapsed = time.perf_counter() - start
    c.close()
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap")
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    broker = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        from tests.support.broker_process import BrokerProcess

        broker = BrokerProcess(Path(tempfile.mkdtemp(prefix="bench-")) / "data").start()
        bootstrap = broker.bootstrap
    mb = args.records * args.size / 1e6
    prod, cons = [], []
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for run in range(args.runs):
            topic = f"bench-{uuid.uuid4().hex[:8]}"
            admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
            tp = produce(bootstrap, topic, args.records, args.size)
            tc = consume(bootstrap, topic, args.records)
            prod.append(mb / tp)
            cons.append(mb / tc)
            print(f"run {run + 1}: produce {mb / tp:7.1f} MB/s ({args.records / tp:9.0f} rec/s)   "
                  f"consume {mb / tc:7.1f} MB/s ({args.records / tc:9.0f} rec/s)")
        print(f"median: produce {statistics.median(prod):.1f} MB/s, consume {statistics.median(cons):.1f} MB/s "
              f"({args.records} x {args.size} B records, 1 partition, acks=all)")
    finally:
        if broker is not None:
            broker.stop()


if __name__ == "__main__":
    main()
