"""The data path compared with Apache Kafka: Produce validation errors, Fetch at and beyond the log
end, ListOffsets (earliest / latest / max-timestamp / by timestamp, both isolation levels) and
OffsetForLeaderEpoch.

Records are built by kafka-python's encoder with fixed timestamps, so offsets, timestamps and even the
fetched record bytes are comparable between the two brokers.
"""

from __future__ import annotations

import time

import pytest
from kafka.protocol.consumer import OffsetForLeaderEpochRequest
from kafka.protocol.producer import ProduceRequest
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from tests.differential.harness import build, normalise, record_batch, unique

T0 = 1_700_000_000_000


def small_batch() -> bytes:
    return record_batch([b"value"], key=b"key", timestamps=[T0])


def legacy_message_set(magic: int) -> bytes:
    b = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 20)
    b.append(0, timestamp=T0 if magic else None, key=b"k", value=b"old format")
    return bytes(b.build())


# -- Produce validation --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def small_limit_topic(pair) -> str:
    return pair.create_topic(unique("limit"), 1, {"max.message.bytes": "2000"})


@pytest.mark.parametrize("version", [3, 7, 9])
def test_produce_oversize_batch(pair, small_limit_topic, version):
    """A batch above the topic's max.message.bytes: MESSAGE_TOO_LARGE (10), nothing appended."""
    big = record_batch([b"x" * 3000], timestamps=[T0])
    k, o = pair.run(lambda t: (t.produce_one(small_limit_topic, 0, big, version=version),
                               t.list_offsets(small_limit_topic, 0, -1)["offset"]))
    assert k[0]["error_code"] == 10
    assert o == k


def test_produce_oversize_batch_broker_limit(pair, topic):
    """Above the broker's message.max.bytes (1048588) on a topic without an override."""
    big = record_batch([b"x" * 1_100_000], timestamps=[T0])
    k, o = pair.run(lambda t: t.produce_one(topic, 0, big))
    assert k["error_code"] == 10
    assert o == k


def test_produce_corrupt_crc(pair, topic):
    bad = bytearray(small_batch())
    bad[-1] ^= 0xFF  # inside the CRC-covered records
    k, o = pair.run(lambda t: (t.produce_one(topic, 0, bytes(bad)), t.list_offsets(topic, 0, -1)["offset"]))
    assert k[0]["error_code"] == 2
    assert o == k


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("version", [3, 9])
def test_produce_legacy_magic(pair, topic, magic, version):
    """Produce v3+ only carries magic-2 batches: INVALID_RECORD (87) for a magic 0/1 message set."""
    k, o = pair.run(lambda t: t.produce_one(topic, 0, legacy_message_set(magic), version=version))
    assert k["error_code"] == 87
    assert o == k


def test_produce_two_batches_in_one_partition(pair, topic):
    """Produce v3+ carries exactly one batch per partition: INVALID_RECORD (87)."""
    k, o = pair.run(lambda t: t.produce_one(topic, 0, small_batch() + small_batch()))
    assert k["error_code"] == 87
    assert o == k


def test_produce_empty_records(pair, topic):
    k, o = pair.run(lambda t: t.produce_one(topic, 0, b""))
    assert k["error_code"] == 87
    assert o == k


def test_produce_truncated_batch(pair, topic):
    """A batch cut short (the length field says more than the request holds): Kafka finds no complete
    batch, so this is "not exactly one batch", INVALID_RECORD (87)."""
    k, o = pair.run(lambda t: t.produce_one(topic, 0, small_batch()[:40]))
    assert k["error_code"] == 87
    assert o == k


@pytest.mark.parametrize("version,expected", [(3, 76), (6, 76), (7, 0), (9, 0)])
def test_produce_zstd_needs_v7(pair, topic, version, expected):
    """zstd needs Produce v7+: UNSUPPORTED_COMPRESSION_TYPE (76) below."""
    z = record_batch([b"z" * 200], timestamps=[T0], compression=4)
    k, o = pair.run(lambda t: t.produce_one(topic, 0, z, version=version))
    assert k["error_code"] == expected
    assert o == k


@pytest.mark.parametrize("acks", [2, -2, 5])
def test_produce_invalid_acks(pair, topic, acks):
    k, o = pair.run(lambda t: t.produce_one(topic, 0, small_batch(), acks=acks))
    assert k["error_code"] == 21
    assert o == k


def test_produce_acks_1(pair, topic):
    k, o = pair.run(lambda t: t.produce_one(topic, 0, small_batch(), acks=1))
    assert k["error_code"] == 0
    assert o == k


@pytest.mark.parametrize("name", ["__consumer_offsets", "__transaction_state"])
def test_produce_to_internal_topic(pair, name):
    """Clients may not write internal topics: INVALID_TOPIC_EXCEPTION (17). (Before the topic
    exists Kafka answers UNKNOWN_TOPIC_OR_PARTITION, so make sure it exists on both sides: a
    FindCoordinator of the matching key type creates it.)"""
    from kafka.protocol.metadata import FindCoordinatorRequest

    key_type = 0 if name == "__consumer_offsets" else 1

    def ensure(t) -> None:
        for _ in range(50):
            with t.client() as c:
                r = c.send(FindCoordinatorRequest[3](key="differential-ensure", key_type=key_type), 3)
            if r.error_code == 0:
                return
            time.sleep(0.1)

    pair.run(ensure)
    k, o = pair.run(lambda t: t.produce_one(name, 0, small_batch()))
    assert k["error_code"] == 17
    assert o == k


@pytest.mark.parametrize("what", ["unknown-topic", "unknown-partition"])
def test_produce_unknown_partition(pair, topic, what):
    name, part = (unique("nope"), 0) if what == "unknown-topic" else (topic, 7)
    k, o = pair.run(lambda t: t.produce_one(name, part, small_batch()))
    assert k["error_code"] == 3
    assert o == k


def test_produce_offsets_and_log_start(pair, topic):
    """Three appends: base offsets 0, 2, 5; log start 0; LogAppendTime -1 (CreateTime topic)."""
    batches = [record_batch([b"a", b"b"], timestamps=[T0, T0 + 1]),
               record_batch([b"c", b"d", b"e"], timestamps=[T0 + 2] * 3),
               record_batch([b"f"], timestamps=[T0 + 3])]
    k, o = pair.run(lambda t: [t.produce_one(topic, 0, b) for b in batches])
    assert [p["base_offset"] for p in k] == [0, 2, 5]
    assert o == k


def _produce_by_id(t, topics: list[tuple], acks: int = -1):
    """Produce v13: ``topics`` is [(topic id, [(partition, records)])]; the answer as
    [(topic id, [(index, error, base offset, log start offset)])]."""
    req = build(ProduceRequest, 13, transactional_id=None, acks=acks, timeout_ms=10000, topic_data=[
        dict(topic_id=tid, partition_data=[dict(index=i, records=r) for i, r in parts]) for tid, parts in topics])
    with t.client() as c:
        r = c.send(req, 13)
    return [(tt.topic_id, sorted((p.index, p.error_code, p.base_offset, p.log_start_offset)
                                 for p in tt.partition_responses)) for tt in r.responses]


def test_produce_v13_by_topic_id(pair):
    """KIP-516: Produce v13 names topics by id; an id the broker does not know gets
    UNKNOWN_TOPIC_ID (100), a partition it lacks UNKNOWN_TOPIC_OR_PARTITION, the rest append."""
    name = pair.create_topic(unique("by-id"), 2)
    import uuid

    stranger = uuid.UUID("00000000-0000-0000-0000-00000000beef")

    def scenario(t):
        (md,) = t.metadata([name]).topics
        tid = md.topic_id
        first = _produce_by_id(t, [(tid, [(0, record_batch([b"a", b"b"])), (1, record_batch([b"c"]))])])
        mixed = _produce_by_id(t, [(stranger, [(0, record_batch([b"x"]))]),
                                   (tid, [(0, record_batch([b"d"])), (5, record_batch([b"e"]))])])
        bad_acks = _produce_by_id(t, [(tid, [(0, record_batch([b"f"]))])], acks=2)
        rename = {tid: "id", stranger: "stranger"}
        # Kafka answers in its maps' order: compared sorted
        return [sorted((rename[i], parts) for i, parts in r) for r in (first, mixed, bad_acks)], \
            t.list_offsets(name, 0, -1)["offset"]

    k, o = pair.run(scenario)
    assert k[0][1] == [("id", [(0, 0, 2, 0), (5, 3, -1, -1)]), ("stranger", [(0, 100, -1, -1)])], k
    assert o == k


# -- Fetch ------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def seeded(pair) -> str:
    """Offsets 0-6 in four batches with fixed timestamps: (T0, T0+5) (T0+10, T0+15) (T0+20, T0+25) (T0-100)."""
    name = pair.create_topic(unique("seeded"), 2)
    for t in pair:
        for i in range(3):
            r = t.produce_one(name, 0, record_batch([b"a%d" % i, b"b%d" % i],
                                                     timestamps=[T0 + 10 * i, T0 + 10 * i + 5]))
            assert r["error_code"] == 0, r
        assert t.produce_one(name, 0, record_batch([b"late"], timestamps=[T0 - 100]))["error_code"] == 0
    return name


def fetch_partition(t, topic, partition, offset, **kw) -> dict:
    r = t.fetch(topic, partition, offset, **kw)
    assert r.error_code == 0
    (tt,) = r.responses
    (p,) = tt.partitions
    return normalise(p)


@pytest.mark.parametrize("offset", [0, 1, 3, 6, 7])
@pytest.mark.parametrize("version", [4, 11, 12])
def test_fetch_in_range_same_bytes(pair, seeded, offset, version):
    """Below and at the log end: the same high watermark, LSO, log start and the same record bytes
    (whole batches from the one containing the offset)."""
    k, o = pair.run(lambda t: fetch_partition(t, seeded, 0, offset, version=version))
    assert k["error_code"] == 0 and k["high_watermark"] == 7
    assert o == k


@pytest.mark.parametrize("offset", [8, 100, -1])
@pytest.mark.parametrize("version", [4, 12])
def test_fetch_offset_out_of_range(pair, seeded, offset, version):
    """OFFSET_OUT_OF_RANGE (1); Kafka then reports high watermark, LSO and log start as -1."""
    k, o = pair.run(lambda t: fetch_partition(t, seeded, 0, offset, version=version))
    assert k["error_code"] == 1
    assert o == k


def test_fetch_empty_partition(pair, seeded):
    k, o = pair.run(lambda t: fetch_partition(t, seeded, 1, 0))
    assert k["error_code"] == 0 and k["high_watermark"] == 0
    assert o == k


@pytest.mark.parametrize("epoch,expected", [(0, 0), (5, 75)])
def test_fetch_current_leader_epoch(pair, seeded, epoch, expected):
    """current_leader_epoch newer than the leader's: UNKNOWN_LEADER_EPOCH (75)."""
    k, o = pair.run(lambda t: fetch_partition(t, seeded, 0, 0, current_leader_epoch=epoch))
    assert k["error_code"] == expected
    assert o == k


@pytest.mark.parametrize("what", ["unknown-topic", "unknown-partition"])
def test_fetch_unknown_partition(pair, seeded, what):
    name, part = (unique("nope"), 0) if what == "unknown-topic" else (seeded, 9)
    k, o = pair.run(lambda t: fetch_partition(t, name, part, 0))
    assert k["error_code"] == 3
    assert o == k


@pytest.mark.parametrize("version", [4, 12])
def test_fetch_partition_named_twice(pair, seeded, version):
    """A partition named several times (with different offsets) is answered once: Kafka keys the
    fetch data by partition, in the place it was first named, with the last fetch offset."""
    from kafka.protocol.consumer import FetchRequest

    def scenario(t):
        parts = [dict(partition=p, current_leader_epoch=-1, fetch_offset=off, last_fetched_epoch=-1,
                      log_start_offset=-1, partition_max_bytes=1 << 20) for p, off in ((0, 0), (1, 0), (0, 3), (0, 6))]
        with t.client() as c:
            r = c.send(build(FetchRequest, version, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                             isolation_level=0, session_id=0, session_epoch=-1,
                             topics=[dict(topic=seeded, partitions=parts)], forgotten_topics_data=[], rack_id=""),
                       version)
        return normalise(r)

    k, o = pair.run(scenario)
    assert [p["partition_index"] for p in k["responses"][0]["partitions"]] == [0, 1]
    assert o == k


def test_fetch_read_committed_no_transactions(pair, seeded):
    """read_committed on a partition without transactions: everything up to the HW, and an empty (not
    null) aborted_transactions list."""
    k, o = pair.run(lambda t: fetch_partition(t, seeded, 0, 0, isolation_level=1))
    assert k["aborted_transactions"] == [] and k["last_stable_offset"] == 7
    assert o == k


# -- ListOffsets ---------------------------------------------------------------------------------------------

LIST_OFFSETS_TIMESTAMPS = {
    "latest": -1, "earliest": -2, "max-timestamp": -3, "earliest-local": -4, "earliest-pending-upload": -5,
    "before-all": T0 - 1000, "first": T0, "between": T0 + 1, "inside-batch": T0 + 11, "last": T0 + 25,
    "after-all": T0 + 10 ** 6,
}


@pytest.mark.parametrize("isolation", [0, 1], ids=["read_uncommitted", "read_committed"])
@pytest.mark.parametrize("when", list(LIST_OFFSETS_TIMESTAMPS))
def test_list_offsets(pair, seeded, when, isolation):
    ts = LIST_OFFSETS_TIMESTAMPS[when]
    k, o = pair.run(lambda t: t.list_offsets(seeded, 0, ts, isolation_level=isolation))
    assert k["error_code"] == 0
    assert o == k


@pytest.mark.parametrize("version", [1, 6, 7, 8, 9, 10, 11])
def test_list_offsets_special_timestamps(pair, seeded, version):
    """-3 max timestamp (KIP-734, v7), -4 earliest local (KIP-405, v8), -5 latest tiered (KIP-1005,
    v9), -6 earliest pending upload (KIP-1023, v11), at versions below and from where each is
    defined, and -7 (no such timestamp); without tiered storage. Kafka answers UNSUPPORTED_VERSION
    for a negative timestamp the request's version does not define."""
    k, o = pair.run(lambda t: [t.list_offsets(seeded, p, ts, version=version) for p in (0, 1)
                               for ts in (-3, -4, -5, -6, -7)])
    assert o == k


@pytest.mark.parametrize("version", [1, 2, 4, 7, 10, 11])
def test_list_offsets_versions(pair, seeded, version):
    def scenario(t):
        return [t.list_offsets(seeded, 0, ts, version=version, isolation_level=1 if version >= 2 else 0)
                for ts in (-1, -2, T0 + 11)] + (
            [t.list_offsets(seeded, 0, -3, version=version)] if version >= 7 else [])

    k, o = pair.run(scenario)
    assert o == k


def test_list_offsets_empty_partition(pair, seeded):
    k, o = pair.run(lambda t: [t.list_offsets(seeded, 1, ts) for ts in (-1, -2, -3, T0)])
    assert o == k


@pytest.mark.parametrize("what,expected", [("unknown-partition", 3), ("unknown-topic", 3),
                                           ("newer-epoch", 75), ("current-epoch", 0)])
def test_list_offsets_errors(pair, seeded, what, expected):
    name = unique("nope") if what == "unknown-topic" else seeded
    part = 9 if what == "unknown-partition" else 0
    epoch = {"newer-epoch": 7, "current-epoch": 0}.get(what, -1)
    k, o = pair.run(lambda t: t.list_offsets(name, part, -1, current_leader_epoch=epoch))
    assert k["error_code"] == expected
    assert o == k


# -- OffsetForLeaderEpoch -------------------------------------------------------------------------------------

def offset_for_leader_epoch(t, topic, partition, epoch, current=-1):
    with t.client() as c:
        r = c.send(build(OffsetForLeaderEpochRequest, 4, replica_id=-1, topics=[dict(
            topic=topic, partitions=[dict(partition=partition, current_leader_epoch=current, leader_epoch=epoch)])]), 4)
    (tt,) = r.topics
    (p,) = tt.partitions
    return normalise(p)


@pytest.mark.parametrize("epoch,current", [(0, -1), (0, 0), (1, -1), (-1, -1), (0, 3)])
def test_offset_for_leader_epoch(pair, seeded, epoch, current):
    """Epoch 0 ends at the log end (7); a later epoch is unknown (-1, -1); a newer current epoch is
    UNKNOWN_LEADER_EPOCH (75)."""
    k, o = pair.run(lambda t: offset_for_leader_epoch(t, seeded, 0, epoch, current))
    assert o == k


def test_offset_for_leader_epoch_empty_partition(pair, seeded):
    """A partition that never had data: Kafka's leader wrote epoch 0 at offset 0 into its epoch cache
    when it became leader, so epoch 0 ends at 0."""
    k, o = pair.run(lambda t: offset_for_leader_epoch(t, seeded, 1, 0))
    assert (k["leader_epoch"], k["end_offset"]) == (0, 0)
    assert o == k


def test_offset_for_leader_epoch_unknown_topic(pair):
    name = unique("nope")
    k, o = pair.run(lambda t: offset_for_leader_epoch(t, name, 0, 0))
    assert k["error_code"] == 3
    assert o == k
