"""Dynamic broker configs through stock admin clients: a change takes effect on the open logs at
once (message.max.bytes is every topic's default max.message.bytes), survives a restart, and
DELETE brings the static value back. Kafka's answers are compared request by request in
tests/differential/test_dynamic_broker_configs.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from kafka.protocol.admin import DescribeConfigsRequest, IncrementalAlterConfigsRequest

from tests.differential.wire import WireClient, build


def _alter(admin: AdminClient, op: AlterConfigOpType, name: str, value: str | None, broker: str = "1") -> None:
    res = ConfigResource(ResourceType.BROKER, broker,
                         incremental_configs=[ConfigEntry(name, value, incremental_operation=op)])
    admin.incremental_alter_configs([res])[res].result(15)


def _produce(bootstrap: str, topic: str, size: int) -> str | None:
    """None when the record is written, else the delivery error's name."""
    errors: list = []
    p = Producer({"bootstrap.servers": bootstrap, "message.max.bytes": 10_000_000, "retries": 0})
    p.produce(topic, b"x" * size, on_delivery=lambda err, _msg: errors.append(err))
    p.flush(15)
    return errors[0].name() if errors and errors[0] is not None else None


def test_message_max_bytes_applies_now_and_after_restart(fresh_broker, topic_name) -> None:
    b = fresh_broker.start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(15)
    assert _produce(b.bootstrap, topic_name, 200_000) is None
    _alter(admin, AlterConfigOpType.SET, "message.max.bytes", "100000")
    assert _produce(b.bootstrap, topic_name, 200_000) == "MSG_SIZE_TOO_LARGE"
    res = ConfigResource(ResourceType.BROKER, "1")
    entry = admin.describe_configs([res])[res].result(15)["message.max.bytes"]
    assert (entry.value, entry.source, entry.is_read_only) == ("100000", 2, False)  # DYNAMIC_BROKER_CONFIG
    del admin
    assert b.stop() == 0
    b.start()
    assert _produce(b.bootstrap, topic_name, 200_000) == "MSG_SIZE_TOO_LARGE"
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    _alter(admin, AlterConfigOpType.DELETE, "message.max.bytes", None)
    assert _produce(b.bootstrap, topic_name, 200_000) is None


def test_cluster_default_and_errors(broker) -> None:
    """The cluster-default resource ("" , which librdkafka's AdminClient will not name) over the wire."""

    def alter(c, op: int, value: str | None) -> tuple:
        req = build(IncrementalAlterConfigsRequest, 1, validate_only=False, resources=[dict(
            resource_type=4, resource_name="", configs=[dict(name="log.retention.ms", config_operation=op,
                                                            value=value)])])
        (r,) = c.send(req, 1).responses
        return r.error_code, r.error_message

    def describe(c, name: str) -> list:
        req = build(DescribeConfigsRequest, 4, include_synonyms=False, include_documentation=False,
                    resources=[dict(resource_type=4, resource_name=name, configuration_keys=["log.retention.ms"])])
        return [(e.name, e.value, e.config_source) for e in c.send(req, 4).results[0].configs]

    with WireClient(broker.bootstrap) as c:
        assert alter(c, 0, "7200000") == (0, None)
        try:
            assert describe(c, "") == [("log.retention.ms", "7200000", 3)]  # DYNAMIC_DEFAULT_BROKER_CONFIG
            assert describe(c, "1") == [("log.retention.ms", "7200000", 3)]
        finally:
            assert alter(c, 1, None) == (0, None)
        assert describe(c, "") == []
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    with pytest.raises(KafkaException, match="Cannot update these configs dynamically"):
        _alter(admin, AlterConfigOpType.SET, "num.partitions", "3")


def test_refused_values_keep_the_broker_startable(fresh_broker) -> None:
    """Values Kafka refuses are refused before anything is kept; and a stored set that no longer
    applies (an older version's, edited by hand) is logged and skipped at start, as Kafka does."""
    import json

    b = fresh_broker.start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    for name, value in [("log.cleaner.dedupe.buffer.size", "0"), ("listeners", "garbage"),
                        ("log.cleaner.threads", "0"), ("num.io.threads", "0")]:
        with pytest.raises(KafkaException):
            _alter(admin, AlterConfigOpType.SET, name, value)
    del admin
    assert b.stop() == 0
    meta = Path(b.data_dir) / "__cluster_metadata" / "topics.json"
    data = json.loads(meta.read_text()) if meta.exists() else {"version": 1, "topics": []}
    # only the cluster-level min.insync.replicas that ELR puts there at the first start
    assert data.get("broker_configs", {}) == {"": {"min.insync.replicas": "1"}}
    meta.parent.mkdir(parents=True, exist_ok=True)
    data["broker_configs"] = {"1": {"log.cleaner.dedupe.buffer.size": "0", "message.max.bytes": "100"}}
    with open(meta, "w") as f:
        json.dump(data, f)
    b.start()
    res = ConfigResource(ResourceType.BROKER, "1")
    admin = AdminClient({"bootstrap.servers": b.bootstrap})  # kept alive until the answer arrives
    configs = admin.describe_configs([res])[res].result(15)
    assert configs["message.max.bytes"].value == "1048588"  # the static value: the stored set was skipped
    assert "dynamic broker configs could not be applied" in b.log_tail(200)
