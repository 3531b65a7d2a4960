"""Authorization against Apache Kafka 4.3.1 configured the same way: StandardAuthorizer, an SSL
listener with client certificates (ssl.client.auth=required, the CN as the principal through
ssl.principal.mapping.rules), super.users for the PLAINTEXT listener's ANONYMOUS (inter-broker and
the test's setup) and for User:admin. The same ACLs are created on both with CreateAcls; then the
same requests, sent over TLS as alice (granted some) and as bob (granted nothing), must get the
same answers, API by API: errors and where they are, what is hidden, authorized-operation bits.

Only what is per-cluster is normalised away: node ids, ports, cluster and topic ids, producer ids,
throttle times, free-text messages of cluster-authorization refusals (Kafka's names its
RequestChannel.Request object), and the order of lists that Kafka builds from hash maps.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Callable
from typing import Any

import pytest
from kafka.protocol.admin import (
    CreateAclsRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteAclsRequest,
    DeleteGroupsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    DescribeAclsRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    DescribeGroupsRequest,
    DescribeProducersRequest,
    DescribeTransactionsRequest,
    ListGroupsRequest,
    ListTransactionsRequest,
)
from kafka.protocol.consumer import (
    FetchRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    ListOffsetsRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
)
from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest
from kafka.protocol.producer import ProduceRequest
from kafka.protocol.producer.transaction import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    TxnOffsetCommitRequest,
)

from broker.testing import KafkaCluster
from tests.differential.harness import Target, normalise, record_batch
from tests.differential.wire import WireClient, build
from tests.support.kafka_reference import KafkaReference
from tests.support.pki import PASSWORD, Pki, make_pki
from tests.support.runtime_env import runtime_python

pytestmark = pytest.mark.timeout(300)

TOPICS = ("acl-open", "acl-read", "acl-closed")
STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
# Resource types, pattern types, operations, permissions (Kafka's codes)
TOPIC, GROUP, CLUSTER, TXN = 2, 3, 4, 5
LITERAL, PREFIXED, ANY_PATTERN = 3, 4, 1
ALL, READ, WRITE, DESCRIBE, ANY_OP = 2, 3, 4, 8, 1
ALLOW, ANY_PERM = 3, 1
# alice's grants; bob has none
ACLS = [
    (TOPIC, "acl-open", LITERAL, ALL), (TOPIC, "acl-read", LITERAL, READ), (GROUP, "g-open", LITERAL, READ),
    (TXN, "tx-open", LITERAL, WRITE), (GROUP, "g-pre", PREFIXED, DESCRIBE),
]


def settings(pki: Pki) -> dict[str, object]:
    return {
        "authorizer.class.name": STANDARD,
        "super.users": "User:ANONYMOUS;User:admin",
        "listener.name.ssl.ssl.keystore.type": "PKCS12",
        "listener.name.ssl.ssl.keystore.location": str(pki.broker.p12),
        "listener.name.ssl.ssl.keystore.password": PASSWORD,
        "listener.name.ssl.ssl.truststore.type": "PEM",
        "listener.name.ssl.ssl.truststore.location": str(pki.ca_pem),
        "listener.name.ssl.ssl.client.auth": "required",
        "listener.name.ssl.ssl.principal.mapping.rules": "RULE:^CN=([^,]*),.*$/$1/,DEFAULT",
        "num.partitions": 1, "default.replication.factor": 1, "offsets.topic.replication.factor": 1,
        "transaction.state.log.replication.factor": 1, "transaction.state.log.min.isr": 1,
        "group.initial.rebalance.delay.ms": 0, "auto.create.topics.enable": "false",
    }


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("acl-pki"), clients=("alice", "bob", "admin"))


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory, pki: Pki):
    ref = KafkaReference(extra_props=settings(pki), extra_listeners={"SSL": "SSL"})
    ours = KafkaCluster(python=runtime_python(), data_dir=tmp_path_factory.mktemp("ours-acl"), config={
        **{k: str(v) for k, v in settings(pki).items()},
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0"})
    try:
        ref.start(tmp_path_factory.mktemp("kafka-acl"))
        ours.start()
        ports = ours.describe()["brokers"][0]["ports"]
        pairs = {"kafka": (ref.bootstrap, f"127.0.0.1:{ref.listener_ports['SSL']}"),
                 "ours": (f"127.0.0.1:{ports['PLAINTEXT']}", f"127.0.0.1:{ports['SSL']}")}
        for plain, _ in pairs.values():
            setup(plain)
        yield pairs
    finally:
        ours.stop()
        ref.stop()


def setup(plain: str) -> None:
    """As the super user: the topics (one record each), the coordinators loaded, alice's ACLs."""
    target = Target("setup", plain)
    for topic in TOPICS:
        target.create_topic(topic, 1)
        target.produce(topic, 0, record_batch([b"x"], timestamps=[1_700_000_000_000]))
    target.find_coordinator("g-open", 0)
    target.find_coordinator("tx-open", 1)
    assert target.init_producer_id()[0] == 0  # Kafka's first producer id block is fetched from its controller
    with WireClient(plain) as c:
        r = c.send(build(CreateAclsRequest, 3, creations=[
            dict(resource_type=t, resource_name=n, resource_pattern_type=p, principal="User:alice", host="*",
                 operation=o, permission_type=ALLOW) for t, n, p, o in ACLS]), 3)
        assert [x.error_code for x in r.results] == [0] * len(ACLS)


def tls_for(pki: Pki, who: str) -> ssl.SSLContext:
    identity = pki.clients[who]
    context = ssl.create_default_context(cafile=str(pki.ca_pem))
    context.load_cert_chain(str(identity.cert_pem), str(identity.key_pem))
    return context


def ask(address: str, tls: ssl.SSLContext, request: Any, version: int) -> Any:
    with WireClient(address, tls=tls) as c:
        return c.send(request, version)


DROP = {"node_id", "host", "port", "cluster_id", "controller_id", "brokers", "topic_id", "producer_id",
        "leader_epoch", "current_leader", "log_start_offset", "high_watermark", "last_stable_offset",
        "records", "base_offset", "log_append_time_ms", "timestamp", "offset", "low_watermark",
        "transaction_start_time_ms", "producer_epoch", "member_id", "generation_id", "leader",
        "protocol_name", "assignment", "session_id", "node_endpoints", "preferred_read_replica",
        "last_sequence", "last_timestamp", "coordinator_epoch", "current_txn_start_offset"}


def plain(response: Any) -> Any:
    """The response as comparable data: per-cluster values dropped, lists in a canonical order."""
    def canonical(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: canonical(v) for k, v in x.items()}
        if isinstance(x, list):
            items = [canonical(v) for v in x]
            return sorted(items, key=lambda v: json.dumps(v, sort_keys=True, default=str))
        return x
    return canonical(normalise(response, drop=DROP))


# --- the requests, each as (name, version, builder) ------------------------------------------------

def _produce(version: int) -> Callable[[], Any]:
    return lambda: build(ProduceRequest, version, transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
        dict(name=t, partition_data=[dict(index=0, records=record_batch([b"v"], timestamps=[1_700_000_000_000]))])
        for t in TOPICS])


REQUESTS: list[tuple[str, int, Callable[[], Any]]] = [
    ("Metadata named", 12, lambda: build(MetadataRequest, 12, topics=[dict(name=t) for t in (*TOPICS, "acl-missing")],
                                         allow_auto_topic_creation=False, include_topic_authorized_operations=True)),
    ("Metadata all", 12, lambda: build(MetadataRequest, 12, topics=None, allow_auto_topic_creation=False,
                                       include_topic_authorized_operations=True)),
    ("Metadata v10 cluster ops", 10, lambda: build(MetadataRequest, 10, topics=[dict(name="acl-open")],
                                                   allow_auto_topic_creation=False,
                                                   include_cluster_authorized_operations=True,
                                                   include_topic_authorized_operations=True)),
    ("Produce", 9, _produce(9)),
    ("Fetch", 12, lambda: build(FetchRequest, 12, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                                isolation_level=0, session_id=0, session_epoch=-1, topics=[
                                    dict(topic=t, partitions=[dict(partition=0, current_leader_epoch=-1, fetch_offset=0,
                                                                   last_fetched_epoch=-1, log_start_offset=-1,
                                                                   partition_max_bytes=1 << 20)]) for t in TOPICS],
                                forgotten_topics_data=[], rack_id="")),
    ("ListOffsets", 7, lambda: build(ListOffsetsRequest, 7, replica_id=-1, isolation_level=0, topics=[
        dict(name=t, partitions=[dict(partition_index=0, current_leader_epoch=-1, timestamp=-1)]) for t in TOPICS])),
    ("FindCoordinator groups", 4, lambda: build(FindCoordinatorRequest, 4, key_type=0,
                                                coordinator_keys=["g-open", "g-closed", "g-pre-x"])),
    ("FindCoordinator txns", 4, lambda: build(FindCoordinatorRequest, 4, key_type=1, coordinator_keys=["tx-open", "tx-closed"])),
    ("FindCoordinator v3", 3, lambda: build(FindCoordinatorRequest, 3, key="g-closed", key_type=0)),
    ("InitProducerId idempotent", 4, lambda: build(InitProducerIdRequest, 4, transactional_id=None,
                                                   transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1)),
    ("InitProducerId closed txn", 4, lambda: build(InitProducerIdRequest, 4, transactional_id="tx-closed",
                                                   transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1)),
    ("AddPartitionsToTxn closed", 3, lambda: build(
        AddPartitionsToTxnRequest, 3, v3_and_below_transactional_id="tx-closed", v3_and_below_producer_id=1,
        v3_and_below_producer_epoch=0, v3_and_below_topics=[dict(name=t, partitions=[0]) for t in TOPICS])),
    ("AddPartitionsToTxn open", 3, lambda: build(
        AddPartitionsToTxnRequest, 3, v3_and_below_transactional_id="tx-open", v3_and_below_producer_id=1,
        v3_and_below_producer_epoch=0, v3_and_below_topics=[dict(name=t, partitions=[0]) for t in TOPICS])),
    ("AddOffsetsToTxn", 3, lambda: build(AddOffsetsToTxnRequest, 3, transactional_id="tx-open", producer_id=1,
                                         producer_epoch=0, group_id="g-closed")),
    ("EndTxn closed", 3, lambda: build(EndTxnRequest, 3, transactional_id="tx-closed", producer_id=1, producer_epoch=0,
                                       committed=True)),
    ("TxnOffsetCommit", 3, lambda: build(
        TxnOffsetCommitRequest, 3, transactional_id="tx-open", group_id="g-closed", producer_id=1, producer_epoch=0,
        generation_id=-1, member_id="", group_instance_id=None,
        topics=[dict(name="acl-open", partitions=[dict(partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                                                       committed_metadata="")])])),
    ("OffsetCommit", 8, lambda: build(OffsetCommitRequest, 8, group_id="g-closed", generation_id_or_member_epoch=-1,
                                      member_id="", group_instance_id=None, topics=[dict(name="acl-open", partitions=[
                                          dict(partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                                               committed_metadata="")])])),
    ("OffsetFetch", 8, lambda: build(OffsetFetchRequest, 8, groups=[
        dict(group_id=g, topics=[dict(name=t, partition_indexes=[0]) for t in TOPICS]) for g in ("g-open", "g-closed")],
        require_stable=False)),
    ("JoinGroup", 7, lambda: build(JoinGroupRequest, 7, group_id="g-closed", session_timeout_ms=10000,
                                   rebalance_timeout_ms=10000, member_id="", group_instance_id=None,
                                   protocol_type="consumer", protocols=[dict(name="range", metadata=b"")])),
    ("Heartbeat", 4, lambda: build(HeartbeatRequest, 4, group_id="g-closed", generation_id=1, member_id="m",
                                   group_instance_id=None)),
    ("DescribeGroups", 5, lambda: build(DescribeGroupsRequest, 5, groups=["g-open", "g-closed", "g-pre-1"],
                                        include_authorized_operations=True)),
    ("ListGroups", 4, lambda: build(ListGroupsRequest, 4, states_filter=[])),
    ("DeleteGroups", 2, lambda: build(DeleteGroupsRequest, 2, groups_names=["g-closed", "g-open"])),
    ("OffsetDelete", 0, lambda: build(OffsetDeleteRequest, 0, group_id="g-closed", topics=[
        dict(name="acl-open", partitions=[dict(partition_index=0)])])),
    ("CreateTopics", 7, lambda: build(CreateTopicsRequest, 7, topics=[
        dict(name=n, num_partitions=1, replication_factor=1, assignments=[], configs=[]) for n in ("acl-new-a", "acl-new-b")],
        timeout_ms=10000, validate_only=True)),
    ("DeleteTopics", 6, lambda: build(DeleteTopicsRequest, 6, topics=[dict(name=n) for n in ("acl-closed", "acl-gone")],
                                      timeout_ms=10000)),
    ("CreatePartitions", 3, lambda: build(CreatePartitionsRequest, 3, topics=[
        dict(name=t, count=1, assignments=None) for t in TOPICS], timeout_ms=10000, validate_only=True)),
    ("DeleteRecords", 2, lambda: build(DeleteRecordsRequest, 2, topics=[
        dict(name="acl-closed", partitions=[dict(partition_index=0, offset=0)])], timeout_ms=10000)),
    ("DescribeConfigs", 4, lambda: build(DescribeConfigsRequest, 4, resources=[
        dict(resource_type=2, resource_name=t, configuration_keys=["cleanup.policy"]) for t in TOPICS]
        + [dict(resource_type=4, resource_name="1", configuration_keys=["num.io.threads"])],
        include_synonyms=False, include_documentation=False)),
    ("DescribeCluster", 1, lambda: build(DescribeClusterRequest, 1, include_cluster_authorized_operations=True,
                                         endpoint_type=1)),
    ("DescribeProducers", 0, lambda: build(DescribeProducersRequest, 0, topics=[
        dict(name=t, partition_indexes=[0]) for t in TOPICS])),
    ("DescribeTransactions", 0, lambda: build(DescribeTransactionsRequest, 0, transactional_ids=["tx-open", "tx-closed"])),
    ("ListTransactions", 1, lambda: build(ListTransactionsRequest, 1, state_filters=[], producer_id_filters=[],
                                          duration_filter=-1)),
    ("DescribeAcls", 3, lambda: build(DescribeAclsRequest, 3, resource_type_filter=1, resource_name_filter=None,
                                      pattern_type_filter=ANY_PATTERN, principal_filter=None, host_filter=None,
                                      operation=ANY_OP, permission_type=ANY_PERM)),
    ("CreateAcls", 3, lambda: build(CreateAclsRequest, 3, creations=[dict(
        resource_type=TOPIC, resource_name="x", resource_pattern_type=LITERAL, principal="User:bob", host="*",
        operation=READ, permission_type=ALLOW)])),
    ("DeleteAcls", 3, lambda: build(DeleteAclsRequest, 3, filters=[dict(
        resource_type_filter=1, resource_name_filter=None, pattern_type_filter=ANY_PATTERN, principal_filter=None,
        host_filter=None, operation=ANY_OP, permission_type=ANY_PERM)])),
]


@pytest.mark.parametrize("who", ["alice", "bob"])
@pytest.mark.parametrize(("name", "version", "request_of"), REQUESTS, ids=[r[0] for r in REQUESTS])
def test_the_same_answer_as_kafka(clusters, pki: Pki, who: str, name: str, version: int,
                                  request_of: Callable[[], Any]) -> None:
    tls = tls_for(pki, who)
    answers = {}
    for broker, (_, secure) in clusters.items():
        answers[broker] = plain(ask(secure, tls, request_of(), version))
    assert answers["ours"] == answers["kafka"], f"{name} as {who}"


def test_acls_created_the_same_way_are_described_the_same_way(clusters) -> None:
    described = {}
    for broker, (plain_address, _) in clusters.items():
        with WireClient(plain_address) as c:
            r = c.send(build(DescribeAclsRequest, 3, resource_type_filter=1, resource_name_filter=None,
                             pattern_type_filter=ANY_PATTERN, principal_filter="User:alice", host_filter=None,
                             operation=ANY_OP, permission_type=ANY_PERM), 3)
        described[broker] = plain(r)
    assert described["ours"] == described["kafka"]
    assert len(described["kafka"]["resources"]) == len(ACLS)


def test_a_super_user_is_never_refused(clusters, pki: Pki) -> None:
    tls = tls_for(pki, "admin")
    for broker, (_, secure) in clusters.items():
        r = ask(secure, tls, build(DescribeAclsRequest, 3, resource_type_filter=1, resource_name_filter=None,
                                   pattern_type_filter=ANY_PATTERN, principal_filter=None, host_filter=None,
                                   operation=ANY_OP, permission_type=ANY_PERM), 3)
        assert r.error_code == 0, broker
