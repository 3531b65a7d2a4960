"""SASL_PLAINTEXT listeners with stock clients: PLAIN users from the listener's JAAS config, SCRAM
users created with AlterUserScramCredentials, wrong passwords refused, nothing but ApiVersions and
the SASL APIs before authenticating, and the SASL user as the quota principal."""

from __future__ import annotations

import socket
import struct
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kafka import KafkaConsumer, KafkaProducer

from broker.cluster.scram_credentials import derive
from broker.net.sasl import AuthenticationFailed, PlainServer, ScramServer, plain_users
from tests.support.broker_process import BrokerProcess, free_port

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory):
    sasl_port = free_port()
    b = BrokerProcess(tmp_path_factory.mktemp("sasl") / "data", overrides={
        "listeners": "PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:" + str(sasl_port),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
    })
    b.overrides["listeners"] = b.overrides["listeners"].format(port=b.port)
    b.start()
    b.sasl_bootstrap = f"127.0.0.1:{sasl_port}"
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"bob-secret"),
        UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"carol-pw"),
    ])["bob"].result(15)
    time.sleep(0.2)
    yield b
    b.stop()


def _conf(b, mechanism: str, user: str, password: str) -> dict:
    return {"bootstrap.servers": b.sasl_bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}


def _round_trip(conf: dict, topic: str) -> list[bytes]:
    p = Producer({**conf, "acks": "all"})
    for i in range(5):
        p.produce(topic, value=f"v{i}".encode())
    assert p.flush(15) == 0
    c = Consumer({**conf, "group.id": f"g-{uuid.uuid4().hex[:8]}", "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < 5 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.close()
    return got


@pytest.mark.parametrize("mechanism,user,password", [
    ("PLAIN", "alice", "alice-secret"),
    ("SCRAM-SHA-256", "bob", "bob-secret"),
    ("SCRAM-SHA-512", "carol", "carol-pw"),
])
def test_librdkafka_produces_and_consumes_over_sasl(sasl_broker, mechanism, user, password):
    topic = f"sasl-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": sasl_broker.bootstrap})  # must outlive the future
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    assert _round_trip(_conf(sasl_broker, mechanism, user, password), topic) == [f"v{i}".encode() for i in range(5)]


@pytest.mark.parametrize("mechanism,user,password", [
    ("PLAIN", "alice", "wrong"), ("PLAIN", "mallory", "x"), ("SCRAM-SHA-256", "bob", "wrong"),
    ("SCRAM-SHA-512", "bob", "bob-secret"),  # bob has no SHA-512 credential
])
def test_wrong_credentials_are_refused(sasl_broker, mechanism, user, password):
    admin = AdminClient({**_conf(sasl_broker, mechanism, user, password), "socket.timeout.ms": 2000})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=3)


def test_kafka_python_plain_and_scram(sasl_broker):
    topic = f"sasl-kp-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": sasl_broker.bootstrap})  # must outlive the future
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    for mechanism, user, password in (("PLAIN", "alice", "alice-secret"), ("SCRAM-SHA-256", "bob", "bob-secret")):
        kw = dict(bootstrap_servers=sasl_broker.sasl_bootstrap, security_protocol="SASL_PLAINTEXT",
                  sasl_mechanism=mechanism, sasl_plain_username=user, sasl_plain_password=password)
        p = KafkaProducer(**kw)
        p.send(topic, f"{mechanism}".encode()).get(15)
        p.close()
    c = KafkaConsumer(topic, bootstrap_servers=sasl_broker.sasl_bootstrap, security_protocol="SASL_PLAINTEXT",
                      sasl_mechanism="PLAIN", sasl_plain_username="alice", sasl_plain_password="alice-secret",
                      auto_offset_reset="earliest", consumer_timeout_ms=10000)
    assert [m.value for m in c][:2] == [b"PLAIN", b"SCRAM-SHA-256"]
    c.close()


def _frame(api_key: int, version: int, body: bytes) -> bytes:
    header = struct.pack(">hhih", api_key, version, 1, 1) + b"x"
    return struct.pack(">i", len(header) + len(body)) + header + body


def test_requests_before_authentication_close_the_connection(sasl_broker):
    host, port = sasl_broker.sasl_bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(_frame(3, 1, struct.pack(">i", -1)))  # Metadata v1, all topics
        assert s.recv(100) == b""  # closed, no answer
    # the PLAINTEXT listener answers a handshake with ILLEGAL_SASL_STATE
    with socket.create_connection(("127.0.0.1", sasl_broker.port), timeout=5) as s:
        s.sendall(_frame(17, 1, struct.pack(">h", 5) + b"PLAIN"))
        size = struct.unpack(">i", s.recv(4))[0]
        body = s.recv(size)
        assert struct.unpack(">h", body[4:6])[0] == 34


def test_unsupported_mechanism_is_answered_then_closed(sasl_broker):
    host, port = sasl_broker.sasl_bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(_frame(17, 1, struct.pack(">h", 6) + b"GSSAPI"))
        size = struct.unpack(">i", s.recv(4))[0]
        body = b""
        while len(body) < size:
            body += s.recv(size - len(body))
        assert struct.unpack(">h", body[4:6])[0] == 33  # UNSUPPORTED_SASL_MECHANISM, mechanisms listed
        assert b"SCRAM-SHA-256" in body
        assert s.recv(100) == b""


def test_sasl_servers_unit():
    assert plain_users(JAAS) == {"admin": "admin-secret", "alice": "alice-secret"}
    plain = PlainServer({"alice": "pw"})
    assert plain.evaluate(b"\x00alice\x00pw") == b"" and plain.complete and plain.user == "alice"
    cred = derive(1, b"salt", __import__("hashlib").pbkdf2_hmac("sha256", b"pw", b"salt", 4096), 4096)
    scram = ScramServer("SCRAM-SHA-256", lambda user, mech: cred if (user, mech) == ("bob", 1) else None)
    first = scram.evaluate(b"n,,n=bob,r=abc").decode()
    assert first.startswith("r=abc") and ",i=4096" in first
    unknown = ScramServer("SCRAM-SHA-256", lambda user, mech: None)
    with pytest.raises(AuthenticationFailed) as e:
        unknown.evaluate(b"n,,n=nobody,r=abc")
    # Kafka's one message: an unknown user looks like a wrong password
    assert str(e.value) == ("Authentication failed during authentication due to invalid credentials with SASL "
                            "mechanism SCRAM-SHA-256")
