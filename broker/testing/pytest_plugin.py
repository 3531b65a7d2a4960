"""The ``kafka_cluster`` pytest fixture (registered as a pytest plugin when pykafka-broker is
installed): a started broker for the test, stopped after it.

    def test_end_txn_retried(kafka_cluster):
        kafka_cluster.faults.push("EndTxn", "COORDINATOR_LOAD_IN_PROGRESS")
        ...

    @pytest.mark.kafka_cluster(brokers=3, virtual_clock=True)
    def test_failover(kafka_cluster):
        kafka_cluster.broker(1).down()

The marker takes ``broker.testing.KafkaCluster``'s arguments.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from broker.testing import KafkaCluster


def pytest_configure(config: Any) -> None:
    config.addinivalue_line("markers", "kafka_cluster(**kwargs): arguments of the kafka_cluster fixture "
                                       "(broker.testing.KafkaCluster)")


@pytest.fixture
def kafka_cluster(request: Any, tmp_path: Any) -> Iterator[KafkaCluster]:
    marker = request.node.get_closest_marker("kafka_cluster")
    kwargs: dict[str, Any] = dict(marker.kwargs) if marker is not None else {}
    kwargs.setdefault("data_dir", tmp_path / "kafka")
    with KafkaCluster(**kwargs) as cluster:
        yield cluster
