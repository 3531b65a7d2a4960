"""The Fetch fast path against kafka-python's generated codec, for every version 4..18."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer import FetchRequest, FetchResponse

from protocol.fetch_codec import (
    INLINE_RECORDS_MAX,
    MAX_INT64,
    MAX_VERSION,
    MIN_VERSION,
    FetchPartitionResponse,
    FetchTopicResponse,
    decode_fetch_request,
    encode_fetch_response,
)
from protocol.primitives import MalformedRequest, NodeEndpoint
from tests.unit.protocol.strategies import (
    any_names,
    big_records,
    int8,
    int16,
    int32,
    int64,
    names,
    non_default_pair,
    nullable_names,
    small_lists,
    uuids,
)

VERSIONS = list(range(MIN_VERSION, MAX_VERSION + 1))
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

FetchTopic = FetchRequest.FetchTopic
FetchPartition = FetchTopic.FetchPartition
TopicResponse = FetchResponse.FetchableTopicResponse
PartitionData = TopicResponse.PartitionData


# ---------------------------------------------------------------------------------------------
# Request: library encodes, we decode

request_partitions = st.fixed_dictionaries({
    "partition": int32,
    "current_leader_epoch": int32,
    "fetch_offset": int64,
    "last_fetched_epoch": int32,
    "log_start_offset": int64,
    "partition_max_bytes": int32,
    # Tagged (v17+/v18+): absent, or present with any value.
    "replica_directory_id": st.none() | uuids,
    "high_watermark": st.just(MAX_INT64) | int64,
})
request_topics = small_lists(st.tuples(any_names, uuids, small_lists(request_partitions)))
forgotten = small_lists(st.tuples(names, uuids, small_lists(int32, 5)))
requests = st.fixed_dictionaries({
    "replica_id": int32,
    "replica_state": st.none() | st.tuples(int32, int64),
    "max_wait_ms": int32,
    "min_bytes": int32,
    "max_bytes": int32,
    "isolation_level": int8,
    "session_id": int32,
    "session_epoch": int32,
    "topics": request_topics,
    "forgotten": forgotten,
    "rack_id": any_names,
    "cluster_id": nullable_names,
})


def library_request(version, m):
    kwargs = dict(
        cluster_id=m["cluster_id"],
        max_wait_ms=m["max_wait_ms"],
        min_bytes=m["min_bytes"],
        max_bytes=m["max_bytes"],
        isolation_level=m["isolation_level"],
        session_id=m["session_id"],
        session_epoch=m["session_epoch"],
        topics=[
            FetchTopic(topic=name, topic_id=topic_id, partitions=[FetchPartition(**p) for p in parts])
            for name, topic_id, parts in m["topics"]
        ],
        forgotten_topics_data=[
            FetchRequest.ForgottenTopic(topic=name, topic_id=topic_id, partitions=parts)
            for name, topic_id, parts in m["forgotten"]
        ],
        rack_id=m["rack_id"],
    )
    if version >= 15:
        if m["replica_state"] is not None:
            rid, epoch = m["replica_state"]
            kwargs["replica_state"] = FetchRequest.ReplicaState(replica_id=rid, replica_epoch=epoch)
    else:
        kwargs["replica_id"] = m["replica_id"]
    return FetchRequest[version](**kwargs)


def assert_request_matches(view, lib, version):
    if version >= 15:
        state = lib.replica_state
        assert (view.replica_id, view.replica_epoch) == (
            (-1, -1) if state is None else (state.replica_id, state.replica_epoch)
        )
    else:
        assert (view.replica_id, view.replica_epoch) == (lib.replica_id, -1)
    assert view.max_wait_ms == lib.max_wait_ms
    assert view.min_bytes == lib.min_bytes
    assert view.max_bytes == lib.max_bytes
    assert view.isolation_level == lib.isolation_level
    assert view.session_id == (lib.session_id if version >= 7 else 0)
    assert view.session_epoch == (lib.session_epoch if version >= 7 else -1)
    assert view.rack_id == (lib.rack_id if version >= 11 else "")
    assert view.cluster_id == (lib.cluster_id if version >= 12 else None)
    assert len(view.topics) == len(lib.topics)
    for topic, lib_topic in zip(view.topics, lib.topics, strict=True):
        if version >= 13:
            assert (topic.name, topic.topic_id) == (None, lib_topic.topic_id)
        else:
            assert (topic.name, topic.topic_id) == (lib_topic.topic, None)
        assert len(topic.partitions) == len(lib_topic.partitions)
        for p, lp in zip(topic.partitions, lib_topic.partitions, strict=True):
            assert p.partition == lp.partition
            assert p.fetch_offset == lp.fetch_offset
            assert p.partition_max_bytes == lp.partition_max_bytes
            assert p.current_leader_epoch == (lp.current_leader_epoch if version >= 9 else -1)
            assert p.last_fetched_epoch == (lp.last_fetched_epoch if version >= 12 else -1)
            assert p.log_start_offset == (lp.log_start_offset if version >= 5 else -1)
            assert p.replica_directory_id == (lp.replica_directory_id if version >= 17 else None)
            assert p.high_watermark == (lp.high_watermark if version >= 18 else MAX_INT64)
    if version < 7:
        assert view.forgotten_topics == []
        return
    assert len(view.forgotten_topics) == len(lib.forgotten_topics_data)
    for topic, lib_topic in zip(view.forgotten_topics, lib.forgotten_topics_data, strict=True):
        if version >= 13:
            assert (topic.name, topic.topic_id) == (None, lib_topic.topic_id)
        else:
            assert (topic.name, topic.topic_id) == (lib_topic.topic, None)
        assert topic.partitions == list(lib_topic.partitions)


@pytest.mark.parametrize("version", VERSIONS)
@SETTINGS
@given(m=requests)
def test_request_decode_matches_library(version, m):
    body = bytes(library_request(version, m).encode())
    view = decode_fetch_request(memoryview(body), version)
    assert_request_matches(view, FetchRequest.decode(body, version=version), version)
    assert decode_fetch_request(body, version) == view


def _sample_request(version):
    m = {
        "replica_id": -1, "replica_state": (3, 4), "max_wait_ms": 500, "min_bytes": 1,
        "max_bytes": 52428800, "isolation_level": 1, "session_id": 0, "session_epoch": -1,
        "topics": [("töpic", uuid.UUID(int=5), [
            {"partition": 0, "current_leader_epoch": 3, "fetch_offset": 100, "last_fetched_epoch": 2,
             "log_start_offset": -1, "partition_max_bytes": 1048576,
             "replica_directory_id": uuid.UUID(int=9), "high_watermark": 77},
        ])],
        "forgotten": [("gone", uuid.UUID(int=6), [1, 2])],
        "rack_id": "rack-a", "cluster_id": "cluster",
    }
    return bytes(library_request(version, m).encode())


@pytest.mark.parametrize("version", VERSIONS)
def test_request_every_truncation_is_malformed(version):
    body = _sample_request(version)
    decode_fetch_request(body, version)
    for cut in range(len(body)):
        with pytest.raises(MalformedRequest):
            decode_fetch_request(memoryview(body)[:cut], version)
    with pytest.raises(MalformedRequest):
        decode_fetch_request(body + b"\x00", version)


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=200, deadline=None)
@given(body=st.binary(max_size=80))
def test_request_garbage_never_leaks_other_exceptions(version, body):
    try:
        decode_fetch_request(body, version)
    except MalformedRequest:
        pass


def test_request_rejects_unsupported_versions():
    for version in (0, 3, 19):
        with pytest.raises(ValueError):
            decode_fetch_request(b"", version)


# ---------------------------------------------------------------------------------------------
# Response: we encode, the library decodes (and encodes the same bytes)

partition_responses = st.builds(
    FetchPartitionResponse,
    partition_index=int32,
    error_code=int16,
    high_watermark=int64,
    last_stable_offset=int64,
    log_start_offset=int64,
    aborted_transactions=st.none() | small_lists(st.tuples(int64, int64)),
    preferred_read_replica=int32,
    records=big_records,
    diverging_epoch=non_default_pair(int32, int64),
    current_leader=non_default_pair(),
    snapshot_id=non_default_pair(int64, int32),
)
topic_responses = st.builds(
    FetchTopicResponse, name=any_names, topic_id=uuids, partitions=small_lists(partition_responses)
)
endpoints = st.none() | small_lists(st.builds(NodeEndpoint, int32, names, int32, nullable_names), 3)


def _pair(cls, names_, value):
    return None if value is None else cls(**dict(zip(names_, value, strict=True)))


def library_response(version, throttle_time_ms, error_code, session_id, topics, node_endpoints):
    return FetchResponse[version](
        throttle_time_ms=throttle_time_ms,
        error_code=error_code,
        session_id=session_id,
        responses=[
            TopicResponse(topic=t.name, topic_id=t.topic_id, partitions=[
                PartitionData(
                    partition_index=p.partition_index,
                    error_code=p.error_code,
                    high_watermark=p.high_watermark,
                    last_stable_offset=p.last_stable_offset,
                    log_start_offset=p.log_start_offset,
                    aborted_transactions=None if p.aborted_transactions is None else [
                        PartitionData.AbortedTransaction(producer_id=pid, first_offset=first)
                        for pid, first in p.aborted_transactions
                    ],
                    preferred_read_replica=p.preferred_read_replica,
                    records=None if p.records is None else bytes(p.records),
                    diverging_epoch=_pair(PartitionData.EpochEndOffset, ("epoch", "end_offset"),
                                          p.diverging_epoch),
                    current_leader=_pair(PartitionData.LeaderIdAndEpoch, ("leader_id", "leader_epoch"),
                                         p.current_leader),
                    snapshot_id=_pair(PartitionData.SnapshotId, ("end_offset", "epoch"), p.snapshot_id),
                )
                for p in t.partitions
            ])
            for t in topics
        ],
        node_endpoints=[
            FetchResponse.NodeEndpoint(node_id=e.node_id, host=e.host, port=e.port, rack=e.rack)
            for e in node_endpoints or ()
        ],
    )


def assert_response_matches(lib, version, throttle_time_ms, error_code, session_id, topics, node_endpoints):
    assert lib.throttle_time_ms == throttle_time_ms
    assert lib.error_code == (error_code if version >= 7 else 0)
    assert lib.session_id == (session_id if version >= 7 else 0)
    assert len(lib.responses) == len(topics)
    for lt, t in zip(lib.responses, topics, strict=True):
        if version >= 13:
            assert lt.topic_id == t.topic_id
        else:
            assert lt.topic == t.name
        for lp, p in zip(lt.partitions, t.partitions, strict=True):
            assert (lp.partition_index, lp.error_code, lp.high_watermark, lp.last_stable_offset) == (
                p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset)
            assert lp.log_start_offset == (p.log_start_offset if version >= 5 else -1)
            if p.aborted_transactions is None:
                assert lp.aborted_transactions is None
            else:
                assert [(a.producer_id, a.first_offset) for a in lp.aborted_transactions] == list(
                    p.aborted_transactions
                )
            assert lp.preferred_read_replica == (p.preferred_read_replica if version >= 11 else -1)
            assert lp.records == (None if p.records is None else bytes(p.records))
            tags = version >= 12
            for lib_value, value, fields in (
                (lp.diverging_epoch, p.diverging_epoch, ("epoch", "end_offset")),
                (lp.current_leader, p.current_leader, ("leader_id", "leader_epoch")),
                (lp.snapshot_id, p.snapshot_id, ("end_offset", "epoch")),
            ):
                if tags and value is not None:
                    assert tuple(getattr(lib_value, f) for f in fields) == value
                else:
                    assert lib_value is None
    expected_endpoints = list(node_endpoints or ()) if version >= 16 else []
    assert [(e.node_id, e.host, e.port, e.rack) for e in lib.node_endpoints] == expected_endpoints


@pytest.mark.parametrize("version", VERSIONS)
@SETTINGS
@given(
    throttle_time_ms=int32,
    error_code=int16,
    session_id=int32,
    topics=small_lists(topic_responses, 3),
    node_endpoints=endpoints,
)
def test_response_encode_matches_library(version, throttle_time_ms, error_code, session_id, topics,
                                         node_endpoints):
    # Records as memoryviews over a bytearray, as read from a segment file.
    topics = [
        t._replace(partitions=[
            p._replace(records=None if p.records is None else memoryview(bytearray(p.records)))
            for p in t.partitions
        ])
        for t in topics
    ]
    encoded = encode_fetch_response(
        version, throttle_time_ms=throttle_time_ms, error_code=error_code, session_id=session_id,
        topics=topics, node_endpoints=node_endpoints,
    )
    body = b"".join(encoded.buffers)
    assert encoded.size == len(body)
    assert isinstance(encoded.buffers[0], bytes)
    lib = FetchResponse.decode(body, version=version)
    assert_response_matches(lib, version, throttle_time_ms, error_code, session_id, topics, node_endpoints)
    expected = library_response(version, throttle_time_ms, error_code, session_id, topics, node_endpoints)
    assert body == bytes(expected.encode())
    # Large record slices are passed through as the very same objects: never copied.
    passed = {id(b) for b in encoded.buffers}
    for t in topics:
        for p in t.partitions:
            if p.records is not None and len(p.records) > INLINE_RECORDS_MAX:
                assert id(p.records) in passed


def test_response_buffers_alternate_metadata_and_records():
    big = memoryview(bytearray(b"\x01" * (1 << 20)))
    small = b"\x02" * 10
    encoded = encode_fetch_response(
        12,
        topics=[FetchTopicResponse("t", None, [
            FetchPartitionResponse(0, 0, 10, 10, 0, None, -1, big),
            FetchPartitionResponse(1, 0, 10, 10, 0, [], -1, small),
            FetchPartitionResponse(2, 1, records=None),
        ])],
    )
    assert [type(b) for b in encoded.buffers] == [bytes, memoryview, bytes]
    assert encoded.buffers[1] is big
    assert encoded.size == sum(len(b) for b in encoded.buffers)
    lib = FetchResponse.decode(b"".join(encoded.buffers), version=12)
    parts = lib.responses[0].partitions
    assert [p.aborted_transactions for p in parts] == [None, [], None]
    assert [len(p.records) if p.records is not None else None for p in parts] == [1 << 20, 10, None]


def test_response_default_tagged_structs_are_not_written():
    plain = encode_fetch_response(12, topics=[FetchTopicResponse("t", None, [FetchPartitionResponse(0)])])
    defaults = encode_fetch_response(12, topics=[FetchTopicResponse("t", None, [
        FetchPartitionResponse(0, diverging_epoch=(-1, -1), current_leader=(-1, -1), snapshot_id=(-1, -1))
    ])])
    assert plain == defaults
