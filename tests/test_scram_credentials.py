"""SCRAM credentials: the keys Kafka derives (checked against RFC 7677's SCRAM-SHA-256 exchange) and
the admin APIs through librdkafka's AdminClient, surviving a restart. The request-by-request rules
are compared with Apache Kafka in tests/differential/test_scram_credentials.py."""

from __future__ import annotations

import base64
import hashlib
import hmac
from types import SimpleNamespace as Ns

from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from broker.cluster import scram_credentials as sc


def test_derived_keys_complete_rfc_7677_exchange() -> None:
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    salted = hashlib.pbkdf2_hmac("sha256", b"pencil", salt, 4096)
    cred = sc.derive(1, salt, salted, 4096)
    auth = (b"n=user,r=rOprNGfwEbeRWgbNEkqO,"
            b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,"
            b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    # the server proves itself with ServerKey ...
    assert base64.b64encode(hmac.new(cred.server_key, auth, "sha256").digest()) == \
        b"6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    # ... and checks the client's proof with StoredKey alone
    proof = base64.b64decode("dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    signature = hmac.new(cred.stored_key, auth, "sha256").digest()
    client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
    assert hashlib.sha256(client_key).digest() == cred.stored_key


def test_alter_rules_without_a_broker() -> None:
    up = [Ns(name="a", mechanism=2, iterations=4096, salt=b"s", salted_password=b"p"),
          Ns(name="b", mechanism=1, iterations=4095, salt=b"s", salted_password=b"p")]
    store, results = sc.alter({}, [Ns(name="a", mechanism=1)], up)
    # "a" was named twice (a deletion of a missing credential is an error first, which wins)
    assert sorted(results) == [("a", 91, "Attempt to delete a user credential that does not exist"),
                               ("b", 93, "Too few iterations")]
    assert store == {}
    store, results = sc.alter({}, [], up[:1])
    assert results == [("a", 0, None)] and list(store["a"]) == [2] and store["a"][2].iterations == 4096
    assert sc.describe(store, []) == [("a", 0, "", [(2, 4096)])]
    store, results = sc.alter(store, [Ns(name="a", mechanism=2)], [])
    assert results == [("a", 0, None)] and store == {}
    # an empty salted password is no key at all (Kafka: an unexpected error, nothing stored)
    store, results = sc.alter({}, [], [Ns(name="c", mechanism=1, iterations=4096, salt=b"s", salted_password=b"")])
    assert results == [("c", -1, None)] and store == {}


def test_admin_client_credentials_survive_restart(fresh_broker) -> None:
    b = fresh_broker.start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    futures = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), b"pw"),
        UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"pw"),
    ])
    for f in futures.values():
        f.result(15)
    del admin
    assert b.stop() == 0
    b.start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    described = admin.describe_user_scram_credentials(["alice", "bob"])
    alice, bob = described["alice"].result(15), described["bob"].result(15)
    assert [(i.mechanism, i.iterations) for i in alice.scram_credential_infos] == [(ScramMechanism.SCRAM_SHA_256, 8192)]
    assert [(i.mechanism, i.iterations) for i in bob.scram_credential_infos] == [(ScramMechanism.SCRAM_SHA_512, 4096)]
    admin.alter_user_scram_credentials([UserScramCredentialDeletion("alice", ScramMechanism.SCRAM_SHA_256)])[
        "alice"].result(15)
    missing = admin.describe_user_scram_credentials(["alice"])["alice"]
    try:
        missing.result(15)
        raise AssertionError("alice should be gone")
    except Exception as e:  # noqa: BLE001 - KafkaException carrying RESOURCE_NOT_FOUND
        assert "RESOURCE_NOT_FOUND" in str(e) or "does not exist" in str(e), e
