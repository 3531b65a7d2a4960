"""Dynamic group configs in the KIP-848 coordinator, sans-IO: a group's consumer.heartbeat.interval.ms
is what its members are told, and its consumer.session.timeout.ms times their sessions; other
groups keep the broker's values. Plus broker.config.group_configs' validation of a group's whole set."""

from __future__ import annotations

import pytest

from broker.config import group_configs
from coordinator.group.consumer_manager import ConsumerGroupConfig, HeartbeatRequest, session_key
from coordinator.group.manager import GroupConfig, GroupMetadataManager
from protocol.errors import ErrorCode, KafkaError
from tests.unit.coordinator.helpers import FakeTimer, FakeWriter
from tests.unit.coordinator.test_consumer_groups import FakeTopics


def _manager(configs: dict[str, dict[str, str]]):
    timer = FakeTimer()
    mgr = GroupMetadataManager(
        GroupConfig(initial_rebalance_delay_ms=0), timer, FakeWriter(), timer.time_ms,
        consumer_config=ConsumerGroupConfig(session_timeout_ms=45_000, heartbeat_interval_ms=5_000),
        topics=FakeTopics({"a": 2}), group_config=lambda g: configs.get(g, {}))
    return mgr.consumer, timer


def _join(cm, group: str, member: str):
    return cm.heartbeat(HeartbeatRequest(group, member, 0, rebalance_timeout_ms=30_000,
                                         subscribed_topic_names=["a"], owned={}))


def test_group_heartbeat_interval_and_session_timeout():
    configs = {"tuned": {"consumer.heartbeat.interval.ms": "7000", "consumer.session.timeout.ms": "50000"}}
    cm, timer = _manager(configs)
    assert _join(cm, "tuned", "A").heartbeat_interval_ms == 7000
    assert _join(cm, "plain", "B").heartbeat_interval_ms == 5000
    assert timer.tasks[session_key("tuned", "A")][0] == timer.now + 50_000
    assert timer.tasks[session_key("plain", "B")][0] == timer.now + 45_000
    timer.advance(49_999)
    assert "A" in cm.groups["tuned"].members and "B" not in cm.groups["plain"].members
    timer.advance(1)
    assert "A" not in cm.groups["tuned"].members
    # A change applies to the next heartbeat, as Kafka's GroupConfigManager does.
    configs["tuned"]["consumer.heartbeat.interval.ms"] = "8000"
    assert _join(cm, "tuned", "C").heartbeat_interval_ms == 8000


@pytest.mark.parametrize("configs, message", [
    ({"bogus": "1"}, "Unknown group config name: bogus"),
    ({"consumer.heartbeat.interval.ms": "0"},
     "Invalid value 0 for configuration consumer.heartbeat.interval.ms: Value must be at least 1"),
    ({"consumer.heartbeat.interval.ms": "4999"},
     "consumer.heartbeat.interval.ms must be greater than or equal to group.consumer.min.heartbeat.interval.ms"),
    ({"consumer.session.timeout.ms": "x"},
     "Invalid value x for configuration consumer.session.timeout.ms: Not a number of type INT"),
])
def test_validation_messages(configs, message):
    with pytest.raises(KafkaError) as e:
        group_configs.validate(configs, None)
    assert e.value.code is ErrorCode.INVALID_CONFIG and e.value.message == message


def test_session_must_exceed_heartbeat_when_the_broker_bounds_allow_it():
    broker = {"group.consumer.min.session.timeout.ms": 1000, "group.consumer.session.timeout.ms": 45000}

    class Config:
        def get(self, name):
            return broker.get(name)

    with pytest.raises(KafkaError) as e:
        group_configs.validate({"consumer.session.timeout.ms": "5000"}, Config())
    assert e.value.message == "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms"
    group_configs.validate({"consumer.session.timeout.ms": "5001"}, Config())
