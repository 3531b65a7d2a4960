"""KIP-848 consumer groups (``group.protocol=consumer``: ConsumerGroupHeartbeat, the broker assigns) with
stock clients against OUR broker: librdkafka (confluent-kafka) and franz-go.

Each test: members of one group split a multi-partition topic (assignments disjoint, covering every
partition), consume and commit what they read, then one member leaves with records unread and the
other takes over every partition from the committed offsets: no record twice, none lost. Admin's
describe shows a CONSUMER group. The Java client's run of the same is the ``consumer-protocol`` scenario
(tests/e2e/test_java_clients.py).

While our broker does not advertise ConsumerGroupHeartbeat, these tests skip: see
``require_consumer_group_protocol`` (the one place that decides it).

PYKAFKA_KIP848_BOOTSTRAP=host:port runs them against another broker instead (how they were proved
against Apache Kafka 4.3.1: ``python -m tests.support.kafka_reference run`` prints a bootstrap).
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections.abc import Mapping

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupState,
    ConsumerGroupType,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from tests.e2e.test_franz_go import GO, GO_MODULE
from tests.support.kafka_reference import probe_kafka_api

PARTITIONS = 6
PER_PHASE = 30  # records per partition per phase
DEADLINE = 40.0  # seconds for a rebalance or a phase; the broker's heartbeat interval is 5 s by default
CONSUMER_GROUP_HEARTBEAT = 68
CONSUMER_GROUP_DESCRIBE = 69


def require_consumer_group_protocol(api_keys: Mapping[int, object]) -> None:
    """Fails the calling test when the broker does not advertise KIP-848's ConsumerGroupHeartbeat
    (the one check for every KIP-848 client test: this module and the Java ``consumer-protocol``
    scenario)."""
    assert CONSUMER_GROUP_HEARTBEAT in api_keys, "the broker does not advertise ConsumerGroupHeartbeat (API 68)"


@pytest.fixture(scope="module")
def bootstrap(request) -> str:
    """The shared session broker's bootstrap (PYKAFKA_KIP848_BOOTSTRAP overrides), once it serves KIP-848."""
    addr = os.environ.get("PYKAFKA_KIP848_BOOTSTRAP") or request.getfixturevalue("broker").bootstrap
    host, _, port = addr.rpartition(":")
    require_consumer_group_protocol(probe_kafka_api(host, int(port))["api_keys"])
    return addr


def _name(what: str) -> str:
    return f"kip848-{what}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=30)
    deadline = time.monotonic() + 30
    while True:
        md = admin.list_topics(topic, timeout=10).topics.get(topic)
        if md is not None and md.error is None and len(md.partitions) == partitions \
                and all(p.leader >= 0 for p in md.partitions.values()):
            return
        assert time.monotonic() < deadline, f"topic {topic} has no leaders: {md}"
        time.sleep(0.1)


def produce(bootstrap: str, topic: str, first: int) -> None:
    """PER_PHASE records to every partition: key k<i>, value '<partition>:<i>' for i in [first, first+PER_PHASE)."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    for i in range(first, first + PER_PHASE):
        for part in range(PARTITIONS):
            p.produce(topic, key=f"k{i}", value=f"{part}:{i}", partition=part)
    assert p.flush(30) == 0, "records left unsent"


def expected_values(partitions, first: int) -> set[str]:
    return {f"{p}:{i}" for p in partitions for i in range(first, first + PER_PHASE)}


class Member:
    """A librdkafka consumer with group.protocol=consumer, what it consumed, and its assignment."""

    def __init__(self, bootstrap: str, name: str, group: str, topic: str, assignor: str | None):
        conf = {
            "bootstrap.servers": bootstrap,
            "client.id": name,
            "group.id": group,
            "group.protocol": "consumer",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 100,
        }
        if assignor is not None:
            conf["group.remote.assignor"] = assignor
        self.name = name
        self.topic = topic
        self.consumer = Consumer(conf)
        self.consumer.subscribe([topic])
        self.consumed: list[str] = []
        self.closed = False

    def partitions(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    def poll_and_commit(self) -> int:
        """One consume(); every record must be of an assigned partition; commits what it got, synchronously."""
        msgs = self.consumer.consume(num_messages=200, timeout=0.1)
        assigned = self.partitions()
        offsets: dict[int, int] = {}
        for m in msgs:
            assert m.error() is None, f"{self.name}: {m.error()}"
            assert m.partition() in assigned, f"{self.name} got a record of partition {m.partition()}, assigned {assigned}"
            value = m.value().decode()
            assert value == f"{m.partition()}:{m.key().decode()[1:]}", value
            self.consumed.append(value)
            offsets[m.partition()] = m.offset() + 1
        if offsets:
            self.consumer.commit(offsets=[TopicPartition(self.topic, p, o) for p, o in offsets.items()],
                                 asynchronous=False)
        return len(msgs)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.consumer.close()

    def __repr__(self) -> str:
        return f"{self.name}{sorted(self.partitions())}"


def await_split(members: list[Member]) -> list[str]:
    """Polls until the members' assignments are non-empty, disjoint and cover the topic; returns the
    sequence of assignments seen."""
    seen: list[str] = []
    deadline = time.monotonic() + DEADLINE
    while True:
        for m in members:
            assert m.poll_and_commit() == 0, f"{m.name} consumed before anything was produced"
        now = repr(members)
        if not seen or seen[-1] != now:
            seen.append(now)
        parts = [m.partitions() for m in members]
        if all(parts) and sum(map(len, parts)) == PARTITIONS and set().union(*parts) == set(range(PARTITIONS)):
            return seen
        assert time.monotonic() < deadline, f"no split of the partitions after {DEADLINE}s: {seen}"


def settle(members: list[Member], seconds: float = 1.0) -> None:
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        for m in members:
            assert m.poll_and_commit() == 0, f"{m.name}: unexpected extra records"


def committed(member: Member) -> dict[int, int]:
    tps = [TopicPartition(member.topic, p) for p in range(PARTITIONS)]
    return {tp.partition: tp.offset for tp in member.consumer.committed(tps, timeout=30)}


def describe(bootstrap: str, group: str):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.describe_consumer_groups([group], request_timeout=30)[group].result(timeout=30)


def check_description(bootstrap: str, group: str, members: list[Member], assignor: str | None) -> None:
    d = describe(bootstrap, group)
    print(f"described {group}: type {d.type} state {d.state} assignor {d.partition_assignor} members "
          + ", ".join(f"{md.client_id}={sorted(tp.partition for tp in md.assignment.topic_partitions)}"
                      for md in d.members))
    assert d.type == ConsumerGroupType.CONSUMER, d.type
    assert d.state == ConsumerGroupState.STABLE, d.state
    assert not d.is_simple_consumer_group
    if assignor is not None:
        assert d.partition_assignor == assignor
    by_id = {m.consumer.memberid(): m for m in members}
    assert {md.member_id for md in d.members} == set(by_id), (d.members, by_id)
    for md in d.members:
        m = by_id[md.member_id]
        assert md.client_id == m.name
        assert {tp.partition for tp in md.assignment.topic_partitions} == m.partitions(), (md, m)
        if md.target_assignment is not None:
            assert {tp.partition for tp in md.target_assignment.topic_partitions} == m.partitions(), (md, m)


@pytest.mark.parametrize("assignor", [None, "range"], ids=["default-assignor", "range"])
def test_librdkafka_members_split_commit_and_take_over(bootstrap, assignor):
    t0 = time.monotonic()
    topic, group = _name("t"), _name("group")
    create_topic(bootstrap, topic)
    c1 = Member(bootstrap, "c1", group, topic, assignor)
    c2 = Member(bootstrap, "c2", group, topic, assignor)
    try:
        seen = await_split([c1, c2])
        print(f"\n[librdkafka] split after {time.monotonic() - t0:.1f}s via {seen}")
        if assignor == "range":
            for m in (c1, c2):
                ps = sorted(m.partitions())
                assert ps == list(range(ps[0], ps[0] + PARTITIONS // 2)), f"range: {m} not a contiguous half"
        check_description(bootstrap, group, [c1, c2], assignor)

        # phase 1: each member consumes exactly its partitions' records, commits after each poll
        produce(bootstrap, topic, 0)
        deadline = time.monotonic() + DEADLINE
        while len(c1.consumed) + len(c2.consumed) < PARTITIONS * PER_PHASE:
            assert time.monotonic() < deadline, f"phase 1: consumed {len(c1.consumed)} + {len(c2.consumed)}"
            c1.poll_and_commit()
            c2.poll_and_commit()
        settle([c1, c2])
        for m in (c1, c2):
            assert len(m.consumed) == len(set(m.consumed)), f"{m.name} consumed duplicates"
            assert set(m.consumed) == expected_values(m.partitions(), 0), m
        assert committed(c1) == dict.fromkeys(range(PARTITIONS), PER_PHASE)

        # phase 2: records arrive for every partition; c2 leaves without reading them; c1 takes over
        produce(bootstrap, topic, PER_PHASE)
        c1.consumed.clear()
        c2.close()
        t1 = time.monotonic()
        expected = expected_values(range(PARTITIONS), PER_PHASE)
        while len(c1.partitions()) < PARTITIONS or len(c1.consumed) < len(expected):
            assert time.monotonic() < t1 + DEADLINE, f"no takeover: {c1}, {len(c1.consumed)} records"
            c1.poll_and_commit()
        print(f"[librdkafka] takeover in {time.monotonic() - t1:.1f}s")
        settle([c1])
        assert len(c1.consumed) == len(set(c1.consumed)), "c1 consumed duplicates"
        assert set(c1.consumed) == expected
        assert committed(c1) == dict.fromkeys(range(PARTITIONS), 2 * PER_PHASE)
        check_description(bootstrap, group, [c1], assignor)
    finally:
        c1.close()
        c2.close()
    print(f"[librdkafka] total {time.monotonic() - t0:.1f}s")


@pytest.mark.go
@pytest.mark.skipif(GO is None, reason="needs Go 1.21+ (go on PATH or /usr/local/go/bin/go)")
def test_franz_go_members_split_commit_and_take_over(bootstrap):
    """tests/go/kip848_test.go (kgo.ServerSideBalancer with the cooperative-sticky balancer: the server's
    uniform assignor); afterwards the group is an empty CONSUMER group holding the committed offsets."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    t0 = time.monotonic()
    topic, group = _name("go"), _name("go-group")
    create_topic(bootstrap, topic)
    env = {**os.environ, "GOFLAGS": "-mod=mod -buildvcs=false", "KIP848_SEEDS": bootstrap,
           "KIP848_TOPIC": topic, "KIP848_GROUP": group, "KIP848_PARTITIONS": str(PARTITIONS)}
    run = subprocess.run([GO, "test", "-run", "^TestKIP848Consumers$", "-count=1", "-v", "."], cwd=GO_MODULE,
                         env=env, capture_output=True, text=True, timeout=180)
    out = run.stdout + run.stderr
    print(f"\n[franz-go] {time.monotonic() - t0:.1f}s (build included)\n{out[-2000:]}")
    assert run.returncode == 0 and "--- PASS: TestKIP848Consumers" in out, out[-4000:]

    d = describe(bootstrap, group)
    assert d.type == ConsumerGroupType.CONSUMER, d.type
    assert d.state == ConsumerGroupState.EMPTY, d.state
    assert not d.members
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fut = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group]
    offsets = {tp.partition: tp.offset for tp in fut.result(timeout=30).topic_partitions if tp.topic == topic}
    assert offsets == dict.fromkeys(range(PARTITIONS), 2 * PER_PHASE)
