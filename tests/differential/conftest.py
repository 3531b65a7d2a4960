"""One Apache Kafka (the reference, jars cached by tests/support/kafka_reference.py) and one broker of
ours per test session; every differential test sends the same requests to both.

Both brokers get the same settings (Kafka's server.properties from KafkaReference, the same values as
overrides for ours), so defaults, auto-creation and config sources are comparable. Skipped when java
or mvn is missing (the reference needs them).
"""

from __future__ import annotations

import shutil
import time

import pytest

from tests.differential.harness import Pair, Target
from tests.support.broker_process import BrokerProcess

HAVE_JAVA = shutil.which("java") is not None and shutil.which("mvn") is not None

# The settings KafkaReference.server_properties() gives Apache Kafka, passed to ours as overrides.
SHARED_SETTINGS = {
    "num.partitions": "1",
    "default.replication.factor": "1",
    "min.insync.replicas": "1",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    "auto.create.topics.enable": "true",
    "delete.topic.enable": "true",
    "log.retention.check.interval.ms": "3600000",
    "log.initial.task.delay.ms": "3600000",
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "tests/differential/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.java)
            if not HAVE_JAVA:
                item.add_marker(pytest.mark.skip(reason="needs java and mvn on PATH (Apache Kafka reference)"))


@pytest.fixture(scope="session")
def kafka_target(tmp_path_factory):
    if not HAVE_JAVA:
        pytest.skip("needs java and mvn on PATH")
    from tests.support.kafka_reference import KafkaReference

    ref = KafkaReference()
    try:
        ref.start(tmp_path_factory.mktemp("differential-kafka"))
    except Exception:
        ref.stop()
        raise
    target = Target("kafka", ref.bootstrap)
    target.refresh_api_versions()
    target.reference = ref  # type: ignore[attr-defined]
    print(f"\n[differential] Apache Kafka {ref.version} at {ref.bootstrap} "
          + ", ".join(f"{k}={v:.1f}s" for k, v in ref.timings.items()))
    yield target
    ref.stop()


@pytest.fixture(scope="session")
def ours_target(tmp_path_factory):
    t0 = time.monotonic()
    b = BrokerProcess(tmp_path_factory.mktemp("differential-ours") / "data", overrides=SHARED_SETTINGS).start()
    target = Target("ours", b.bootstrap)
    target.refresh_api_versions()
    target.process = b  # type: ignore[attr-defined]
    print(f"\n[differential] our broker at {b.bootstrap} in {time.monotonic() - t0:.1f}s")
    yield target
    code = b.stop()
    assert code == 0, f"our broker exited with {code} on SIGTERM:\n{b.log_tail()}"


@pytest.fixture(scope="session")
def pair(kafka_target, ours_target) -> Pair:
    return Pair(kafka_target, ours_target)


@pytest.fixture
def topic(pair) -> str:
    """A fresh one-partition topic on both brokers."""
    from tests.differential.harness import unique

    return pair.create_topic(unique("d"), 1)
