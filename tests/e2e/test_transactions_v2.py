"""Transactions V2 (KIP-890 part 2) over the raw wire, as Apache Kafka 4.3 answers it.

- ApiVersions v3/v4 features (``transaction.version`` finalized at 2 by default; compared with a
  real Kafka 4.3.1 when java is available);
- Produce v12: the partition is added to the transaction implicitly (no AddPartitionsToTxn),
  CONCURRENT_TRANSACTIONS after Kafka's 100 ms of internal retries, the error mapping;
- TxnOffsetCommit v5: the offsets partition is added implicitly (no AddOffsetsToTxn);
- EndTxn v5: a new epoch per transaction, sequences restart, retries recognised, the state x
  result table, epoch exhaustion -> a new producer id at epoch 0 (with its retry);
- TV2 markers (WriteTxnMarkers v2: strictly higher epoch) and ``__transaction_state`` value v1;
- InitProducerId on an Ongoing TV2 transaction; the ``transaction.version`` property (0/1/2).

Requests are kafka-python's generated classes sent by ``tests.support.raw_client``. The epoch-exhaustion
test runs the broker in-process (a thread with its own event loop) so that it can move a
transactional id's epoch to 32765 instead of bumping it 32765 times.
"""

from __future__ import annotations

import asyncio
import shutil
import threading
import time
import uuid
from pathlib import Path

import pytest
from kafka.protocol.admin import CreateTopicsRequest, DescribeTransactionsRequest
from kafka.protocol.consumer import OffsetFetchRequest
from kafka.protocol.metadata import ApiVersionsRequest, FindCoordinatorRequest, MetadataRequest
from kafka.protocol.producer import (
    EndTxnRequest,
    InitProducerIdRequest,
    ProduceRequest,
    TxnOffsetCommitRequest,
    WriteTxnMarkersRequest,
)

from protocol.records import build_batch
from tests.support.broker_process import BrokerProcess, free_port
from tests.support.raw_client import RawClient

NONE, OUT_OF_ORDER_SEQUENCE = 0, 45
INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE, INVALID_PRODUCER_ID_MAPPING = 47, 48, 49
CONCURRENT_TRANSACTIONS, UNSTABLE_OFFSET_COMMIT, PRODUCER_FENCED = 51, 88, 90
GROUP_ID_NOT_FOUND, UNKNOWN_TOPIC_ID, TRANSACTION_ABORTABLE = 69, 100, 120
TOPIC = "txn-v2"
SHORT_MAX = 32767


def create_topic(c: RawClient, name: str = TOPIC, partitions: int = 3) -> None:
    req = CreateTopicsRequest[5](topics=[CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1, assignments=[], configs=[])],
        timeout_ms=10000, validate_only=False)
    assert c.send(req, 5).topics[0].error_code in (0, 36)
    assert c.send(FindCoordinatorRequest[3](key="any", key_type=1), 3).error_code == 0  # __transaction_state


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("txn-v2") / "data").start()
    with RawClient(b.bootstrap) as c:
        create_topic(c)
    yield b
    assert b.stop() == 0


@pytest.fixture
def wire(broker):
    with RawClient(broker.bootstrap) as c:
        yield c


def tid() -> str:
    return f"v2-{uuid.uuid4().hex[:8]}"


def init(c: RawClient, txn_id: str, pid: int = -1, epoch: int = -1, timeout_ms: int = 60000):
    return c.send(InitProducerIdRequest[5](transactional_id=txn_id, transaction_timeout_ms=timeout_ms,
                                           producer_id=pid, producer_epoch=epoch), 5)


def fresh(c: RawClient) -> tuple[str, int, int]:
    txn_id = tid()
    r = init(c, txn_id)
    assert (r.error_code, r.producer_epoch) == (NONE, 0)
    return txn_id, r.producer_id, r.producer_epoch


def records(pid: int, epoch: int, seq: int, n: int = 1, transactional: bool = True) -> bytes:
    return bytes(build_batch([(b"k", b"v%d" % i) for i in range(n)], timestamp=int(time.time() * 1000),
                             producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=transactional))


def produce(c: RawClient, txn_id: str | None, batches: dict[int, bytes], version: int = 12, topic: str = TOPIC):
    """{partition: records} -> {partition: (error, base offset, error message)}."""
    req = ProduceRequest[version](transactional_id=txn_id, acks=-1, timeout_ms=5000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=p, records=r) for p, r in batches.items()])])
    resp = c.send(req, version).responses[0]
    return {p.index: (p.error_code, p.base_offset, p.error_message) for p in resp.partition_responses}


def produce_one(c, txn_id, pid, epoch, seq, partition=0, version=12, n=1) -> int:
    return produce(c, txn_id, {partition: records(pid, epoch, seq, n)}, version)[partition][0]


def end_txn(c: RawClient, txn_id: str, pid: int, epoch: int, commit: bool, version: int = 5):
    r = c.send(EndTxnRequest[version](transactional_id=txn_id, producer_id=pid, producer_epoch=epoch,
                                      committed=commit), version)
    return (r.error_code, r.producer_id, r.producer_epoch) if version >= 5 else (r.error_code, -1, -1)


def describe(c: RawClient, txn_id: str):
    return c.send(DescribeTransactionsRequest[0](transactional_ids=[txn_id]), 0).transaction_states[0]


def partitions_of(d) -> set[tuple[str, int]]:
    return {(t.topic, p) for t in d.topics for p in t.partitions}


def until(fn, ok, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while True:
        result = fn()
        if ok(result) or time.monotonic() > deadline:
            return result
        time.sleep(0.02)


def completed(c: RawClient, txn_id: str, state: str = "CompleteCommit"):
    d = until(lambda: describe(c, txn_id), lambda d: d.transaction_state == state)
    assert d.transaction_state == state
    return d


def api_versions(c: RawClient, version: int):
    return c.send(ApiVersionsRequest[version](client_software_name="raw-test", client_software_version="1.0"),
                  version)


def features(resp) -> tuple[list, int, list]:
    return ([(f.name, f.min_version, f.max_version) for f in resp.supported_features or []],
            resp.finalized_features_epoch,
            [(f.name, f.min_version_level, f.max_version_level) for f in resp.finalized_features or []])


# --- ApiVersions -----------------------------------------------------------------------------------------


def test_api_versions_finalize_transaction_version_2(wire):
    v4 = api_versions(wire, 4)
    assert features(v4) == (
        [("group.version", 0, 1), ("metadata.version", 7, 30), ("transaction.version", 0, 2),
         ("eligible.leader.replicas.version", 0, 1)],
        1,
        [("group.version", 1, 1), ("metadata.version", 30, 30), ("transaction.version", 2, 2),
         ("eligible.leader.replicas.version", 1, 1)],
    )
    # KAFKA-17492: below v4, supported features with min 0 are left out
    v3 = api_versions(wire, 3)
    assert features(v3) == ([("metadata.version", 7, 30)], 1, features(v4)[2])
    keys = {k.api_key: (k.min_version, k.max_version) for k in v4.api_keys}
    # what a TV2 client needs (Produce v12+, v13 naming topics by id)
    assert keys[0] == (0, 13) and keys[26] == (0, 5) and keys[28] == (0, 6) and keys[27] == (1, 2)


def test_transaction_version_property_levels(tmp_path):
    for level, finalized in (("0", []), ("1", [("transaction.version", 1, 1)])):
        b = BrokerProcess(tmp_path / f"tv{level}", overrides={"transaction.version": level}).start()
        try:
            with RawClient(b.bootstrap) as c:
                supported, epoch, fin = features(api_versions(c, 4))
                assert ("transaction.version", 0, 2) in supported and epoch == 1
                assert fin == [("group.version", 1, 1), ("metadata.version", 30, 30), *finalized,
                               ("eligible.leader.replicas.version", 1, 1)]
                # TV1 transactions keep working; the log value version follows the level
                create_topic(c)
                txn_id, pid, epoch = fresh(c)
                assert end_txn(c, txn_id, pid, epoch, False, version=5)[0] == NONE
                completed(c, txn_id, "CompleteAbort")
            assert {r["version"] for r in txn_log(Path(b.data_dir), txn_id)} == {int(level)}
        finally:
            b.stop()


def test_transaction_version_out_of_range_is_a_configuration_error():
    from broker.config.broker_config import BrokerConfig
    from coordinator.txn.state_manager import transaction_version_level

    assert transaction_version_level(BrokerConfig({})) == 2
    with pytest.raises(ValueError, match="transaction.version"):
        transaction_version_level(BrokerConfig({"transaction.version": "3"}))


@pytest.mark.java
@pytest.mark.skipif(shutil.which("java") is None or shutil.which("mvn") is None, reason="needs java and mvn")
def test_api_versions_features_match_apache_kafka(wire, tmp_path):
    """Field by field against Kafka 4.3.1's answer: the features we list have Kafka's ranges and
    levels; the ones we leave out are exactly the group/quorum protocols we do not implement."""
    from tests.support.kafka_reference import KafkaReference

    ref = KafkaReference()
    try:
        ref.start(tmp_path / "kafka")
        with RawClient(ref.bootstrap) as k:
            theirs = {v: features(api_versions(k, v)) for v in (3, 4)}
    finally:
        ref.stop()
    ours = {v: features(api_versions(wire, v)) for v in (3, 4)}
    omitted = {"kraft.version", "share.version", "streams.version"}
    for v in (3, 4):
        (k_sup, k_epoch, k_fin), (o_sup, o_epoch, o_fin) = theirs[v], ours[v]
        assert k_epoch >= 0 and o_epoch >= 0
        assert [f for f in k_sup if f[0] not in omitted] == o_sup
        assert [f for f in k_fin if f[0] not in omitted] == o_fin
        assert {f[0] for f in k_fin} - {f[0] for f in o_fin} == omitted
        assert all(lo != 0 for _, lo, _ in (k_sup if v == 3 else [])), "v3 keeps only min != 0"
    assert theirs[3][0] == [f for f in theirs[4][0] if f[1] != 0]


# --- Produce v12: implicit AddPartitionsToTxn ------------------------------------------------------------


def test_produce_v12_adds_the_partition_to_the_transaction(wire):
    txn_id, pid, epoch = fresh(wire)
    assert produce_one(wire, txn_id, pid, epoch, 0, partition=0, n=3) == NONE
    d = describe(wire, txn_id)
    assert (d.transaction_state, partitions_of(d)) == ("Ongoing", {(TOPIC, 0)})
    # the transaction is open there now: no coordinator round trip, sequences continue
    assert produce_one(wire, txn_id, pid, epoch, 3, partition=0) == NONE
    # two more partitions in one request, one add
    got = produce(wire, txn_id, {1: records(pid, epoch, 0), 2: records(pid, epoch, 0)})
    assert {p: r[0] for p, r in got.items()} == {1: NONE, 2: NONE}
    assert partitions_of(describe(wire, txn_id)) == {(TOPIC, 0), (TOPIC, 1), (TOPIC, 2)}
    err, new_pid, new_epoch = end_txn(wire, txn_id, pid, epoch, True)
    assert (err, new_pid, new_epoch) == (NONE, pid, epoch + 1)
    d = completed(wire, txn_id)
    assert (d.producer_epoch, partitions_of(d)) == (epoch + 1, set())


def test_sequences_restart_every_transaction(wire):
    """The Java TV2 producer resets sequences to 0 with the epoch EndTxn v5 returns; its first
    write of the next transaction usually arrives while the markers are still being written (the
    broker retries CONCURRENT_TRANSACTIONS internally)."""
    txn_id, pid, epoch = fresh(wire)
    for t in range(5):
        assert produce_one(wire, txn_id, pid, epoch, 0, partition=t % 2, n=2) == NONE
        assert produce_one(wire, txn_id, pid, epoch, 2, partition=t % 2) == NONE
        err, pid2, epoch2 = end_txn(wire, txn_id, pid, epoch, t % 2 == 0)
        assert (err, pid2, epoch2) == (NONE, pid, epoch + 1)
        # the old epoch is fenced at once, and cannot continue its sequence in the new one
        assert produce_one(wire, txn_id, pid, epoch, 3, partition=t % 2) == INVALID_PRODUCER_EPOCH
        epoch = epoch2
    assert produce_one(wire, txn_id, pid, epoch, 5, partition=0) == OUT_OF_ORDER_SEQUENCE
    assert produce_one(wire, txn_id, pid, epoch, 0, partition=0) == NONE
    assert end_txn(wire, txn_id, pid, epoch, True) == (NONE, pid, epoch + 1)
    completed(wire, txn_id)


def test_produce_v12_errors(wire):
    txn_id, pid, epoch = fresh(wire)
    # a producer without state on a partition starts at sequence 0 (TV2 verification state)
    assert produce_one(wire, txn_id, pid, epoch, 7, partition=1) == OUT_OF_ORDER_SEQUENCE
    # the coordinator's PRODUCER_FENCED reaches the producer as INVALID_PRODUCER_EPOCH
    assert produce_one(wire, txn_id, pid, epoch + 1, 0) == INVALID_PRODUCER_EPOCH
    assert produce_one(wire, txn_id, pid + 1000, 0, 0) == INVALID_PRODUCER_ID_MAPPING
    assert produce_one(wire, tid(), pid, epoch, 0) == INVALID_PRODUCER_ID_MAPPING
    # transactional records of two producers in one request fail the whole request
    other_id, other_pid, other_epoch = fresh(wire)
    got = produce(wire, txn_id, {0: records(pid, epoch, 0), 1: records(other_pid, other_epoch, 0)})
    assert {p: r[0] for p, r in got.items()} == {0: INVALID_PRODUCER_ID_MAPPING, 1: INVALID_PRODUCER_ID_MAPPING}
    assert got[0][2] == "Transactional records contained more than one producer ID"
    # only the rejected sequence-7 write added a partition (as in Kafka: added, then refused)
    assert partitions_of(describe(wire, txn_id)) == {(TOPIC, 1)}
    # v11 is still TV1: the client must have added the partition (KIP-890 part 1)
    assert produce_one(wire, txn_id, pid, epoch, 0, version=11) == TRANSACTION_ABORTABLE
    assert produce_one(wire, txn_id, pid, epoch, 0, version=12) == NONE
    end_txn(wire, txn_id, pid, epoch, False)


# --- TxnOffsetCommit v5 -----------------------------------------------------------------------------------


def txn_offset_commit(c: RawClient, txn_id: str, group: str, pid: int, epoch: int, offset: int, version: int = 5):
    resp = c.send(TxnOffsetCommitRequest[version](
        transactional_id=txn_id, group_id=group, producer_id=pid, producer_epoch=epoch, generation_id=-1,
        member_id="", group_instance_id=None, topics=[
            TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name=TOPIC, partitions=[
                TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition(
                    partition_index=0, committed_offset=offset, committed_leader_epoch=-1,
                    committed_metadata="m")])]), version)
    return resp.topics[0].partitions[0].error_code


def fetch_offset(c: RawClient, group: str, require_stable: bool = True) -> tuple[int, int]:
    req = OffsetFetchRequest[7](group_id=group, require_stable=require_stable, topics=[
        OffsetFetchRequest.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=[0])])
    p = c.send(req, 7).topics[0].partitions[0]
    return p.error_code, p.committed_offset


def test_txn_offset_commit_v5_adds_the_offsets_partition(wire):
    txn_id, pid, epoch = fresh(wire)
    group = f"g-{uuid.uuid4().hex[:8]}"
    assert txn_offset_commit(wire, txn_id, group, pid, epoch + 1, 5) == INVALID_PRODUCER_EPOCH
    # v4 still needs AddOffsetsToTxn
    assert txn_offset_commit(wire, txn_id, group, pid, epoch, 5, version=4) == TRANSACTION_ABORTABLE
    assert txn_offset_commit(wire, txn_id, group, pid, epoch, 5) == NONE
    d = describe(wire, txn_id)
    assert d.transaction_state == "Ongoing"
    [(topic, _)] = partitions_of(d)
    assert topic == "__consumer_offsets"
    assert fetch_offset(wire, group) == (UNSTABLE_OFFSET_COMMIT, -1)
    assert txn_offset_commit(wire, txn_id, group, pid, epoch, 6) == NONE
    assert end_txn(wire, txn_id, pid, epoch, True) == (NONE, pid, epoch + 1)
    completed(wire, txn_id)
    assert until(lambda: fetch_offset(wire, group), lambda r: r == (NONE, 6)) == (NONE, 6)


def txn_offset_commit_v6(c: RawClient, txn_id: str, group: str, pid: int, epoch: int, topics: list[tuple],
                         generation: int = -1) -> list:
    """TxnOffsetCommit v6 (Kafka 4.4, KIP-1319): ``topics`` [(topic id, partition, offset)];
    the answer as [(topic id, partition, error)]."""
    from protocol.newer.txn_offset_commit import TxnOffsetCommitRequest as V6

    Topic = V6.TxnOffsetCommitRequestTopic
    req = V6[6](transactional_id=txn_id, group_id=group, producer_id=pid, producer_epoch=epoch,
                generation_id_or_member_epoch=generation, member_id="", group_instance_id=None, topics=[
                    Topic(topic_id=tid, partitions=[Topic.TxnOffsetCommitRequestPartition(
                        partition_index=p, committed_offset=o, committed_leader_epoch=-1, committed_metadata="m")])
                    for tid, p, o in topics])
    resp = c.send(req, 6)
    return [(t.topic_id, p.partition_index, p.error_code) for t in resp.topics for p in t.partitions]


def test_txn_offset_commit_v6_names_topics_by_id(wire):
    """As Kafka 4.4's KafkaApis and OffsetMetadataManager: ids resolved first (an unknown one gets
    UNKNOWN_TOPIC_ID), a missing group with a generation gets GROUP_ID_NOT_FOUND (v5:
    ILLEGAL_GENERATION), and the committed offsets land under the topic's name."""
    (md,) = wire.send(MetadataRequest[12](topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC, topic_id=None)],
                                          allow_auto_topic_creation=False, include_topic_authorized_operations=False),
                      12).topics
    tid, stranger = md.topic_id, uuid.UUID(int=0xBEEF)
    txn_id, pid, epoch = fresh(wire)
    group = f"g-{uuid.uuid4().hex[:8]}"
    assert txn_offset_commit_v6(wire, txn_id, group, pid, epoch, [(tid, 0, 1)], generation=3) == [
        (tid, 0, GROUP_ID_NOT_FOUND)]
    assert txn_offset_commit(wire, txn_id, group, pid, epoch, 1, version=5) == NONE  # the group exists now
    assert txn_offset_commit_v6(wire, txn_id, group, pid, epoch, [(tid, 0, 7), (stranger, 0, 1)]) == [
        (tid, 0, NONE), (stranger, 0, UNKNOWN_TOPIC_ID)]
    assert end_txn(wire, txn_id, pid, epoch, True) == (NONE, pid, epoch + 1)
    completed(wire, txn_id)
    assert until(lambda: fetch_offset(wire, group), lambda r: r == (NONE, 7)) == (NONE, 7)


# --- EndTxn v5 ---------------------------------------------------------------------------------------------


def test_end_txn_v5_state_and_epoch_rules(wire):
    txn_id, pid, epoch = fresh(wire)
    # Empty: commit is invalid, abort is legal (an "empty" TV2 abort) and bumps the epoch
    assert end_txn(wire, txn_id, pid, epoch, True) == (INVALID_TXN_STATE, -1, -1)
    assert end_txn(wire, txn_id, pid, epoch + 1, False) == (PRODUCER_FENCED, -1, -1)
    assert end_txn(wire, txn_id, pid, epoch, False) == (NONE, pid, epoch + 1)
    completed(wire, txn_id, "CompleteAbort")
    # a retry (request epoch + 1 == stored epoch) answers NONE with the current id and epoch
    assert end_txn(wire, txn_id, pid, epoch, False) == (NONE, pid, epoch + 1)
    assert end_txn(wire, txn_id, pid, epoch, True) == (INVALID_TXN_STATE, -1, -1)
    # CompleteAbort, current epoch: another abort bumps again; a commit is invalid
    epoch += 1
    assert end_txn(wire, txn_id, pid, epoch, True) == (INVALID_TXN_STATE, -1, -1)
    assert end_txn(wire, txn_id, pid, epoch, False) == (NONE, pid, epoch + 1)
    completed(wire, txn_id, "CompleteAbort")
    epoch += 1
    # a committed transaction: its retry is fine, a commit at the current epoch is not
    assert produce_one(wire, txn_id, pid, epoch, 0) == NONE
    assert end_txn(wire, txn_id, pid, epoch, True) == (NONE, pid, epoch + 1)
    completed(wire, txn_id)
    assert end_txn(wire, txn_id, pid, epoch, True) == (NONE, pid, epoch + 1)
    assert end_txn(wire, txn_id, pid, epoch, False) == (INVALID_TXN_STATE, -1, -1)
    assert end_txn(wire, txn_id, pid, epoch + 1, True) == (INVALID_TXN_STATE, -1, -1)
    assert end_txn(wire, txn_id, pid, epoch + 1, False) == (NONE, pid, epoch + 2)  # empty abort
    # until the completion is written every EndTxn is concurrent (checked first, as in Kafka)
    assert end_txn(wire, txn_id, pid + 1000, epoch + 2, False)[0] in (CONCURRENT_TRANSACTIONS,
                                                                      INVALID_PRODUCER_ID_MAPPING)
    completed(wire, txn_id, "CompleteAbort")
    assert end_txn(wire, txn_id, pid + 1000, epoch + 2, False) == (INVALID_PRODUCER_ID_MAPPING, -1, -1)


def test_init_producer_id_fences_an_ongoing_tv2_transaction(wire):
    txn_id, pid, epoch = fresh(wire)
    assert produce_one(wire, txn_id, pid, epoch, 0) == NONE
    # the coordinator aborts with a bumped epoch and asks the client to retry
    assert init(wire, txn_id).error_code == CONCURRENT_TRANSACTIONS
    r = until(lambda: init(wire, txn_id), lambda r: r.error_code != CONCURRENT_TRANSACTIONS)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (NONE, pid, epoch + 2)
    assert produce_one(wire, txn_id, pid, epoch, 1) == INVALID_PRODUCER_EPOCH
    # the abort marker carried the fencing epoch: the new epoch writes a new transaction from 0
    assert produce_one(wire, txn_id, pid, epoch + 2, 0) == NONE
    assert end_txn(wire, txn_id, pid, epoch + 2, True) == (NONE, pid, epoch + 3)


# --- markers --------------------------------------------------------------------------------------------


def write_marker(c: RawClient, pid: int, epoch: int, partition: int, tv: int, version: int = 2) -> int:
    fields = dict(producer_id=pid, producer_epoch=epoch, transaction_result=False, coordinator_epoch=0,
                  topics=[WriteTxnMarkersRequest.WritableTxnMarker.WritableTxnMarkerTopic(
                      name=TOPIC, partition_indexes=[partition])])
    if version >= 2:
        fields["transaction_version"] = tv
    [marker] = c.send(WriteTxnMarkersRequest[version](markers=[WriteTxnMarkersRequest.WritableTxnMarker(**fields)]),
                      version).markers
    return marker.topics[0].partitions[0].error_code


def test_tv2_markers_need_a_higher_epoch(wire):
    """The coordinator's TV2 markers carry the bumped epoch; a TV2 marker at the producer's epoch is
    stale unless it repeats the marker already written (KAFKA-19999); TV0 accepts the same epoch."""
    txn_id, pid, epoch = fresh(wire)
    assert produce_one(wire, txn_id, pid, epoch, 0, partition=2) == NONE
    assert end_txn(wire, txn_id, pid, epoch, False) == (NONE, pid, epoch + 1)
    completed(wire, txn_id, "CompleteAbort")
    # the marker was written with epoch + 1 and TV2: repeating it is an idempotent retry
    assert write_marker(wire, pid, epoch + 1, 2, tv=2) == NONE
    assert write_marker(wire, pid, epoch, 2, tv=2) == INVALID_PRODUCER_EPOCH
    assert write_marker(wire, pid, epoch, 2, tv=0) == INVALID_PRODUCER_EPOCH
    assert write_marker(wire, pid, epoch + 1, 2, tv=0, version=1) == NONE
    # an open transaction at epoch + 1: a TV2 marker at that same epoch would end it late
    assert produce_one(wire, txn_id, pid, epoch + 1, 0, partition=2) == NONE
    assert write_marker(wire, pid, epoch + 1, 2, tv=2) == INVALID_PRODUCER_EPOCH
    assert end_txn(wire, txn_id, pid, epoch + 1, True) == (NONE, pid, epoch + 2)
    completed(wire, txn_id)


# --- __transaction_state value v1 -----------------------------------------------------------------------


def _uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def _tags(value: bytes) -> dict[int, int]:
    """The tagged fields of a TransactionLogValue v1 (PreviousProducerId 0, NextProducerId 1:
    int64; ClientTransactionVersion 2, NextProducerEpoch 3: int16), decoded independently."""
    pos = 17  # version, producer id, epoch, timeout, status
    n, pos = _uvarint(value, pos)
    for _ in range(max(n - 1, 0)):
        tl, pos = _uvarint(value, pos)
        pos += tl - 1
        pc, pos = _uvarint(value, pos)
        pos += 4 * (pc - 1)
        _, pos = _uvarint(value, pos)  # no tagged fields in an entry
    pos += 16  # last update, start
    count, pos = _uvarint(value, pos)
    tags = {}
    for _ in range(count):
        tag, pos = _uvarint(value, pos)
        size, pos = _uvarint(value, pos)
        tags[tag] = int.from_bytes(value[pos:pos + size], "big", signed=True)
        pos += size
    return tags


def txn_log(data_dir: Path, txn_id: str) -> list[dict]:
    """Every __transaction_state value of ``txn_id`` (tests/e2e/test_transactions_crash's decoders),
    v1 ones with their tagged fields as ``tags``."""
    from tests.e2e.test_transactions_crash import decode_txn_key, decode_txn_value, read_batches

    out = []
    for d in sorted(data_dir.glob("__transaction_state-*")):
        for *_, recs in read_batches(d):
            for _offset, key, value in recs:
                if value is not None and decode_txn_key(key) == txn_id:
                    r = decode_txn_value(value)
                    r["tags"] = _tags(value) if r["version"] == 1 else {}
                    out.append(r)
    return out


def test_transaction_log_values_are_v1_with_the_client_version(broker, wire):
    txn_id, pid, epoch = fresh(wire)
    assert produce_one(wire, txn_id, pid, epoch, 0) == NONE
    assert end_txn(wire, txn_id, pid, epoch, True)[0] == NONE
    completed(wire, txn_id)
    log = txn_log(Path(broker.data_dir), txn_id)
    assert {r["version"] for r in log} == {1}
    assert [(r["state"], r["epoch"], r["tags"]) for r in log] == [
        ("Empty", 0, {0: pid}),  # InitProducerId: client version TV0 (the default, not written)
        ("Ongoing", 0, {0: pid, 2: 2}),  # PreviousProducerId, ClientTransactionVersion
        ("PrepareCommit", 1, {0: pid, 2: 2}),
        ("CompleteCommit", 1, {0: pid, 2: 2}),
    ]


# --- stuck markers: CONCURRENT_TRANSACTIONS -------------------------------------------------------------


def test_concurrent_transactions_while_the_previous_commit_completes(tmp_path):
    """Commit markers parked forever (test hook): the next transaction's first write retries for
    Kafka's 100 ms and then answers CONCURRENT_TRANSACTIONS (51, not converted for TV2); TV1 clients
    see it as NOT_ENOUGH_REPLICAS."""
    b = BrokerProcess(tmp_path / "data", overrides={"test.txn.stop.before.markers": "true"}).start()
    try:
        with RawClient(b.bootstrap) as c:
            create_topic(c)
            txn_id, pid, epoch = fresh(c)
            group = f"g-{uuid.uuid4().hex[:8]}"
            assert produce_one(c, txn_id, pid, epoch, 0) == NONE
            assert end_txn(c, txn_id, pid, epoch, True) == (NONE, pid, epoch + 1)
            assert describe(c, txn_id).transaction_state == "PrepareCommit"
            started = time.monotonic()
            assert produce_one(c, txn_id, pid, epoch + 1, 0, partition=1) == CONCURRENT_TRANSACTIONS
            assert time.monotonic() - started >= 0.1
            assert txn_offset_commit(c, txn_id, group, pid, epoch + 1, 1) == CONCURRENT_TRANSACTIONS
            # EndTxn while CompleteCommit is pending: CONCURRENT_TRANSACTIONS before any other check
            for e, commit in ((epoch, True), (epoch, False), (epoch + 1, True), (epoch + 7, False)):
                assert end_txn(c, txn_id, pid, e, commit) == (CONCURRENT_TRANSACTIONS, -1, -1)
            assert init(c, txn_id).error_code == CONCURRENT_TRANSACTIONS
    finally:
        b.kill()


# --- epoch exhaustion: a new producer id --------------------------------------------------------------


class InProcessBroker:
    """Our broker on an event loop in a thread, so a test can reach into its state."""

    def __init__(self, data_dir: Path) -> None:
        from broker.broker import Broker
        from broker.config.broker_config import BrokerConfig

        self.port = free_port()
        self.broker = Broker(BrokerConfig({"listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
                                           "log.dirs": str(data_dir)}))
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.broker.start(), self.loop).result(60)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def call(self, fn):
        async def run():
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(30)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.broker.stop(), self.loop).result(60)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def test_end_txn_v5_rotates_the_producer_id_when_the_epoch_is_exhausted(tmp_path):
    b = InProcessBroker(tmp_path / "data")
    try:
        with RawClient(b.bootstrap) as c:
            create_topic(c)
            txn_id, pid, _ = fresh(c)

            def fast_forward():
                _, found = b.broker.txn_coordinator.state_manager.get_transaction_state(txn_id)
                found[1].producer_epoch = SHORT_MAX - 2  # 32765

            b.call(fast_forward)
            epoch = SHORT_MAX - 2
            assert produce_one(c, txn_id, pid, epoch, 0) == NONE
            assert end_txn(c, txn_id, pid, epoch, True) == (NONE, pid, SHORT_MAX - 1)
            completed(c, txn_id)
            epoch = SHORT_MAX - 1  # 32766: exhausted, the next EndTxn allocates a new producer id
            assert produce_one(c, txn_id, pid, epoch, 0, partition=1) == NONE
            err, new_pid, new_epoch = end_txn(c, txn_id, pid, epoch, True)
            assert (err, new_epoch) == (NONE, 0) and new_pid not in (-1, pid)
            d = completed(c, txn_id)
            assert (d.producer_id, d.producer_epoch) == (new_pid, 0)
            # the client's retry with the old id at 32766 is recognised (retryOnOverflow)
            assert end_txn(c, txn_id, pid, epoch, True) == (NONE, new_pid, 0)
            assert end_txn(c, txn_id, pid, epoch, False) == (INVALID_TXN_STATE, -1, -1)
            # the new producer id starts its transactions from sequence 0
            assert produce_one(c, txn_id, new_pid, 0, 0, partition=1) == NONE
            assert produce_one(c, txn_id, pid, epoch, 1, partition=1) == INVALID_PRODUCER_ID_MAPPING
            assert end_txn(c, txn_id, new_pid, 0, True) == (NONE, new_pid, 1)
            completed(c, txn_id)
        log = [(r["state"], r["producer_id"], r["epoch"], r["tags"].get(1))
               for r in txn_log(Path(b.broker.config.log_dirs[0]), txn_id)]
        # PrepareCommit at 32767 names the next producer id; CompleteCommit switches to it at 0
        assert ("PrepareCommit", pid, SHORT_MAX, new_pid) in log
        assert ("CompleteCommit", new_pid, 0, None) in log
    finally:
        b.stop()


# --- restarts: v0 and v1 values, TV2 markers resumed ---------------------------------------------------


def control_epochs(partition_dir: Path) -> list[tuple[int, int]]:
    """(producer id, producer epoch) of every control batch (the markers) of a partition."""
    from tests.e2e.test_transactions_crash import read_batches

    return [(pid, epoch) for _base, attrs, pid, epoch, _ in read_batches(partition_dir) if attrs & 0x20]


def test_a_tv0_log_is_read_after_upgrading_to_tv2(tmp_path):
    """Values written at transaction.version=0 (v0) load at 2, and the id goes on with TV2. The
    property is only the level of a new cluster: the upgrade is an UpdateFeatures, as on Kafka."""
    b = BrokerProcess(tmp_path / "data", overrides={"transaction.version": "0"}).start()
    try:
        with RawClient(b.bootstrap) as c:
            create_topic(c)
            txn_id, pid, epoch = fresh(c)
            assert produce_one(c, txn_id, pid, epoch, 0) == NONE  # v12 is TV2 whatever we finalize
            assert end_txn(c, txn_id, pid, epoch, True) == (NONE, pid, epoch + 1)
            completed(c, txn_id)
        b.stop()
        assert {r["version"] for r in txn_log(Path(b.data_dir), txn_id)} == {0}
        b.overrides.pop("transaction.version")
        b.start()
        with RawClient(b.bootstrap) as c:
            assert ("transaction.version", 2, 2) not in features(api_versions(c, 4))[2]
            from protocol.messages import request_class
            from tests.differential.wire import build

            r = c.send(build(request_class(57), 1, timeout_ms=60000, validate_only=False, feature_updates=[
                dict(feature="transaction.version", max_version_level=2, upgrade_type=1)]), 1)
            assert r.error_code == NONE, r
            assert ("transaction.version", 2, 2) in features(api_versions(c, 4))[2]
            d = until(lambda: describe(c, txn_id), lambda d: d.error_code == NONE)
            assert (d.transaction_state, d.producer_id, d.producer_epoch) == ("CompleteCommit", pid, epoch + 1)
            r = init(c, txn_id, pid, epoch + 1)
            assert (r.error_code, r.producer_id, r.producer_epoch) == (NONE, pid, epoch + 2)
            assert produce_one(c, txn_id, pid, epoch + 2, 0, partition=1) == NONE
            assert end_txn(c, txn_id, pid, epoch + 2, True) == (NONE, pid, epoch + 3)
            completed(c, txn_id)
        assert [r["version"] for r in txn_log(Path(b.data_dir), txn_id)][-1] == 1
    finally:
        b.kill()


def test_tv2_markers_resume_after_a_crash_with_the_bumped_epoch(tmp_path):
    """Killed after PrepareCommit (v1 value: ClientTransactionVersion 2): on restart the coordinator
    sends the commit markers with the bumped epoch and TV2, which the partitions accept."""
    b = BrokerProcess(tmp_path / "data", overrides={"test.txn.stop.before.markers": "true"}).start()
    try:
        with RawClient(b.bootstrap) as c:
            create_topic(c)
            txn_id, pid, epoch = fresh(c)
            assert produce_one(c, txn_id, pid, epoch, 0, partition=0) == NONE
            assert produce_one(c, txn_id, pid, epoch, 0, partition=2) == NONE
            assert end_txn(c, txn_id, pid, epoch, True) == (NONE, pid, epoch + 1)
        b.kill()
        b.overrides.pop("test.txn.stop.before.markers")
        b.start()
        with RawClient(b.bootstrap) as c:
            d = until(lambda: describe(c, txn_id), lambda d: d.transaction_state == "CompleteCommit", 20)
            assert (d.transaction_state, d.producer_epoch) == ("CompleteCommit", epoch + 1)
            assert produce_one(c, txn_id, pid, epoch + 1, 0, partition=0) == NONE
            assert end_txn(c, txn_id, pid, epoch + 1, False) == (NONE, pid, epoch + 2)
            completed(c, txn_id, "CompleteAbort")
        data = Path(b.data_dir)
        assert control_epochs(data / f"{TOPIC}-0") == [(pid, epoch + 1), (pid, epoch + 2)]
        assert control_epochs(data / f"{TOPIC}-2") == [(pid, epoch + 1)]
    finally:
        b.kill()


def test_produce_v12_adds_even_without_partition_verification(tmp_path):
    """transaction.partition.verification.enable=false turns off KIP-890 part 1 only: TV2 writes
    still add their partitions (ReplicaManager skips the coordinator only for non-TV2 requests)."""
    b = BrokerProcess(tmp_path / "data",
                      overrides={"transaction.partition.verification.enable": "false"}).start()
    try:
        with RawClient(b.bootstrap) as c:
            create_topic(c)
            txn_id, pid, epoch = fresh(c)
            assert produce_one(c, txn_id, pid, epoch, 0, partition=1, version=11) == NONE  # unverified
            assert partitions_of(describe(c, txn_id)) == set()
            assert produce_one(c, txn_id, pid, epoch, 0, partition=2) == NONE
            assert partitions_of(describe(c, txn_id)) == {(TOPIC, 2)}
            assert produce_one(c, txn_id, pid + 1000, 0, 0) == INVALID_PRODUCER_ID_MAPPING
            assert end_txn(c, txn_id, pid, epoch, True) == (NONE, pid, epoch + 1)
            completed(c, txn_id)
    finally:
        b.kill()
