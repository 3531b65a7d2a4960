"""The offline views on data directories written by the storage layer itself (no broker, no
Java): offsets, segments, producer states, open and aborted transactions of a partition; the
latest state of each transactional id, tombstones removing ids; a ``--brokers N`` directory,
where the replica furthest ahead is the one read."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from broker.inspect.cli import main
from broker.inspect.data_dir import log_dirs, partition_dirs
from broker.inspect.partitions_view import partitions
from broker.inspect.transactions_view import transactions
from coordinator.txn.records import TransactionLogValue, encode_key, encode_log_value
from protocol.records import build_batch, build_control_batch, validate_batches
from storage.log_manager import LogManager
from storage.producer.types import TV_0, AppendOrigin

T0 = 1_700_000_000_000


@pytest.fixture(autouse=True)
def _no_fsync(monkeypatch):
    monkeypatch.setattr(os, "fsync", lambda fd: None)


def _append(plog, records, **producer):
    buf = build_batch(records, timestamp=T0, **producer)
    return plog.append(buf, validate_batches(buf), now_ms=T0)


def _marker(plog, pid: int, commit: bool):
    buf = build_control_batch(producer_id=pid, producer_epoch=0, commit=commit, coordinator_epoch=0, timestamp=T0)
    return plog.append(buf, validate_batches(buf), now_ms=T0, origin=AppendOrigin.COORDINATOR,
                       transaction_version=TV_0)


def _txn_record(txn_id: str, status: int, pid: int = 1) -> tuple[bytes, bytes | None]:
    if status < 0:
        return encode_key(txn_id), None
    parts = None if status == 0 else [("t", [0])]
    return encode_key(txn_id), encode_log_value(TransactionLogValue(pid, 0, 60000, status, parts, T0, T0, version=1))


def write_data_dir(root: Path, txn_records: list[tuple[bytes, bytes | None]]) -> str:
    lm = LogManager([str(root)])
    lm.startup(now_ms=T0)
    plog = lm.create("t", 0, lm.config_for({"internal.segment.bytes": "200"}), now_ms=T0)
    _append(plog, [(b"a", b"1"), (b"b", b"2")], producer_id=7, producer_epoch=0, base_sequence=0,
            transactional=True)                                   # 0-1 aborted
    _marker(plog, 7, commit=False)                                # 2
    _append(plog, [(b"c", b"3")])                                 # 3 plain
    _append(plog, [(b"d", b"4")], producer_id=7, producer_epoch=0, base_sequence=2, transactional=True)  # 4
    _marker(plog, 7, commit=True)                                 # 5
    _append(plog, [(b"e", b"5")], producer_id=9, producer_epoch=0, base_sequence=0, transactional=True)  # 6 open
    state = lm.create("__transaction_state", 0, lm.config_for({}), now_ms=T0)
    for key, value in txn_records:
        _append(state, [(key, value)])
    lm.shutdown()
    return str(root)


def test_partitions_view_offsets_segments_producers_and_transactions(tmp_path):
    data = write_data_dir(tmp_path / "data", [])
    (view,) = partitions(data, {"t"})
    assert (view["logStartOffset"], view["logEndOffset"]) == (0, 7)
    assert len(view["segments"]) >= 2 and view["segments"][-1]["nextOffset"] == 7
    assert sum(s["batches"] for s in view["segments"]) == 6
    assert [(a["producerId"], a["firstOffset"], a["lastOffset"]) for a in view["abortedTransactions"]] == [(7, 0, 2)]
    assert view["openTransactions"] == [{"producerId": 9, "producerEpoch": 0, "firstOffset": 6}]
    assert view["lastStableOffset"] == 6
    producers = {p["producerId"]: p for p in view["producerSnapshot"]["producers"]}
    assert producers[7]["lastOffset"] == 4 and producers[7]["currentTxnFirstOffset"] is None
    assert producers[9]["currentTxnFirstOffset"] == 6
    assert view["producerSnapshot"]["snapshot"] == "00000000000000000007.snapshot"


def test_transactions_view_last_record_wins_and_tombstones_remove(tmp_path):
    data = write_data_dir(tmp_path / "data", [
        _txn_record("a", 0), _txn_record("a", 1), _txn_record("a", 2), _txn_record("a", 4),
        _txn_record("b", 1, pid=2), _txn_record("gone", 5, pid=3), _txn_record("gone", -1),
    ])
    view = transactions(data)
    assert [(t["transactionalId"], t["state"], t["producerId"]) for t in view["transactions"]] == [
        ("a", "CompleteCommit", 1), ("b", "Ongoing", 2)]
    assert view["transactions"][1]["topicPartitions"] == [{"topic": "t", "partitions": [0]}]
    assert view["records"] == 7 and view["errors"] == []


def test_brokers_layout_reads_the_replica_furthest_ahead(tmp_path):
    write_data_dir(tmp_path / "data" / "broker-1", [_txn_record("a", 1)])
    write_data_dir(tmp_path / "data" / "broker-2", [_txn_record("a", 1), _txn_record("a", 4)])
    root = str(tmp_path / "data")
    assert [b for _d, b in log_dirs(root)] == [1, 2]
    assert [(p.broker, p.topic) for p in partition_dirs(root, {"t"})] == [(1, "t"), (2, "t")]
    (txn,) = transactions(root)["transactions"]
    assert (txn["state"], txn["broker"]) == ("CompleteCommit", 2)


def test_cli_text_and_json(tmp_path):
    data = write_data_dir(tmp_path / "data", [_txn_record("a", 1)])
    out, err = io.StringIO(), io.StringIO()
    assert main(["offline", data, "partitions", "--topic", "t"], out, err) == 0
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("t-0 topicId: ") and " logEndOffset: 7 " in lines[0]
    assert "  open producerId: 9 producerEpoch: 0 firstOffset: 6" in lines
    assert any(line.startswith("  aborted producerId: 7 firstOffset: 0 lastOffset: 2 ") for line in lines)
    out = io.StringIO()
    assert main(["offline", data, "partitions", "--skip-empty"], out, err) == 0
    assert [line.split()[0] for line in out.getvalue().splitlines() if not line.startswith(" ")] == [
        "__transaction_state-0", "t-0"]
    out = io.StringIO()
    assert main(["offline", data, "transactions", "--json"], out, err) == 0
    assert json.loads(out.getvalue())["transactions"][0]["state"] == "Ongoing"
    out = io.StringIO()
    assert main(["files", os.path.join(data, "t-0"), "--json"], out, err) == 0
    kinds = {f["kind"] for f in json.loads(out.getvalue())["files"]}
    assert kinds == {"log", "index", "timeindex", "txnindex", "snapshot"}
