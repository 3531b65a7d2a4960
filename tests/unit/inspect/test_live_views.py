"""The inspector's JSON views, read through its API from a real broker (in this process, on its own
event loop) after a workload of stock clients: committed, aborted, open and hanging transactions
and groups with members, committed offsets and pending transactional offsets
(``tests.support.inspector_scenario``). Then the abort action, and its guards."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from broker.broker import Broker
from broker.config.broker_config import BrokerConfig
from broker.inspect.files import FileOptions, dump_file
from broker.inspect.jackson import plain
from broker.inspect.live.settings import actions_enabled, inspector_enabled, is_loopback
from broker.testing import free_port
from coordinator.group.java_hash import partition_for
from tests.support.broker_thread import BrokerThread
from tests.support.inspector_scenario import build_scenario, read_committed

pytestmark = pytest.mark.timeout(120)


def start_broker(tmp_path, **overrides: str) -> BrokerThread:
    return BrokerThread({"log.dirs": str(tmp_path / "data"), "listeners": "PLAINTEXT://127.0.0.1:0",
                         "metrics.port": str(free_port()), "group.initial.rebalance.delay.ms": "0",
                         "transaction.partition.verification.enable": "false", **overrides},
                        name="inspector-broker").start_and_wait()


class Api:
    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.base + path, timeout=30) as r:
            return json.loads(r.read())

    def post(self, path: str, body: bytes, content_type: str = "application/json",
             headers: dict[str, str] | None = None) -> tuple[int, Any]:
        req = urllib.request.Request(self.base + path, data=body, method="POST",
                                     headers={"Content-Type": content_type, **(headers or {})})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    r = start_broker(tmp_path_factory.mktemp("inspector"))
    assert r.broker is not None and r.broker.metrics_port
    scenario = build_scenario(f"127.0.0.1:{r.broker.bound_ports['PLAINTEXT']}")
    yield r, scenario, Api(r.broker.metrics_port)
    scenario.close()
    r.stop()


def by_id(view: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["transactionalId"]: t for t in view["transactions"]}


def test_every_transactional_id_with_its_state_its_partitions_and_its_coordinator(env):
    _r, _s, api = env
    view = api.get("/inspect/api/transactions")
    txns = by_id(view)
    assert {k: t["state"] for k, t in txns.items()} == {
        "tx-after": "CompleteCommit", "tx-committed": "CompleteCommit", "tx-aborted": "CompleteAbort",
        "tx-open": "Ongoing", "tx-hanging": "Empty"}
    assert view["states"] == {"CompleteAbort": 1, "CompleteCommit": 2, "Empty": 1, "Ongoing": 1}
    opened = txns["tx-open"]
    offsets_partition = partition_for("copier", 50)
    assert opened["topicPartitions"] == [{"topic": "__consumer_offsets", "partitions": [offsets_partition]},
                                         {"topic": "orders", "partitions": [2]}]
    assert opened["ageMs"] >= 0 and opened["pendingMarkers"] == [] and opened["timedOut"] is False
    assert opened["transactionTimeoutMs"] == 300_000
    for txn_id, t in txns.items():
        assert t["broker"] == 1 and t["partition"] == partition_for(txn_id, 50)
    assert txns["tx-committed"]["topicPartitions"] == [] and txns["tx-committed"]["ageMs"] is None


def test_the_list_is_filtered_by_state_and_id_and_paged(env):
    _r, _s, api = env
    assert list(by_id(api.get("/inspect/api/transactions?state=Ongoing"))) == ["tx-open"]
    assert list(by_id(api.get("/inspect/api/transactions?state=open"))) == ["tx-open"]
    assert list(by_id(api.get("/inspect/api/transactions?state=completecommit,CompleteAbort&q=tx-a"))) == \
        ["tx-aborted", "tx-after"]
    pages = [api.get(f"/inspect/api/transactions?size=2&page={n}") for n in (1, 2, 3)]
    assert [(p["page"], p["pages"], p["total"]) for p in pages] == [(1, 3, 5), (2, 3, 5), (3, 3, 5)]
    assert [t for p in pages for t in by_id(p)] == ["tx-aborted", "tx-after", "tx-committed", "tx-hanging", "tx-open"]


def test_a_transaction_s_timeline_is_the_walk_of_kafka_s_design_as_it_happened(env):
    _r, _s, api = env
    view = api.get("/inspect/api/transactions/tx-committed")
    assert view["transaction"]["state"] == "CompleteCommit" and view["recording"]
    session, txn = view["timeline"]
    # librdkafka may ask for the coordinator more than once (its first query can race the broker
    # connection); the walk is FindCoordinator, then InitProducerId.
    requests = [e.get("api") for e in session["events"] if e["kind"] == "request"]
    assert [api for i, api in enumerate(requests) if i == 0 or api != requests[i - 1]] \
        == ["FindCoordinator", "InitProducerId"]
    assert session["outcome"] == "Empty"
    assert txn["outcome"] == "CompleteCommit" and txn["states"] == ["Ongoing", "PrepareCommit", "CompleteCommit"]
    walk = [e.get("api") or f'{e["kind"]}:{e.get("to") or e["topic"] + "-" + str(e["partition"])}'
            for e in txn["events"]]
    # librdkafka: AddPartitionsToTxn before its Produce; the two Produce requests may come in any order
    assert walk[:2] == ["AddPartitionsToTxn", "state:Ongoing"]
    assert sorted(walk[2:4]) == ["Produce", "Produce"]
    assert walk[4:6] == ["EndTxn", "state:PrepareCommit"]
    assert sorted(walk[6:8]) == ["marker:orders-0", "marker:orders-1"] and walk[8] == "state:CompleteCommit"
    markers = {(e["topic"], e["partition"]): e for e in txn["events"] if e["kind"] == "marker"}
    assert markers[("orders", 0)]["offset"] == 2 and markers[("orders", 1)]["offset"] == 1  # after the records
    assert {m["result"] for m in markers.values()} == {"COMMIT"} and {m["error"] for m in markers.values()} == {"NONE"}
    produced = sorted((p["topic"], p["partition"], p["offset"], p["records"])
                      for e in txn["events"] if e.get("api") == "Produce" for p in e["partitions"])
    assert produced == [("orders", 0, 0, 2), ("orders", 1, 0, 1)]
    states = [e for e in txn["events"] if e["kind"] == "state"]
    assert [e["offset"] for e in states] == sorted(e["offset"] for e in states)  # __transaction_state offsets
    assert {e["statePartition"] for e in states} == {partition_for("tx-committed", 50)}
    opened = api.get("/inspect/api/transactions/tx-open")
    apis = [e.get("api") for g in opened["timeline"] for e in g["events"]]
    assert "AddOffsetsToTxn" in apis and "TxnOffsetCommit" in apis
    commit = next(e for g in opened["timeline"] for e in g["events"] if e.get("api") == "TxnOffsetCommit")
    assert commit["groupId"] == "copier" and commit["partitions"] == [
        {"topic": "orders", "partition": 2, "committedOffset": 7}]
    assert {(o["topic"], o["partition"], o["status"]) for o in opened["openTransactions"]} == {
        ("orders", 2, "ongoing"), ("__consumer_offsets", partition_for("copier", 50), "ongoing")}


def test_find_hanging_finds_the_transaction_no_coordinator_holds(env):
    _r, s, api = env
    view = api.get("/inspect/api/hanging?max_transaction_timeout_ms=0")
    [hanging] = view["hanging"]
    assert {k: hanging[k] for k in ("topic", "partition", "producerId", "producerEpoch", "coordinatorEpoch",
                                    "startOffset", "transactionalId", "coordinatorState", "status")} == {
        "topic": "orders", "partition": 0, "producerId": s.hanging_producer_id, "producerEpoch": s.hanging_epoch,
        "coordinatorEpoch": -1, "startOffset": s.hanging_offset, "transactionalId": "tx-hanging",
        "coordinatorState": "Empty", "status": "hanging"}
    assert sorted((o["topic"], o["partition"], o["status"]) for o in view["open"]) == sorted([
        ("orders", 0, "hanging"), ("orders", 2, "ongoing"), ("__consumer_offsets", partition_for("copier", 50), "ongoing")])
    # with the broker's transaction.max.timeout.ms (15 minutes) it is not judged yet
    default = api.get("/inspect/api/hanging")
    assert default["maxTransactionTimeoutMs"] == 900_000 and default["hanging"] == []
    assert [o["status"] for o in default["open"] if o["topic"] == "orders" and o["partition"] == 0] == ["unverified"]


def test_partitions_show_the_lso_what_holds_it_producers_segments_and_aborted_ranges(env):
    _r, s, api = env
    view = api.get("/inspect/api/partitions?topic=orders")
    parts = {p["partition"]: p for p in view["partitions"]}
    p0, p1, p2 = parts[0], parts[1], parts[2]
    assert p0["lastStableOffset"] == s.hanging_offset
    assert p0["highWatermark"] == p0["logEndOffset"] == s.after_offsets[-1] + 2  # + tx-after's marker
    assert p0["lsoLag"] == p0["highWatermark"] - s.hanging_offset
    [held] = p0["openTransactions"]
    assert (held["producerId"], held["firstOffset"], held["holdsLso"], held["transactionalId"]) == (
        s.hanging_producer_id, s.hanging_offset, True, "tx-hanging")
    assert {e["producerId"] for e in p0["producerSnapshot"]["producers"]} >= {s.hanging_producer_id}
    assert p1["lastStableOffset"] == p1["highWatermark"] and p1["openTransactions"] == []
    [aborted] = p1["abortedTransactions"]
    assert (aborted["firstOffset"], aborted["lastOffset"]) == (2, 4)  # a0, a1, then the ABORT marker
    assert p1["segments"][0]["txnIndexEntries"] == 1
    assert p2["lastStableOffset"] == 0 and p2["openTransactions"][0]["transactionalId"] == "tx-open"
    assert api.get("/inspect/api/partitions?open=1&internal=0")["total"] == 2  # orders-0 and orders-2


def test_groups_show_members_assignments_offsets_lag_and_pending_transactional_offsets(env):
    _r, _s, api = env
    groups = {g["groupId"]: g for g in api.get("/inspect/api/groups")["groups"]}
    copier, readers = groups["copier"], groups["readers"]
    assert copier["unstable"] and copier["pendingTransactionalOffsets"] == [
        {"producerId": copier["pendingTransactionalOffsets"][0]["producerId"], "transactionalId": "tx-open",
         "topic": "orders", "partition": 2, "offset": 7,
         "recordOffset": copier["pendingTransactionalOffsets"][0]["recordOffset"]}]
    assert copier["offsetsPartition"] == partition_for("copier", 50) and copier["coordinator"] == 1
    assert (readers["type"], readers["state"], readers["protocol"]) == ("classic", "Stable", "range")
    [member] = readers["members"]
    assert member["assignment"] == [{"topic": "orders", "partitions": [0, 1, 2]}]
    offsets = {o["partition"]: o for o in readers["offsets"]}
    assert offsets[0]["offset"] == 1 and offsets[0]["lag"] == offsets[0]["highWatermark"] - 1
    assert not readers["unstable"]
    assert [g["groupId"] for g in api.get("/inspect/api/groups?pending=1")["groups"]] == ["copier"]


def test_a_file_decoded_live_is_the_offline_decoder_s_view(env):
    r, _s, api = env
    assert r.broker is not None
    listing = api.get("/inspect/api/files?dir=orders-1")
    assert {f["kind"] for f in listing["files"]} >= {"log", "index", "timeindex", "txnindex"}
    doc = api.get("/inspect/api/files?dir=orders-1&file=00000000000000000000.log&deep=1")
    [dumped] = doc["files"]
    offline = dump_file(listing["path"] + "/00000000000000000000.log", FileOptions(deep_iteration=True))
    assert dumped == json.loads(json.dumps(plain(offline)))
    markers = [rec.get("endTxnMarker") for b in dumped["batches"] for rec in b.get("records", ())]
    assert "ABORT" in markers and "COMMIT" in markers
    for bad in ("/inspect/api/files?dir=../../etc", "/inspect/api/files?dir=orders-1&file=../meta.properties",
                "/inspect/api/files?dir=orders-1&file=leader-epoch-checkpoint"):
        with pytest.raises(urllib.error.HTTPError) as e:
            api.get(bad)
        assert e.value.code in (400, 404)


def test_the_overview_says_where_everything_is(env):
    _r, _s, api = env
    view = api.get("/inspect/api/overview?max_transaction_timeout_ms=0")
    [broker] = view["brokers"]
    assert broker["id"] == 1 and broker["alive"] and broker["thisPage"]
    assert broker["transactionCoordinatorPartitions"] == 50 and broker["groupCoordinatorPartitions"] == 50
    assert {c["leader"] for c in view["coordinators"]["transaction"]} == {1}
    assert next(t for t in view["leaders"] if t["topic"] == "orders")["leaders"] == [1, 1, 1]
    assert [h["transactionalId"] for h in view["hanging"]] == ["tx-hanging"]
    assert view["transactions"]["open"] == 1 and view["recorder"]["transactionalIds"] >= 5
    assert view["actionsEnabled"]


def test_the_abort_action_is_guarded(env):
    _r, s, api = env
    body = json.dumps({"topic": "orders", "partition": 0, "startOffset": s.hanging_offset}).encode()
    status, answer = api.post("/inspect/api/abort", body)
    assert status == 400 and b"confirm" in answer
    confirmed = json.dumps({"topic": "orders", "partition": 0, "startOffset": s.hanging_offset,
                            "confirm": True}).encode()
    assert api.post("/inspect/api/abort", confirmed, "text/plain")[0] == 400  # a cross-site form cannot send JSON
    assert api.post("/inspect/api/abort", confirmed, headers={"Origin": "http://evil.example"})[0] == 403
    form = b"topic=orders&partition=0&start_offset=%d&confirm=yes&token=forged" % s.hanging_offset
    assert api.post("/inspect/abort", form, "application/x-www-form-urlencoded")[0] == 403
    assert api.get("/inspect/api/hanging?max_transaction_timeout_ms=0")["hanging"]  # still there


def test_abort_unblocks_read_committed_consumers(env):
    _r, s, api = env
    assert read_committed(s.bootstrap, 0, 2.0) == [b"c0", b"c1"]  # held at the hanging transaction
    status, answer = api.post("/inspect/api/abort", json.dumps({
        "topic": "orders", "partition": 0, "startOffset": s.hanging_offset, "confirm": True}).encode())
    result = json.loads(answer)
    assert status == 200 and result["ok"] and result["error"] == "NONE"
    assert (result["producerId"], result["producerEpoch"], result["coordinatorEpoch"]) == (
        s.hanging_producer_id, s.hanging_epoch, 0)
    assert result["lastStableOffsetBefore"] == s.hanging_offset
    assert result["lastStableOffsetAfter"] == result["highWatermark"] > s.hanging_offset
    assert read_committed(s.bootstrap, 0, 10.0, expect=4) == [b"c0", b"c1", b"after-0", b"after-1"]
    assert api.get("/inspect/api/hanging?max_transaction_timeout_ms=0")["hanging"] == []
    timeline = api.get("/inspect/api/transactions/tx-hanging")["timeline"]
    [marker] = [e for g in timeline for e in g["events"] if e["kind"] == "marker"]
    assert (marker["result"], marker["via"], marker["offset"]) == ("ABORT", "inspector", result["highWatermark"] - 1)
    status, again = api.post("/inspect/api/abort", json.dumps({
        "topic": "orders", "partition": 0, "startOffset": s.hanging_offset, "confirm": True}).encode())
    assert status == 409 and b"Could not find any open transactions starting at offset" in again


def test_without_the_metrics_port_nothing_is_recorded_and_nothing_served(tmp_path):
    config = BrokerConfig({"log.dirs": str(tmp_path)})
    broker = Broker(config)
    assert not inspector_enabled(config) and broker.txn_recorder is None
    off = BrokerConfig({"log.dirs": str(tmp_path), "metrics.port": "9999", "inspector.enable": "false"})
    assert not inspector_enabled(off) and Broker(off).txn_recorder is None


def test_the_abort_action_is_on_for_loopback_only_unless_enabled():
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost") and is_loopback("127.0.0.2")
    assert not is_loopback("0.0.0.0") and not is_loopback("") and not is_loopback("10.1.2.3")
    assert actions_enabled(BrokerConfig({}))  # metrics.host defaults to 127.0.0.1
    assert not actions_enabled(BrokerConfig({"metrics.host": "0.0.0.0"}))
    assert actions_enabled(BrokerConfig({"metrics.host": "0.0.0.0", "inspector.actions.enable": "true"}))


def test_a_transaction_whose_markers_are_not_written_yet_shows_them_pending(tmp_path):
    """``test.txn.stop.before.markers`` withholds the commit markers once PrepareCommit is durable:
    the id shows PrepareCommit with both partitions' markers pending, the LSO of each partition
    stays at the transaction's first offset, and find-hanging calls it ongoing (its coordinator
    will write the markers), as Kafka's tool would."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    r = start_broker(tmp_path, **{"test.txn.stop.before.markers": "true"})
    try:
        assert r.broker is not None
        bootstrap = f"127.0.0.1:{r.broker.bound_ports['PLAINTEXT']}"
        admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the result is in
        admin.create_topics([NewTopic("t", 2, 1)])["t"].result(30)
        p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "tx-stuck", "linger.ms": 0})
        p.init_transactions(30)
        p.begin_transaction()
        p.produce("t", b"a", partition=0)
        p.produce("t", b"b", partition=1)
        p.commit_transaction(30)  # answered once PrepareCommit is durable
        api = Api(r.broker.metrics_port or 0)
        [row] = api.get("/inspect/api/transactions?q=tx-stuck")["transactions"]
        assert (row["state"], row["pendingState"]) == ("PrepareCommit", "CompleteCommit")
        assert [(m["topic"], m["partition"], m["lastError"]) for m in row["pendingMarkers"]] == [
            ("t", 0, None), ("t", 1, None)]
        parts = api.get("/inspect/api/partitions?topic=t")["partitions"]
        assert [(q["lastStableOffset"], q["lsoLag"]) for q in parts] == [(0, 1), (0, 1)]
        hanging = api.get("/inspect/api/hanging?max_transaction_timeout_ms=0")
        assert hanging["hanging"] == [] and {o["status"] for o in hanging["open"]} == {"ongoing"}
        timeline = api.get("/inspect/api/transactions/tx-stuck")["timeline"]
        assert timeline[-1]["states"] == ["Ongoing", "PrepareCommit"] and timeline[-1]["markers"] == 0
    finally:
        r.stop()
