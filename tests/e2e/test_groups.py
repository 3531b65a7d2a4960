"""Consumer groups (classic protocol) through the real wire with confluent-kafka, kafka-python and
aiokafka: partition splitting and handoff, committed offsets (also across a clean restart and a
kill -9), manual commits, admin listing/describing, independent groups, static membership, and
the ``__consumer_offsets`` records on disk read back with an independent decoder.
"""

from __future__ import annotations

import asyncio
import struct
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition
from kafka.admin import KafkaAdminClient
from kafka.structs import OffsetAndMetadata

from coordinator.group.java_hash import partition_for
from tests.unit.coordinator.test_group_records import parse_group_value, parse_key, parse_offset_value

PARTITIONS = 6
PER_PARTITION = 20
GROUP_TIMEOUTS = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500, "max.poll.interval.ms": 10000}


def create_topic(bootstrap: str, name: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # must outlive the future
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)


def produce(bootstrap: str, topic: str, partitions: int = PARTITIONS, per_partition: int = PER_PARTITION) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(per_partition):
        for part in range(partitions):
            p.produce(topic, key=f"{part}-{i}".encode(), value=f"v{i}".encode(), partition=part)
    assert p.flush(15) == 0


def group_name() -> str:
    return f"g-{uuid.uuid4().hex[:10]}"


def wait_until(cond: Callable[[], bool], pump: Callable[[], None], timeout: float = 30.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pump()
        if cond():
            return
    raise AssertionError(f"timed out waiting for {what}")


def ck_consumer(bootstrap: str, group: str, **extra) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, **GROUP_TIMEOUTS, **extra})


def parts_of(c: Consumer) -> set[int]:
    return {tp.partition for tp in c.assignment()}


def pump_all(consumers: list[Consumer], sink: list | None = None) -> Callable[[], None]:
    def pump() -> None:
        for c in consumers:
            m = c.poll(0.05)
            if m is not None and m.error() is None and sink is not None:
                sink.append((m.partition(), m.offset()))

    return pump


def split_evenly(consumers: list[Consumer], total: int = PARTITIONS) -> bool:
    sets = [parts_of(c) for c in consumers]
    union = set().union(*sets)
    return len(union) == total and sum(len(s) for s in sets) == total and \
        all(len(s) == total // len(consumers) for s in sets)


# --- confluent-kafka ----------------------------------------------------------------------------


def test_confluent_group_splits_hands_off_and_grows(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    group = group_name()
    members = [ck_consumer(broker.bootstrap, group) for _ in range(3)]
    for c in members:
        c.subscribe([topic_name])
    wait_until(lambda: split_evenly(members), pump_all(members), what="a 2/2/2 split")

    leaving = members.pop(1)
    leaving.close()
    wait_until(lambda: split_evenly(members), pump_all(members), what="two members taking over all 6")
    assert all(len(parts_of(c)) == 3 for c in members)

    newcomer = ck_consumer(broker.bootstrap, group)
    newcomer.subscribe([topic_name])
    members.append(newcomer)
    wait_until(lambda: split_evenly(members), pump_all(members), what="a new member getting its share")
    for c in members:
        c.close()


def test_confluent_commits_are_where_the_next_owner_starts(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    produce(broker.bootstrap, topic_name)
    group = group_name()
    first = ck_consumer(broker.bootstrap, group)
    first.subscribe([topic_name])
    seen: list = []
    wait_until(lambda: len(seen) >= PARTITIONS * 5, pump_all([first], seen), what="first records")
    # Commit position 7 on every partition explicitly, then hand the group over.
    first.commit(offsets=[TopicPartition(topic_name, p, 7) for p in range(PARTITIONS)], asynchronous=False)
    committed = first.committed([TopicPartition(topic_name, p) for p in range(PARTITIONS)], timeout=10)
    assert [tp.offset for tp in committed] == [7] * PARTITIONS
    first.close()

    second = ck_consumer(broker.bootstrap, group)
    second.subscribe([topic_name])
    got: list = []
    wait_until(lambda: len(got) >= PARTITIONS * (PER_PARTITION - 7), pump_all([second], got),
               what="the next owner to read the rest")
    first_per_partition = {p: min(o for pp, o in got if pp == p) for p in range(PARTITIONS)}
    assert first_per_partition == dict.fromkeys(range(PARTITIONS), 7)
    second.close()


def test_two_groups_consume_independently(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 3)
    produce(broker.bootstrap, topic_name, partitions=3)
    a, b = ck_consumer(broker.bootstrap, group_name()), ck_consumer(broker.bootstrap, group_name())
    a.subscribe([topic_name])
    b.subscribe([topic_name])
    got_a: list = []
    got_b: list = []

    def pump() -> None:
        pump_all([a], got_a)()
        pump_all([b], got_b)()

    total = 3 * PER_PARTITION
    wait_until(lambda: len(got_a) >= total and len(got_b) >= total, pump, what="both groups to read everything")
    assert sorted(got_a) == sorted(got_b) and len(set(got_a)) == total
    a.commit(asynchronous=False)
    # Group a's commits are not group b's.
    assert all(tp.offset == PER_PARTITION for tp in a.committed([TopicPartition(topic_name, p) for p in range(3)]))
    assert all(tp.offset < 0 for tp in b.committed([TopicPartition(topic_name, p) for p in range(3)]))
    a.close()
    b.close()


def test_static_member_rejoins_without_rebalance(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    group = group_name()
    revoked: list = []
    a = ck_consumer(broker.bootstrap, group, **{"group.instance.id": "inst-a"})
    b = ck_consumer(broker.bootstrap, group, **{"group.instance.id": "inst-b"})
    a.subscribe([topic_name])
    b.subscribe([topic_name], on_revoke=lambda c, parts: revoked.append(parts))
    wait_until(lambda: split_evenly([a, b]), pump_all([a, b]), what="two static members to split")
    before_a, before_b = parts_of(a), parts_of(b)
    revoked.clear()
    a.close()  # a static member does not send LeaveGroup

    a2 = ck_consumer(broker.bootstrap, group, **{"group.instance.id": "inst-a"})
    a2.subscribe([topic_name])
    wait_until(lambda: parts_of(a2) == before_a, pump_all([a2, b]), what="the restarted static member")
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:
        pump_all([a2, b])()
    assert revoked == [] and parts_of(b) == before_b  # nobody else noticed

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        desc = admin.describe_groups([group])[group]
        assert desc["group_state"] == "Stable"
        assert sorted(m["group_instance_id"] for m in desc["members"]) == ["inst-a", "inst-b"]
    finally:
        admin.close()
    a2.close()
    b.close()


# --- kafka-python -----------------------------------------------------------------------------------


def kp_consumer(bootstrap: str, group: str, *topics: str, **extra) -> KafkaConsumer:
    return KafkaConsumer(*topics, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                         enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=500,
                         max_poll_interval_ms=10000, **extra)


class KpWorker:
    """Drives one kafka-python consumer from its own thread (it is not thread-safe), running
    submitted calls between polls. One thread per member also sidesteps a kafka-python 3.0.12
    quirk: a JoinGroup/SyncGroup task that finishes while no poll() awaits it is discarded and
    a fresh JoinGroup sent, so round-robin polling with short timeouts rebalances forever."""

    def __init__(self, consumer: KafkaConsumer) -> None:
        import queue
        import threading

        self.consumer = consumer
        self.first_offsets: dict[int, int] = {}
        self.assigned: set[int] = set()
        self._calls: queue.Queue = queue.Queue()
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop:
            while not self._calls.empty():
                fn, box, done = self._calls.get()
                try:
                    box.append((True, fn(self.consumer)))
                except Exception as e:  # noqa: BLE001 - handed to the caller
                    box.append((False, e))
                done.set()
            for tp, records in self.consumer.poll(timeout_ms=200).items():
                for r in records:
                    self.first_offsets.setdefault(tp.partition, r.offset)
            self.assigned = {tp.partition for tp in self.consumer.assignment()}

    def call(self, fn):
        import threading

        box: list = []
        done = threading.Event()
        self._calls.put((fn, box, done))
        assert done.wait(30), "worker call timed out"
        ok, value = box[0]
        if not ok:
            raise value
        return value

    def close(self) -> None:
        self.call(lambda c: c.close())
        self._stop = True
        self._thread.join(10)


def test_kafka_python_group_manual_commit_and_admin(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    produce(broker.bootstrap, topic_name)
    group = group_name()
    workers = [KpWorker(kp_consumer(broker.bootstrap, group, topic_name, client_id=f"kp-{i}")) for i in range(3)]

    def split(ws) -> bool:
        sets = [w.assigned for w in ws]
        return len(set().union(*sets)) == PARTITIONS and all(len(s) == PARTITIONS // len(ws) for s in sets)

    wait_until(lambda: split(workers), lambda: time.sleep(0.05), what="kafka-python 2/2/2 split")

    owner = workers[0]
    tps = sorted(KpTopicPartition(topic_name, p) for p in owner.assigned)
    owner.call(lambda c: c.commit({tp: OffsetAndMetadata(5 + tp.partition, "note", -1) for tp in tps}))
    assert owner.call(lambda c: {tp: c.committed(tp) for tp in tps}) == {tp: 5 + tp.partition for tp in tps}
    assert owner.call(lambda c: c.committed(tps[0], metadata=True)).metadata == "note"

    # kafka-python 3's admin: list_groups / describe_groups (the old *_consumer_groups names).
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        listed = {g["group_id"]: g for g in admin.list_groups()}
        assert listed[group] == {"group_id": group, "protocol_type": "consumer", "group_state": "Stable",
                                 "group_type": "classic"}
        assert group in {g["group_id"] for g in admin.list_groups(states_filter=["Stable"])}
        assert group not in {g["group_id"] for g in admin.list_groups(states_filter=["Empty"])}
        desc = admin.describe_groups([group])[group]
        assert desc["error"] is None and desc["group_state"] == "Stable" and desc["protocol_type"] == "consumer"
        assert desc["protocol_data"] == "range"
        assert sorted(m["client_id"] for m in desc["members"]) == ["kp-0", "kp-1", "kp-2"]
        assert all(m["client_host"] == "/127.0.0.1" for m in desc["members"])
        assert all(m["member_metadata"]["topics"] == [topic_name] for m in desc["members"])
        assigned = sorted(p for m in desc["members"] for a in m["member_assignment"]["assigned_partitions"]
                          for p in a["partitions"])
        assert assigned == list(range(PARTITIONS))
        offsets = admin.list_group_offsets({group: None})[group]
        assert {tp.partition: om.offset for tp, om in offsets.items()} == {tp.partition: 5 + tp.partition for tp in tps}
    finally:
        admin.close()

    # The member that leaves hands its partitions over; the next owner starts at the commits.
    owner.close()
    rest = workers[1:]
    for w in rest:
        w.first_offsets.clear()
    mine = [tp.partition for tp in tps]
    wait_until(lambda: split(rest) and all(any(p in w.first_offsets for w in rest) for p in mine),
               lambda: time.sleep(0.05), what="handoff to the other members")
    firsts = {p: o for w in rest for p, o in w.first_offsets.items() if p in mine}
    assert firsts == {p: 5 + p for p in mine}

    # A newcomer gets its share: 2/2/2 again.
    newcomer = KpWorker(kp_consumer(broker.bootstrap, group, topic_name, client_id="kp-3"))
    rest.append(newcomer)
    wait_until(lambda: split(rest), lambda: time.sleep(0.05), what="the newcomer's share")
    for w in rest:
        w.close()


def raw_request(bootstrap: str, api_key: int, version: int, request):
    """Send one request on a fresh connection and decode the answer (kafka-python's codecs)."""
    import socket

    from protocol.messages import is_flexible, response_class

    host, port = bootstrap.split(":")
    request.with_header(correlation_id=7, client_id="raw")
    frame = request.encode(version=version, header=True, framed=True)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(frame)
        size = struct.unpack(">i", _recv(s, 4))[0]
        body = _recv(s, size)
    assert struct.unpack_from(">i", body, 0)[0] == 7
    pos = 4
    if is_flexible(api_key, version):
        pos += 1  # empty tagged fields of the response header
    return response_class(api_key).decode(body[pos:], version=version)


def _recv(s, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        assert chunk, "connection closed"
        buf += chunk
    return buf


def test_commit_and_heartbeat_errors_over_the_wire(broker, topic_name):
    """Kafka's errors for a stale generation, an unknown member and a simple commit into an
    active group, sent raw next to a live kafka-python member."""
    from protocol.messages import request_class

    create_topic(broker.bootstrap, topic_name, 1)
    group = group_name()
    c = kp_consumer(broker.bootstrap, group, topic_name)
    wait_until(lambda: bool(c.assignment()), lambda: c.poll(timeout_ms=1000), timeout=60, what="an assignment")
    meta = c.group_metadata()
    Commit = request_class(8)
    Topic = Commit.OffsetCommitRequestTopic
    Part = Topic.OffsetCommitRequestPartition

    def commit(gen: int, member: str, version: int = 2, partition: int = 0, group_id: str = group) -> int:
        req = Commit(group_id=group_id, generation_id_or_member_epoch=gen, member_id=member, retention_time_ms=-1,
                     topics=[Topic(name=topic_name, partitions=[
                         Part(partition_index=partition, committed_offset=1, committed_metadata="")])])
        return raw_request(broker.bootstrap, 8, version, req).topics[0].partitions[0].error_code

    assert commit(meta.generation_id, meta.member_id) == 0
    assert commit(meta.generation_id + 1, meta.member_id) == 22  # ILLEGAL_GENERATION
    assert commit(meta.generation_id, "nobody") == 25  # UNKNOWN_MEMBER_ID
    assert commit(-1, "") == 25  # a simple commit while the group has members
    assert commit(meta.generation_id, meta.member_id, partition=9) == 3  # UNKNOWN_TOPIC_OR_PARTITION
    assert commit(meta.generation_id + 1, meta.member_id, version=9) == 22
    assert commit(1, "x", version=8, group_id=group_name()) == 22  # no such group: ILLEGAL_GENERATION < v9
    assert commit(1, "x", version=9, group_id=group_name()) == 69  # GROUP_ID_NOT_FOUND from v9
    assert commit(-1, "", version=9, group_id=group_name()) == 0  # a simple commit creates the group

    Heartbeat = request_class(12)

    def heartbeat(gen: int, member: str) -> int:
        return raw_request(broker.bootstrap, 12, 1, Heartbeat(group_id=group, generation_id=gen,
                                                               member_id=member)).error_code

    assert heartbeat(meta.generation_id, meta.member_id) == 0
    assert heartbeat(meta.generation_id + 1, meta.member_id) == 22
    assert heartbeat(meta.generation_id, "nobody") == 25
    Join = request_class(11)
    resp = raw_request(broker.bootstrap, 11, 4, Join(
        group_id=group, session_timeout_ms=1000, rebalance_timeout_ms=1000, member_id="", protocol_type="consumer",
        protocols=[Join.JoinGroupRequestProtocol(name="range", metadata=b"")]))
    assert resp.error_code == 26  # INVALID_SESSION_TIMEOUT (below group.min.session.timeout.ms)
    resp = raw_request(broker.bootstrap, 11, 4, Join(
        group_id=group_name(), session_timeout_ms=6000, rebalance_timeout_ms=6000, member_id="",
        protocol_type="consumer", protocols=[Join.JoinGroupRequestProtocol(name="range", metadata=b"")]))
    assert resp.error_code == 79 and resp.member_id.startswith("raw-")  # MEMBER_ID_REQUIRED
    c.close()


# --- aiokafka --------------------------------------------------------------------------------------


def test_aiokafka_group_split_commit_and_handoff(broker, topic_name):
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition as AioTP

    create_topic(broker.bootstrap, topic_name)
    produce(broker.bootstrap, topic_name)
    group = group_name()

    def consumer() -> AIOKafkaConsumer:
        return AIOKafkaConsumer(topic_name, bootstrap_servers=broker.bootstrap, group_id=group,
                                auto_offset_reset="earliest", enable_auto_commit=False, session_timeout_ms=6000,
                                heartbeat_interval_ms=500, max_poll_interval_ms=10000)

    async def until(cond, members, timeout=30.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            await asyncio.gather(*(m.getmany(timeout_ms=50) for m in members))
            if cond():
                return
        raise AssertionError("timed out")

    async def run() -> None:
        a, b = consumer(), consumer()
        await a.start()
        await b.start()
        await until(lambda: len(a.assignment()) == 3 and len(b.assignment()) == 3
                    and not (a.assignment() & b.assignment()), [a, b])
        mine = sorted(a.assignment())
        await a.commit({tp: 11 for tp in mine})
        assert [await a.committed(tp) for tp in mine] == [11] * 3
        await a.stop()  # leaves the group
        first: dict[int, int] = {}

        async def fetch_b() -> None:
            for tp, records in (await b.getmany(timeout_ms=50)).items():
                if records:
                    first.setdefault(tp.partition, records[0].offset)

        deadline = time.monotonic() + 30
        while not (len(b.assignment()) == PARTITIONS and all(tp.partition in first for tp in mine)):
            assert time.monotonic() < deadline, "b never took over"
            await fetch_b()
        assert {tp.partition: first[tp.partition] for tp in mine} == {tp.partition: 11 for tp in mine}
        for tp in mine:
            assert await b.committed(AioTP(tp.topic, tp.partition)) == 11
        await b.stop()

    asyncio.run(run())


# --- durability ---------------------------------------------------------------------------------------


def _commit_and_check(bootstrap: str, topic: str, group: str, offsets: dict[int, int]) -> None:
    c = ck_consumer(bootstrap, group)
    try:
        c.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    finally:
        c.close()
    assert _committed(bootstrap, topic, group, list(offsets)) == offsets


def _committed(bootstrap: str, topic: str, group: str, parts: list[int]) -> dict[int, int]:
    c = ck_consumer(bootstrap, group)
    try:
        for _ in range(20):
            try:
                return {tp.partition: tp.offset
                        for tp in c.committed([TopicPartition(topic, p) for p in parts], timeout=10)}
            except KafkaException:
                time.sleep(0.25)
        raise AssertionError("committed() kept failing")
    finally:
        c.close()


def test_committed_offsets_survive_restart_and_kill(fresh_broker, topic_name):
    fresh_broker.start()
    create_topic(fresh_broker.bootstrap, topic_name, 3)
    group = group_name()
    _commit_and_check(fresh_broker.bootstrap, topic_name, group, {0: 10, 1: 20, 2: 30})
    # A group that went through a full rebalance, so its metadata record is in the log too.
    rgroup = group_name()
    c = ck_consumer(fresh_broker.bootstrap, rgroup)
    c.subscribe([topic_name])
    wait_until(lambda: len(parts_of(c)) == 3, pump_all([c]), what="assignment")
    c.commit(offsets=[TopicPartition(topic_name, p, 1) for p in range(3)], asynchronous=False)
    c.close()

    assert fresh_broker.stop() == 0
    fresh_broker.start()
    assert _committed(fresh_broker.bootstrap, topic_name, group, [0, 1, 2]) == {0: 10, 1: 20, 2: 30}
    assert _committed(fresh_broker.bootstrap, topic_name, rgroup, [0, 1, 2]) == {0: 1, 1: 1, 2: 1}

    _commit_and_check(fresh_broker.bootstrap, topic_name, group, {0: 11, 1: 21, 2: 31})
    fresh_broker.kill()  # SIGKILL: nothing flushed on the way out
    fresh_broker.start()
    assert _committed(fresh_broker.bootstrap, topic_name, group, [0, 1, 2]) == {0: 11, 1: 21, 2: 31}

    admin = KafkaAdminClient(bootstrap_servers=fresh_broker.bootstrap)
    try:
        groups = {g["group_id"]: g["group_state"] for g in admin.list_groups()}
        assert groups[group] == "Empty" and groups[rgroup] == "Empty"
    finally:
        admin.close()
    fresh_broker.stop()

    # The records on disk, decoded independently of the broker's code.
    records = read_offsets_topic(Path(fresh_broker.data_dir), partition_for(group, 50))
    commits = [(parse_key(k), parse_offset_value(v)) for k, v in records if v is not None and k[:2] == b"\x00\x01"]
    mine = [(key, value) for key, value in commits if key[1] == group]
    assert [(key[3], value["offset"]) for key, value in mine] == [(0, 10), (1, 20), (2, 30), (0, 11), (1, 21), (2, 31)]
    assert all(value["version"] == 3 for _, value in mine)
    rrecords = read_offsets_topic(Path(fresh_broker.data_dir), partition_for(rgroup, 50))
    metadata = [parse_group_value(v) for k, v in rrecords if k[:2] == b"\x00\x02" and v is not None]
    assert any(m["protocol_type"] == "consumer" and len(m["members"]) == 1 and m["generation"] == 1 for m in metadata)


def read_offsets_topic(data_dir: Path, partition: int) -> list[tuple[bytes, bytes | None]]:
    """Every (key, value) in a ``__consumer_offsets`` partition, parsed straight from the segment
    files: v2 batch headers and varint-framed records (the coordinator writes uncompressed)."""
    out = []
    pdir = data_dir / f"__consumer_offsets-{partition}"
    for seg in sorted(pdir.glob("*.log")):
        data = seg.read_bytes()
        pos = 0
        while pos + 61 <= len(data):
            base_offset, length = struct.unpack_from(">qi", data, pos)
            attributes = struct.unpack_from(">h", data, pos + 21)[0]
            count = struct.unpack_from(">i", data, pos + 57)[0]
            assert attributes & 0x07 == 0
            rpos = pos + 61
            for _ in range(count):
                _, rpos = _varint(data, rpos)  # record length
                rpos += 1  # attributes
                _, rpos = _varint(data, rpos)  # timestamp delta
                _, rpos = _varint(data, rpos)  # offset delta
                klen, rpos = _varint(data, rpos)
                key = data[rpos:rpos + klen]
                rpos += klen
                vlen, rpos = _varint(data, rpos)
                value = None if vlen < 0 else data[rpos:rpos + vlen]
                rpos += max(vlen, 0)
                nheaders, rpos = _varint(data, rpos)
                assert nheaders == 0
                out.append((key, value))
            pos += 12 + length
    return out


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    shift = raw = 0
    while True:
        b = data[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7


# --- admin and error paths over the wire ------------------------------------------------------------


def test_delete_groups_and_offsets_via_admin(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 2)
    empty_group, busy_group = group_name(), group_name()
    _commit_and_check(broker.bootstrap, topic_name, empty_group, {0: 3, 1: 4})
    busy = ck_consumer(broker.bootstrap, busy_group)
    busy.subscribe([topic_name])
    wait_until(lambda: len(parts_of(busy)) == 2, pump_all([busy]), what="assignment")

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        missing = "no-such-group-" + topic_name
        results = dict(admin.delete_groups([empty_group, busy_group, missing]))
        assert results == {empty_group: "OK", busy_group: "NonEmptyGroupError", missing: "GroupIdNotFoundError"}
        # OffsetDelete: refused for a topic the active consumer group subscribes to.
        assert empty_group not in {g["group_id"] for g in admin.list_groups()}
    finally:
        admin.close()
    assert _committed(broker.bootstrap, topic_name, empty_group, [0, 1]) == {0: -1001, 1: -1001}
    busy.close()


def test_delete_groups_v3_answers_an_error_message_field(broker, topic_name):
    """DeleteGroups v3 (Kafka 4.4, used by the 4.4 Admin client): the v2 answer plus a per-group
    ErrorMessage, null as Kafka's coordinator leaves it for classic groups."""
    from protocol.newer.delete_groups import DeleteGroupsRequest
    from tests.support.raw_client import RawClient

    create_topic(broker.bootstrap, topic_name, 1)
    group = group_name()
    _commit_and_check(broker.bootstrap, topic_name, group, {0: 1})
    with RawClient(broker.bootstrap) as c:
        first = c.send(DeleteGroupsRequest[3](groups_names=[group, "no-such-" + group]), 3)
        again = c.send(DeleteGroupsRequest[3](groups_names=[group]), 3)
    assert [(r.group_id, r.error_code, r.error_message) for r in first.results] == [
        (group, 0, None), ("no-such-" + group, 69, None)]
    assert [(r.error_code, r.error_message) for r in again.results] == [(69, None)]  # GROUP_ID_NOT_FOUND


DEAD_MEMBER = """
import sys, time
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "session.timeout.ms": 6000,
              "heartbeat.interval.ms": 500, "max.poll.interval.ms": 10000})
c.subscribe([sys.argv[3]])
while not c.assignment():
    c.poll(0.1)
print("ASSIGNED", flush=True)
while True:
    c.poll(0.1)
"""


def test_session_timeout_of_a_killed_member_rebalances(broker, topic_name):
    """A member killed with SIGKILL (no LeaveGroup) is removed after session.timeout.ms and the
    survivor takes over its partitions."""
    import subprocess
    import sys

    create_topic(broker.bootstrap, topic_name, 2)
    group = group_name()
    proc = subprocess.Popen([sys.executable, "-c", DEAD_MEMBER, broker.bootstrap, group, topic_name],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout.readline().strip() == "ASSIGNED"
        a = ck_consumer(broker.bootstrap, group)
        a.subscribe([topic_name])
        wait_until(lambda: len(parts_of(a)) == 1, pump_all([a]), what="a 1/1 split with the doomed member")
        proc.kill()
        killed = time.monotonic()
        wait_until(lambda: len(parts_of(a)) == 2, pump_all([a]), timeout=20, what="a to take over")
        assert time.monotonic() - killed >= 4  # it waited for (about) the 6 s session timeout
        a.close()
    finally:
        proc.kill()
        proc.wait()


def test_admin_apis_over_the_wire(broker, topic_name):
    """Version-specific shapes: batched FindCoordinator, multi-group OffsetFetch with null topics,
    DescribeGroups v6 for a missing group, ListGroups filters, LeaveGroup batches, OffsetDelete."""
    from protocol.messages import request_class

    create_topic(broker.bootstrap, topic_name, 2)
    simple, active = group_name(), group_name()
    _commit_and_check(broker.bootstrap, topic_name, simple, {0: 4, 1: 5})
    c = ck_consumer(broker.bootstrap, active)
    c.subscribe([topic_name])
    wait_until(lambda: len(parts_of(c)) == 2, pump_all([c]), what="assignment")
    c.commit(offsets=[TopicPartition(topic_name, 0, 9)], asynchronous=False)

    FindCoordinator = request_class(10)
    resp = raw_request(broker.bootstrap, 10, 4, FindCoordinator(key_type=0, coordinator_keys=[simple, active]))
    assert [(x.key, x.error_code, x.port) for x in resp.coordinators] == [
        (simple, 0, broker.port), (active, 0, broker.port)]
    resp = raw_request(broker.bootstrap, 10, 4, FindCoordinator(key_type=1, coordinator_keys=["txn"]))
    assert (resp.coordinators[0].error_code, resp.coordinators[0].port) == (0, broker.port)  # txn coordinator
    resp = raw_request(broker.bootstrap, 10, 4, FindCoordinator(key_type=7, coordinator_keys=["x"]))
    assert resp.coordinators[0].error_code == 42  # unknown key type: INVALID_REQUEST
    resp = raw_request(broker.bootstrap, 10, 0, FindCoordinator(key=simple))
    assert (resp.error_code, resp.port) == (0, broker.port)

    OffsetFetch = request_class(9)
    Grp = OffsetFetch.OffsetFetchRequestGroup
    resp = raw_request(broker.bootstrap, 9, 8, OffsetFetch(groups=[
        Grp(group_id=simple, topics=None), Grp(group_id=active, topics=None),
        Grp(group_id="nobody-" + topic_name, topics=None)], require_stable=True))
    by_group = {g.group_id: {(t.name, p.partition_index): p.committed_offset for t in g.topics for p in t.partitions}
                for g in resp.groups}
    assert by_group == {simple: {(topic_name, 0): 4, (topic_name, 1): 5}, active: {(topic_name, 0): 9},
                        "nobody-" + topic_name: {}}
    Topic = OffsetFetch.OffsetFetchRequestTopic
    resp = raw_request(broker.bootstrap, 9, 1, OffsetFetch(group_id=simple, topics=[
        Topic(name=topic_name, partition_indexes=[0, 1, 7])]))
    assert [(p.partition_index, p.committed_offset, p.error_code) for p in resp.topics[0].partitions] == [
        (0, 4, 0), (1, 5, 0), (7, -1, 0)]

    DescribeGroups = request_class(15)
    resp = raw_request(broker.bootstrap, 15, 6, DescribeGroups(groups=["nobody-" + topic_name, active],
                                                               include_authorized_operations=True))
    missing, found = resp.groups
    assert (missing.error_code, missing.group_state) == (69, "Dead") and missing.error_message
    assert (found.error_code, found.group_state, found.protocol_type, found.protocol_data) == (
        0, "Stable", "consumer", "range")
    assert found.authorized_operations == {3, 6, 8, 10, 11}

    ListGroups = request_class(16)
    resp = raw_request(broker.bootstrap, 16, 5, ListGroups(states_filter=["empty"], types_filter=["classic"]))
    listed = {g.group_id: (g.group_state, g.group_type) for g in resp.groups}
    assert listed.get(simple) == ("Empty", "classic") and active not in listed
    resp = raw_request(broker.bootstrap, 16, 5, ListGroups(states_filter=[], types_filter=["consumer"]))
    # only KIP-848 groups (other tests' on this shared broker), never these classic ones
    assert all(g.group_type == "consumer" for g in resp.groups)
    assert not {g.group_id for g in resp.groups} & {active, simple}

    OffsetDelete = request_class(47)
    DTopic = OffsetDelete.OffsetDeleteRequestTopic
    DPart = DTopic.OffsetDeleteRequestPartition
    resp = raw_request(broker.bootstrap, 47, 0, OffsetDelete(group_id=active, topics=[
        DTopic(name=topic_name, partitions=[DPart(partition_index=0)])]))
    assert resp.error_code == 0 and resp.topics[0].partitions[0].error_code == 86  # GROUP_SUBSCRIBED_TO_TOPIC
    resp = raw_request(broker.bootstrap, 47, 0, OffsetDelete(group_id=simple, topics=[
        DTopic(name=topic_name, partitions=[DPart(partition_index=0), DPart(partition_index=9)])]))
    assert [(p.partition_index, p.error_code) for p in resp.topics[0].partitions] == [(0, 0), (9, 3)]
    assert _committed(broker.bootstrap, topic_name, simple, [0, 1]) == {0: -1001, 1: 5}

    LeaveGroup = request_class(13)
    Ident = LeaveGroup.MemberIdentity
    resp = raw_request(broker.bootstrap, 13, 5, LeaveGroup(group_id=active, members=[
        Ident(member_id="ghost", group_instance_id=None, reason="test")]))
    assert resp.error_code == 0 and resp.members[0].error_code == 25
    resp = raw_request(broker.bootstrap, 13, 1, LeaveGroup(group_id=active, member_id="ghost"))
    assert resp.error_code == 25  # v0-2: the member's error is the top-level error
    c.close()


def test_offsets_of_a_deleted_topic_are_removed(broker, topic_name):
    """Kafka's onPartitionsDeleted: a group forgets offsets of a topic that no longer exists."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, 2, 1)])[topic_name].result(15)
    group = "gone-" + topic_name
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic_name, 0, 5), TopicPartition(topic_name, 1, 7)], asynchronous=False)
        assert [tp.offset for tp in c.committed([TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)],
                                                timeout=10)] == [5, 7]
        admin.delete_topics([topic_name])[topic_name].result(15)
        admin.create_topics([NewTopic(topic_name, 2, 1)])[topic_name].result(15)
        after = c.committed([TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)], timeout=10)
        assert [tp.offset for tp in after] == [-1001, -1001]  # OFFSET_INVALID: nothing committed
    finally:
        c.close()
