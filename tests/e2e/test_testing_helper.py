"""``broker.testing`` as a user's test suite uses it: the ``kafka_cluster`` pytest fixture (a pytest
plugin registered by the package), configured by its marker, and the control endpoint's safety:
nothing is steerable unless configured."""

from __future__ import annotations

import subprocess

import pytest
from confluent_kafka import Consumer, Producer

from broker.config.broker_config import BrokerConfig
from broker.control.setup import build_controls, process_clock
from broker.testing import KafkaCluster
from storage.clock import SYSTEM_CLOCK
from tests.support.runtime_env import runtime_python


@pytest.mark.kafka_cluster(brokers=3, python=runtime_python())
def test_the_fixture_gives_a_cluster_and_its_controls(kafka_cluster: KafkaCluster) -> None:
    assert len(kafka_cluster.bootstrap.split(",")) == 3
    kafka_cluster.faults.push("Produce", "NOT_ENOUGH_REPLICAS")
    producer = Producer({"bootstrap.servers": kafka_cluster.bootstrap, "enable.idempotence": True})
    producer.produce("fixture-topic", b"once")
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": kafka_cluster.bootstrap, "group.id": "g",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe(["fixture-topic"])
    got = []
    for _ in range(40):
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
            break
    consumer.close()
    assert got == [b"once"]  # retried after NOT_ENOUGH_REPLICAS, written once
    assert [e["error"] for e in kafka_cluster.requests.list(api="Produce")][:2] == ["NOT_ENOUGH_REPLICAS", "NONE"]


def test_nothing_is_steerable_unless_configured() -> None:
    assert process_clock(BrokerConfig({})) is SYSTEM_CLOCK
    controls = build_controls(BrokerConfig({}))
    assert not controls.engaged and not controls.logging
    with pytest.raises(ValueError, match="needs the control endpoint"):
        process_clock(BrokerConfig({"control.clock": "virtual"}))
    assert BrokerConfig({}).get("control.host") == "127.0.0.1"


def test_a_bad_faults_file_stops_the_start_with_a_clear_error(tmp_path) -> None:
    rules = tmp_path / "rules.json"
    rules.write_text('[{"api": "EndTxn", "error": "NOT_A_KAFKA_ERROR"}]')
    done = subprocess.run([runtime_python(), "-m", "broker", "--faults", str(rules), "--override",
                           f"log.dirs={tmp_path / 'data'}"], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path)
    assert done.returncode == 2
    assert "unknown error 'NOT_A_KAFKA_ERROR'" in done.stderr
