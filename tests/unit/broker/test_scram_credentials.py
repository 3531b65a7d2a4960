"""broker.cluster.scram_credentials: the keys Kafka derives (checked against RFC 7677's SCRAM-SHA-256
exchange) and the alter rules, without a broker."""

from __future__ import annotations

import base64
import hashlib
import hmac
from types import SimpleNamespace as Ns

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
