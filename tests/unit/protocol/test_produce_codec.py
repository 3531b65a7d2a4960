"""The Produce fast path against kafka-python's generated codec, for every version 3..13."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.producer import ProduceRequest, ProduceResponse
from kafka.protocol.schemas.fields.codecs.types import UnsignedVarInt32

from protocol.primitives import MalformedRequest, NodeEndpoint
from protocol.produce_codec import (
    MAX_VERSION,
    MIN_VERSION,
    ProducePartitionResponse,
    ProduceTopicResponse,
    decode_produce_request,
    encode_produce_response,
)
from tests.unit.protocol.strategies import (
    any_names,
    int16,
    int32,
    int64,
    names,
    non_default_pair,
    nullable_names,
    records,
    small_lists,
    uuids,
)

VERSIONS = list(range(MIN_VERSION, MAX_VERSION + 1))
FLEXIBLE = [v for v in VERSIONS if v >= 9]
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

TopicData = ProduceRequest.TopicProduceData
PartitionData = TopicData.PartitionProduceData
TopicResponse = ProduceResponse.TopicProduceResponse
PartitionResponse = TopicResponse.PartitionProduceResponse


# ---------------------------------------------------------------------------------------------
# Request: library encodes, we decode

request_topics = small_lists(st.tuples(any_names, uuids, small_lists(st.tuples(int32, records))))


def library_request(version, txn_id, acks, timeout_ms, topics):
    return ProduceRequest[version](
        transactional_id=txn_id,
        acks=acks,
        timeout_ms=timeout_ms,
        topic_data=[
            TopicData(name=name, topic_id=topic_id, partition_data=[
                PartitionData(index=index, records=recs) for index, recs in parts
            ])
            for name, topic_id, parts in topics
        ],
    )


def assert_request_matches(view, lib, version, buffer=None):
    assert view.transactional_id == lib.transactional_id
    assert view.acks == lib.acks
    assert view.timeout_ms == lib.timeout_ms
    assert len(view.topics) == len(lib.topic_data)
    for topic, lib_topic in zip(view.topics, lib.topic_data, strict=True):
        if version >= 13:
            assert topic.name is None
            assert topic.topic_id == lib_topic.topic_id
        else:
            assert topic.name == lib_topic.name
            assert topic.topic_id is None
        assert len(topic.partitions) == len(lib_topic.partition_data)
        for part, lib_part in zip(topic.partitions, lib_topic.partition_data, strict=True):
            assert part.index == lib_part.index
            if lib_part.records is None:
                assert part.records is None
            else:
                assert isinstance(part.records, memoryview)
                assert bytes(part.records) == bytes(lib_part.records)
                if buffer is not None:  # a view of the request buffer, not a copy
                    assert part.records.obj is buffer


@pytest.mark.parametrize("version", VERSIONS)
@SETTINGS
@given(txn_id=nullable_names, acks=int16, timeout_ms=int32, topics=request_topics)
def test_request_decode_matches_library(version, txn_id, acks, timeout_ms, topics):
    body = bytes(library_request(version, txn_id, acks, timeout_ms, topics).encode())
    buffer = bytearray(body)  # the broker reads frames into a writable buffer
    view = decode_produce_request(memoryview(buffer), version)
    assert_request_matches(view, ProduceRequest.decode(body, version=version), version, buffer)
    assert decode_produce_request(body, version) == view  # bytes input works too


def test_request_edge_cases_every_version():
    """Null transactional id, empty arrays, null and empty records, non-ASCII names."""
    cases = [
        (None, 1, 0, []),
        ("", -1, 30000, [("", None, [])]),
        ("tx-ü", 0, -1, [("tópic-名", None, [(0, None), (1, b""), (2, b"x" * 300)])]),
    ]
    for version in VERSIONS:
        for txn_id, acks, timeout_ms, topics in cases:
            topics = [(n, uuid.UUID(int=7), parts) for n, _, parts in topics]
            body = bytes(library_request(version, txn_id, acks, timeout_ms, topics).encode())
            view = decode_produce_request(memoryview(body), version)
            assert_request_matches(view, ProduceRequest.decode(body, version=version), version)


# Requests with unknown tagged fields at every level, which kafka-python cannot emit: built by
# hand from the library's varint codec, then decoded by both sides.

def _uv(n: int) -> bytes:
    return UnsignedVarInt32.encode(n)


def _cstr(s):
    if s is None:
        return b"\x00"
    raw = s.encode()
    return _uv(len(raw) + 1) + raw


def _tags(fields):
    return _uv(len(fields)) + b"".join(_uv(tag) + _uv(len(val)) + val for tag, val in fields)


tag_sets = st.dictionaries(st.integers(0, 300), st.binary(max_size=150), max_size=3).map(
    lambda d: sorted(d.items())
)


def flexible_request_with_tags(version, txn_id, acks, timeout_ms, topics, top_tags):
    out = [_cstr(txn_id), acks.to_bytes(2, "big", signed=True),
           timeout_ms.to_bytes(4, "big", signed=True), _uv(len(topics) + 1)]
    for name, topic_id, parts, topic_tags in topics:
        out.append(topic_id.bytes if version >= 13 else _cstr(name))
        out.append(_uv(len(parts) + 1))
        for index, recs, part_tags in parts:
            out.append(index.to_bytes(4, "big", signed=True))
            out.append(b"\x00" if recs is None else _uv(len(recs) + 1) + recs)
            out.append(_tags(part_tags))
        out.append(_tags(topic_tags))
    out.append(_tags(top_tags))
    return b"".join(out)


@pytest.mark.parametrize("version", FLEXIBLE)
@SETTINGS
@given(
    txn_id=nullable_names,
    acks=int16,
    timeout_ms=int32,
    topics=small_lists(st.tuples(names, uuids, small_lists(st.tuples(int32, records, tag_sets)), tag_sets)),
    top_tags=tag_sets,
)
def test_request_unknown_tagged_fields_are_skipped(version, txn_id, acks, timeout_ms, topics, top_tags):
    body = flexible_request_with_tags(version, txn_id, acks, timeout_ms, topics, top_tags)
    lib = ProduceRequest.decode(body, version=version)
    view = decode_produce_request(memoryview(body), version)
    assert_request_matches(view, lib, version)


# ---------------------------------------------------------------------------------------------
# Request: malformed input is always MalformedRequest


def _sample_request(version):
    topics = [("topic-é", uuid.UUID(int=1), [(0, b"r" * 200), (1, None)]), ("t2", uuid.UUID(int=2), [])]
    return bytes(library_request(version, "txn", -1, 1000, topics).encode())


@pytest.mark.parametrize("version", VERSIONS)
def test_request_every_truncation_is_malformed(version):
    body = _sample_request(version)
    for cut in range(len(body)):
        with pytest.raises(MalformedRequest):
            decode_produce_request(memoryview(body)[:cut], version)


@pytest.mark.parametrize("version", VERSIONS)
def test_request_trailing_bytes_are_malformed(version):
    with pytest.raises(MalformedRequest):
        decode_produce_request(_sample_request(version) + b"\x00", version)


@pytest.mark.parametrize("version", [3, 8, 9, 13])
def test_request_bad_lengths_are_malformed(version):
    flexible = version >= 9
    # A null topics array, a negative records length, invalid UTF-8 in the transactional id.
    head = (b"\x00" if flexible else b"\xff\xff") + b"\x00\x01\x00\x00\x00\x10"
    null_topics = head + (b"\x00" if flexible else b"\xff\xff\xff\xff") + (b"\x00" if flexible else b"")
    bad_utf8 = (b"\x03\xff\xfe" if flexible else b"\x00\x02\xff\xfe") + head[1 if flexible else 2:]
    bad_utf8 += b"\x01\x00" if flexible else b"\x00\x00\x00\x00"
    for body in (null_topics, bad_utf8, b"", b"\xff" * 10):
        with pytest.raises(MalformedRequest):
            decode_produce_request(body, version)
    if not flexible:
        neg = head + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x00\xff\xff\xff\xfe"
        with pytest.raises(MalformedRequest):
            decode_produce_request(neg, version)


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=200, deadline=None)
@given(body=st.binary(max_size=80))
def test_request_garbage_never_leaks_other_exceptions(version, body):
    try:
        decode_produce_request(body, version)
    except MalformedRequest:
        pass


def test_request_rejects_unsupported_versions():
    for version in (0, 2, 14):
        with pytest.raises(ValueError):
            decode_produce_request(b"", version)


# ---------------------------------------------------------------------------------------------
# Response: we encode, the library decodes (and encodes the same bytes)

partition_responses = st.builds(
    ProducePartitionResponse,
    index=int32,
    error_code=int16,
    base_offset=int64,
    log_append_time_ms=int64,
    log_start_offset=int64,
    record_errors=small_lists(st.tuples(int32, nullable_names), max_size=3),
    error_message=nullable_names,
    current_leader=non_default_pair(),
)
topic_responses = st.builds(
    ProduceTopicResponse, name=any_names, topic_id=uuids, partitions=small_lists(partition_responses)
)
endpoints = st.none() | small_lists(st.builds(NodeEndpoint, int32, names, int32, nullable_names), 3)


def library_response(version, topics, throttle_time_ms, node_endpoints):
    return ProduceResponse[version](
        responses=[
            TopicResponse(name=t.name, topic_id=t.topic_id, partition_responses=[
                PartitionResponse(
                    index=p.index,
                    error_code=p.error_code,
                    base_offset=p.base_offset,
                    log_append_time_ms=p.log_append_time_ms,
                    log_start_offset=p.log_start_offset,
                    record_errors=[
                        PartitionResponse.BatchIndexAndErrorMessage(
                            batch_index=i, batch_index_error_message=m
                        )
                        for i, m in p.record_errors
                    ],
                    error_message=p.error_message,
                    current_leader=None if p.current_leader is None else PartitionResponse.LeaderIdAndEpoch(
                        leader_id=p.current_leader[0], leader_epoch=p.current_leader[1]
                    ),
                )
                for p in t.partitions
            ])
            for t in topics
        ],
        throttle_time_ms=throttle_time_ms,
        node_endpoints=[
            ProduceResponse.NodeEndpoint(node_id=e.node_id, host=e.host, port=e.port, rack=e.rack)
            for e in node_endpoints or ()
        ],
    )


def assert_response_matches(lib, version, topics, throttle_time_ms, node_endpoints):
    assert lib.throttle_time_ms == throttle_time_ms
    assert len(lib.responses) == len(topics)
    for lib_topic, topic in zip(lib.responses, topics, strict=True):
        if version >= 13:
            assert lib_topic.topic_id == topic.topic_id
        else:
            assert lib_topic.name == topic.name
        for lp, p in zip(lib_topic.partition_responses, topic.partitions, strict=True):
            assert (lp.index, lp.error_code, lp.base_offset, lp.log_append_time_ms) == (
                p.index, p.error_code, p.base_offset, p.log_append_time_ms)
            assert lp.log_start_offset == (p.log_start_offset if version >= 5 else -1)
            if version >= 8:
                assert [(e.batch_index, e.batch_index_error_message) for e in lp.record_errors] == list(
                    p.record_errors
                )
                assert lp.error_message == p.error_message
            if version >= 10 and p.current_leader is not None:
                assert (lp.current_leader.leader_id, lp.current_leader.leader_epoch) == p.current_leader
            else:
                assert lp.current_leader is None
    expected_endpoints = list(node_endpoints or ()) if version >= 10 else []
    assert [(e.node_id, e.host, e.port, e.rack) for e in lib.node_endpoints] == expected_endpoints


@pytest.mark.parametrize("version", VERSIONS)
@SETTINGS
@given(topics=small_lists(topic_responses), throttle_time_ms=int32, node_endpoints=endpoints)
def test_response_encode_matches_library(version, topics, throttle_time_ms, node_endpoints):
    ours = encode_produce_response(version, topics, throttle_time_ms, node_endpoints)
    lib = ProduceResponse.decode(ours, version=version)
    assert_response_matches(lib, version, topics, throttle_time_ms, node_endpoints)
    assert ours == bytes(library_response(version, topics, throttle_time_ms, node_endpoints).encode())


def test_response_default_leader_is_not_written():
    """Kafka writes a tagged struct only when it differs from its defaults."""
    plain = encode_produce_response(10, [ProduceTopicResponse("t", None, [ProducePartitionResponse(0)])])
    default = encode_produce_response(
        10, [ProduceTopicResponse("t", None, [ProducePartitionResponse(0, current_leader=(-1, -1))])]
    )
    assert plain == default
    leader = encode_produce_response(
        10, [ProduceTopicResponse("t", None, [ProducePartitionResponse(0, 6, current_leader=(2, 5))])]
    )
    lp = ProduceResponse.decode(leader, version=10).responses[0].partition_responses[0]
    assert (lp.error_code, lp.current_leader.leader_id, lp.current_leader.leader_epoch) == (6, 2, 5)


def test_response_topic_id_accepts_raw_bytes():
    tid = uuid.uuid4()
    as_uuid = encode_produce_response(13, [ProduceTopicResponse(None, tid, [ProducePartitionResponse(1)])])
    as_bytes = encode_produce_response(13, [ProduceTopicResponse(None, tid.bytes, [ProducePartitionResponse(1)])])
    assert as_uuid == as_bytes
    assert ProduceResponse.decode(as_uuid, version=13).responses[0].topic_id == tid
