"""Hostile clients and unlucky operators (issue 18), one test per finding: each attack runs
against a broker from the runtime install while a probe measures how long another client waits
for ApiVersions; the broker's memory and descriptors are read from /proc. The disk-full and
I/O-error findings are in tests/e2e/test_disk_full.py and tests/unit/storage/test_io_errors.py.
"""

from __future__ import annotations

import os
import socket
import struct
import threading
import time
import uuid
import zlib

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from protocol.messages import request_class
from protocol.record_codec import zigzag as _zz
from protocol.records import build_batch
from tests.differential.wire import ConnectionClosed, WireClient, build
from tests.support.broker_process import BrokerProcess, api_versions_ok, free_port

CreateTopics, Metadata, Fetch, Produce = request_class(19), request_class(3), request_class(1), request_class(0)
DescribeGroups, Scram, SaslAuthenticate = request_class(15), request_class(51), request_class(36)


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


class LatencyProbe:
    """Another client: ApiVersions round trips in a loop; ``worst`` is the longest wait seen."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.worst = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            assert api_versions_ok("127.0.0.1", self.port, timeout=120)
            self.worst = max(self.worst, time.monotonic() - started)
            time.sleep(0.02)

    def __enter__(self) -> LatencyProbe:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


@pytest.fixture(scope="module")
def hb(tmp_path_factory):
    """One broker for the attacks that leave it usable (their own topics and names)."""
    b = BrokerProcess(tmp_path_factory.mktemp("hardening") / "data",
                      overrides={"metrics.port": str(free_port())}).start()
    yield b
    assert b.stop() == 0, b.log_tail()


def _topic(bootstrap: str, name: str, partitions: int = 1, **configs: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # must outlive the future
    admin.create_topics([NewTopic(name, partitions, 1, config=configs)])[name].result(15)
    return name


def raw_batch(records: bytes, count: int, codec: int) -> bytes:
    """A v2 batch around an already encoded (or compressed) records section."""
    import crc32c

    now = int(time.time() * 1000)
    head = bytearray(61)
    struct.pack_into(">qiib", head, 0, 0, 49 + len(records), -1, 2)
    struct.pack_into(">hiqqqhii", head, 21, codec, count - 1, now, now, -1, -1, -1, count)
    out = head + records
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


def _produce_raw(c: WireClient, topic: str, payload: bytes, version: int = 9):
    r = c.send(build(Produce, version, transactional_id=None, acks=-1, timeout_ms=30000, topic_data=[dict(
        name=topic, partition_data=[dict(index=0, records=payload)])]), version)
    return r.responses[0].partition_responses[0]


def _produce_request(topic: str, size: int):
    return build(Produce, 9, transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[dict(
        name=topic, partition_data=[dict(index=0, records=bytes(build_batch(
            [(b"k", os.urandom(size))], timestamp=int(time.time() * 1000))))])])


def _parked_fetch(topic: str) -> bytes:
    """A framed Fetch that waits 5 s for a gigabyte that will not come."""
    park = build(Fetch, 12, replica_id=-1, max_wait_ms=5000, min_bytes=1 << 30, max_bytes=1 << 20,
                 isolation_level=0, session_id=0, session_epoch=-1,
                 topics=[dict(topic=topic, partitions=[dict(partition=0, current_leader_epoch=-1, fetch_offset=0,
                                                            last_fetched_epoch=-1, log_start_offset=-1,
                                                            partition_max_bytes=1 << 20)])],
                 forgotten_topics_data=[], rack_id="")
    park.with_header(correlation_id=1, client_id="park")
    return bytes(park.encode(version=12, header=True, framed=True))


# --- 2. segments and descriptors -------------------------------------------------------------------


def test_segment_bytes_below_kafkas_minimum_is_refused(hb):
    with WireClient(hb.bootstrap) as c:
        r = c.send(build(CreateTopics, 7, topics=[dict(name=f"seg-{uuid.uuid4().hex[:6]}", num_partitions=1,
                                                       replication_factor=1, assignments=[],
                                                       configs=[dict(name="segment.bytes", value="100")])],
                         timeout_ms=10000, validate_only=False), 7)
    assert r.topics[0].error_code == 40  # INVALID_CONFIG: at least 1048576, as Kafka 4


def test_many_segments_cost_one_descriptor_each_and_restart_under_the_limit(tmp_path):
    """The issue's case: a segment per record. Each inactive segment holds one descriptor (three
    before), so 1,500 segments fit under a 2,048-descriptor limit, and the broker restarts."""
    limit = ["prlimit", "--nofile=2048:2048"]
    b = BrokerProcess(tmp_path / "data", command_prefix=limit).start()
    try:
        topic = _topic(b.bootstrap, "tiny-segments", **{"internal.segment.bytes": "100"})
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0, "batch.num.messages": 1})
        for i in range(1500):
            p.produce(topic, value=b"%d" % i, partition=0)
            p.flush(10)
        segments = len([f for f in os.listdir(tmp_path / "data" / f"{topic}-0") if f.endswith(".log")])
        assert segments >= 1400
        assert open_fds(b.proc.pid) < segments + 200, (open_fds(b.proc.pid), segments)
        assert b.stop() == 0
        b.start()
        assert open_fds(b.proc.pid) < segments + 200
        c = __import__("confluent_kafka").Consumer({"bootstrap.servers": b.bootstrap, "group.id": "g"})
        lo, hi = c.get_watermark_offsets(__import__("confluent_kafka").TopicPartition(topic, 0), timeout=10)
        c.close()
        assert (lo, hi) == (0, 1500)
    finally:
        b.kill()


# --- 3. decompression bombs ------------------------------------------------------------------------


def gzip_bomb(prefix: bytes, zeros: int) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    out = [c.compress(prefix)]
    chunk = bytes(1 << 20)
    for _ in range(zeros >> 20):
        out.append(c.compress(chunk))
    out.append(c.compress(bytes(zeros & ((1 << 20) - 1))))
    out.append(c.flush())
    return b"".join(out)


def test_decompression_bombs_cost_neither_memory_nor_the_event_loop(hb):
    """1 MB of gzip that inflates to 1,000 MiB: refused after reading what its declared records
    need (INVALID_RECORD), or at the decompressed-size bound for one huge record
    (MESSAGE_TOO_LARGE); memory stays flat and other clients are answered throughout."""
    topic = _topic(hb.bootstrap, f"bomb-{uuid.uuid4().hex[:6]}", **{"max.message.bytes": "2000000"})
    zeros = raw_batch(gzip_bomb(b"", 1000 << 20), 3, 1)  # declares 3 records; the first reads as garbage
    value = 400 << 20  # one record whose value is 400 MiB of zeros
    body = b"\x00\x00\x00" + _zz(1) + b"k" + _zz(value)
    huge = raw_batch(gzip_bomb(_zz(len(body) + value + 1) + body, value + 1), 1, 1)
    assert len(zeros) < 1_100_000 and len(huge) < 500_000
    before = rss_kib(hb.proc.pid)
    with LatencyProbe(hb.port) as probe, WireClient(hb.bootstrap, timeout=60) as c:
        started = time.monotonic()
        assert _produce_raw(c, topic, zeros).error_code != 0  # its second record is read wrong
        assert _produce_raw(c, topic, huge).error_code == 10  # MESSAGE_TOO_LARGE: past the bound
        took = time.monotonic() - started
    assert rss_kib(hb.proc.pid) - before < 150_000, (before, rss_kib(hb.proc.pid))
    assert probe.worst < 0.5, probe.worst
    assert took < 10
    assert "Traceback" not in hb.log_tail(400)  # refusals are one line each


# --- 4. memory that was never released ------------------------------------------------------------


def _metrics_text(b: BrokerProcess) -> str:
    import urllib.request

    port = int(b.overrides["metrics.port"])
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return r.read().decode()


def test_unknown_topics_create_no_metrics_series(hb):
    names = [f"nope-{uuid.uuid4().hex[:8]}" for _ in range(300)]
    with WireClient(hb.bootstrap) as c:
        c.send(build(Produce, 9, transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
            dict(name=n, partition_data=[dict(index=0, records=bytes(build_batch([(b"k", b"v")], timestamp=0)))])
            for n in names]), 9)
        c.send(build(Fetch, 12, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                     session_id=0, session_epoch=-1, topics=[dict(topic=n, partitions=[dict(
                         partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                         log_start_offset=-1, partition_max_bytes=1 << 20)]) for n in names],
                     forgotten_topics_data=[], rack_id=""), 12)
    text = _metrics_text(hb)
    assert not [n for n in names if n in text]


def test_a_fetch_naming_one_partition_thousands_of_times(hb):
    """Answered once per partition (as Kafka keys fetch data by partition), within fetch.max.bytes,
    without a descriptor or a copy per mention."""
    topic = _topic(hb.bootstrap, f"dupfetch-{uuid.uuid4().hex[:6]}")
    p = Producer({"bootstrap.servers": hb.bootstrap, "linger.ms": 50})
    for _ in range(200):
        p.produce(topic, value=os.urandom(1000), partition=0)
    assert p.flush(15) == 0
    part = dict(partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1, log_start_offset=-1,
                partition_max_bytes=1 << 20)
    fds = open_fds(hb.proc.pid)
    with WireClient(hb.bootstrap, timeout=30) as c:
        r = c.send(build(Fetch, 12, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=200 << 20, isolation_level=0,
                         session_id=0, session_epoch=-1, topics=[dict(topic=topic, partitions=[part] * 5000)],
                         forgotten_topics_data=[], rack_id=""), 12)
        assert open_fds(hb.proc.pid) <= fds + 5
    (t,) = r.responses
    assert len(t.partitions) == 1 and len(t.partitions[0].records) > 100_000


def test_connections_hold_one_request_each(hb):
    """Twenty connections pipelining 32 produce requests of 1 MiB behind a parked Fetch: the broker
    reads one request per connection at a time (the rest wait in the kernel), not 32 MiB each."""
    topic = _topic(hb.bootstrap, f"queued-{uuid.uuid4().hex[:6]}", **{"max.message.bytes": "2000000"})
    produce = _produce_request(topic, 1 << 20)
    produce.with_header(correlation_id=2, client_id="flood")
    one_produce = bytes(produce.encode(version=9, header=True, framed=True))
    before = rss_kib(hb.proc.pid)
    socks = []
    for _ in range(20):
        s = socket.create_connection(("127.0.0.1", hb.port))
        s.setblocking(False)
        data = _parked_fetch(topic) + one_produce * 32
        socks.append((s, memoryview(data)))
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:  # push as much as the broker takes
        for i, (s, view) in enumerate(socks):
            try:
                sent = s.send(view[:1 << 20])
                socks[i] = (s, view[sent:])
            except BlockingIOError:
                pass
        time.sleep(0.01)
    grown = rss_kib(hb.proc.pid) - before
    for s, _ in socks:
        s.close()
    assert grown < 200_000, f"RSS grew {grown} KiB for 20 connections (32 MiB each would be 655,360)"


def test_sasl_frames_before_authentication_are_bounded(tmp_path):
    """sasl.server.max.receive.size (512 KiB) before authentication, as Kafka's fix for
    CVE-2022-34917; and SaslAuthenticate with no SaslHandshake first closes the connection."""
    sasl_port = free_port()
    b = BrokerProcess(tmp_path / "data", overrides={"sasl.enabled.mechanisms": "PLAIN"})
    b.overrides["listeners"] = f"PLAINTEXT://127.0.0.1:{b.port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}"
    b.start()
    try:
        with socket.create_connection(("127.0.0.1", sasl_port)) as s:
            s.sendall(struct.pack(">i", 600 * 1024) + b"\x00" * 1024)
            s.settimeout(5)
            assert s.recv(1) == b""  # closed after the size prefix alone
        with WireClient(f"127.0.0.1:{sasl_port}") as c, pytest.raises(ConnectionClosed):
            c.send(build(SaslAuthenticate, 1, auth_bytes=b"\x00user\x00pw"), 1)
    finally:
        b.kill()


# --- 5. requests that stalled everyone -------------------------------------------------------------


def test_large_admin_requests_do_not_stall_other_clients(hb):
    """The issue's numbers on the previous main: CreateTopics of 2,000 topics held other clients
    58 s, Metadata auto-creating 1,000 topics 10.8 s, 1,000 AlterUserScramCredentials 20 s and
    36 s, DescribeGroups of a million empty ids 9 s (+361 MB), pipelined Metadata 26 s."""
    prefix = uuid.uuid4().hex[:6]
    with LatencyProbe(hb.port) as probe, WireClient(hb.bootstrap, timeout=300) as c:
        started = time.monotonic()
        r = c.send(build(CreateTopics, 7, topics=[dict(name=f"{prefix}-c{i}", num_partitions=1, replication_factor=1,
                                                       assignments=[], configs=[]) for i in range(2000)],
                         timeout_ms=600000, validate_only=False), 7)
        assert {t.error_code for t in r.topics} == {0}
        c.send(build(Metadata, 12, topics=[dict(name=f"{prefix}-a{i}", topic_id=None) for i in range(1000)],
                     allow_auto_topic_creation=True, include_topic_authorized_operations=False), 12)
        for i in range(300):
            c.send(build(Scram, 0, deletions=[], upsertions=[dict(
                name=f"{prefix}-u{i}", mechanism=1, iterations=4096, salt=os.urandom(16),
                salted_password=os.urandom(32))]), 0)
        before = rss_kib(hb.proc.pid)
        r = c.send(build(DescribeGroups, 5, groups=[""] * 1_000_000, include_authorized_operations=False), 5)
        assert len(r.groups) == 1_000_000
        took = time.monotonic() - started
    assert probe.worst < 1.5, f"another client waited {probe.worst:.2f} s"
    assert took < 60
    assert rss_kib(hb.proc.pid) - before < 250_000
    with LatencyProbe(hb.port) as probe:
        req = build(Metadata, 12, topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
        clients = [WireClient(hb.bootstrap, timeout=120) for _ in range(10)]
        for c in clients:
            frames = b""
            for j in range(20):
                req.with_header(correlation_id=j, client_id="pipelined")
                frames += bytes(req.encode(version=12, header=True, framed=True))
            c.sock.sendall(frames)
        for c in clients:
            for _ in range(20):
                c.recv_frame()
            c.close()
    assert probe.worst < 1.0, f"another client waited {probe.worst:.2f} s behind pipelined Metadata"


def test_sigterm_is_honoured_within_dockers_grace_under_attack(tmp_path):
    b = BrokerProcess(tmp_path / "data").start()
    try:
        c = WireClient(b.bootstrap, timeout=120)
        req = build(CreateTopics, 7, topics=[dict(name=f"sig-{i}", num_partitions=1, replication_factor=1,
                                                  assignments=[], configs=[]) for i in range(3000)],
                    timeout_ms=600000, validate_only=False)
        req.with_header(correlation_id=1, client_id="attack")
        c.sock.sendall(bytes(req.encode(version=7, header=True, framed=True)))
        time.sleep(0.5)
        started = time.monotonic()
        assert b.stop(timeout=15) == 0
        assert time.monotonic() - started < 8
        c.close()
    finally:
        b.kill()


# --- 6. operator limits -----------------------------------------------------------------------------


def test_connection_limits(tmp_path):
    b = BrokerProcess(tmp_path / "data", overrides={"max.connections.per.ip": "5",
                                                    "max.connections.per.ip.overrides": "127.0.0.2:8"}).start()
    try:
        held = [socket.create_connection(("127.0.0.1", b.port)) for _ in range(5)]
        assert not api_versions_ok("127.0.0.1", b.port)  # the sixth from 127.0.0.1 is closed
        other = [socket.create_connection(("127.0.0.1", b.port), source_address=("127.0.0.2", 0)) for _ in range(7)]
        s = socket.create_connection(("127.0.0.1", b.port), source_address=("127.0.0.2", 0))
        body = struct.pack(">hhih", 18, 0, 1, 5) + b"probe"
        s.sendall(struct.pack(">i", len(body)) + body)
        s.settimeout(5)
        assert len(s.recv(4)) == 4  # the eighth from 127.0.0.2 (its override) is served
        for h in held[:2]:
            h.close()
        time.sleep(0.3)
        assert api_versions_ok("127.0.0.1", b.port)
        for x in held[2:] + other + [s]:
            x.close()
    finally:
        b.kill()
    b = BrokerProcess(tmp_path / "data2", overrides={"max.connections": "3"}).start()
    try:
        held = [socket.create_connection(("127.0.0.1", b.port)) for _ in range(3)]
        time.sleep(0.2)
        assert not api_versions_ok("127.0.0.1", b.port)
        held[0].close()
        time.sleep(0.3)
        assert api_versions_ok("127.0.0.1", b.port)
    finally:
        b.kill()


def test_fetch_max_bytes_bounds_an_answer(tmp_path):
    b = BrokerProcess(tmp_path / "data", overrides={"fetch.max.bytes": "100000"}).start()
    try:
        topic = _topic(b.bootstrap, "fmb", 3)
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 20, "batch.num.messages": 5})
        for i in range(300):
            p.produce(topic, value=os.urandom(2000), partition=i % 3)
        assert p.flush(15) == 0  # batches of about 10 KB, 200 KB per partition
        parts = [dict(partition=i, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                      log_start_offset=-1, partition_max_bytes=1 << 20) for i in range(3)]
        with WireClient(b.bootstrap) as c:
            r = c.send(build(Fetch, 12, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=50 << 20,
                             isolation_level=0, session_id=0, session_epoch=-1,
                             topics=[dict(topic=topic, partitions=parts)], forgotten_topics_data=[], rack_id=""), 12)
        total = sum(len(p.records or b"") for p in r.responses[0].partitions)
        assert 50_000 < total <= 100_000  # fetch.max.bytes (the request allowed 50 MiB)
    finally:
        b.kill()


def test_request_percentage_quota_throttles(tmp_path):
    """A client over its request_percentage quota gets a throttle time and waits it out."""
    b = BrokerProcess(tmp_path / "data").start()
    try:
        AlterQuotas = request_class(49)
        with WireClient(b.bootstrap) as c:
            r = c.send(build(AlterQuotas, 1, entries=[dict(entity=[dict(entity_type="client-id", entity_name="busy")],
                                                           ops=[dict(key="request_percentage", value=0.001,
                                                                     remove=False)])], validate_only=False), 1)
            assert r.entries[0].error_code == 0
        throttled = []
        with WireClient(b.bootstrap, client_id="busy") as c:
            for _ in range(8):
                m = c.send(build(Metadata, 12, topics=None, allow_auto_topic_creation=False,
                                 include_topic_authorized_operations=False), 12)
                throttled.append(m.throttle_time_ms)
                if m.throttle_time_ms:
                    break  # the connection is now muted for that long
        assert throttled[-1] > 0, throttled
    finally:
        b.kill()


def _parked_then_produce(topic: str, size: int) -> bytes:
    """A Fetch that waits 5 s for data that will not come, then a produce request of ``size``."""
    produce = _produce_request(topic, size)
    produce.with_header(correlation_id=2, client_id="big")
    return _parked_fetch(topic) + bytes(produce.encode(version=9, header=True, framed=True))


def _recv_exactly(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        assert chunk, "connection closed"
        buf += chunk
    return bytes(buf)


def test_queued_max_request_bytes_bounds_what_all_connections_hold(tmp_path):
    """Forty connections each with a 2 MB request waiting behind a parked Fetch: past
    queued.max.request.bytes (4 MiB) no connection reads more until requests are answered; then
    every request is answered."""
    b = BrokerProcess(tmp_path / "data", overrides={"queued.max.request.bytes": str(4 << 20)}).start()
    try:
        topic = _topic(b.bootstrap, "qmrb", **{"max.message.bytes": "3000000"})
        data = _parked_then_produce(topic, 2_000_000)
        before = rss_kib(b.proc.pid)
        socks = []
        for _ in range(40):
            s = socket.create_connection(("127.0.0.1", b.port))
            threading.Thread(target=s.sendall, args=(data,), daemon=True).start()
            socks.append(s)
        time.sleep(2)
        grown = rss_kib(b.proc.pid) - before
        for s in socks:
            s.settimeout(30)
            for _ in range(2):  # the Fetch answer after its 5 s, then the produce answer
                size = struct.unpack(">i", _recv_exactly(s, 4))[0]
                _recv_exactly(s, size)
            s.close()
        assert grown < 40_000, f"RSS grew {grown} KiB holding 40 x 2 MB requests (limit 4 MiB)"
    finally:
        b.kill()
