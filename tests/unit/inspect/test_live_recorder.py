"""The inspector's timeline recorder on its own: what a transactional request, a state change and
a marker become; the producer id -> transactional id mapping that puts markers on the right
timeline; the bounds (a ring per id, a global cap that forgets the least recently active ids);
and the cut of a timeline into transactions."""

from __future__ import annotations

from types import SimpleNamespace

from broker.inspect.live.recorder import CoordinatorObserver, TxnRecorder, group_transactions
from broker.net.context import RawResponse
from coordinator.txn.state import TransactionState, TxnTransitMetadata
from protocol.errors import ErrorCode
from protocol.messages import request_class, response_class
from protocol.produce_codec import (
    ProducePartitionResponse,
    ProducePartitionView,
    ProduceRequestView,
    ProduceTopicResponse,
    ProduceTopicView,
)
from protocol.records import build_batch
from storage.clock import ManualClock

S = TransactionState


def _clock(ms: int = 1_000) -> ManualClock:
    return ManualClock(now_ms=ms)


def _transit(state: TransactionState, pid: int = 7, epoch: int = 0,
             tps: frozenset[tuple[str, int]] = frozenset()) -> TxnTransitMetadata:
    return TxnTransitMetadata(pid, pid, -1, epoch, -1, 60000, state, tps, 1, 1, 0)


def _init(recorder: TxnRecorder, txn_id: str, pid: int) -> None:
    req = request_class(22)(transactional_id=txn_id, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1)
    pending = recorder.request(1, 22, 4, "client", req)
    assert pending is not None
    pending.answered(response_class(22)(throttle_time_ms=0, error_code=0, producer_id=pid, producer_epoch=0))


def test_a_transaction_s_walk_is_recorded_in_order_with_offsets_and_markers():
    r = TxnRecorder(_clock())
    find = request_class(10)(key="tx", key_type=1)
    pending = r.request(1, 10, 3, "client", find)
    assert pending is not None
    pending.answered(response_class(10)(throttle_time_ms=0, error_code=0, error_message=None, node_id=1,
                                        host="h", port=1))
    _init(r, "tx", 7)
    observer = CoordinatorObserver(r, 1)
    observer.transaction_state_changed("tx", int(S.EMPTY), _transit(S.EMPTY), 12, 0, 0)
    add = request_class(24)(v3_and_below_transactional_id="tx", v3_and_below_producer_id=7,
                            v3_and_below_producer_epoch=0,
                            v3_and_below_topics=[request_class(24).AddPartitionsToTxnTopic(name="orders",
                                                                                           partitions=[0])])
    pending = r.request(1, 24, 3, "client", add)
    assert pending is not None
    observer.transaction_state_changed("tx", int(S.EMPTY), _transit(S.ONGOING, tps=frozenset({("orders", 0)})),
                                       12, 0, 1)
    pending.answered(response_class(24)(throttle_time_ms=0, results_by_topic_v3_and_below=[]))
    records = memoryview(build_batch([(b"k", b"v"), (b"k", b"w")], timestamp=5, producer_id=7, producer_epoch=0,
                                     base_sequence=0, transactional=True))
    produce = ProduceRequestView("tx", -1, 1000, [ProduceTopicView("orders", None, [ProducePartitionView(0, records)])])
    pending = r.request(1, 0, 9, "client", produce)
    assert pending is not None
    pending.answered(RawResponse([b""], 0, source=[ProduceTopicResponse("orders", None, [
        ProducePartitionResponse(0, 0, base_offset=41)])]))
    end = request_class(26)(transactional_id="tx", producer_id=7, producer_epoch=0, committed=True)
    pending = r.request(1, 26, 4, "client", end)
    assert pending is not None
    observer.transaction_state_changed("tx", int(S.ONGOING), _transit(S.PREPARE_COMMIT, tps=frozenset({("orders", 0)})),
                                       12, 0, 2)
    pending.answered(response_class(26)(throttle_time_ms=0, error_code=0))
    r.marker(1, "orders", 0, 7, 0, True, 0, 43, ErrorCode.NONE, "coordinator")
    observer.transaction_state_changed("tx", int(S.PREPARE_COMMIT), _transit(S.COMPLETE_COMMIT), 12, 0, 3)

    events = r.events("tx")
    walk = [e.get("api") or (e["kind"] + ":" + str(e.get("to") or e.get("result"))) for e in events]
    assert walk == ["FindCoordinator", "InitProducerId", "state:Empty", "AddPartitionsToTxn", "state:Ongoing",
                    "Produce", "EndTxn", "state:PrepareCommit", "marker:COMMIT", "state:CompleteCommit"]
    assert [e["seq"] for e in events] == sorted(e["seq"] for e in events)
    assert events[0]["coordinator"] == [1]
    assert events[1]["producerId"] == 7 and events[1]["error"] == "NONE"
    produce_event = events[5]
    assert produce_event["partitions"] == [{"topic": "orders", "partition": 0, "records": 2, "baseSequence": 0,
                                            "offset": 41}]
    assert events[6]["result"] == "COMMIT"
    assert events[7]["statePartition"] == 12 and events[7]["offset"] == 2
    assert events[8]["offset"] == 43 and events[8]["via"] == "coordinator"
    groups = group_transactions(events)
    assert [g["outcome"] for g in groups] == ["Empty", "CompleteCommit"]
    assert groups[1]["states"] == ["Ongoing", "PrepareCommit", "CompleteCommit"]
    assert groups[1]["producedTo"] == [{"topic": "orders", "partition": 0}] and groups[1]["markers"] == 1


def test_requests_that_are_not_transactional_are_not_recorded():
    r = TxnRecorder(_clock())
    plain = ProduceRequestView(None, -1, 1000, [ProduceTopicView("orders", None, [])])
    assert r.request(1, 0, 9, "c", plain) is None
    assert r.request(1, 10, 3, "c", request_class(10)(key="group", key_type=0)) is None
    idempotent = request_class(22)(transactional_id=None, transaction_timeout_ms=1, producer_id=-1, producer_epoch=-1)
    assert r.request(1, 22, 4, "c", idempotent) is None
    assert r.stats()["events"] == 0


def test_a_marker_lands_on_the_timeline_of_the_id_that_holds_its_producer_id():
    r = TxnRecorder(_clock())
    _init(r, "tx-a", 5)
    CoordinatorObserver(r, 1).transaction_state_changed(
        "tx-b", int(S.EMPTY), TxnTransitMetadata(9, 9, 10, 0, -1, 1000, S.PREPARE_ABORT, frozenset(), 1, 1, 2),
        3, 0, 4)
    r.marker(2, "t", 1, 5, 0, False, 0, 17, ErrorCode.NONE, "WriteTxnMarkers")
    r.marker(2, "t", 1, 10, 1, True, 0, 18, ErrorCode.NONE, "coordinator")  # the next producer id (TV2)
    r.marker(2, "t", 1, 99, 0, True, 0, 19, ErrorCode.NONE, "inspector")  # nobody's
    assert [(e["kind"], e.get("offset")) for e in r.events("tx-a")][-1] == ("marker", 17)
    assert [(e["kind"], e.get("offset")) for e in r.events("tx-b")][-1] == ("marker", 18)
    assert r.stats()["unattributedMarkers"] == 1


def test_refused_markers_are_kept_as_the_pending_markers_last_error_until_the_transaction_completes():
    r = TxnRecorder(_clock())
    observer = CoordinatorObserver(r, 1)
    for _ in range(3):
        observer.markers_answered("tx", 7, 0, True, {("t", 0): ErrorCode.NOT_LEADER_OR_FOLLOWER, ("t", 1): ErrorCode.NONE})
    assert r.marker_errors("tx") == {("t", 0): ("NOT_LEADER_OR_FOLLOWER", 1_000, 3)}
    assert [e["kind"] for e in r.events("tx")] == ["markerError"] * 3
    for _ in range(100):  # a long retry loop does not flood the ring
        observer.markers_answered("tx", 7, 0, True, {("t", 0): ErrorCode.NOT_LEADER_OR_FOLLOWER})
    assert len(r.events("tx")) < 10
    observer.transaction_state_changed("tx", int(S.PREPARE_COMMIT), _transit(S.COMPLETE_COMMIT), 1, 0, 9)
    assert r.marker_errors("tx") == {}


def test_each_id_keeps_a_ring_and_the_least_recently_active_ids_go_first():
    r = TxnRecorder(_clock(), events_per_id=5, max_events=12)
    for i in range(8):
        r.marker(1, "t", 0, 1, 0, True, 0, i, ErrorCode.NONE, "x")  # unattributed: nothing kept
    for txn_id, pid in (("a", 1), ("b", 2), ("c", 3)):
        r.learn_producer(pid, txn_id)
    for i in range(8):
        r.marker(1, "t", 0, 1, 0, True, 0, i, ErrorCode.NONE, "x")
    assert [e["offset"] for e in r.events("a")] == [3, 4, 5, 6, 7]  # the newest five
    for i in range(5):
        r.marker(1, "t", 0, 2, 0, True, 0, i, ErrorCode.NONE, "x")
    r.marker(1, "t", 0, 1, 0, True, 0, 8, ErrorCode.NONE, "x")  # "a" is active again
    for i in range(5):
        r.marker(1, "t", 0, 3, 0, True, 0, i, ErrorCode.NONE, "x")
    stats = r.stats()
    assert stats["events"] <= 12
    assert r.events("b") == [] and r.events("a") and r.events("c")  # b was the least recently active
    assert stats["forgottenIds"] == 1


def test_a_request_whose_answer_cannot_be_read_does_not_fail():
    r = TxnRecorder(_clock())
    req = request_class(26)(transactional_id="tx", producer_id=1, producer_epoch=0, committed=False)
    pending = r.request(1, 26, 4, "c", req)
    assert pending is not None
    pending.answered(SimpleNamespace())  # not a message: no error codes to read
    assert r.events("tx")[0]["result"] == "ABORT"
