"""The transaction APIs over the raw wire: exact error codes and answers, as Kafka 4.3's
TransactionCoordinator, KafkaApis and AddPartitionsToTxnManager give them.

Requests are kafka-python's generated message classes sent by ``tests.support.raw_client``.
"""

from __future__ import annotations

import time
import uuid

import pytest
from kafka.protocol.admin import CreateTopicsRequest, DescribeTransactionsRequest, ListTransactionsRequest
from kafka.protocol.consumer import OffsetFetchRequest
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    ProduceRequest,
    TxnOffsetCommitRequest,
    WriteTxnMarkersRequest,
)

from protocol.records import build_batch
from tests.support.broker_process import BrokerProcess
from tests.support.raw_client import RawClient

NONE, UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS = 0, 3, 19
INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE, INVALID_PRODUCER_ID_MAPPING = 47, 48, 49
INVALID_TRANSACTION_TIMEOUT, CONCURRENT_TRANSACTIONS = 50, 51
OPERATION_NOT_ATTEMPTED, UNSTABLE_OFFSET_COMMIT, PRODUCER_FENCED = 55, 88, 90
TRANSACTIONAL_ID_NOT_FOUND, TRANSACTION_ABORTABLE = 105, 120
TOPIC = "txn-wire"


@pytest.fixture(scope="module")
def wire(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("txn-wire") / "data").start()
    c = RawClient(b.bootstrap)
    req = CreateTopicsRequest[5](topics=[CreateTopicsRequest.CreatableTopic(
        name=TOPIC, num_partitions=3, replication_factor=1, assignments=[], configs=[])],
        timeout_ms=10000, validate_only=False)
    assert c.send(req, 5).topics[0].error_code == 0
    assert find_coordinator(c, "any").error_code == 0  # creates __transaction_state
    yield c
    c.close()
    assert b.stop() == 0


def find_coordinator(c: RawClient, key: str, key_type: int = 1):
    return c.send(FindCoordinatorRequest[3](key=key, key_type=key_type), 3)


def tid() -> str:
    return f"wire-{uuid.uuid4().hex[:8]}"


def init(c: RawClient, txn_id: str, timeout_ms: int = 60000, version: int = 4, pid: int = -1, epoch: int = -1):
    fields = dict(transactional_id=txn_id, transaction_timeout_ms=timeout_ms)
    if version >= 3:
        fields.update(producer_id=pid, producer_epoch=epoch)
    return c.send(InitProducerIdRequest[version](**fields), version)


def add_partitions(c: RawClient, txn_id: str, pid: int, epoch: int, parts: dict[str, list[int]], version: int = 3):
    req = AddPartitionsToTxnRequest[version](
        v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=t, partitions=ps)
                             for t, ps in parts.items()])
    resp = c.send(req, version)
    return {(t.name, p.partition_index): p.partition_error_code
            for t in resp.results_by_topic_v3_and_below for p in t.results_by_partition}


def end_txn(c: RawClient, txn_id: str, pid: int, epoch: int, commit: bool, version: int = 3):
    return c.send(EndTxnRequest[version](transactional_id=txn_id, producer_id=pid, producer_epoch=epoch,
                                         committed=commit), version)


def produce_txn(c: RawClient, txn_id: str, pid: int, epoch: int, seq: int, partition: int = 0, version: int = 9):
    records = bytes(build_batch([(b"k", b"v")], timestamp=int(time.time() * 1000), producer_id=pid,
                                producer_epoch=epoch, base_sequence=seq, transactional=True))
    req = ProduceRequest[version](transactional_id=txn_id, acks=-1, timeout_ms=5000, topic_data=[
        ProduceRequest.TopicProduceData(name=TOPIC, partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=partition, records=records)])])
    return c.send(req, version).responses[0].partition_responses[0]


def until(fn, ok, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while True:
        result = fn()
        if ok(result) or time.monotonic() > deadline:
            return result
        time.sleep(0.02)


def describe(c: RawClient, txn_id: str):
    return c.send(DescribeTransactionsRequest[0](transactional_ids=[txn_id]), 0).transaction_states[0]


def fresh(c: RawClient) -> tuple[str, int, int]:
    txn_id = tid()
    r = init(c, txn_id)
    assert r.error_code == NONE and r.producer_epoch == 0
    return txn_id, r.producer_id, r.producer_epoch


# --- InitProducerId -------------------------------------------------------------------------------


def test_init_producer_id_validates_the_timeout(wire):
    assert init(wire, tid(), timeout_ms=900001).error_code == INVALID_TRANSACTION_TIMEOUT
    assert init(wire, tid(), timeout_ms=0).error_code == INVALID_TRANSACTION_TIMEOUT
    assert init(wire, tid(), timeout_ms=900000).error_code == NONE


def test_init_producer_id_bumps_the_epoch_and_fences(wire):
    txn_id, pid, _ = fresh(wire)
    again = init(wire, txn_id)
    assert (again.error_code, again.producer_id, again.producer_epoch) == (NONE, pid, 1)
    # KIP-360: a producer passing its current id/epoch gets a bump; a stale one is fenced.
    bumped = init(wire, txn_id, pid=pid, epoch=1)
    assert (bumped.error_code, bumped.producer_epoch) == (NONE, 2)
    assert init(wire, txn_id, pid=pid + 1000, epoch=2).error_code == PRODUCER_FENCED
    assert init(wire, txn_id, pid=pid + 1000, epoch=2, version=3).error_code == INVALID_PRODUCER_EPOCH


def test_init_producer_id_aborts_an_ongoing_transaction(wire):
    txn_id, pid, epoch = fresh(wire)
    assert add_partitions(wire, txn_id, pid, epoch, {TOPIC: [0]}) == {(TOPIC, 0): NONE}
    assert produce_txn(wire, txn_id, pid, epoch, 0).error_code == NONE
    first = init(wire, txn_id)
    assert first.error_code == CONCURRENT_TRANSACTIONS  # the abort (with epoch + 1) is under way
    r = until(lambda: init(wire, txn_id), lambda r: r.error_code != CONCURRENT_TRANSACTIONS)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (NONE, pid, epoch + 2)
    d = describe(wire, txn_id)
    assert (d.transaction_state, d.producer_epoch) == ("Empty", epoch + 2)
    # The zombie's epoch is now stale everywhere.
    assert add_partitions(wire, txn_id, pid, epoch, {TOPIC: [1]}) == {(TOPIC, 1): PRODUCER_FENCED}
    assert produce_txn(wire, txn_id, pid, epoch, 1).error_code == INVALID_PRODUCER_EPOCH


# --- AddPartitionsToTxn -----------------------------------------------------------------------------


def test_add_partitions_errors(wire):
    txn_id, pid, epoch = fresh(wire)
    assert add_partitions(wire, tid(), pid, epoch, {TOPIC: [0]}) == {(TOPIC, 0): INVALID_PRODUCER_ID_MAPPING}
    assert add_partitions(wire, txn_id, pid + 1, epoch, {TOPIC: [0]}) == {(TOPIC, 0): INVALID_PRODUCER_ID_MAPPING}
    assert add_partitions(wire, txn_id, pid, epoch + 5, {TOPIC: [0]}, version=3) == {(TOPIC, 0): PRODUCER_FENCED}
    assert add_partitions(wire, txn_id, pid, epoch + 5, {TOPIC: [0]}, version=1) == {(TOPIC, 0): INVALID_PRODUCER_EPOCH}
    assert add_partitions(wire, txn_id, pid, epoch, {TOPIC: [0], "no-such-topic": [0]}) == {
        (TOPIC, 0): OPERATION_NOT_ATTEMPTED, ("no-such-topic", 0): UNKNOWN_TOPIC_OR_PARTITION}
    assert add_partitions(wire, txn_id, pid, epoch, {TOPIC: [0, 7]}) == {
        (TOPIC, 0): OPERATION_NOT_ATTEMPTED, (TOPIC, 7): UNKNOWN_TOPIC_OR_PARTITION}
    assert add_partitions(wire, txn_id, pid, epoch, {TOPIC: [0, 1]}, version=0) == {(TOPIC, 0): NONE, (TOPIC, 1): NONE}
    d = describe(wire, txn_id)
    assert d.transaction_state == "Ongoing" and [(t.topic, sorted(t.partitions)) for t in d.topics] == [(TOPIC, [0, 1])]


def test_add_partitions_v4_verify_only(wire):
    txn_id, pid, epoch = fresh(wire)
    assert add_partitions(wire, txn_id, pid, epoch, {TOPIC: [2]}) == {(TOPIC, 2): NONE}
    req = AddPartitionsToTxnRequest[4](transactions=[AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction(
        transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, verify_only=True,
        topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=TOPIC, partitions=[1, 2])])])
    resp = wire.send(req, 4)
    assert resp.error_code == NONE
    [result] = resp.results_by_transaction
    assert result.transactional_id == txn_id
    assert {p.partition_index: p.partition_error_code for t in result.topic_results for p in t.results_by_partition} \
        == {1: TRANSACTION_ABORTABLE, 2: NONE}


# --- Produce verification (KIP-890) -------------------------------------------------------------------


def test_transactional_produce_needs_the_partition_in_the_transaction(wire):
    txn_id, pid, epoch = fresh(wire)
    r = produce_txn(wire, txn_id, pid, epoch, 0, version=9)
    assert r.error_code == INVALID_TXN_STATE  # DEFAULT_ERROR clients (Produce < v11)
    assert r.error_message == "Partition was not added to the transaction"
    assert produce_txn(wire, txn_id, pid, epoch, 0, version=11).error_code == TRANSACTION_ABORTABLE
    assert produce_txn(wire, tid(), pid, epoch, 0).error_code == INVALID_PRODUCER_ID_MAPPING
    assert add_partitions(wire, txn_id, pid, epoch, {TOPIC: [0]}) == {(TOPIC, 0): NONE}
    assert produce_txn(wire, txn_id, pid, epoch, 0).error_code == NONE
    assert produce_txn(wire, txn_id, pid, epoch, 1).error_code == NONE  # ongoing: no new check
    assert end_txn(wire, txn_id, pid, epoch, True).error_code == NONE
    # PrepareCommit/CompleteCommit pending: the next transaction's first write must wait.
    r = until(lambda: add_partitions(wire, txn_id, pid, epoch, {TOPIC: [0]}),
              lambda r: r[(TOPIC, 0)] != CONCURRENT_TRANSACTIONS)
    assert r == {(TOPIC, 0): NONE}


def test_produce_with_transactional_records_needs_a_transactional_id(wire):
    txn_id, pid, epoch = fresh(wire)
    assert produce_txn(wire, None, pid, epoch, 0).error_code == 53  # TRANSACTIONAL_ID_AUTHORIZATION_FAILED


# --- EndTxn --------------------------------------------------------------------------------------------


def test_end_txn_state_errors(wire):
    txn_id, pid, epoch = fresh(wire)
    assert end_txn(wire, txn_id, pid, epoch, True).error_code == INVALID_TXN_STATE  # Empty
    assert end_txn(wire, txn_id, pid, epoch, False).error_code == INVALID_TXN_STATE
    assert end_txn(wire, tid(), pid, epoch, True).error_code == INVALID_PRODUCER_ID_MAPPING
    assert end_txn(wire, txn_id, pid + 1, epoch, True).error_code == INVALID_PRODUCER_ID_MAPPING
    assert add_partitions(wire, txn_id, pid, epoch, {TOPIC: [1]}) == {(TOPIC, 1): NONE}
    assert end_txn(wire, txn_id, pid, epoch + 1, True).error_code == PRODUCER_FENCED
    assert end_txn(wire, txn_id, pid, epoch + 1, True, version=1).error_code == INVALID_PRODUCER_EPOCH
    assert end_txn(wire, txn_id, pid, epoch, False).error_code == NONE
    # A retry of the same result is fine; the other result is not.
    retry = until(lambda: end_txn(wire, txn_id, pid, epoch, False).error_code,
                  lambda code: code != CONCURRENT_TRANSACTIONS)
    assert retry == NONE
    assert end_txn(wire, txn_id, pid, epoch, True).error_code == INVALID_TXN_STATE
    d = describe(wire, txn_id)
    assert (d.error_code, d.transaction_state, d.topics) == (NONE, "CompleteAbort", [])


def test_end_txn_v5_bumps_the_epoch(wire):
    """EndTxn v5 means Transactions V2 to Kafka: the answer carries the bumped epoch."""
    txn_id, pid, epoch = fresh(wire)
    assert add_partitions(wire, txn_id, pid, epoch, {TOPIC: [0]}) == {(TOPIC, 0): NONE}
    assert produce_txn(wire, txn_id, pid, epoch, 0).error_code == NONE
    r = end_txn(wire, txn_id, pid, epoch, True, version=5)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (NONE, pid, epoch + 1)
    d = until(lambda: describe(wire, txn_id), lambda d: d.transaction_state == "CompleteCommit")
    assert (d.transaction_state, d.producer_epoch) == ("CompleteCommit", epoch + 1)
    # A retry with the old epoch is recognised; the old epoch cannot start anything new.
    r = end_txn(wire, txn_id, pid, epoch, True, version=5)
    assert (r.error_code, r.producer_epoch) == (NONE, epoch + 1)


# --- Describe / List -------------------------------------------------------------------------------------


def test_describe_and_list_transactions(wire):
    assert describe(wire, tid()).error_code == TRANSACTIONAL_ID_NOT_FOUND
    txn_id, pid, epoch = fresh(wire)
    add_partitions(wire, txn_id, pid, epoch, {TOPIC: [0, 2]})
    d = describe(wire, txn_id)
    assert (d.error_code, d.transaction_state, d.producer_id, d.producer_epoch, d.transaction_timeout_ms) == \
        (NONE, "Ongoing", pid, epoch, 60000)
    assert d.transaction_start_time_ms > 0
    resp = wire.send(ListTransactionsRequest[1](state_filters=["Ongoing", "Bogus"], producer_id_filters=[pid],
                                                duration_filter=-1), 1)
    assert resp.error_code == NONE and resp.unknown_state_filters == ["Bogus"]
    assert [(s.transactional_id, s.producer_id, s.transaction_state) for s in resp.transaction_states] == \
        [(txn_id, pid, "Ongoing")]
    resp = wire.send(ListTransactionsRequest[2](state_filters=[], producer_id_filters=[], duration_filter=-1,
                                                transactional_id_pattern=txn_id[:9] + ".*"), 2)
    assert txn_id in [s.transactional_id for s in resp.transaction_states]
    end_txn(wire, txn_id, pid, epoch, False)


# --- WriteTxnMarkers ----------------------------------------------------------------------------------


def test_write_txn_markers_partition_errors(wire):
    txn_id, pid, epoch = fresh(wire)
    assert add_partitions(wire, txn_id, pid, epoch, {TOPIC: [1]}) == {(TOPIC, 1): NONE}
    assert produce_txn(wire, txn_id, pid, epoch, 0, partition=1).error_code == NONE
    req = WriteTxnMarkersRequest[1](markers=[WriteTxnMarkersRequest.WritableTxnMarker(
        producer_id=pid, producer_epoch=epoch - 1 if epoch else -1, transaction_result=False, coordinator_epoch=0,
        topics=[WriteTxnMarkersRequest.WritableTxnMarker.WritableTxnMarkerTopic(name=TOPIC, partition_indexes=[1]),
                WriteTxnMarkersRequest.WritableTxnMarker.WritableTxnMarkerTopic(name="nope", partition_indexes=[0])],
    )])
    [marker] = wire.send(req, 1).markers
    errors = {(t.name, p.partition_index): p.error_code for t in marker.topics for p in t.partitions}
    assert errors == {(TOPIC, 1): INVALID_PRODUCER_EPOCH, ("nope", 0): UNKNOWN_TOPIC_OR_PARTITION}
    end_txn(wire, txn_id, pid, epoch, False)


# --- offsets in transactions ---------------------------------------------------------------------------


def txn_offset_commit(c: RawClient, txn_id: str, group: str, pid: int, epoch: int, offset: int, version: int = 3):
    fields = dict(transactional_id=txn_id, group_id=group, producer_id=pid, producer_epoch=epoch, topics=[
        TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name=TOPIC, partitions=[
            TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition(
                partition_index=0, committed_offset=offset, committed_leader_epoch=-1, committed_metadata="m")])])
    if version >= 3:
        fields.update(generation_id=-1, member_id="", group_instance_id=None)
    resp = c.send(TxnOffsetCommitRequest[version](**fields), version)
    return resp.topics[0].partitions[0].error_code


def fetch_offset(c: RawClient, group: str, require_stable: bool) -> tuple[int, int]:
    req = OffsetFetchRequest[7](group_id=group, require_stable=require_stable, topics=[
        OffsetFetchRequest.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=[0])])
    p = c.send(req, 7).topics[0].partitions[0]
    return p.error_code, p.committed_offset


def test_txn_offset_commit_is_staged_until_the_commit_marker(wire):
    group = f"g-{uuid.uuid4().hex[:8]}"
    assert find_coordinator(wire, group, key_type=0).error_code == NONE
    txn_id, pid, epoch = fresh(wire)
    # Without AddOffsetsToTxn the offsets partition is not in the transaction.
    assert txn_offset_commit(wire, txn_id, group, pid, epoch, 5, version=3) == INVALID_TXN_STATE
    assert txn_offset_commit(wire, txn_id, group, pid, epoch, 5, version=4) == TRANSACTION_ABORTABLE
    resp = wire.send(AddOffsetsToTxnRequest[1](transactional_id=txn_id, producer_id=pid, producer_epoch=epoch,
                                               group_id=group), 1)
    assert resp.error_code == NONE
    assert txn_offset_commit(wire, txn_id, group, pid, epoch + 3, 5) == INVALID_PRODUCER_EPOCH
    assert txn_offset_commit(wire, txn_id, group, pid, epoch, 5) == NONE
    assert fetch_offset(wire, group, True) == (UNSTABLE_OFFSET_COMMIT, -1)
    assert fetch_offset(wire, group, False) == (NONE, -1)
    assert end_txn(wire, txn_id, pid, epoch, True).error_code == NONE
    assert until(lambda: fetch_offset(wire, group, True), lambda r: r[0] == NONE) == (NONE, 5)
    # Aborted offsets are dropped.
    r = until(lambda: add_partitions(wire, txn_id, pid, epoch, {TOPIC: [0]}),
              lambda r: r[(TOPIC, 0)] != CONCURRENT_TRANSACTIONS)
    assert r == {(TOPIC, 0): NONE}
    assert wire.send(AddOffsetsToTxnRequest[1](transactional_id=txn_id, producer_id=pid, producer_epoch=epoch,
                                               group_id=group), 1).error_code == NONE
    assert txn_offset_commit(wire, txn_id, group, pid, epoch, 9) == NONE
    assert end_txn(wire, txn_id, pid, epoch, False).error_code == NONE
    assert until(lambda: fetch_offset(wire, group, True), lambda r: r[0] == NONE) == (NONE, 5)


# --- transactional.id.expiration.ms ------------------------------------------------------------------


def test_idle_transactional_ids_expire_with_a_tombstone(tmp_path):
    from pathlib import Path

    from tests.e2e.test_transactions_crash import txn_log

    b = BrokerProcess(tmp_path / "data", overrides={
        "transactional.id.expiration.ms": "1500",
        "transaction.remove.expired.transaction.cleanup.interval.ms": "200",
    }).start()
    try:
        with RawClient(b.bootstrap) as c:
            c.send(CreateTopicsRequest[5](topics=[CreateTopicsRequest.CreatableTopic(
                name=TOPIC, num_partitions=1, replication_factor=1, assignments=[], configs=[])],
                timeout_ms=10000, validate_only=False), 5)
            assert find_coordinator(c, "x").error_code == NONE
            idle, pid, _ = fresh(c)
            busy, bpid, bepoch = fresh(c)
            assert add_partitions(c, busy, bpid, bepoch, {TOPIC: [0]}) == {(TOPIC, 0): NONE}
            d = until(lambda: describe(c, idle), lambda d: d.error_code != NONE, timeout=15)
            assert d.error_code == TRANSACTIONAL_ID_NOT_FOUND
            assert describe(c, busy).transaction_state == "Ongoing", "an open transaction never expires"
            records = txn_log(Path(b.data_dir), idle)
            assert records[0]["state"] == "Empty" and records[-1] is None, "expiry writes a tombstone"
            again = init(c, idle)
            assert again.error_code == NONE and again.producer_id != pid and again.producer_epoch == 0
            end_txn(c, busy, bpid, bepoch, False)
        assert b.stop() == 0
    finally:
        b.kill()


# --- Fetch and ListOffsets around transactions ------------------------------------------------------


def fetch(c: RawClient, partition: int, isolation: int, offset: int = 0):
    from kafka.protocol.consumer import FetchRequest

    req = FetchRequest[11](replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=8 << 20, isolation_level=isolation,
                           session_id=0, session_epoch=-1, topics=[FetchRequest.FetchTopic(
                               topic=TOPIC, partitions=[FetchRequest.FetchTopic.FetchPartition(
                                   partition=partition, current_leader_epoch=-1, fetch_offset=offset,
                                   log_start_offset=-1, partition_max_bytes=8 << 20)])],
                           forgotten_topics_data=[], rack_id="")
    return c.send(req, 11).responses[0].partitions[0]


def list_offset(c: RawClient, partition: int, isolation: int) -> int:
    from kafka.protocol.consumer import ListOffsetsRequest

    req = ListOffsetsRequest[5](replica_id=-1, isolation_level=isolation, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name=TOPIC, partitions=[
            ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                partition_index=partition, current_leader_epoch=-1, timestamp=-1)])])
    return c.send(req, 5).topics[0].partitions[0].offset


def test_fetch_reports_the_lso_and_aborted_transactions(wire):
    """read_committed: data below the LSO, ``last_stable_offset`` and the aborted transactions of the
    returned range; read_uncommitted: up to the high watermark, ``aborted_transactions`` null."""
    partition = 2
    base = list_offset(wire, partition, 0)
    txn_id, pid, epoch = fresh(wire)
    until(lambda: add_partitions(wire, txn_id, pid, epoch, {TOPIC: [partition]}),
          lambda r: r[(TOPIC, partition)] != CONCURRENT_TRANSACTIONS)
    assert produce_txn(wire, txn_id, pid, epoch, 0, partition=partition).error_code == NONE
    assert produce_txn(wire, txn_id, pid, epoch, 1, partition=partition).error_code == NONE
    p = fetch(wire, partition, 1, base)
    assert (p.high_watermark, p.last_stable_offset, p.aborted_transactions, p.records) == (base + 2, base, [], b"")
    assert list_offset(wire, partition, 1) == base and list_offset(wire, partition, 0) == base + 2
    assert end_txn(wire, txn_id, pid, epoch, False).error_code == NONE
    until(lambda: describe(wire, txn_id), lambda d: d.transaction_state == "CompleteAbort")
    p = fetch(wire, partition, 1, base)
    assert (p.high_watermark, p.last_stable_offset) == (base + 3, base + 3)
    assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(pid, base)]
    assert len(p.records) > 0
    u = fetch(wire, partition, 0, base)
    assert u.aborted_transactions is None and u.last_stable_offset == base + 3
