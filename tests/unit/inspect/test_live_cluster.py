"""Two brokers in one process (``--brokers 2``), each with its inspector page (``metrics.port``,
``metrics.port`` + 1): either page shows both brokers, which broker leads each partition, where
each coordinator partition lives, every transactional id wherever its coordinator is, and one
timeline in which each event names the broker it happened on (the coordinator's state changes,
the leaders' markers)."""

from __future__ import annotations

import json
import time
import urllib.request
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from broker.testing import KafkaCluster, free_port

pytestmark = pytest.mark.timeout(120)


def _get(port: int, path: str) -> Any:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as r:
        return json.loads(r.read())


def test_either_broker_s_page_shows_the_whole_process(tmp_path):
    base = free_port()
    with KafkaCluster(brokers=2, in_process=True, data_dir=tmp_path, config={"metrics.port": base}) as k:
        admin = AdminClient({"bootstrap.servers": k.bootstrap})
        admin.create_topics([NewTopic("orders", 2, 2)])["orders"].result(30)
        p = Producer({"bootstrap.servers": k.bootstrap, "transactional.id": "tx-multi", "linger.ms": 0})
        p.init_transactions(30)
        p.begin_transaction()
        for partition in (0, 1):
            p.produce("orders", b"v", partition=partition)
        p.commit_transaction(30)
        leaders = [part["leader"] for part in k.topic("orders")["partitions"]]
        assert sorted(leaders) == [1, 2]
        coordinator = k.coordinator("transaction", "tx-multi")
        # EndTxn answers at PrepareCommit; CompleteCommit follows once both partitions' ISRs hold
        # their markers (the follower's next fetch)
        deadline = time.monotonic() + 10
        while _get(base, "/inspect/api/transactions?q=tx-multi")["transactions"][0]["state"] != "CompleteCommit":
            assert time.monotonic() < deadline, "the transaction never completed"
            time.sleep(0.05)

        for port in (base, base + 1):  # the same process seen from either page
            overview = _get(port, "/inspect/api/overview")
            brokers = {b["id"]: b for b in overview["brokers"]}
            assert sorted(brokers) == [1, 2] and all(b["alive"] for b in brokers.values())
            assert {b["metricsPort"] for b in brokers.values()} == {base, base + 1}
            assert [b["id"] for b in brokers.values() if b["thisPage"]] == [port - base + 1]
            assert next(t for t in overview["leaders"] if t["topic"] == "orders")["leaders"] == leaders
            txn_leaders = {c["leader"] for c in overview["coordinators"]["transaction"]}
            assert txn_leaders == {1, 2}
            assert sum(b["transactionCoordinatorPartitions"] for b in brokers.values()) == 50
            [row] = _get(port, "/inspect/api/transactions?q=tx-multi")["transactions"]
            assert row["state"] == "CompleteCommit" and row["broker"] == coordinator

        parts = _get(base, "/inspect/api/partitions?topic=orders")
        assert sorted((q["partition"], q["broker"]) for q in parts["partitions"]) == [(0, 1), (0, 2), (1, 1), (1, 2)]
        led = _get(base, "/inspect/api/partitions?topic=orders&role=leader")["partitions"]
        assert {q["partition"]: q["broker"] for q in led} == dict(enumerate(leaders))

        events = [e for g in _get(base + 1, "/inspect/api/transactions/tx-multi")["timeline"] for e in g["events"]]
        markers = {e["partition"]: e for e in events if e["kind"] == "marker"}
        assert {q: m["broker"] for q, m in markers.items()} == dict(enumerate(leaders))  # written by each leader
        assert {m["via"] for q, m in markers.items()} <= {"coordinator", "WriteTxnMarkers"}
        assert {m["via"] for q, m in markers.items() if leaders[q] != coordinator} <= {"WriteTxnMarkers"}
        assert {e["broker"] for e in events if e["kind"] == "state"} == {coordinator}
        assert [e["to"] for e in events if e["kind"] == "state"][-2:] == ["PrepareCommit", "CompleteCommit"]
