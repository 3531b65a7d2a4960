"""segmentio/kafka-go's own ACL tests (TestClientCreateACLs, TestClientDescribeACLs,
TestClientDeleteACLs of the version in tests/go/go.mod) against our broker with the authorizer on:
without one they fail with SECURITY_DISABLED, as against a Kafka without an authorizer. Their
client dials localhost:9092, so the broker listens there (the port must be free)."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest

from tests.e2e.test_franz_go import GO, _go
from tests.support.broker_process import BrokerProcess

KAFKA_GO = "github.com/segmentio/kafka-go"
ACL_TESTS = ("TestClientCreateACLs", "TestClientDescribeACLs", "TestClientDeleteACLs")

pytestmark = [pytest.mark.go, pytest.mark.skipif(GO is None, reason="needs Go 1.21+")]


def test_kafka_go_acl_tests(tmp_path: Path) -> None:
    binary = tmp_path / "kafka-go.test"
    built = _go("test", "-c", "-o", str(binary), KAFKA_GO)
    assert built.returncode == 0, built.stderr
    package_dir = Path(_go("list", "-f", "{{.Dir}}", KAFKA_GO).stdout.strip())
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", 9092))
        except OSError:
            pytest.fail("kafka-go's tests dial localhost:9092, which is taken on this machine")
    broker = BrokerProcess(tmp_path / "data", port=9092, overrides={
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS"}).start()
    try:
        run = subprocess.run([str(binary), "-test.v", "-test.count=1", f"-test.run=^({'|'.join(ACL_TESTS)})$"],
                             cwd=package_dir, env={"KAFKA_VERSION": "3.9.0", "PATH": "/usr/bin:/bin"},
                             capture_output=True, text=True, timeout=120)
    finally:
        assert broker.stop() == 0
    passed = {line.split()[2] for line in run.stdout.splitlines() if line.startswith("--- PASS")}
    assert passed == set(ACL_TESTS), run.stdout[-3000:]
