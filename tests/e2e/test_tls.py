"""SSL and SASL_SSL listeners with stock clients, against a broker from the runtime install: mutual
TLS (PKCS12 keystore, PEM truststore, ssl.client.auth=required), a PEM keystore given inline with an
encrypted key, SASL_SSL with SCRAM, and the principal a certificate maps to through
ssl.principal.mapping.rules. Each client produces, consumes, runs a transaction and a group.

franz-go's whole kgo suite over mutual TLS runs in tests/e2e/test_franz_go.py (``tls``)."""

from __future__ import annotations

import asyncio
import shutil
import socket
import ssl
import subprocess
import time
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kafka import KafkaConsumer, KafkaProducer

from broker.testing import KafkaCluster
from tests.support.java_client import run_scenario, scenario_failure
from tests.support.pki import PASSWORD, Pki, make_pki
from tests.support.runtime_env import runtime_python

pytestmark = pytest.mark.timeout(300)
SCRAM_USER, SCRAM_PASSWORD = "tls-user", "tls-secret"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"), clients=("alice", "bob"))


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory, pki: Pki):
    """Three listeners: SSL with mutual TLS (PKCS12 keystore), SASL_SSL with SCRAM (the same
    keystore, no client certificate), and PLAINTEXT for the helper's control calls."""
    config = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(pki.broker.p12),
        "ssl.keystore.password": PASSWORD, "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca_pem),
        "listener.name.ssl.ssl.client.auth": "required",
        "listener.name.ssl.ssl.principal.mapping.rules": "RULE:^CN=([^,]*),.*$/$1/U,DEFAULT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
    }
    with KafkaCluster(python=runtime_python(), config=config, data_dir=tmp_path_factory.mktemp("tls")) as cluster:
        plain = AdminClient({"bootstrap.servers": cluster.bootstrap})
        plain.alter_user_scram_credentials([UserScramCredentialUpsertion(
            SCRAM_USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), SCRAM_PASSWORD.encode())
        ])[SCRAM_USER].result(15)
        ports = cluster.describe()["brokers"][0]["ports"]
        cluster.ssl = f"127.0.0.1:{ports['SSL']}"
        cluster.sasl_ssl = f"127.0.0.1:{ports['SASL_SSL']}"
        yield cluster


def _mtls(kafka: KafkaCluster, pki: Pki, who: str = "alice") -> dict[str, str]:
    identity = pki.clients[who]
    return {"bootstrap.servers": kafka.ssl, "security.protocol": "SSL", "ssl.ca.location": str(pki.ca_pem),
            "ssl.certificate.location": str(identity.cert_pem), "ssl.key.location": str(identity.encrypted_key_pem),
            "ssl.key.password": PASSWORD}


def _scram(kafka: KafkaCluster, pki: Pki) -> dict[str, str]:
    return {"bootstrap.servers": kafka.sasl_ssl, "security.protocol": "SASL_SSL", "ssl.ca.location": str(pki.ca_pem),
            "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": SCRAM_USER, "sasl.password": SCRAM_PASSWORD}


def _delivered(conf: dict[str, str], topic: str) -> bool:
    """Whether one record produced with ``conf`` is acknowledged (its delivery report has no error)."""
    reports: list[object] = []
    producer = Producer({**conf, "message.timeout.ms": 4000})
    producer.produce(topic, b"x", on_delivery=lambda err, _msg: reports.append(err))
    producer.flush(15)
    return len(reports) == 1 and reports[0] is None


def _consume(conf: dict[str, str], topic: str, count: int, isolation: str = "read_committed") -> list[bytes]:
    consumer = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest",
                         "isolation.level": isolation})
    consumer.subscribe([topic])
    out: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(out) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            out.append(msg.value())
    consumer.commit(asynchronous=False)
    committed = consumer.committed([TopicPartition(topic, 0)], 10)
    consumer.close()
    assert committed[0].offset >= count
    return out


@pytest.mark.parametrize("security", ["mtls", "sasl_ssl"])
def test_confluent_kafka_produces_consumes_and_commits_a_transaction(kafka: KafkaCluster, pki: Pki,
                                                                     security: str) -> None:
    conf = _mtls(kafka, pki) if security == "mtls" else _scram(kafka, pki)
    topic = f"tls-confluent-{security}"
    producer = Producer({**conf, "transactional.id": f"tx-{security}"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(100):
        producer.produce(topic, b"%d" % i, partition=0)
    producer.commit_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, b"aborted", partition=0)
    producer.abort_transaction(30)
    got = _consume(conf, topic, 100)
    assert got == [b"%d" % i for i in range(100)]
    entries = kafka.requests.list(api="InitProducerId", transactional_id=f"tx-{security}")
    principal = "User:ALICE" if security == "mtls" else f"User:{SCRAM_USER}"
    assert {e["principal"] for e in entries} == {principal}  # the certificate's CN, upper-cased by the rule


def test_a_client_without_a_certificate_is_refused_when_client_auth_is_required(kafka: KafkaCluster, pki: Pki) -> None:
    assert not _delivered({"bootstrap.servers": kafka.ssl, "security.protocol": "SSL",
                           "ssl.ca.location": str(pki.ca_pem)}, "tls-refused")  # the handshake fails
    context = ssl.create_default_context(cafile=str(pki.ca_pem))
    answered = b""
    try:
        with socket.create_connection(("127.0.0.1", int(kafka.ssl.rsplit(":", 1)[1])), timeout=5) as raw, \
                context.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            s.sendall(b"\x00\x00\x00\x01")
            answered = s.recv(1)
    except (ssl.SSLError, ConnectionError):
        pass  # TLS 1.3: the refusal arrives as an alert after the client's side of the handshake
    assert answered == b""


def test_a_wrong_ca_is_refused_by_the_client(kafka: KafkaCluster, tmp_path: Path, pki: Pki) -> None:
    other = make_pki(tmp_path / "other")
    assert not _delivered({**_mtls(kafka, pki), "ssl.ca.location": str(other.ca_pem)}, "tls-wrong-ca")


def test_kafka_python_over_mutual_tls_with_a_transaction(kafka: KafkaCluster, pki: Pki) -> None:
    alice = pki.clients["alice"]
    tls = dict(security_protocol="SSL", ssl_cafile=str(pki.ca_pem), ssl_certfile=str(alice.cert_pem),
               ssl_keyfile=str(alice.key_pem), ssl_check_hostname=True)
    producer = KafkaProducer(bootstrap_servers=kafka.ssl, acks="all", **tls)
    for i in range(50):
        producer.send("tls-kafka-python", b"%d" % i, partition=0)
    producer.flush(30)
    producer.close()
    transactional = KafkaProducer(bootstrap_servers=kafka.ssl, transactional_id="tls-kp-tx", **tls)
    transactional.init_transactions()
    transactional.begin_transaction()
    transactional.send("tls-kafka-python", b"in a transaction", partition=0)
    transactional.commit_transaction()
    transactional.close()
    consumer = KafkaConsumer("tls-kafka-python", bootstrap_servers=kafka.ssl, group_id="kp", auto_offset_reset="earliest",
                             isolation_level="read_committed", consumer_timeout_ms=10000, **tls)
    got = [m.value for m in consumer]
    consumer.close()
    assert got == [b"%d" % i for i in range(50)] + [b"in a transaction"]


def test_aiokafka_over_sasl_ssl_with_a_transaction(kafka: KafkaCluster, pki: Pki) -> None:
    async def run() -> list[bytes]:
        context = ssl.create_default_context(cafile=str(pki.ca_pem))
        auth = dict(security_protocol="SASL_SSL", ssl_context=context, sasl_mechanism="SCRAM-SHA-512",
                    sasl_plain_username=SCRAM_USER, sasl_plain_password=SCRAM_PASSWORD)
        producer = AIOKafkaProducer(bootstrap_servers=kafka.sasl_ssl, transactional_id="tls-aio-tx", **auth)
        await producer.start()
        try:
            async with producer.transaction():
                for i in range(50):
                    await producer.send_and_wait("tls-aiokafka", b"%d" % i, partition=0)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer("tls-aiokafka", bootstrap_servers=kafka.sasl_ssl, group_id="aio",
                                    auto_offset_reset="earliest", isolation_level="read_committed", **auth)
        await consumer.start()
        out: list[bytes] = []
        try:
            deadline = time.monotonic() + 20
            while len(out) < 50 and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    out += [r.value for r in records]
        finally:
            await consumer.stop()
        return out

    assert asyncio.run(run()) == [b"%d" % i for i in range(50)]


@pytest.mark.skipif(shutil.which("kcat") is None, reason="needs kcat")
def test_kcat_over_mutual_tls(kafka: KafkaCluster, pki: Pki) -> None:
    alice = pki.clients["alice"]
    tls = ["-X", "security.protocol=SSL", "-X", f"ssl.ca.location={pki.ca_pem}",
           "-X", f"ssl.certificate.location={alice.cert_pem}", "-X", f"ssl.key.location={alice.key_pem}"]
    produced = subprocess.run(["kcat", "-b", kafka.ssl, *tls, "-P", "-t", "tls-kcat", "-p", "0"],
                              input=b"one\ntwo\nthree\n", capture_output=True, timeout=30)
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(["kcat", "-b", kafka.ssl, *tls, "-C", "-t", "tls-kcat", "-o", "beginning", "-e", "-q"],
                              capture_output=True, timeout=30)
    assert consumed.stdout.split() == [b"one", b"two", b"three"]


@pytest.mark.java
@pytest.mark.skipif(shutil.which("java") is None or shutil.which("mvn") is None, reason="needs java and mvn")
@pytest.mark.parametrize("security", ["mtls", "sasl_ssl"])
@pytest.mark.parametrize("scenario", ["transactions", "groups"])
def test_the_java_client_over_tls(kafka: KafkaCluster, pki: Pki, tmp_path: Path, security: str,
                                  scenario: str) -> None:
    props = tmp_path / "client.properties"
    alice = pki.clients["alice"]
    if security == "mtls":
        bootstrap = kafka.ssl
        props.write_text(f"security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location={pki.ca_pem}\n"
                         f"ssl.keystore.type=PKCS12\nssl.keystore.location={alice.p12}\n"
                         f"ssl.keystore.password={PASSWORD}\n")
    else:
        bootstrap = kafka.sasl_ssl
        props.write_text(f"security.protocol=SASL_SSL\nssl.truststore.type=PEM\nssl.truststore.location={pki.ca_pem}\n"
                         "sasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config=org.apache.kafka.common.security.scram."
                         f'ScramLoginModule required username="{SCRAM_USER}" password="{SCRAM_PASSWORD}";\n')
    result = run_scenario(scenario, bootstrap, env={"SCENARIO_CLIENT_CONFIG": str(props)})
    assert scenario_failure(result, scenario) is None, scenario_failure(result, scenario)


def test_a_pem_keystore_given_inline_with_an_encrypted_key(tmp_path: Path, pki: Pki) -> None:
    """ssl.keystore.type=PEM with ssl.keystore.certificate.chain and ssl.keystore.key in the
    configuration itself (as Kafka takes them), the key encrypted with ssl.key.password."""
    config = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "listener.name.ssl.ssl.keystore.type": "PEM",
        "listener.name.ssl.ssl.keystore.certificate.chain": pki.broker.cert_pem.read_text(),
        "listener.name.ssl.ssl.keystore.key": pki.broker.encrypted_key_pem.read_text(),
        "listener.name.ssl.ssl.key.password": PASSWORD,
    }
    with KafkaCluster(python=runtime_python(), config=config, data_dir=tmp_path / "inline") as cluster:
        port = cluster.describe()["brokers"][0]["ports"]["SSL"]
        assert _delivered({"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SSL",
                           "ssl.ca.location": str(pki.ca_pem)}, "inline-pem")
        entries = cluster.requests.list(api="Produce")
        assert entries and entries[-1]["principal"] == "User:ANONYMOUS"  # no client certificate asked


def test_a_keystore_that_cannot_be_read_stops_the_start(tmp_path: Path, pki: Pki) -> None:
    done = subprocess.run([runtime_python(), "-m", "broker", "--override", "listeners=SSL://127.0.0.1:0",
                           "--override", "ssl.keystore.type=PKCS12", "--override",
                           f"ssl.keystore.location={pki.broker.p12}", "--override", "ssl.keystore.password=wrong",
                           "--override", f"log.dirs={tmp_path / 'data'}"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 2
    assert "ssl.keystore.location" in done.stderr and "PKCS12" in done.stderr


def test_no_rule_for_the_subject_closes_the_connection(tmp_path: Path, pki: Pki) -> None:
    config = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(pki.broker.p12), "ssl.keystore.password": PASSWORD,
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca_pem), "ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=bob,.*$/bob/",
    }
    with KafkaCluster(python=runtime_python(), config=config, data_dir=tmp_path / "rules") as cluster:
        port = cluster.describe()["brokers"][0]["ports"]["SSL"]
        for who, delivered in (("alice", False), ("bob", True)):
            identity = pki.clients[who]
            assert _delivered({"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SSL",
                               "ssl.ca.location": str(pki.ca_pem), "ssl.certificate.location": str(identity.cert_pem),
                               "ssl.key.location": str(identity.key_pem)}, "rules") is delivered, who
        assert {e["principal"] for e in cluster.requests.list(api="Produce")} == {"User:bob"}
