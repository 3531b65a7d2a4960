"""Version emulation checked against the one release we can run: our broker emulating Apache Kafka
4.3 (``control.kafka.version``) advertises, for every API it serves, exactly Kafka 4.3.1's range cut
to ours, and refuses a version 4.3.1 does not serve as Kafka refuses it (the connection is closed).
The other releases' tables come from the same source (Kafka's JSON specs at each release tag)."""

from __future__ import annotations

import pytest
from kafka.protocol.metadata import ApiVersionsRequest

from broker.control.kafka_versions import release, releases
from broker.testing import KafkaCluster
from tests.differential.harness import Target
from tests.differential.wire import ConnectionClosed, build
from tests.support.runtime_env import runtime_python


@pytest.fixture(scope="module")
def emulating(tmp_path_factory: pytest.TempPathFactory):
    with KafkaCluster(python=runtime_python(), emulate_kafka="4.3",
                      data_dir=tmp_path_factory.mktemp("emulating")) as cluster:
        yield cluster


def _ranges(bootstrap: str) -> dict[int, tuple[int, int]]:
    target = Target("t", bootstrap)
    return target.refresh_api_versions()


def test_emulating_4_3_advertises_kafka_4_3_1s_ranges(kafka_target, ours_target, emulating) -> None:
    kafka, ours, emulated = kafka_target.api_versions, ours_target.api_versions, _ranges(emulating.bootstrap)
    expected = {}
    for key, (lo, hi) in ours.items():
        if key in kafka:
            low, high = max(lo, kafka[key][0]), min(hi, kafka[key][1])
            if low <= high:
                expected[key] = (low, high)
    assert emulated == expected
    # the table's own 4.3 entry is Kafka 4.3.1's ApiVersions, API for API
    assert {k: v for k, v in release("4.3").apis.items() if k in kafka} == kafka


def test_a_version_the_release_does_not_serve_is_refused(emulating) -> None:
    target = Target("t", emulating.bootstrap)
    with target.client() as c, pytest.raises(ConnectionClosed):
        c.send(build(ApiVersionsRequest, 3, client_software_name="t", client_software_version="1"), 3)
        emulating.emulate("3.0")
        # AddPartitionsToTxn v4+ and DescribeTopicPartitions do not exist in 3.0
        c.send_raw(75, 0, b"\x00\x00", flexible_header=True)
    emulating.emulate("4.3")
    assert releases()[0] == "3.0" and releases()[-1] == "4.4"
