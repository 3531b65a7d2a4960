"""SCRAM credentials through librdkafka's AdminClient, surviving a restart (the derived keys:
tests/unit/broker/test_scram_credentials.py). The request-by-request rules
are compared with Apache Kafka in tests/differential/test_scram_credentials.py."""

from __future__ import annotations

from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)


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
