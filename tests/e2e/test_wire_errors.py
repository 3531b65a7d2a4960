"""Bad input gets a clear error or a closed connection, and the broker keeps serving."""

from __future__ import annotations

import struct
import time

import pytest
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.producer import ProduceRequest

from protocol.records import build_batch
from tests.support.broker_process import BrokerProcess
from tests.support.raw_client import RawClient


def _create(bootstrap: str, name: str, partitions: int = 1, configs: dict | None = None) -> int:
    req = CreateTopicsRequest[5](
        topics=[CreateTopicsRequest.CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=1, assignments=[],
            configs=[CreateTopicsRequest.CreatableTopic.CreatableTopicConfig(name=k, value=v)
                     for k, v in (configs or {}).items()])],
        timeout_ms=10000, validate_only=False)
    with RawClient(bootstrap) as c:
        return c.send(req, 5).topics[0].error_code


def _produce(bootstrap: str, topic: str, records: bytes, version: int = 9, partition: int = 0, acks: int = -1):
    req = ProduceRequest[version](transactional_id=None, acks=acks, timeout_ms=5000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=partition, records=records)])])
    with RawClient(bootstrap) as c:
        resp = c.send(req, version)
    return resp.responses[0].partition_responses[0]


def _still_serving(bootstrap: str) -> None:
    with RawClient(bootstrap) as c:
        resp = c.send(ApiVersionsRequest[3](client_software_name="t", client_software_version="1"), 3)
        assert resp.error_code == 0


def _batch(n: int = 3, size: int = 10) -> bytearray:
    return build_batch([(b"k%d" % i, b"v" * size) for i in range(n)], timestamp=int(time.time() * 1000))


def test_api_versions_unknown_version_gets_v0_error(broker):
    with RawClient(broker.bootstrap) as c:
        body = struct.pack(">hhih", 18, 99, 7, 1) + b"x" + b"\x00\x00\x00"
        c.send_bytes(struct.pack(">i", len(body)) + body)
        frame = c.recv_frame()
    corr, err, count = struct.unpack_from(">ihi", frame, 0)
    assert (corr, err, count) == (7, 35, 1)
    assert struct.unpack_from(">hhh", frame, 10) == (18, 0, 5)


def test_api_versions_advertises_what_clients_need(broker):
    with RawClient(broker.bootstrap) as c:
        resp = c.send(ApiVersionsRequest[0](), 0)
    ranges = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert ranges[0][0] == 0  # Produce min 0 for old librdkafka (KAFKA-18659)
    assert ranges[1] == (4, 18)
    assert ranges[2][1] >= 10  # kafka-python infers broker >= 4.0 from ListOffsets v10
    assert ranges[3] == (0, 13)
    assert ranges[18] == (0, 5)


def _api_versions_v5(bootstrap: str, cluster_id: str | None, node_id: int):
    """The v5 answer decoded at v5 (kafka-python's class reads any error answer as a v0 body, the
    KIP-511 UNSUPPORTED_VERSION case; Kafka encodes the other errors at the request's version)."""
    from kafka.protocol.api_message import ApiMessage

    from protocol.newer.api_versions import ApiVersionsRequest as V5
    from protocol.newer.api_versions import ApiVersionsResponse

    req = V5[5](client_software_name="t", client_software_version="1", cluster_id=cluster_id, node_id=node_id)
    req.with_header(correlation_id=1, client_id="t")
    with RawClient(bootstrap) as c:
        c.send_bytes(bytes(req.encode(version=5, header=True, framed=True)))
        frame = c.recv_frame()
    return ApiMessage.decode.__func__(ApiVersionsResponse, frame[4:], version=5)


def test_api_versions_v5_checks_the_node_the_client_means(broker):
    """KIP-1242 as Kafka 4.4's KafkaApis: both ids or neither, and a client aimed at another
    cluster or node is told to rebootstrap."""
    with RawClient(broker.bootstrap) as c:
        cluster_id = c.send(MetadataRequest[12](topics=[], allow_auto_topic_creation=False), 12).cluster_id
    anonymous = _api_versions_v5(broker.bootstrap, None, -1)
    assert anonymous.error_code == 0 and {k.api_key for k in anonymous.api_keys} >= {0, 1, 3, 18}
    assert anonymous.finalized_features_epoch >= 0
    aimed = _api_versions_v5(broker.bootstrap, cluster_id, 1)
    assert aimed.error_code == 0 and len(aimed.api_keys) == len(anonymous.api_keys)
    for cid, node in ((cluster_id, -1), (None, 1)):
        r = _api_versions_v5(broker.bootstrap, cid, node)
        assert (r.error_code, r.api_keys) == (42, [])  # INVALID_REQUEST
    for cid, node in (("another-cluster-id0000", 1), (cluster_id, 7)):
        r = _api_versions_v5(broker.bootstrap, cid, node)
        assert (r.error_code, r.api_keys) == (129, [])  # REBOOTSTRAP_REQUIRED
    _still_serving(broker.bootstrap)


@pytest.mark.parametrize("garbage", [
    struct.pack(">i", -5),  # negative size
    struct.pack(">i", 0),  # an empty frame
    struct.pack(">i", 4) + struct.pack(">hh", 18, 99),  # ApiVersions too short to hold a correlation id
    struct.pack(">i", 3) + b"abc",  # shorter than a header
    struct.pack(">i", 12) + struct.pack(">hhih", 9999, 0, 1, 0) + b"\x00\x00",  # unknown API key
    struct.pack(">i", 12) + struct.pack(">hhih", 3, 77, 1, 0) + b"\x00\x00",  # unsupported Metadata version
    struct.pack(">i", 12) + struct.pack(">hhih", 3, 1, 1, 5000) + b"\x00\x00",  # client id past the frame
    struct.pack(">i", 14) + struct.pack(">hhih", 19, 5, 1, -1) + b"\xff\xff\xff\xff",  # garbage body
])
def test_garbage_closes_connection_only(broker, garbage):
    with RawClient(broker.bootstrap) as c:
        c.send_bytes(garbage)
        assert c.is_closed()
    _still_serving(broker.bootstrap)


def test_frame_over_socket_request_max_bytes(tmp_path):
    b = BrokerProcess(tmp_path / "d", overrides={"socket.request.max.bytes": "1000"}).start()
    try:
        with RawClient(b.bootstrap) as c:
            c.send_bytes(struct.pack(">i", 5000) + b"\x00" * 100)
            assert c.is_closed()
        _still_serving(b.bootstrap)
    finally:
        assert b.stop() == 0


def test_corrupt_crc_is_rejected_and_nothing_appended(broker, topic_name):
    assert _create(broker.bootstrap, topic_name) == 0
    batch = _batch()
    batch[-1] ^= 0xFF
    resp = _produce(broker.bootstrap, topic_name, bytes(batch))
    assert resp.error_code == 2  # CORRUPT_MESSAGE
    good = _produce(broker.bootstrap, topic_name, bytes(_batch()))
    assert (good.error_code, good.base_offset) == (0, 0)


def test_truncated_batch_is_invalid_record(broker, topic_name):
    """Kafka's batch iterator stops at an incomplete batch, so a cut-short payload holds no
    complete batch: "exactly one record batch" fails with INVALID_RECORD, as in Kafka 4."""
    assert _create(broker.bootstrap, topic_name) == 0
    resp = _produce(broker.bootstrap, topic_name, bytes(_batch())[:-7])
    assert resp.error_code == 87


def test_batch_over_max_message_bytes(broker, topic_name):
    assert _create(broker.bootstrap, topic_name, configs={"max.message.bytes": "2000"}) == 0
    resp = _produce(broker.bootstrap, topic_name, bytes(_batch(n=5, size=1000)))
    assert resp.error_code == 10  # MESSAGE_TOO_LARGE
    ok = _produce(broker.bootstrap, topic_name, bytes(_batch(n=1, size=100)))
    assert (ok.error_code, ok.base_offset) == (0, 0)


def test_magic_v1_message_set_rejected(broker, topic_name):
    assert _create(broker.bootstrap, topic_name) == 0
    # A legacy v1 message: offset, size, crc, magic=1, attributes, timestamp, key, value.
    body = struct.pack(">bbqi", 1, 0, 0, -1) + struct.pack(">i", 1) + b"v"
    msg = struct.pack(">i", 0) + body
    legacy = struct.pack(">qi", 0, len(msg)) + msg
    resp = _produce(broker.bootstrap, topic_name, legacy)
    assert resp.error_code == 87  # INVALID_RECORD, as Kafka 4's ProduceRequest.validateRecords


def test_zstd_requires_produce_v7(broker, topic_name):
    assert _create(broker.bootstrap, topic_name) == 0
    batch = _batch()
    struct.pack_into(">h", batch, 21, 4)  # claim zstd; the CRC then fails, but version comes first
    from crc32c import crc32c
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    resp = _produce(broker.bootstrap, topic_name, bytes(batch), version=6)
    assert resp.error_code == 76  # UNSUPPORTED_COMPRESSION_TYPE


def test_invalid_required_acks(broker, topic_name):
    assert _create(broker.bootstrap, topic_name) == 0
    resp = _produce(broker.bootstrap, topic_name, bytes(_batch()), acks=2)
    assert resp.error_code == 21


def test_unknown_topic_with_auto_create_off(tmp_path):
    b = BrokerProcess(tmp_path / "d", overrides={"auto.create.topics.enable": "false"}).start()
    try:
        resp = _produce(b.bootstrap, "nope", bytes(_batch()))
        assert resp.error_code == 3
        with RawClient(b.bootstrap) as c:
            meta = c.send(MetadataRequest[9](topics=[MetadataRequest.MetadataRequestTopic(name="nope")],
                                             allow_auto_topic_creation=True), 9)
        assert meta.topics[0].error_code == 3
    finally:
        assert b.stop() == 0


@pytest.mark.parametrize("name", ["", ".", "..", "bad/name", "a" * 250, "spaces here", "ünïcode", "newline\n"])
def test_bad_topic_name(broker, name):
    assert _create(broker.bootstrap, name) == 17  # INVALID_TOPIC_EXCEPTION
    if name:
        with RawClient(broker.bootstrap) as c:
            meta = c.send(MetadataRequest[9](topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                                             allow_auto_topic_creation=True), 9)
        assert meta.topics[0].error_code == 17


def test_auto_create_on_metadata(broker, topic_name):
    """The creating request is answered UNKNOWN_TOPIC_OR_PARTITION, as Kafka 4 answers it; the next
    one shows the topic."""
    with RawClient(broker.bootstrap) as c:
        req = MetadataRequest[12](topics=[MetadataRequest.MetadataRequestTopic(name=topic_name)],
                                  allow_auto_topic_creation=True)
        first = c.send(req, 12).topics[0]
        meta = c.send(req, 12)
    assert (first.error_code, first.partitions) == (3, [])
    t = meta.topics[0]
    assert t.error_code == 0 and t.name == topic_name and len(t.partitions) == 1
    assert t.partitions[0].leader_id == 1 and t.partitions[0].leader_epoch == 0


def test_fetch_out_of_range(broker, topic_name):
    assert _create(broker.bootstrap, topic_name) == 0
    _produce(broker.bootstrap, topic_name, bytes(_batch()))
    req = FetchRequest[11](replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                           session_id=0, session_epoch=-1, topics=[FetchRequest.FetchTopic(
                               topic=topic_name, partitions=[FetchRequest.FetchTopic.FetchPartition(
                                   partition=0, current_leader_epoch=-1, fetch_offset=99, log_start_offset=-1,
                                   partition_max_bytes=1 << 20)])], forgotten_topics_data=[], rack_id="")
    with RawClient(broker.bootstrap) as c:
        resp = c.send(req, 11)
    p = resp.responses[0].partitions[0]
    # Kafka reports unknown (-1) offsets with an error.
    assert (p.error_code, p.high_watermark, p.log_start_offset) == (1, -1, -1)


def test_duplicate_create_topic(broker, topic_name):
    assert _create(broker.bootstrap, topic_name) == 0
    assert _create(broker.bootstrap, topic_name) == 36  # TOPIC_ALREADY_EXISTS
    assert _create(broker.bootstrap, topic_name + "-x", configs={"retention.ms": "abc"}) == 40  # INVALID_CONFIG
    assert _create(broker.bootstrap, topic_name + "-y", configs={"no.such.config": "1"}) == 40


def _fetch_req(topic: str, offset: int, *, max_wait: int = 0, min_bytes: int = 1, max_bytes: int = 1 << 20,
               partition_max: int = 1 << 20):
    return FetchRequest[11](replica_id=-1, max_wait_ms=max_wait, min_bytes=min_bytes, max_bytes=max_bytes,
                            isolation_level=0, session_id=0, session_epoch=-1, topics=[FetchRequest.FetchTopic(
                                topic=topic, partitions=[FetchRequest.FetchTopic.FetchPartition(
                                    partition=0, current_leader_epoch=-1, fetch_offset=offset,
                                    log_start_offset=-1, partition_max_bytes=partition_max)])],
                            forgotten_topics_data=[], rack_id="")


def test_fetch_returns_whole_first_batch_even_if_larger_than_limits(broker, topic_name):
    assert _create(broker.bootstrap, topic_name) == 0
    big = _batch(n=5, size=2000)
    assert _produce(broker.bootstrap, topic_name, bytes(big)).error_code == 0
    assert _produce(broker.bootstrap, topic_name, bytes(_batch())).error_code == 0
    with RawClient(broker.bootstrap) as c:
        resp = c.send(_fetch_req(topic_name, 0, max_bytes=100, partition_max=100), 11)
    p = resp.responses[0].partitions[0]
    assert p.error_code == 0 and p.high_watermark == 8
    assert len(p.records) == len(big)  # exactly the first batch, whole, and not the second


def test_fetch_long_poll_is_woken_by_append(broker, topic_name):
    import threading

    assert _create(broker.bootstrap, topic_name) == 0
    result = {}

    def fetch():
        with RawClient(broker.bootstrap) as c:
            start = time.monotonic()
            result["resp"] = c.send(_fetch_req(topic_name, 0, max_wait=10000, min_bytes=1), 11)
            result["elapsed"] = time.monotonic() - start

    t = threading.Thread(target=fetch)
    t.start()
    time.sleep(0.5)
    assert _produce(broker.bootstrap, topic_name, bytes(_batch())).error_code == 0
    t.join(15)
    assert result["elapsed"] < 5, result["elapsed"]
    assert len(result["resp"].responses[0].partitions[0].records) > 0


def test_fetch_long_poll_times_out_empty(broker, topic_name):
    assert _create(broker.bootstrap, topic_name) == 0
    with RawClient(broker.bootstrap) as c:
        start = time.monotonic()
        resp = c.send(_fetch_req(topic_name, 0, max_wait=300, min_bytes=1), 11)
        elapsed = time.monotonic() - start
    assert 0.25 < elapsed < 3
    assert resp.responses[0].partitions[0].error_code == 0
    assert not resp.responses[0].partitions[0].records


def test_fetch_long_poll_sees_an_append_in_the_same_loop_pass(broker, topic_name):
    """A Produce handled right after a Fetch that found nothing, before its wait began, must still
    wake it (found by kafka-go's nettest: a read hung for its whole max wait with the data in the
    log). The two requests go out back to back on two connections, many times over, so some land
    in one pass of the broker's loop; each fetch must come back at once, not after max_wait."""
    from kafka.protocol.producer import ProduceRequest

    assert _create(broker.bootstrap, topic_name) == 0
    slow = []
    with RawClient(broker.bootstrap) as f, RawClient(broker.bootstrap) as p:
        for offset in range(0, 40 * 3, 3):
            produce = ProduceRequest[9](transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
                ProduceRequest.TopicProduceData(name=topic_name, partition_data=[
                    ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=bytes(_batch()))])])
            f.correlation_id += 1
            fetch = _fetch_req(topic_name, offset, max_wait=3000)
            fetch.with_header(correlation_id=f.correlation_id, client_id=f.client_id)
            p.correlation_id += 1
            produce.with_header(correlation_id=p.correlation_id, client_id=p.client_id)
            start = time.monotonic()
            f.send_bytes(bytes(fetch.encode(version=11, header=True, framed=True)))
            p.send_bytes(bytes(produce.encode(version=9, header=True, framed=True)))
            p.recv_frame()
            f.recv_frame()
            if time.monotonic() - start > 1.5:
                slow.append(offset)
    assert slow == [], f"fetches at these offsets waited out max_wait: {slow}"


def test_idle_connections_are_closed(tmp_path):
    """connections.max.idle.ms: an idle connection, and one stalled halfway through a frame, are
    closed; one that keeps talking is not."""
    b = BrokerProcess(tmp_path / "d", overrides={"connections.max.idle.ms": "1000"}).start()
    try:
        with RawClient(b.bootstrap) as idle, RawClient(b.bootstrap) as stalled, RawClient(b.bootstrap) as busy:
            stalled.send_bytes(struct.pack(">i", 100) + b"\x00\x12")
            deadline = time.monotonic() + 2.5
            while time.monotonic() < deadline:
                busy.send(ApiVersionsRequest[3](client_software_name="t", client_software_version="1"), 3)
                time.sleep(0.2)
            assert idle.is_closed(timeout=2)
            assert stalled.is_closed(timeout=2)
            assert not busy.is_closed(timeout=0.1)
    finally:
        b.stop()


def test_null_in_a_non_nullable_field_closes_the_connection(broker):
    """Kafka's parsers refuse a null where the schema allows none ("non-nullable field ... was
    serialized as null") and the broker closes the connection; no handler sees it (DeleteTopics v1
    with a null topic array, JoinGroup v5 with null protocol metadata)."""
    import re

    bodies = {
        20: (1, struct.pack(">i", -1) + struct.pack(">i", 1000)),  # DeleteTopics v1: topic_names null
        11: (5, struct.pack(">h", 1) + b"g" + struct.pack(">ii", 10000, 10000) + struct.pack(">h", 0)
             + struct.pack(">h", -1) + struct.pack(">h", 8) + b"consumer" + struct.pack(">i", 1)
             + struct.pack(">h", 5) + b"range" + struct.pack(">i", -1)),  # JoinGroup v5: metadata null
    }
    for api_key, (version, body) in bodies.items():
        with RawClient(broker.bootstrap) as c:
            frame = struct.pack(">hhih", api_key, version, 9, 1) + b"t" + body
            c.send_bytes(struct.pack(">i", len(frame)) + frame)
            assert c.is_closed()
    _still_serving(broker.bootstrap)
    assert not re.search(r"Traceback|request failed", broker.log_tail(400))
