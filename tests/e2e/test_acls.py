"""The authorizer as users drive it: Kafka's own ``kafka-acls.sh`` (AclCommand from the 4.3.1
tools jar) adds, lists and removes ACLs on our broker; the Java AdminClient and confluent-kafka
create, describe and delete them; and a transactional producer without WRITE on its
transactional id gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as on Apache Kafka."""

from __future__ import annotations

import shutil

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from broker.testing import KafkaCluster
from tests.support.kafka_reference import KafkaReference
from tests.support.pki import PASSWORD, Pki, make_pki
from tests.support.runtime_env import runtime_python

pytestmark = pytest.mark.timeout(300)
STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("acl-e2e-pki"), clients=("alice", "bob"))


def secured(pki: Pki) -> dict[str, str]:
    return {"authorizer.class.name": STANDARD, "super.users": "User:ANONYMOUS",
            "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
            "listener.name.ssl.ssl.keystore.type": "PKCS12", "listener.name.ssl.ssl.keystore.location": str(pki.broker.p12),
            "listener.name.ssl.ssl.keystore.password": PASSWORD, "listener.name.ssl.ssl.truststore.type": "PEM",
            "listener.name.ssl.ssl.truststore.location": str(pki.ca_pem), "listener.name.ssl.ssl.client.auth": "required",
            "listener.name.ssl.ssl.principal.mapping.rules": "RULE:^CN=([^,]*),.*$/$1/,DEFAULT"}


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory, pki: Pki):
    with KafkaCluster(python=runtime_python(), data_dir=tmp_path_factory.mktemp("acl-e2e"), config=secured(pki)) as cluster:
        ports = cluster.describe()["brokers"][0]["ports"]
        cluster.plain, cluster.ssl = f"127.0.0.1:{ports['PLAINTEXT']}", f"127.0.0.1:{ports['SSL']}"
        yield cluster


def as_user(kafka: KafkaCluster, pki: Pki, who: str) -> dict[str, str]:
    identity = pki.clients[who]
    return {"bootstrap.servers": kafka.ssl, "security.protocol": "SSL", "ssl.ca.location": str(pki.ca_pem),
            "ssl.certificate.location": str(identity.cert_pem), "ssl.key.location": str(identity.key_pem)}


@pytest.mark.java
@pytest.mark.skipif(shutil.which("java") is None or shutil.which("mvn") is None, reason="needs java and mvn")
def test_kafka_acls_sh_adds_lists_and_removes(kafka: KafkaCluster) -> None:
    ref = KafkaReference()

    def acls(*args: str) -> str:
        done = ref.run_tool("org.apache.kafka.tools.AclCommand", ["--bootstrap-server", kafka.plain, *args])
        assert done.returncode == 0, done.stderr
        return done.stdout

    acls("--add", "--allow-principal", "User:alice", "--operation", "Read", "--operation", "Describe",
         "--topic", "orders", "--group", "billing")
    acls("--add", "--deny-principal", "User:bob", "--operation", "All", "--topic", "orders-", "--resource-pattern-type",
         "prefixed")
    listed = acls("--list", "--topic", "orders")
    assert "User:alice" in listed and "READ" in listed and "DESCRIBE" in listed
    assert "orders-" not in listed  # --list of a literal name shows that pattern only
    matching = acls("--list", "--topic", "orders-eu", "--resource-pattern-type", "match")
    assert "User:bob" in matching and "DENY" in matching
    acls("--remove", "--force", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "orders")
    after = acls("--list", "--topic", "orders")
    assert "READ" not in after and "DESCRIBE" in after


def test_confluent_admin_creates_describes_and_deletes(kafka: KafkaCluster) -> None:
    admin = AdminClient({"bootstrap.servers": kafka.plain})
    binding = AclBinding(ResourceType.TOPIC, "payments", ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.WRITE, AclPermissionType.ALLOW)
    for future in admin.create_acls([binding]).values():
        future.result(15)
    found = admin.describe_acls(AclBindingFilter(ResourceType.TOPIC, "payments", ResourcePatternType.ANY, None, None,
                                                 AclOperation.ANY, AclPermissionType.ANY)).result(15)
    assert found == [binding]
    deleted = [f.result(15) for f in admin.delete_acls([AclBindingFilter(
        ResourceType.TOPIC, "payments", ResourcePatternType.LITERAL, None, None, AclOperation.ANY,
        AclPermissionType.ANY)]).values()]
    assert deleted == [[binding]]


def test_a_transactional_producer_without_write_on_its_id_is_refused(kafka: KafkaCluster, pki: Pki) -> None:
    admin = AdminClient({"bootstrap.servers": kafka.plain})
    admin.create_topics([NewTopic("txn-topic", 1, 1)])["txn-topic"].result(15)  # alice may not create it
    for future in admin.create_acls([
        AclBinding(ResourceType.TOPIC, "txn-topic", ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.WRITE,
                   AclPermissionType.ALLOW),
        AclBinding(ResourceType.TRANSACTIONAL_ID, "alice-", ResourcePatternType.PREFIXED, "User:alice", "*",
                   AclOperation.WRITE, AclPermissionType.ALLOW),
    ]).values():
        future.result(15)
    allowed = Producer({**as_user(kafka, pki, "alice"), "transactional.id": "alice-1"})
    allowed.init_transactions(20)
    allowed.begin_transaction()
    allowed.produce("txn-topic", b"ok")
    allowed.commit_transaction(20)
    refused = Producer({**as_user(kafka, pki, "alice"), "transactional.id": "someone-else"})
    with pytest.raises(KafkaException) as e:
        refused.init_transactions(20)
    assert e.value.args[0].name() == "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
    assert e.value.args[0].fatal()
    # refused where Kafka refuses it: finding the coordinator already needs DESCRIBE on the id
    asked = kafka.requests.list(transactional_id="someone-else")
    assert asked and {(r["api"], r["error"]) for r in asked} == {("FindCoordinator", "TRANSACTIONAL_ID_AUTHORIZATION_FAILED")}
    assert {r["principal"] for r in asked} == {"User:alice"}
