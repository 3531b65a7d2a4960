"""Smoke test of a running broker through a stock client (confluent-kafka / librdkafka).

    python docker/smoke.py [--bootstrap 127.0.0.1:9092] [--metrics http://127.0.0.1:9404/metrics]
                           [--expect-topics orders,payments] [--require-transactions]
                           [--brokers 3 --control http://127.0.0.1:9099]

Waits for the broker to answer ApiVersions, then: creates a topic, produces records (with
idempotence when the broker serves InitProducerId), consumes them back in a consumer group
and checks every one; does the same once per compression codec (none, gzip, snappy, lz4, zstd). When the broker serves EndTxn it also runs transactions: one committed
and one aborted, then checks that a read_committed consumer sees exactly the committed
records. With ``--metrics`` it scrapes /metrics and checks the log-end-offset gauge and the
bytes-in counter of the topic. With ``--brokers N`` (``--brokers 3`` in the container) it waits
for N brokers in Metadata and uses topics of replication factor N (min.insync.replicas 2); with
``--control`` it also takes broker 2 down through the control endpoint, produces and consumes
through the failover, and brings it back. Prints one line per step; exit 0 when all passed.
Run from the repository root (it borrows ``broker.ops.healthcheck`` for ApiVersions).
"""

from __future__ import annotations

import argparse
import sys
import time
import urllib.request
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Consumer, KafkaException, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from broker.ops.healthcheck import api_versions  # noqa: E402

INIT_PRODUCER_ID, END_TXN = 22, 26


def step(msg: str) -> None:
    print(f"smoke: {msg}", flush=True)


def wait_for_broker(host: str, port: int, timeout: float) -> dict[int, tuple[int, int]]:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return api_versions(host, port, 5.0)
        except (OSError, ValueError) as e:
            if time.monotonic() > deadline:
                raise SystemExit(f"smoke: FAIL broker at {host}:{port} does not answer ApiVersions: {e}") from None
            time.sleep(0.5)


REPLICATION_FACTOR = 1  # --brokers N sets N


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {"min.insync.replicas": "2"} if REPLICATION_FACTOR > 1 else {}
    new = NewTopic(topic, partitions, REPLICATION_FACTOR, config=config)
    for fut in admin.create_topics([new], operation_timeout=30).values():
        fut.result(30)


def wait_brokers(bootstrap: str, count: int, timeout: float) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while True:
        brokers = admin.list_topics(timeout=10).brokers
        if len(brokers) >= count:
            step(f"Metadata lists {len(brokers)} brokers: "
                 + ", ".join(f"{b.id} at {b.host}:{b.port}" for b in sorted(brokers.values(), key=lambda b: b.id)))
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"smoke: FAIL Metadata lists {len(brokers)} brokers, expected {count}")
        time.sleep(0.5)


def control(url: str, method: str, path: str) -> dict:
    import json

    request = urllib.request.Request(url.rstrip("/") + path, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def failover(bootstrap: str, url: str, topic: str, idempotent: bool) -> None:
    """Broker 2 down (its partitions get new leaders), records through it, broker 2 back."""
    alive = [b["id"] for b in control(url, "GET", "/cluster")["brokers"] if b["alive"]]
    create_topic(bootstrap, topic, 3)  # one partition led by each broker
    control(url, "POST", "/brokers/2/down")
    produce(bootstrap, topic, 300, idempotent)
    got = consume(bootstrap, topic, 300)
    if sorted(got) != sorted(f"v{i}".encode() for i in range(300)):
        raise SystemExit(f"smoke: FAIL with broker 2 down: consumed {len(got)} of 300 records")
    control(url, "POST", "/brokers/2/up")
    step(f"control: brokers {alive} alive; broker 2 taken down, 300 records produced and consumed "
         "through the failover, broker 2 back")


def wait_topics(bootstrap: str, names: list[str], timeout: float) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while True:
        present = set(admin.list_topics(timeout=10).topics)
        missing = [n for n in names if n not in present]
        if not missing:
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"smoke: FAIL topics {missing} do not exist (present: {sorted(present)})")
        time.sleep(1.0)


CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def produce(bootstrap: str, topic: str, count: int, idempotent: bool, compression: str = "none") -> None:
    errors: list[str] = []
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": idempotent, "linger.ms": 5,
                  "acks": "all", "compression.type": compression})
    for i in range(count):
        p.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(),
                  on_delivery=lambda err, _msg: errors.append(str(err)) if err else None)
        if i % 1000 == 0:
            p.poll(0)
    left = p.flush(30)
    if left or errors:
        raise SystemExit(f"smoke: FAIL produce: {left} undelivered, errors {errors[:3]}")


def consume(bootstrap: str, topic: str, expect: int, isolation: str = "read_uncommitted",
            timeout: float = 60.0) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"smoke-{uuid.uuid4().hex[:8]}",
                  "auto.offset.reset": "earliest", "isolation.level": isolation,
                  "enable.partition.eof": False})
    c.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while len(values) < expect and time.monotonic() < deadline:
            for m in c.consume(500, 1.0):
                if m.error():
                    raise KafkaException(m.error())
                values.append(m.value())
        # a short grace period, to notice records beyond what was expected
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            values.extend(m.value() for m in c.consume(500, 0.2) if not m.error())
        if values:
            c.commit(asynchronous=False)
    finally:
        c.close()
    return values


def codecs(bootstrap: str, topic: str, idempotent: bool) -> None:
    """Every compression codec a producer can choose, produced and consumed back."""
    for codec in CODECS:
        name = f"{topic}-{codec}"
        create_topic(bootstrap, name, 1)
        produce(bootstrap, name, 200, idempotent, codec)
        got = consume(bootstrap, name, 200)
        if sorted(got) != sorted(f"v{i}".encode() for i in range(200)):
            raise SystemExit(f"smoke: FAIL compression.type={codec}: consumed {len(got)} of 200 records")
    step(f"codecs: 200 records each with compression.type {', '.join(CODECS)} produced and consumed back")


def transactions(bootstrap: str, topic: str) -> None:
    tid = f"smoke-txn-{uuid.uuid4().hex[:8]}"
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "transaction.timeout.ms": 30000})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, key=b"t", value=f"committed-{i}".encode())
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, key=b"t", value=f"aborted-{i}".encode())
    p.flush(30)
    p.abort_transaction(30)
    step(f"transactions: {tid} committed 10 records, aborted 5")
    got = consume(bootstrap, topic, 10, isolation="read_committed")
    committed = sorted(v for v in got if v.startswith(b"committed-"))
    aborted = [v for v in got if v.startswith(b"aborted-")]
    if len(committed) != 10 or aborted:
        raise SystemExit(f"smoke: FAIL read_committed saw {len(committed)} committed and {len(aborted)} "
                         f"aborted records")
    step("transactions: read_committed consumer saw exactly the 10 committed records")


def scrape(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url, timeout=10) as r:
        text = r.read().decode()
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            samples[name] = float(value)
    return samples


def check_metrics(url: str, topic: str, produced: int) -> None:
    samples = scrape(url)
    leo = sum(v for k, v in samples.items()
              if k.startswith("kafka_log_log_logendoffset{") and f'topic="{topic}"' in k)
    bytes_in = samples.get(f'kafka_server_brokertopicmetrics_bytesin_total{{topic="{topic}"}}', 0)
    if leo != produced or bytes_in <= 0:
        raise SystemExit(f"smoke: FAIL metrics: log end offset {leo} (expected {produced}), bytes in {bytes_in}")
    step(f"metrics: {url} log end offset {leo:.0f} = records produced, bytes in {bytes_in:.0f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", default="127.0.0.1:9092")
    ap.add_argument("--records", type=int, default=1000)
    ap.add_argument("--metrics", help="URL of /metrics to check after producing")
    ap.add_argument("--expect-topics", default="", help="comma-separated topics that must exist")
    ap.add_argument("--require-transactions", action="store_true", help="fail if the broker lacks EndTxn")
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--brokers", type=int, default=1, help="expect this many brokers; topics get this RF")
    ap.add_argument("--control", help="URL of the control endpoint (with --brokers): a broker taken down")
    args = ap.parse_args(argv)
    started = time.monotonic()
    host, _, port = args.bootstrap.rpartition(":")
    apis = wait_for_broker(host, int(port), args.timeout)
    step(f"broker at {args.bootstrap} answers ApiVersions with {len(apis)} APIs")
    if args.brokers > 1:
        global REPLICATION_FACTOR
        REPLICATION_FACTOR = args.brokers
        wait_brokers(args.bootstrap, args.brokers, args.timeout)
    if args.expect_topics:
        names = [n for n in args.expect_topics.split(",") if n]
        wait_topics(args.bootstrap, names, args.timeout)
        step(f"topics present: {', '.join(names)}")
    topic = f"smoke-{uuid.uuid4().hex[:8]}"
    create_topic(args.bootstrap, topic, 3)
    idempotent = INIT_PRODUCER_ID in apis
    produce(args.bootstrap, topic, args.records, idempotent)
    step(f"produced {args.records} records to {topic} (3 partitions, replication factor {REPLICATION_FACTOR}, "
         f"idempotence {'on' if idempotent else 'off'})")
    got = consume(args.bootstrap, topic, args.records)
    expected = {f"v{i}".encode() for i in range(args.records)}
    if len(got) != args.records or set(got) != expected:
        raise SystemExit(f"smoke: FAIL consumed {len(got)} records, {len(set(got) & expected)} of the expected ones")
    step(f"consumed all {len(got)} records back in a consumer group")
    codecs(args.bootstrap, f"{topic}-codec", idempotent)
    if args.metrics:
        check_metrics(args.metrics, topic, args.records)
    if END_TXN in apis:
        transactions(args.bootstrap, f"{topic}-txn")
    elif args.require_transactions:
        raise SystemExit("smoke: FAIL the broker does not serve EndTxn (transactions)")
    else:
        step("transactions: SKIPPED, this broker build does not serve EndTxn yet")
    if args.control:
        failover(args.bootstrap, args.control, f"{topic}-failover", idempotent)
    step(f"OK in {time.monotonic() - started:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
