"""Kafka's own exactly-once check, run the way Kafka's system test (tests/kafkatest/tests/core/
transactions_test.py) does, against Apache Kafka first (proving the test) and then against our broker:

1. VerifiableProducer seeds an input topic (2 partitions) with increasing integers (keyed, so both
   partitions get some);
2. one TransactionalMessageCopier per input partition copies it into the same partition of an output
   topic (the copier keeps the partition number, so the output has as many partitions) inside
   transactions of 100 messages, committing the consumed offsets in the same transaction
   (sendOffsetsToTransaction with the consumer's group metadata), with --enable-random-aborts: about a
   third of the transactions are aborted and the copier rewinds to the last committed offsets;
3. a read_committed consumer (kafka-python) reads the output.

Each output partition must hold exactly its input partition, in order: no duplicates, nothing
missing. A read_uncommitted read must show more records than the input (the
aborted copies are in the log), which proves the aborts happened.

Needs java 17+ and mvn (marker `java`). Ours is marked xfail (not strict) only while it does not
advertise an API the tools need.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from tests.support.broker_process import BrokerProcess, free_port_block

pytestmark = [
    pytest.mark.java,
    pytest.mark.skipif(shutil.which("java") is None or shutil.which("mvn") is None,
                       reason="needs java and mvn on PATH"),
]

TOOLS = "org.apache.kafka.tools."
MESSAGES = 3000
INPUT_PARTITIONS = 2
# What the Java tools send: idempotent producer, classic consumer with committed offsets, transactions
# (V1 set; V2 clients need a subset).
NEEDED_APIS = {0, 1, 2, 3, 8, 9, 10, 19, 22, 24, 25, 26, 28}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    from tests.support.kafka_reference import KafkaReference

    ref = KafkaReference()
    try:
        ref.start(tmp_path_factory.mktemp("eos-kafka"))
    except Exception:
        ref.stop()
        raise
    yield ref
    ref.stop()


@pytest.fixture(scope="module")
def ours(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("eos-ours") / "data").start()
    yield b
    code = b.stop()
    assert code == 0, f"broker exited with {code} on SIGTERM:\n{b.log_tail()}"


def _json_lines(text: str) -> list[dict]:
    out = []
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    return out


def _read_all(bootstrap: str, topic: str, partition: int, isolation: str, timeout: float = 60.0) -> list[bytes]:
    """Every value of one partition up to its end offset for ``isolation`` (read_committed: the LSO)."""
    return [value for _, value in _read_records(bootstrap, topic, partition, isolation, timeout)]


def _read_records(bootstrap: str, topic: str, partition: int, isolation: str,
                  timeout: float = 60.0) -> list[tuple[int, bytes]]:
    """(offset, value) of every record of one partition up to its end offset for ``isolation``."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False,
                             auto_offset_reset="earliest", consumer_timeout_ms=1000, fetch_max_wait_ms=100)
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        values: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + timeout
        while consumer.position(tp) < end:
            assert time.monotonic() < deadline, f"read of {tp} stalled at {consumer.position(tp)} of {end}"
            for records in consumer.poll(timeout_ms=500).values():
                values.extend((r.offset, r.value) for r in records)
        return values
    finally:
        consumer.close()


def _duplicates(records: list[tuple[int, bytes]]) -> str:
    """Where the duplicated values sit: the offsets of the first few, to tell a batch written
    twice within one transaction (adjacent offsets) from input copied again (a later transaction)."""
    seen: dict[bytes, list[int]] = {}
    for offset, value in records:
        seen.setdefault(value, []).append(offset)
    dups = sorted((offsets, value) for value, offsets in seen.items() if len(offsets) > 1)
    return "; ".join(f"{value.decode(errors='replace')} at {offsets}" for offsets, value in dups[:40])


def _run_eos_check(ref, bootstrap: str, label: str, replication_factor: int = 1,
                   during_copy: Callable[[threading.Event], None] | None = None, messages: int = MESSAGES) -> dict:
    """``during_copy`` runs in a thread while the copiers run, until the event is set (Kafka's
    transactions_test bounces brokers there)."""
    run = uuid.uuid4().hex[:8]
    inp, out = f"eos-in-{run}", f"eos-out-{run}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    configs = {"min.insync.replicas": "2"} if replication_factor > 1 else {}
    try:
        admin.create_topics([NewTopic(inp, INPUT_PARTITIONS, replication_factor, topic_configs=configs),
                             NewTopic(out, INPUT_PARTITIONS, replication_factor, topic_configs=configs)])
    finally:
        admin.close()
    t0 = time.monotonic()

    r = ref.run_tool(TOOLS + "VerifiableProducer", [
        "--bootstrap-server", bootstrap, "--topic", inp, "--max-messages", messages, "--acks", "-1",
        "--repeating-keys", 100], timeout=120)  # keys spread the messages over both partitions
    assert r.returncode == 0, f"VerifiableProducer against {label}: {r.stdout[-2000:]}\n{r.stderr[-2000:]}"
    acked = [e for e in _json_lines(r.stdout) if e.get("name") == "producer_send_success"]
    assert len(acked) == messages, f"VerifiableProducer acked {len(acked)} of {messages}"
    by_partition: dict[int, list[bytes]] = {}
    for e in sorted(acked, key=lambda e: (e["partition"], e["offset"])):
        by_partition.setdefault(e["partition"], []).append(e["value"].encode())
    seeded = time.monotonic()

    results: dict[int, object] = {}

    def copy(partition: int) -> None:
        results[partition] = ref.run_tool(TOOLS + "TransactionalMessageCopier", [
            "--broker-list", bootstrap, "--input-topic", inp, "--input-partition", partition,
            "--output-topic", out, "--transactional-id", f"eos-copier-{run}-{partition}",
            "--consumer-group", f"eos-copier-{run}", "--transaction-size", 100, "--transaction-timeout", 30000,
            "--max-messages", -1, "--enable-random-aborts", "--use-group-metadata"], timeout=240)

    threads = [threading.Thread(target=copy, args=(p,)) for p in range(INPUT_PARTITIONS)]
    for th in threads:
        th.start()
    done = threading.Event()
    disturber = threading.Thread(target=during_copy, args=(done,)) if during_copy is not None else None
    if disturber is not None:
        disturber.start()
    for th in threads:
        th.join()
    done.set()
    if disturber is not None:
        disturber.join()
    copied = time.monotonic()
    for p, res in results.items():
        assert res.returncode == 0, f"copier {p} against {label}: {res.stdout[-3000:]}\n{res.stderr[-3000:]}"
        events = _json_lines(res.stdout)
        assert events and events[-1].get("stage") == "ShutdownComplete", events[-3:]
        assert events[-1]["remaining"] == 0 and events[-1]["totalProcessed"] == len(by_partition.get(p, [])), \
            events[-1]

    committed_records = {p: _read_records(bootstrap, out, p, "read_committed") for p in range(INPUT_PARTITIONS)}
    committed = {p: [value for _, value in records] for p, records in committed_records.items()}
    uncommitted = {p: _read_all(bootstrap, out, p, "read_uncommitted") for p in range(INPUT_PARTITIONS)}
    read = time.monotonic()

    for p in range(INPUT_PARTITIONS):
        got, want = committed[p], by_partition.get(p, [])
        assert len(got) == len(set(got)), \
            f"{label}: {len(got) - len(set(got))} duplicates in read_committed output partition {p}: " \
            f"{_duplicates(committed_records[p])}"
        assert got == want, f"{label}: output partition {p} differs from the input: {len(got)} vs {len(want)} " \
                            f"records, missing {sorted(set(want) - set(got))[:10]}, " \
                            f"unexpected {sorted(set(got) - set(want))[:10]}"
    n_committed = sum(map(len, committed.values()))
    n_uncommitted = sum(map(len, uncommitted.values()))
    assert n_uncommitted > n_committed, \
        f"{label}: no aborted records in the log ({n_uncommitted} read_uncommitted), were aborts enabled?"
    timings = {"seed_s": seeded - t0, "copy_s": copied - seeded, "read_s": read - copied,
               "aborted_records": n_uncommitted - n_committed}
    print(f"\n[eos] {label}: {messages} messages copied exactly once; " +
          ", ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}" for k, v in timings.items()))
    return timings


def test_eos_copier_against_apache_kafka(reference):
    _run_eos_check(reference, reference.bootstrap, "Apache Kafka")


def test_eos_copier_against_our_broker(reference, ours, request):
    from tests.support.kafka_reference import probe_kafka_api

    host, _, port = ours.bootstrap.rpartition(":")
    missing = sorted(NEEDED_APIS - set(probe_kafka_api(host, int(port))["api_keys"]))
    if missing:
        request.applymarker(pytest.mark.xfail(strict=False, reason=f"API keys {missing} not implemented yet"))
    _run_eos_check(reference, ours.bootstrap, "our broker")


@pytest.fixture(scope="module")
def our_cluster(tmp_path_factory):
    base = free_port_block(4)
    b = BrokerProcess(tmp_path_factory.mktemp("eos-cluster") / "data", port=base, overrides={
        "cluster.brokers": "3", "control.port": str(base + 3), "replica.lag.time.max.ms": "5000",
        "offsets.topic.replication.factor": "3", "transaction.state.log.replication.factor": "3",
        "transaction.state.log.min.isr": "2", "offsets.topic.num.partitions": "6",
        "transaction.state.log.num.partitions": "6"}).start()
    b.wait_for_cluster(base + 3)
    b.control_url = f"http://127.0.0.1:{base + 3}"
    b.seeds = ",".join(f"127.0.0.1:{base + i}" for i in range(3))
    yield b
    code = b.stop()
    assert code == 0, f"broker exited with {code} on SIGTERM:\n{b.log_tail()}"


def _bouncer(control_url: str, clean: bool) -> Callable[[threading.Event], None]:
    """Kafka's transactions_test bounce of the brokers: each in turn goes down (SIGTERM, or as
    kill -9) and comes back, while the copiers run."""
    def post(path: str, body: dict | None = None) -> None:
        data = json.dumps(body or {}).encode()
        urllib.request.urlopen(urllib.request.Request(control_url + path, data=data, method="POST"), timeout=60)

    def bounce(done: threading.Event) -> None:
        node = 1
        bounces = 0
        while not done.wait(1.0):
            post(f"/brokers/{node}/down", {"clean": clean})
            done.wait(0.5)
            post(f"/brokers/{node}/up")
            bounces += 1
            node = node % 3 + 1
        print(f"\n[eos] {bounces} {'clean' if clean else 'hard'} broker bounces during the copy")

    return bounce


@pytest.mark.parametrize("clean", [True, False], ids=["clean-bounce", "hard-bounce"])
def test_eos_copier_while_brokers_bounce(reference, our_cluster, clean):
    """transactions_test.py's broker bounces: three brokers, RF 3, min.insync.replicas 2; each broker
    in turn goes down and comes back while the copiers run; still exactly once."""
    timings = _run_eos_check(reference, our_cluster.seeds, f"three brokers, {'clean' if clean else 'hard'} bounces",
                             replication_factor=3, during_copy=_bouncer(our_cluster.control_url, clean),
                             messages=10_000)
    assert timings["copy_s"] > 0
