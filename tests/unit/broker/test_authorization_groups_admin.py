"""Authorization of the group and admin APIs as Apache Kafka 4.3.1 answers it (KafkaApis,
ControllerApis, ConfigHelper, ConfigAdminManager, AuthHelper; /work/notes/authorizer.md §2, §4, §5):
for each handler an authorized principal gets through and an unauthorized one gets exactly Kafka's
error, in Kafka's place and order, existence never leaked.

One broker in this process (its event loop in a thread) with StandardAuthorizer, super.users=User:admin
and a SASL_PLAINTEXT listener with PLAIN users admin, alice and bob; requests go over the wire, each
client authenticated with SaslHandshake v1 + SaslAuthenticate v2. bob is never granted anything;
alice gets ACLs for the span of one test (``grant``); admin (a super user) sets things up.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from broker.broker import Broker
from broker.security.acls import Acl, AclFilter, Operation, PatternType, Permission, ResourceType
from broker.testing import free_port
from protocol.errors import ErrorCode
from protocol.messages import request_class
from tests.differential.wire import WireClient, build
from tests.support.broker_thread import BrokerThread

pytestmark = pytest.mark.timeout(120)

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret" '
        'user_alice="alice-secret" user_bob="bob-secret";')
T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
OMITTED = -2147483648  # Integer.MIN_VALUE: authorized operations not computed
ZERO = uuid.UUID(int=0)
E = ErrorCode


class Cluster:
    def __init__(self, running: BrokerThread, sasl_port: int) -> None:
        self.running = running
        self.bootstrap = f"127.0.0.1:{sasl_port}"
        self._clients: dict[str, WireClient] = {}

    @property
    def broker(self) -> Broker:
        assert self.running.broker is not None
        return self.running.broker

    def client(self, user: str) -> WireClient:
        """A connection authenticated as ``user`` (SASL PLAIN), kept for the module."""
        c = self._clients.get(user)
        if c is None:
            c = WireClient(self.bootstrap, client_id=f"authz-{user}")
            assert c.send(build(request_class(17), 1, mechanism="PLAIN"), 1).error_code == 0
            token = b"\0" + user.encode() + b"\0" + f"{user}-secret".encode()
            assert c.send(build(request_class(36), 2, auth_bytes=token), 2).error_code == 0
            self._clients[user] = c
        return c

    def send(self, user: str, api_key: int, version: int, **data: Any) -> Any:
        return self.client(user).send(build(request_class(api_key), version, **data), version)

    @contextmanager
    def grant(self, *acls: Acl) -> Iterator[None]:
        """``acls`` for the duration of the block (created and deleted on the broker's loop)."""
        authorizer = self.broker.authorizer
        assert authorizer is not None
        assert self.running.call(lambda: authorizer.create(list(acls))) == [None] * len(acls)
        try:
            yield
        finally:
            filters = [AclFilter(a.resource_type, a.name, a.pattern_type, a.principal, a.host, a.operation,
                                 a.permission) for a in acls]
            self.running.call(lambda: authorizer.delete(filters))

    def create_topic(self, name: str, partitions: int = 1) -> uuid.UUID:
        resp = self.send("admin", 19, 7, topics=[dict(name=name, num_partitions=partitions, replication_factor=1,
                                                      assignments=[], configs=[])],
                         timeout_ms=30000, validate_only=False)
        (t,) = resp.topics
        assert t.error_code == 0, t
        return t.topic_id

    def close(self) -> None:
        for c in self._clients.values():
            c.close()


def alice(rtype: ResourceType, name: str, op: Operation, pattern: PatternType = PatternType.LITERAL) -> Acl:
    return Acl(rtype, name, pattern, "User:alice", "*", op, Permission.ALLOW)


def on_cluster(op: Operation) -> Acl:
    return alice(C, "kafka-cluster", op)


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    plain, sasl = free_port(), free_port()
    data: Path = tmp_path_factory.mktemp("authz")
    running = BrokerThread(name="authz-broker", properties={
        "log.dirs": str(data),
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": STANDARD,
        "super.users": "User:admin",
        "group.initial.rebalance.delay.ms": "0",
    }).start_and_wait(60)
    cluster = Cluster(running, sasl)
    try:
        yield cluster
    finally:
        cluster.close()
        running.stop()


# ------------------------------------------------------------------------------------------------
# Classic groups
# ------------------------------------------------------------------------------------------------

def _join(kafka: Cluster, user: str, group: str, version: int = 9) -> Any:
    return kafka.send(user, 11, version, group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000,
                      member_id="", group_instance_id=None, protocol_type="consumer",
                      protocols=[dict(name="range", metadata=b"")], reason=None)


def test_join_group_needs_read_on_the_group(kafka: Cluster) -> None:
    r = _join(kafka, "bob", "jg")
    assert (r.error_code, r.generation_id, r.member_id, r.leader, r.protocol_name, r.members) == \
        (E.GROUP_AUTHORIZATION_FAILED, -1, "", "", None, [])  # v7+: protocol name null
    assert _join(kafka, "bob", "jg", version=6).protocol_name == ""  # before v7: ""
    with kafka.grant(alice(G, "jg", Operation.READ)):
        r = _join(kafka, "alice", "jg")
        assert r.error_code == E.MEMBER_ID_REQUIRED and r.member_id  # into the coordinator
    with kafka.grant(alice(G, "jg", Operation.DESCRIBE)):  # DESCRIBE does not imply READ
        assert _join(kafka, "alice", "jg").error_code == E.GROUP_AUTHORIZATION_FAILED


def test_heartbeat_needs_read_on_the_group(kafka: Cluster) -> None:
    hb = dict(group_id="hb", generation_id=1, member_id="m", group_instance_id=None)
    assert kafka.send("bob", 12, 4, **hb).error_code == E.GROUP_AUTHORIZATION_FAILED
    with kafka.grant(alice(G, "hb", Operation.READ)):
        assert kafka.send("alice", 12, 4, **hb).error_code == E.UNKNOWN_MEMBER_ID  # no such group: the coordinator


def test_leave_group_needs_read_on_the_group(kafka: Cluster) -> None:
    r = kafka.send("bob", 13, 5, group_id="lg", members=[dict(member_id="m", group_instance_id=None, reason=None)])
    assert (r.error_code, r.members) == (E.GROUP_AUTHORIZATION_FAILED, [])
    assert kafka.send("bob", 13, 0, group_id="lg", member_id="m").error_code == E.GROUP_AUTHORIZATION_FAILED
    with kafka.grant(alice(G, "lg", Operation.READ)):
        r = kafka.send("alice", 13, 5, group_id="lg", members=[dict(member_id="m", group_instance_id=None,
                                                                      reason=None)])
        assert r.error_code != E.GROUP_AUTHORIZATION_FAILED


def test_sync_group_checks_the_v5_protocol_fields_then_read_on_the_group(kafka: Cluster) -> None:
    sync = dict(group_id="sg", generation_id=1, member_id="m", group_instance_id=None, assignments=[])
    # the mandatory v5 fields come first, even for a principal without any right
    r = kafka.send("bob", 14, 5, protocol_type=None, protocol_name=None, **sync)
    assert r.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    r = kafka.send("bob", 14, 5, protocol_type="consumer", protocol_name="range", **sync)
    assert (r.error_code, r.assignment) == (E.GROUP_AUTHORIZATION_FAILED, b"")
    with kafka.grant(alice(G, "sg", Operation.READ)):
        r = kafka.send("alice", 14, 5, protocol_type="consumer", protocol_name="range", **sync)
        assert r.error_code == E.UNKNOWN_MEMBER_ID


def _commit(kafka: Cluster, user: str, group: str, topics: list[tuple[str, list[int]]], version: int = 9) -> Any:
    return kafka.send(user, 8, version, group_id=group, generation_id_or_member_epoch=-1, member_id="",
                      group_instance_id=None, retention_time_ms=-1, topics=[
                          dict(name=name, partitions=[dict(partition_index=p, committed_offset=5,
                                                           committed_leader_epoch=-1, committed_metadata="")
                                                      for p in parts]) for name, parts in topics])


def _errors(resp_topics: list[Any]) -> list[tuple[str, list[tuple[int, int]]]]:
    return [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in resp_topics]


def test_offset_commit_group_then_topic_read(kafka: Cluster) -> None:
    kafka.create_topic("oc-ok", 2)
    kafka.create_topic("oc-closed")
    request = [("oc-ok", [0, 1]), ("oc-closed", [0]), ("oc-missing", [0])]
    # no READ on the group: 30 on every partition, whatever the topics
    r = _commit(kafka, "bob", "oc", request)
    assert _errors(r.topics) == [("oc-ok", [(0, 30), (1, 30)]), ("oc-closed", [(0, 30)]), ("oc-missing", [(0, 30)])]
    with kafka.grant(alice(G, "oc", Operation.READ), alice(T, "oc-ok", Operation.READ),
                     alice(T, "oc-missing", Operation.READ)):
        r = _commit(kafka, "alice", "oc", request + [("oc-ok-none", [0])])
        # READ on the topic before its existence: an unknown topic without READ is 29 too
        assert _errors(r.topics) == [("oc-ok", [(0, 0), (1, 0)]), ("oc-closed", [(0, 29)]), ("oc-missing", [(0, 3)]),
                                     ("oc-ok-none", [(0, 29)])]
        # v10 (topic ids): an unknown id is UNKNOWN_TOPIC_ID before any topic check
        ok_id = kafka.broker.metadata.get("oc-ok").topic_id
        closed_id = kafka.broker.metadata.get("oc-closed").topic_id
        r = kafka.send("alice", 8, 10, group_id="oc", generation_id_or_member_epoch=-1, member_id="",
                       group_instance_id=None, topics=[
                           dict(topic_id=t, partitions=[dict(partition_index=0, committed_offset=1,
                                                             committed_leader_epoch=-1, committed_metadata="")])
                           for t in (ok_id, closed_id, uuid.uuid4())])
        assert [[p.error_code for p in t.partitions] for t in r.topics] == [[0], [29], [100]]


def _fetch_v8(kafka: Cluster, user: str, group: str, topics: list[tuple[str, list[int]]] | None) -> Any:
    return kafka.send(user, 9, 8, groups=[dict(group_id=group, topics=None if topics is None else [
        dict(name=n, partition_indexes=ps) for n, ps in topics])], require_stable=False)


def test_offset_fetch_group_describe_by_version(kafka: Cluster) -> None:
    kafka.create_topic("of-a")
    # v1: no top-level error field: 30 on every requested partition, offset -1, metadata ""
    r = kafka.send("bob", 9, 1, group_id="of", topics=[dict(name="of-a", partition_indexes=[0, 1])])
    assert [(t.name, [(p.partition_index, p.committed_offset, p.metadata, p.error_code) for p in t.partitions])
            for t in r.topics] == [("of-a", [(0, -1, "", 30), (1, -1, "", 30)])]
    # v2-7: top-level, no topics
    r = kafka.send("bob", 9, 5, group_id="of", topics=[dict(name="of-a", partition_indexes=[0])])
    assert (r.error_code, r.topics) == (30, [])
    # v8+: the group's own error
    r = _fetch_v8(kafka, "bob", "of", [("of-a", [0])])
    assert [(g.group_id, g.error_code, g.topics) for g in r.groups] == [("of", 30, [])]


def test_offset_fetch_topic_describe(kafka: Cluster) -> None:
    kafka.create_topic("off-a")
    kafka.create_topic("off-b")
    assert {p.error_code for t in _commit(kafka, "admin", "off", [("off-a", [0]), ("off-b", [0])]).topics
            for p in t.partitions} == {0}
    with kafka.grant(alice(G, "off", Operation.DESCRIBE), alice(T, "off-a", Operation.DESCRIBE)):
        # refused topics follow the coordinator's answer, 29 with offset -1, whether they exist or not
        r = _fetch_v8(kafka, "alice", "off", [("off-b", [0]), ("off-missing", [0]), ("off-a", [0])])
        (g,) = r.groups
        assert g.error_code == 0
        assert [(t.name, [(p.committed_offset, p.error_code) for p in t.partitions]) for t in g.topics] == \
            [("off-a", [(5, 0)]), ("off-b", [(-1, 29)]), ("off-missing", [(-1, 29)])]
        # every committed offset: the topics alice may not describe are left out silently
        (g,) = _fetch_v8(kafka, "alice", "off", None).groups
        assert [t.name for t in g.topics] == ["off-a"]
        # v5: the same, top level
        r = kafka.send("alice", 9, 5, group_id="off", topics=[dict(name="off-b", partition_indexes=[0]),
                                                               dict(name="off-a", partition_indexes=[0])])
        assert r.error_code == 0
        assert [(t.name, [p.error_code for p in t.partitions]) for t in r.topics] == [("off-a", [0]), ("off-b", [29])]
        # v10: ids; refused and unknown ids after the coordinator's, in request order
        ids = {n: kafka.broker.metadata.get(n).topic_id for n in ("off-a", "off-b")}
        unknown = uuid.uuid4()
        r = kafka.send("alice", 9, 10, groups=[dict(group_id="off", member_id=None, member_epoch=-1, topics=[
            dict(topic_id=t, partition_indexes=[0]) for t in (unknown, ids["off-b"], ids["off-a"])])],
            require_stable=False)
        (g,) = r.groups
        assert [(t.topic_id, [p.error_code for p in t.partitions]) for t in g.topics] == \
            [(ids["off-a"], [0]), (unknown, [100]), (ids["off-b"], [29])]


def test_describe_groups_refused_first_with_operations_omitted(kafka: Cluster) -> None:
    _commit(kafka, "admin", "dg-ok", [])
    with kafka.grant(alice(G, "dg-ok", Operation.READ)):
        r = kafka.send("alice", 15, 5, groups=["dg-ok", "dg-closed"], include_authorized_operations=True)
        assert [(g.group_id, g.error_code, g.group_state, g.authorized_operations) for g in r.groups] == [
            ("dg-closed", 30, "", None),  # -2147483648 on the wire (kafka-python decodes it None)
            ("dg-ok", 0, "Dead", {3, 8}),  # READ, and DESCRIBE implied by it
        ]
        r = kafka.send("alice", 15, 5, groups=["dg-ok"], include_authorized_operations=False)
        assert r.groups[0].authorized_operations is None
    r = kafka.send("admin", 15, 5, groups=["dg-ok"], include_authorized_operations=True)
    assert r.groups[0].authorized_operations == {3, 6, 8, 10, 11}  # a super user: every group operation
    # v6: an unknown group is GROUP_ID_NOT_FOUND and keeps the omitted value
    with kafka.grant(alice(G, "dg-none", Operation.DESCRIBE)):
        (g,) = kafka.send("alice", 15, 6, groups=["dg-none"], include_authorized_operations=True).groups
        assert (g.error_code, g.authorized_operations) == (E.GROUP_ID_NOT_FOUND, None)


def test_describe_groups_many_refused_first(kafka: Cluster) -> None:
    """A request naming more groups than one slice (the path that encodes in a worker thread)."""
    names = [f"dgm-{'a' if i % 2 else 'b'}-{i}" for i in range(2101)]
    with kafka.grant(alice(G, "dgm-a", Operation.DESCRIBE, PatternType.PREFIXED)):
        r = kafka.send("alice", 15, 5, groups=names, include_authorized_operations=True)
    refused = [n for n in names if n.startswith("dgm-b")]
    assert [g.group_id for g in r.groups] == refused + [n for n in names if n.startswith("dgm-a")]
    assert {(g.error_code, g.authorized_operations is None) for g in r.groups[:len(refused)]} == {(30, True)}
    assert {(g.error_code, frozenset(g.authorized_operations)) for g in r.groups[len(refused):]} == \
        {(0, frozenset({8}))}


def test_list_groups_cluster_describe_or_filtered(kafka: Cluster) -> None:
    for g in ("lg-a", "lg-b"):
        assert _join(kafka, "admin", g, version=3).error_code == 0  # v3: joins at once, a group exists
    assert {g.group_id for g in kafka.send("bob", 16, 4, states_filter=[]).groups} & {"lg-a", "lg-b"} == set()
    r = kafka.send("bob", 16, 4, states_filter=[])
    assert r.error_code == 0  # never an error
    with kafka.grant(alice(G, "lg-a", Operation.DESCRIBE)):
        assert {g.group_id for g in kafka.send("alice", 16, 4, states_filter=[]).groups} == {"lg-a"}
    with kafka.grant(on_cluster(Operation.DESCRIBE)):
        assert {"lg-a", "lg-b"} <= {g.group_id for g in kafka.send("alice", 16, 4, states_filter=[]).groups}


def test_delete_groups_refused_after_the_others_once_each(kafka: Cluster) -> None:
    with kafka.grant(alice(G, "del-ok", Operation.DELETE)):
        r = kafka.send("alice", 42, 2, groups_names=["del-closed", "del-ok", "del-closed"])
        assert [(g.group_id, g.error_code) for g in r.results] == [
            ("del-ok", E.GROUP_ID_NOT_FOUND), ("del-closed", E.GROUP_AUTHORIZATION_FAILED)]
    r = kafka.send("bob", 42, 2, groups_names=["del-ok"])
    assert [(g.group_id, g.error_code) for g in r.results] == [("del-ok", 30)]


def test_offset_delete_group_delete_then_topic_read(kafka: Cluster) -> None:
    kafka.create_topic("od-a")
    kafka.create_topic("od-b")
    _commit(kafka, "admin", "od", [("od-a", [0]), ("od-b", [0])])
    req = dict(group_id="od", topics=[dict(name=n, partitions=[dict(partition_index=0)])
                                      for n in ("od-a", "od-b", "od-missing")])
    r = kafka.send("bob", 47, 0, **req)
    assert (r.error_code, r.topics) == (30, [])
    with kafka.grant(alice(G, "od", Operation.READ)):  # READ is not DELETE
        assert kafka.send("alice", 47, 0, **req).error_code == 30
    with kafka.grant(alice(G, "od", Operation.DELETE), alice(T, "od-a", Operation.READ),
                     alice(T, "od-missing", Operation.READ)):
        r = kafka.send("alice", 47, 0, **req)
        assert r.error_code == 0
        assert _errors(r.topics) == [("od-a", [(0, 0)]), ("od-b", [(0, 29)]), ("od-missing", [(0, 3)])]


# ------------------------------------------------------------------------------------------------
# Consumer groups (KIP-848)
# ------------------------------------------------------------------------------------------------

def _cg_heartbeat(kafka: Cluster, user: str, group: str, names: list[str] | None = None,
                  regex: str | None = None) -> Any:
    return kafka.send(user, 68, 1, group_id=group, member_id=uuid.uuid4().hex[:22], member_epoch=0,
                      instance_id=None, rack_id=None, rebalance_timeout_ms=30000, subscribed_topic_names=names,
                      subscribed_topic_regex=regex, server_assignor=None, topic_partitions=[])


def _assigned(resp: Any) -> set[uuid.UUID]:
    return {t.topic_id for t in resp.assignment.topic_partitions} if resp.assignment is not None else set()


def test_consumer_group_heartbeat_group_read_then_every_subscribed_name(kafka: Cluster) -> None:
    a = kafka.create_topic("cgh-a")
    r = _cg_heartbeat(kafka, "bob", "cgh", ["cgh-a"])
    assert (r.error_code, r.error_message, r.member_id, r.member_epoch, r.assignment) == \
        (E.GROUP_AUTHORIZATION_FAILED, None, None, 0, None)
    with kafka.grant(alice(G, "cgh", Operation.READ)):
        # one name not describable (here one that does not exist): 29 at the top level
        r = _cg_heartbeat(kafka, "alice", "cgh", ["cgh-a", "cgh-nope"])
        assert (r.error_code, r.error_message) == (E.TOPIC_AUTHORIZATION_FAILED, None)
        with kafka.grant(alice(T, "cgh-", Operation.DESCRIBE, PatternType.PREFIXED)):
            r = _cg_heartbeat(kafka, "alice", "cgh", ["cgh-a", "cgh-nope"])
            assert r.error_code == 0 and r.member_epoch > 0
            assert _assigned(r) == {a}


def test_consumer_group_regex_resolves_to_describable_topics_only(kafka: Cluster) -> None:
    a = kafka.create_topic("cgr-a")
    b = kafka.create_topic("cgr-b")
    with kafka.grant(alice(G, "cgr", Operation.READ), alice(T, "cgr-a", Operation.DESCRIBE)):
        r = _cg_heartbeat(kafka, "alice", "cgr", regex="cgr-.*")
        assert r.error_code == 0
        assert _assigned(r) == {a}  # cgr-b left out silently
    r = _cg_heartbeat(kafka, "admin", "cgr-admin", regex="cgr-.*")
    assert _assigned(r) == {a, b}


def test_consumer_group_describe_group_then_assigned_topics(kafka: Cluster) -> None:
    kafka.create_topic("cgd-a")
    kafka.create_topic("cgd-b")
    assert _cg_heartbeat(kafka, "admin", "cgd", ["cgd-a", "cgd-b"]).error_code == 0
    assert _cg_heartbeat(kafka, "admin", "cgd-one", ["cgd-a"]).error_code == 0
    req = dict(group_ids=["cgd", "cgd-one", "cgd-closed"], include_authorized_operations=True)
    r = kafka.send("bob", 69, 1, **req)
    assert [(g.group_id, g.error_code, g.authorized_operations) for g in r.groups] == \
        [(g, 30, OMITTED) for g in req["group_ids"]]
    with kafka.grant(alice(G, "cgd", Operation.DESCRIBE, PatternType.PREFIXED), alice(T, "cgd-a", Operation.DESCRIBE)):
        r = kafka.send("alice", 69, 1, **req)
        assert [(g.group_id, g.error_code) for g in r.groups] == [("cgd", 29), ("cgd-one", 0), ("cgd-closed", 69)]
        replaced = r.groups[0]
        assert (replaced.error_message, replaced.members, replaced.authorized_operations, replaced.group_state) == \
            ("The group has described topic(s) that the client is not authorized to describe.", [], OMITTED, "")
        one = r.groups[1]
        assert one.authorized_operations == 1 << 8  # DESCRIBE only
        assert [m.assignment.topic_partitions[0].topic_name for m in one.members] == ["cgd-a"]
        r = kafka.send("alice", 69, 1, group_ids=["cgd-one"], include_authorized_operations=False)
        assert r.groups[0].authorized_operations == OMITTED


# ------------------------------------------------------------------------------------------------
# Topics
# ------------------------------------------------------------------------------------------------

def _create(kafka: Cluster, user: str, names: list[str], validate_only: bool = False, version: int = 7) -> Any:
    return kafka.send(user, 19, version, topics=[dict(name=n, num_partitions=2, replication_factor=1, assignments=[],
                                                      configs=[]) for n in names],
                      timeout_ms=30000, validate_only=validate_only)


def test_create_topics_create_then_describe_configs(kafka: Cluster) -> None:
    with kafka.grant(alice(T, "ct-a", Operation.CREATE), alice(T, "ct-c", Operation.CREATE),
                     alice(T, "ct-c", Operation.ALTER_CONFIGS)):
        r = _create(kafka, "alice", ["ct-b", "ct-a", "ct-dup", "ct-dup", "ct-c"])
        got = [(t.name, t.error_code, t.error_message, t.topic_config_error_code, t.num_partitions,
                t.replication_factor, len(t.configs) > 0) for t in r.topics]
        assert got == [
            ("ct-a", 0, None, 29, -1, -1, False),  # created, its configs refused (no DESCRIBE_CONFIGS)
            ("ct-c", 0, None, 0, 2, 1, True),  # ALTER_CONFIGS implies DESCRIBE_CONFIGS
            ("ct-dup", 42, "Duplicate topic name.", 0, -1, -1, False),
            ("ct-b", 29, "Authorization failed.", 0, -1, -1, False),  # refused, at the end
        ]
        assert r.topics[0].topic_id != ZERO
        assert kafka.broker.metadata.get("ct-a") is not None and kafka.broker.metadata.get("ct-b") is None
    with kafka.grant(on_cluster(Operation.CREATE)):  # CREATE on the cluster: any topic
        r = _create(kafka, "alice", ["ct-b"], validate_only=True)
        assert [(t.error_code, t.topic_config_error_code, t.num_partitions) for t in r.topics] == [(0, 29, -1)]
    r = _create(kafka, "bob", ["ct-a"])  # exists, but bob may not know: 29, not TOPIC_ALREADY_EXISTS
    assert [(t.name, t.error_code) for t in r.topics] == [("ct-a", 29)]


def test_delete_topics_describe_and_delete(kafka: Cluster) -> None:
    kafka.create_topic("dt-a")
    dt_b = kafka.create_topic("dt-b")
    dt_c = kafka.create_topic("dt-c")

    def by_name(user: str, names: list[str]) -> dict[str, tuple[int, str | None]]:
        r = kafka.send(user, 20, 5, topic_names=names, timeout_ms=30000)
        return {t.name: (t.error_code, t.error_message) for t in r.responses}

    denied = (29, "Topic authorization failed.")
    assert by_name("bob", ["dt-a", "dt-missing"]) == {"dt-a": denied, "dt-missing": denied}
    with kafka.grant(alice(T, "dt-", Operation.DESCRIBE, PatternType.PREFIXED)):
        # describable: existence shows; existing but not deletable: 29
        assert by_name("alice", ["dt-a", "dt-missing"]) == {
            "dt-a": denied, "dt-missing": (3, "This server does not host this topic-partition.")}
        # v6 by id: unknown ids first; not deletable: 29, named only when describable
        r = kafka.send("alice", 20, 6, topics=[dict(name=None, topic_id=dt_b), dict(name=None, topic_id=uuid.uuid4())],
                       timeout_ms=30000)
        assert sorted((t.error_code, t.name) for t in r.responses) == [(29, "dt-b"), (100, None)]
    r = kafka.send("bob", 20, 6, topics=[dict(name=None, topic_id=dt_b)], timeout_ms=30000)
    assert [(t.error_code, t.name, t.topic_id) for t in r.responses] == [(29, None, dt_b)]
    with kafka.grant(alice(T, "dt-a", Operation.DELETE), alice(T, "dt-c", Operation.DELETE)):
        assert by_name("alice", ["dt-a"]) == {"dt-a": (0, None)}
        r = kafka.send("alice", 20, 6, topics=[dict(name=None, topic_id=dt_c)], timeout_ms=30000)
        assert [(t.error_code, t.name) for t in r.responses] == [(0, "dt-c")]
    with kafka.grant(on_cluster(Operation.DELETE)):
        assert by_name("alice", ["dt-b"]) == {"dt-b": (0, None)}


def test_create_partitions_alter_on_the_topic(kafka: Cluster) -> None:
    kafka.create_topic("cp-a")
    kafka.create_topic("cp-b")
    with kafka.grant(alice(T, "cp-a", Operation.ALTER)):
        r = kafka.send("alice", 37, 3, topics=[dict(name=n, count=2, assignments=None)
                                               for n in ("cp-a", "cp-b", "cp-missing")],
                       timeout_ms=30000, validate_only=False)
        # the refused ones first (existence not looked at), no message
        assert [(t.name, t.error_code, t.error_message) for t in r.results] == [
            ("cp-b", 29, None), ("cp-missing", 29, None), ("cp-a", 0, None)]
    assert kafka.broker.metadata.get("cp-a").partitions == 2
    assert kafka.broker.metadata.get("cp-b").partitions == 1


def test_delete_records_delete_on_the_topic(kafka: Cluster) -> None:
    kafka.create_topic("dr-a")
    req = dict(topics=[dict(name=n, partitions=[dict(partition_index=0, offset=0)]) for n in ("dr-a", "dr-missing")],
               timeout_ms=30000)
    r = kafka.send("bob", 21, 2, **req)
    assert [(t.name, [(p.error_code, p.low_watermark) for p in t.partitions]) for t in r.topics] == \
        [("dr-a", [(29, -1)]), ("dr-missing", [(29, -1)])]
    with kafka.grant(alice(T, "dr-", Operation.DELETE, PatternType.PREFIXED)):
        r = kafka.send("alice", 21, 2, **req)
        assert [(t.name, [(p.error_code, p.low_watermark) for p in t.partitions]) for t in r.topics] == \
            [("dr-a", [(0, 0)]), ("dr-missing", [(3, -1)])]


def test_offset_for_leader_epoch_cluster_action_or_topic_describe(kafka: Cluster) -> None:
    kafka.create_topic("ofle-a")
    kafka.create_topic("ofle-b")
    req = dict(replica_id=-1, topics=[dict(topic=n, partitions=[dict(partition=0, current_leader_epoch=-1,
                                                                      leader_epoch=0)])
                                      for n in ("ofle-b", "ofle-a")])

    def answer(user: str) -> list[tuple[str, int, int]]:
        r = kafka.send(user, 23, 4, **req)
        return [(t.topic, t.partitions[0].error_code, t.partitions[0].end_offset) for t in r.topics]

    assert answer("bob") == [("ofle-b", 29, -1), ("ofle-a", 29, -1)]
    with kafka.grant(alice(T, "ofle-a", Operation.DESCRIBE)):
        assert answer("alice") == [("ofle-a", 0, 0), ("ofle-b", 29, -1)]  # the refused ones after
    with kafka.grant(on_cluster(Operation.CLUSTER_ACTION)):
        assert answer("alice") == [("ofle-b", 0, 0), ("ofle-a", 0, 0)]


def test_describe_topic_partitions_describe_and_operations(kafka: Cluster) -> None:
    a = kafka.create_topic("dtp-a")
    kafka.create_topic("dtp-b")

    def describe(user: str, names: list[str]) -> list[tuple[str, int, uuid.UUID | None, int, int]]:
        r = kafka.send(user, 75, 0, topics=[dict(name=n) for n in names], response_partition_limit=2000, cursor=None)
        return [(t.name, t.error_code, t.topic_id, len(t.partitions), t.topic_authorized_operations) for t in r.topics]

    with kafka.grant(alice(T, "dtp-a", Operation.READ), alice(T, "dtp-missing", Operation.DESCRIBE)):
        assert describe("alice", ["dtp-b", "dtp-missing", "dtp-a"]) == [
            ("dtp-a", 0, a, 1, (1 << 3) | (1 << 8)),  # READ and DESCRIBE, always computed
            ("dtp-missing", 3, None, 0, 1 << 8),
            ("dtp-b", 29, None, 0, OMITTED),  # refused, after the others, a zero id (decoded None)
        ]
        every = [t for t in describe("alice", []) if t[0].startswith("dtp-")]
        assert [t[0] for t in every] == ["dtp-a"]  # all topics: the refused ones left out
    assert describe("admin", ["dtp-a"])[0][4] == 3576  # every topic operation


def test_describe_cluster_has_no_gate_only_operations(kafka: Cluster) -> None:
    def ops(user: str, include: bool) -> tuple[int, set[int] | None]:
        r = kafka.send(user, 60, 1, include_cluster_authorized_operations=include, endpoint_type=1)
        return r.error_code, r.authorized_operations

    assert ops("bob", False) == (0, None)
    assert ops("bob", True) == (0, set())  # asked for, DESCRIBE refused: 0
    with kafka.grant(on_cluster(Operation.ALTER)):  # ALTER implies DESCRIBE
        assert ops("alice", True) == (0, {7, 8})
    assert ops("admin", True) == (0, {5, 7, 8, 9, 10, 11, 12})


# ------------------------------------------------------------------------------------------------
# Configs
# ------------------------------------------------------------------------------------------------

def test_describe_configs_refused_after_the_others(kafka: Cluster) -> None:
    kafka.create_topic("dc-a")
    resources = [(2, "dc-b"), (4, "1"), (32, "dc-g"), (2, "dc-a"), (2, "dc-missing")]
    with kafka.grant(alice(T, "dc-a", Operation.DESCRIBE_CONFIGS), alice(T, "dc-missing", Operation.ALTER_CONFIGS)):
        r = kafka.send("alice", 32, 4, resources=[dict(resource_type=t, resource_name=n, configuration_keys=None)
                                                  for t, n in resources],
                       include_synonyms=False, include_documentation=False)
        got = [(x.resource_type, x.resource_name, x.error_code, x.error_message, len(x.configs) > 0)
               for x in r.results]
        assert got == [
            (2, "dc-a", 0, "", True),
            (2, "dc-missing", 3, "Topic dc-missing does not exist", False),  # authorized before existence
            (2, "dc-b", 29, "Topic authorization failed.", False),
            (4, "1", 31, "Cluster authorization failed.", False),
            (32, "dc-g", 30, "Group authorization failed.", False),
        ]
    with kafka.grant(on_cluster(Operation.DESCRIBE_CONFIGS)):
        r = kafka.send("alice", 32, 4, resources=[dict(resource_type=4, resource_name="1", configuration_keys=None)],
                       include_synonyms=False, include_documentation=False)
        assert r.results[0].error_code == 0 and r.results[0].configs


def test_alter_configs_in_request_order(kafka: Cluster) -> None:
    kafka.create_topic("ac-a")
    kafka.create_topic("ac-b")
    resources = [dict(resource_type=2, resource_name="ac-b", configs=[dict(name="retention.ms", value="1000")]),
                 dict(resource_type=4, resource_name="1", configs=[dict(name="log.cleaner.threads", value="2")]),
                 dict(resource_type=32, resource_name="ac-g", configs=[]),
                 dict(resource_type=2, resource_name="ac-a", configs=[dict(name="retention.ms", value="1000")]),
                 # the broker validates a broker resource before the controller authorizes it
                 dict(resource_type=4, resource_name="1", configs=[dict(name="node.id", value="7")])]
    with kafka.grant(alice(T, "ac-a", Operation.ALTER_CONFIGS)):
        r = kafka.send("alice", 33, 2, resources=resources, validate_only=True)
        assert [(x.resource_name, x.error_code, x.error_message) for x in r.responses] == [
            ("ac-b", 29, "Topic authorization failed."),
            ("1", 31, "Cluster authorization failed."),
            ("ac-g", 30, "Group authorization failed."),
            ("ac-a", 0, None),
            ("1", 42, "Cannot update these configs dynamically: [node.id]"),
        ]
    r = kafka.send("bob", 33, 2, resources=[dict(resource_type=2, resource_name="ac-missing", configs=[])],
                   validate_only=True)
    assert r.responses[0].error_code == 29  # before existence


def test_incremental_alter_configs(kafka: Cluster) -> None:
    kafka.create_topic("iac-a")
    op = dict(name="retention.ms", config_operation=0, value="1000")
    resources = [dict(resource_type=2, resource_name="iac-missing", configs=[op]),
                 dict(resource_type=8, resource_name="1", configs=[dict(name="kafka", config_operation=0,
                                                                        value="DEBUG")]),
                 dict(resource_type=4, resource_name="", configs=[dict(name="log.cleaner.threads",
                                                                       config_operation=0, value="2")]),
                 dict(resource_type=32, resource_name="iac-g", configs=[]),
                 dict(resource_type=2, resource_name="iac-a", configs=[op])]
    r = kafka.send("bob", 44, 1, resources=resources, validate_only=True)
    assert [(x.resource_type, x.error_code, x.error_message) for x in r.responses] == [
        (2, 29, "Topic authorization failed."),
        (8, 31, None),  # the broker logger, refused by the broker itself: no message
        (4, 31, "Cluster authorization failed."),
        (32, 30, "Group authorization failed."),
        (2, 29, "Topic authorization failed."),
    ]
    with kafka.grant(alice(T, "iac-", Operation.ALTER_CONFIGS, PatternType.PREFIXED),
                     alice(G, "iac-g", Operation.ALTER_CONFIGS), on_cluster(Operation.ALTER_CONFIGS)):
        r = kafka.send("alice", 44, 1, resources=resources, validate_only=True)
        assert [x.error_code for x in r.responses] == [3, 42, 0, 0, 0]  # past authorization


# ------------------------------------------------------------------------------------------------
# Cluster-level admin
# ------------------------------------------------------------------------------------------------

def test_describe_log_dirs_cluster_describe(kafka: Cluster) -> None:
    r = kafka.send("bob", 35, 4, topics=None)
    assert (r.error_code, r.results) == (31, [])
    assert kafka.send("bob", 35, 1, topics=None).results == []  # v1-2: only the empty list
    with kafka.grant(on_cluster(Operation.DESCRIBE)):
        r = kafka.send("alice", 35, 4, topics=None)
        assert r.error_code == 0 and r.results


def test_client_quotas(kafka: Cluster) -> None:
    r = kafka.send("bob", 48, 1, components=[], strict=False)
    assert (r.error_code, r.error_message, r.entries) == (31, None, None)
    entry = dict(entity=[dict(entity_type="user", entity_name="q-user")],
                 ops=[dict(key="producer_byte_rate", value=1024.0, remove=False)])
    r = kafka.send("bob", 49, 1, entries=[entry], validate_only=False)
    assert [(e.error_code, e.error_message, [(x.entity_type, x.entity_name) for x in e.entity]) for e in r.entries] \
        == [(31, "Cluster authorization failed.", [("user", "q-user")])]
    with kafka.grant(on_cluster(Operation.ALTER_CONFIGS)):  # ALTER_CONFIGS implies DESCRIBE_CONFIGS
        assert kafka.send("alice", 49, 1, entries=[entry], validate_only=False).entries[0].error_code == 0
        r = kafka.send("alice", 48, 1, components=[], strict=False)
        assert r.error_code == 0 and len(r.entries) == 1


def test_scram_credentials(kafka: Cluster) -> None:
    r = kafka.send("bob", 50, 0, users=[dict(name="x"), dict(name="y")])
    assert (r.error_code, r.error_message) == (31, None)
    assert [(u.user, u.error_code) for u in r.results] == [("", 31), ("", 31)]  # names left ""
    upsert = dict(name="zed", mechanism=1, iterations=4096, salt=b"salt", salted_password=b"x" * 32)
    r = kafka.send("bob", 51, 0, deletions=[dict(name="yan", mechanism=1)], upsertions=[upsert, upsert])
    assert [(u.user, u.error_code) for u in r.results] == [("yan", 31), ("zed", 31)]  # distinct, sorted
    assert all("needs ALTER permission" in u.error_message for u in r.results)
    with kafka.grant(on_cluster(Operation.ALTER)):  # ALTER implies DESCRIBE
        r = kafka.send("alice", 51, 0, deletions=[], upsertions=[upsert])
        assert [(u.user, u.error_code) for u in r.results] == [("zed", 0)]
        r = kafka.send("alice", 50, 0, users=[dict(name="zed")])
        assert r.error_code == 0 and r.results[0].credential_infos


def test_update_features_cluster_alter(kafka: Cluster) -> None:
    update = dict(feature="group.version", max_version_level=1, allow_downgrade=False, upgrade_type=1)
    r = kafka.send("bob", 57, 1, timeout_ms=30000, feature_updates=[update], validate_only=True)
    assert (r.error_code, r.results) == (31, [])
    assert "needs ALTER permission" in r.error_message
    r = kafka.send("admin", 57, 1, timeout_ms=30000, feature_updates=[update], validate_only=True)
    assert r.error_code == 0


def test_describe_quorum_cluster_describe(kafka: Cluster) -> None:
    req = dict(topics=[dict(topic_name="__cluster_metadata", partitions=[dict(partition_index=0)])])
    r = kafka.send("bob", 55, 2, **req)
    assert (r.error_code, r.error_message, r.topics, r.nodes) == (31, "Cluster authorization failed.", [], [])
    with kafka.grant(on_cluster(Operation.DESCRIBE)):
        r = kafka.send("alice", 55, 2, **req)
        assert r.error_code == 0 and r.topics


def test_elect_leaders_cluster_alter(kafka: Cluster) -> None:
    kafka.create_topic("el-a")
    parts = [dict(topic="el-a", partitions=[0])]
    r = kafka.send("bob", 43, 0, topic_partitions=parts, timeout_ms=30000)  # v0: per partition only
    (p,) = r.replica_election_results[0].partition_result
    assert p.error_code == 31 and "needs ALTER permission" in p.error_message
    r = kafka.send("bob", 43, 2, election_type=0, topic_partitions=parts, timeout_ms=30000)
    assert r.error_code == 31 and r.replica_election_results[0].partition_result[0].error_code == 31
    r = kafka.send("admin", 43, 2, election_type=0, topic_partitions=parts, timeout_ms=30000)
    assert r.error_code == 0 and r.replica_election_results[0].partition_result[0].error_code == E.ELECTION_NOT_NEEDED


def test_partition_reassignments(kafka: Cluster) -> None:
    kafka.create_topic("pr-a")
    r = kafka.send("bob", 45, 0, timeout_ms=30000, topics=[dict(name="pr-a", partitions=[
        dict(partition_index=0, replicas=[1])])])
    assert r.error_code == 31 and "needs ALTER permission" in r.error_message
    assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in r.responses] == \
        [("pr-a", [(0, 31)])]
    r = kafka.send("bob", 46, 0, timeout_ms=30000, topics=[dict(name="pr-a", partition_indexes=[0, 1])])
    assert r.error_code == 31 and "needs DESCRIBE permission" in r.error_message
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in r.topics] == [("pr-a", [0, 1])]  # echoed
    with kafka.grant(on_cluster(Operation.ALTER)):
        r = kafka.send("alice", 45, 0, timeout_ms=30000, topics=[dict(name="pr-a", partitions=[
            dict(partition_index=0, replicas=[1])])])
        assert r.error_code == 0 and r.responses[0].partitions[0].error_code == 0
        r = kafka.send("alice", 46, 0, timeout_ms=30000, topics=None)
        assert (r.error_code, r.error_message) == (0, None)


def test_list_config_resources_cluster_describe_configs(kafka: Cluster) -> None:
    kafka.create_topic("lcr-a")
    r = kafka.send("bob", 74, 1, resource_types=[])
    assert (r.error_code, r.config_resources) == (31, [])
    assert kafka.send("bob", 74, 0, resource_types=[]).error_code == 31  # every version
    with kafka.grant(on_cluster(Operation.DESCRIBE_CONFIGS)):
        r = kafka.send("alice", 74, 1, resource_types=[2])
        assert r.error_code == 0 and "lcr-a" in {x.resource_name for x in r.config_resources}


def test_plaintext_anonymous_is_refused_by_default(kafka: Cluster) -> None:
    """User:ANONYMOUS (the PLAINTEXT listener) has no rights unless granted: allow.everyone.if.no.acl.found
    is false by default."""
    port = kafka.broker.bound_ports["PLAINTEXT"]
    with WireClient(f"127.0.0.1:{port}") as anonymous:
        r = anonymous.send(build(request_class(16), 4, states_filter=[]), 4)
        assert (r.error_code, r.groups) == (0, [])
        r = anonymous.send(build(request_class(15), 5, groups=["anything"], include_authorized_operations=True), 5)
        assert [(g.group_id, g.error_code) for g in r.groups] == [("anything", 30)]
