"""The transaction inspector offline, on a data directory a real broker wrote under a
transactional workload (librdkafka clients):

- ``tx-orders`` commits, aborts and commits transactions over two partitions of ``orders``
  (small segments: several per partition, index entries on every batch), then leaves one open;
- an idempotent gzip producer adds plain records (a null key, a tombstone, headers);
- the classic group ``copier`` copies ``orders`` to ``out`` (lz4, LogAppendTime) with
  ``send_offsets_to_transaction``, commits once, aborts a second transaction with offsets, then
  commits offsets outside transactions; a KIP-848 group ``modern`` consumes and commits too.

The broker is stopped cleanly, then ``python -m broker.inspect files`` and Kafka 4.3.1's own
DumpLogSegments read the same files (a user topic's ``.log`` with markers and its ``.index``,
``.timeindex``, ``.txnindex`` and ``.snapshot``; ``__transaction_state`` with
``--transaction-log-decoder``; ``__consumer_offsets`` with ``--offsets-decoder``) and their
outputs are compared line by line and field by field; then the offline partitions and
transactions views are checked against what the workload did.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.testing import KafkaCluster
from tests.support.dump_log import compare, inspect, needs_dump_log

PRODUCE_TIMEOUT = 15


# --- the workload ----------------------------------------------------------------------------


def _wait_consumed(consumer: Consumer, count: int, timeout: float = 20.0) -> list:
    got: list = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        got += [m for m in consumer.consume(50, 0.3) if m.error() is None]
    assert len(got) >= count, f"consumed {len(got)} of {count}"
    return got


def run_workload(bootstrap: str) -> dict:
    """Returns what the checks need to know: the open transaction's first offsets."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([
        NewTopic("orders", 2, 1, config={"internal.segment.bytes": "300"}),
        NewTopic("out", 1, 1, config={"message.timestamp.type": "LogAppendTime"}),
    ])
    for f in futures.values():
        f.result(PRODUCE_TIMEOUT)

    orders = Producer({"bootstrap.servers": bootstrap, "transactional.id": "tx-orders", "linger.ms": 5})
    orders.init_transactions(PRODUCE_TIMEOUT)
    for i, commit in enumerate([True, True, False, True]):
        orders.begin_transaction()
        for j in range(4):
            orders.produce("orders", key=f"k{i}-{j}".encode(), value=f"v{i}-{j}".encode(), partition=j % 2,
                           headers=[("trace", b"t"), ("n", str(j).encode())])
        orders.flush(PRODUCE_TIMEOUT)
        if commit:
            orders.commit_transaction(PRODUCE_TIMEOUT)
        else:
            orders.abort_transaction(PRODUCE_TIMEOUT)

    plain = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "compression.type": "gzip",
                      "linger.ms": 20})
    for j in range(6):
        plain.produce("orders", key=None if j == 0 else f"p{j}".encode(), value=None if j == 1 else b"plain" * j,
                      partition=j % 2)
    plain.flush(PRODUCE_TIMEOUT)

    copier = Consumer({"bootstrap.servers": bootstrap, "group.id": "copier", "isolation.level": "read_committed",
                       "auto.offset.reset": "earliest", "enable.auto.commit": False})
    copier.subscribe(["orders"])
    got = _wait_consumed(copier, 18)
    out = Producer({"bootstrap.servers": bootstrap, "transactional.id": "tx-copier", "compression.type": "lz4",
                    "linger.ms": 5})
    out.init_transactions(PRODUCE_TIMEOUT)
    out.begin_transaction()
    for m in got:
        out.produce("out", key=m.key(), value=m.value())
    out.send_offsets_to_transaction(copier.position(copier.assignment()), copier.consumer_group_metadata(),
                                    PRODUCE_TIMEOUT)
    out.commit_transaction(PRODUCE_TIMEOUT)
    out.begin_transaction()
    out.produce("out", value=b"never")
    out.send_offsets_to_transaction([TopicPartition("orders", 0, 999)], copier.consumer_group_metadata(),
                                    PRODUCE_TIMEOUT)
    out.abort_transaction(PRODUCE_TIMEOUT)
    copier.commit(asynchronous=False)
    copier.close()

    modern = Consumer({"bootstrap.servers": bootstrap, "group.id": "modern", "group.protocol": "consumer",
                       "auto.offset.reset": "earliest", "enable.auto.commit": False})
    modern.subscribe(["orders"])
    _wait_consumed(modern, 18)
    modern.commit(asynchronous=False)
    modern.close()

    # Left open: the broker stops with it Ongoing.
    orders.begin_transaction()
    orders.produce("orders", key=b"open-0", value=b"open", partition=0)
    orders.produce("orders", key=b"open-1", value=b"open", partition=1)
    orders.flush(PRODUCE_TIMEOUT)
    return {"producers": [orders, plain, out]}  # kept alive until the broker has stopped


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("inspect")
    with KafkaCluster(data_dir=root, in_process=True, config={"log.index.interval.bytes": "1"}) as kafka:
        keep = run_workload(kafka.bootstrap)
    del keep
    return root / "data"


def partition_files(data: Path, topic: str, partition: int) -> list[str]:
    d = data / f"{topic}-{partition}"
    return sorted(str(p) for p in d.iterdir() if p.suffix in (".log", ".index", ".timeindex", ".txnindex",
                                                               ".snapshot"))


def coordinator_log(data: Path, topic: str) -> list[str]:
    """The non-empty first segments of an internal topic's partitions."""
    return sorted(str(p) for p in data.glob(f"{topic}-*/00000000000000000000.log") if p.stat().st_size)


# --- files, against Kafka --------------------------------------------------------------------


@pytest.mark.java
@needs_dump_log
def test_user_topic_files_match_dump_log_segments(data_dir):
    files = partition_files(data_dir, "orders", 0) + partition_files(data_dir, "out", 0)
    assert sum(f.endswith(".log") for f in files) >= 3 and any(f.endswith(".txnindex") for f in files)
    text = compare(files, "--print-data-log")
    assert "endTxnMarker: ABORT" in text and "endTxnMarker: COMMIT" in text
    assert "compresscodec: gzip" in text and "compresscodec: lz4" in text and "LogAppendTime: " in text
    assert re.search(r"^offset: \d+ position: \d+$", text, re.M)
    assert "currentTxnFirstOffset: OptionalLong[" in text  # the open transaction
    compare(partition_files(data_dir, "orders", 1), "--deep-iteration")
    compare(partition_files(data_dir, "orders", 1))


@pytest.mark.java
@needs_dump_log
def test_transaction_state_matches_transaction_log_decoder(data_dir):
    files = coordinator_log(data_dir, "__transaction_state")
    assert len(files) == 2
    text = compare(files, "--transaction-log-decoder")
    assert '"transactionalId":"tx-orders"' in text and '"transactionStatus":1' in text


@pytest.mark.java
@needs_dump_log
def test_consumer_offsets_match_offsets_decoder(data_dir):
    files = coordinator_log(data_dir, "__consumer_offsets")
    text = compare(files, "--offsets-decoder")
    assert '"subscription":{"topics":["orders"]' in text  # a classic member's decoded subscription
    assert '{"type":"5","data":{"groupId":"modern"' in text  # KIP-848 member metadata
    assert "endTxnMarker: ABORT" in text  # the aborted send_offsets_to_transaction


# --- files, our own forms --------------------------------------------------------------------


def test_files_json_has_the_same_fields(data_dir):
    files = coordinator_log(data_dir, "__transaction_state")
    doc = json.loads(inspect("files", *files, "--transaction-log-decoder", "--json").stdout)
    records = [r for d in doc["files"] for b in d["batches"] for r in b["records"]]
    first = records[0]
    assert first["key"]["data"]["transactionalId"] in ("tx-orders", "tx-copier")
    assert first["payload"]["version"] == "1" and first["payload"]["data"]["transactionStatus"] == 0
    batch = doc["files"][0]["batches"][0]
    assert batch["deleteHorizonMs"] is None and batch["isvalid"] is True and batch["compresscodec"] == "none"


# --- the offline views -----------------------------------------------------------------------


def test_partitions_view_tells_what_the_workload_did(data_dir):
    out = inspect("offline", str(data_dir), "partitions", "--topic", "orders", "--json")
    assert out.returncode == 0, out.stderr
    parts = {p["partition"]: p for p in json.loads(out.stdout)["partitions"]}
    assert sorted(parts) == [0, 1]
    dump = json.loads(inspect("files", str(data_dir / "orders-0"), str(data_dir / "orders-1"), "--print-data-log",
                              "--json").stdout)["files"]
    for n, p in parts.items():
        logs = [d for d in dump if d["kind"] == "log" and f"orders-{n}/" in d["file"]]
        batches = [b for d in logs for b in d["batches"]]
        records = {r["offset"]: r for b in batches for r in b["records"]}
        assert len(p["segments"]) == len(logs) >= 2
        assert p["logStartOffset"] == 0
        assert p["logEndOffset"] == batches[-1]["lastOffset"] + 1 == p["highWatermark"]
        # 4 transactions x 2 records, 4 markers, 3 plain records, 2 open records... per partition
        assert p["logEndOffset"] == 8 + 4 + 3 + 1
        (aborted,) = p["abortedTransactions"]
        assert [records[o].get("payload") for o in range(aborted["firstOffset"], aborted["lastOffset"])] == [
            f"v2-{n}", f"v2-{n + 2}"]
        assert records[aborted["lastOffset"]]["endTxnMarker"] == "ABORT"
        assert aborted["lastStableOffset"] == aborted["lastOffset"] + 1
        (open_txn,) = p["openTransactions"]
        assert records[open_txn["firstOffset"]]["key"] == f"open-{n}"
        assert p["lastStableOffset"] == open_txn["firstOffset"]
        producers = {e["producerId"]: e for e in p["producerSnapshot"]["producers"]}
        assert producers[open_txn["producerId"]]["currentTxnFirstOffset"] == open_txn["firstOffset"]
        assert len(producers) == 2  # tx-orders and the idempotent producer
    text = inspect("offline", str(data_dir), "partitions", "--topic", "orders").stdout
    assert re.search(r"^orders-0 topicId: \S+ logStartOffset: 0 logEndOffset: 16 ", text, re.M)
    assert "  aborted producerId: " in text and "  open producerId: " in text


def test_transactions_view_tells_the_latest_state_of_each_id(data_dir):
    out = inspect("offline", str(data_dir), "transactions", "--json")
    assert out.returncode == 0, out.stderr
    view = json.loads(out.stdout)
    assert view["errors"] == []
    txns = {t["transactionalId"]: t for t in view["transactions"]}
    assert sorted(txns) == ["tx-copier", "tx-orders"]
    assert txns["tx-orders"]["state"] == "Ongoing"
    assert txns["tx-orders"]["topicPartitions"] == [{"topic": "orders", "partitions": [0, 1]}]
    assert txns["tx-copier"]["state"] == "CompleteAbort" and txns["tx-copier"]["topicPartitions"] == []
    assert txns["tx-orders"]["producerId"] != txns["tx-copier"]["producerId"]
    text = inspect("offline", str(data_dir), "transactions").stdout
    assert "transactionalId: tx-orders state: Ongoing " in text and " partitions: [orders-0,orders-1] " in text


def test_a_tombstone_removes_the_id(tmp_path, data_dir):
    """The coordinator's expiration writes a tombstone: the id is gone from the view."""
    import shutil

    from coordinator.txn.records import encode_key
    from protocol.records import build_batch

    copy = tmp_path / "data"
    shutil.copytree(data_dir, copy)
    view = json.loads(inspect("offline", str(copy), "transactions", "--json").stdout)
    copier = next(t for t in view["transactions"] if t["transactionalId"] == "tx-copier")
    seg = copy / f"__transaction_state-{copier['partition']}" / "00000000000000000000.log"
    batch = build_batch([(encode_key("tx-copier"), None)], base_offset=copier["offset"] + 1,
                        timestamp=int(time.time() * 1000))
    with open(seg, "ab") as f:
        f.write(batch)
    view = json.loads(inspect("offline", str(copy), "transactions", "--json").stdout)
    assert [t["transactionalId"] for t in view["transactions"]] == ["tx-orders"]


def test_a_missing_data_directory_is_an_error(tmp_path):
    out = inspect("offline", str(tmp_path / "nope"), "partitions")
    assert out.returncode == 1 and "no such data directory" in out.stderr
