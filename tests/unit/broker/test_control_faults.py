"""Fault rules as the control endpoint and ``--faults`` files give them: parsing with clear errors,
librdkafka's push semantics (the next N requests, in order), counts, probabilities, matching on
broker, topic, ids and client, and what a request names (``request_keys``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from broker.control.controls import Controls
from broker.control.faults import FaultRules, FaultSpecError, load_file, parse_rule
from broker.control.request_keys import RequestKeys, request_keys
from protocol.errors import ErrorCode
from protocol.messages import request_class


def _keys(**kw: object) -> RequestKeys:
    return RequestKeys(**kw)  # type: ignore[arg-type]


def test_a_push_answers_the_next_requests_of_the_api_in_order_then_is_gone() -> None:
    rules = FaultRules()
    rules.add({"api": "EndTxn", "errors": ["NOT_COORDINATOR", {"error": "COORDINATOR_LOAD_IN_PROGRESS",
                                                                "delay_ms": 50}, "NONE"]})
    assert rules.pick(1, 3, None, None) is None  # another API is untouched
    picked = [rules.pick(1, 26, None, None) for _ in range(4)]
    assert [(p[0].action, p[0].error, p[0].delay_ms) if p else None for p in picked] == [
        ("error", ErrorCode.NOT_COORDINATOR, 0), ("error", ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, 50),
        ("none", ErrorCode.NONE, 0), None]
    assert rules.rules == [] and not rules.active


def test_a_broker_push_is_taken_before_the_clusters() -> None:
    rules = FaultRules()
    rules.add({"api": 22, "error": "NOT_COORDINATOR"})
    rules.add({"api": 22, "error": "COORDINATOR_NOT_AVAILABLE", "broker": 2})
    first = rules.pick(2, 22, None, None)
    assert first is not None and first[0].error == ErrorCode.COORDINATOR_NOT_AVAILABLE
    on_one = rules.pick(1, 22, None, None)
    assert on_one is not None and on_one[0].error == ErrorCode.NOT_COORDINATOR


def test_count_and_until_removed() -> None:
    rules = FaultRules()
    [three] = rules.add({"api": "Produce", "error": "NOT_ENOUGH_REPLICAS", "count": 3})
    assert sum(rules.pick(1, 0, None, None) is not None for _ in range(5)) == 3
    [forever] = rules.add({"api": "Produce", "action": "close", "count": -1})
    assert all(rules.pick(1, 0, None, None) is not None for _ in range(50))
    assert rules.remove(forever.id) and not rules.remove(three.id)


def test_a_probability_hits_about_that_share_and_lasts_until_removed() -> None:
    rules = FaultRules(seed=7)
    rules.add({"api": "Fetch", "delay_ms": 10, "probability": 0.25})
    hits = sum(rules.pick(1, 1, None, None) is not None for _ in range(4000))
    assert 800 < hits < 1200
    assert len(rules.rules) == 1


def test_rules_match_what_the_request_names() -> None:
    rules = FaultRules()
    rules.add({"api": "TxnOffsetCommit", "topic": "orders", "partition": 2, "transactional_id": "tx",
               "group_id": "g", "client_id": "app", "error": "UNKNOWN_TOPIC_OR_PARTITION", "count": -1})
    right = _keys(topics={"orders": [1, 2]}, transactional_ids=["tx"], group_ids=["g"])
    assert rules.need_keys
    assert rules.pick(1, 28, "app", right) is not None
    assert rules.pick(1, 28, "other", right) is None
    assert rules.pick(1, 28, "app", _keys(topics={"orders": [1]}, transactional_ids=["tx"], group_ids=["g"])) is None
    assert rules.pick(1, 28, "app", _keys(topics={"orders": [2]}, transactional_ids=["tx2"], group_ids=["g"])) is None
    assert rules.pick(1, 28, "app", None) is None  # a rule on keys never matches a request not read


@pytest.mark.parametrize(("spec", "message"), [
    ({"api": "NoSuchApi", "error": "NOT_COORDINATOR"}, "unknown API"),
    ({"api": 999, "error": "NOT_COORDINATOR"}, "unknown API key 999"),
    ({"api": "EndTxn", "error": "NO_SUCH_ERROR"}, "unknown error"),
    ({"api": "EndTxn"}, "needs an"),
    ({"api": "EndTxn", "action": "explode"}, "unknown action"),
    ({"api": "EndTxn", "error": "NOT_COORDINATOR", "probability": 2}, "probability"),
    ({"api": "EndTxn", "error": "NOT_COORDINATOR", "count": 0}, "count"),
    ({"api": "EndTxn", "errors": []}, "non-empty"),
    ({"api": "EndTxn", "errors": ["NOT_COORDINATOR"], "count": 2}, "sequence"),
    ({"api": "EndTxn", "action": "drop", "apply": False}, "always carries"),
    ({"api": "Produce", "partition": 1, "error": "NOT_COORDINATOR"}, "needs its topic"),
    ({"api": "EndTxn", "error": "NOT_COORDINATOR", "colour": "red"}, "unknown field"),
    ({"api": "EndTxn", "delay_ms": -5}, ">= 0"),
])
def test_a_rule_that_cannot_be_understood_is_refused_with_what_is_wrong(spec: dict, message: str) -> None:
    with pytest.raises(FaultSpecError, match=message):
        parse_rule(spec, 1)


def test_several_rules_are_added_all_or_none() -> None:
    rules = FaultRules()
    with pytest.raises(FaultSpecError):
        rules.add([{"api": "EndTxn", "error": "NOT_COORDINATOR"}, {"api": "Nope", "error": "NONE"}])
    assert rules.rules == []
    assert len(rules.add({"rules": [{"api": 26, "error": 16}, {"api": 0, "action": "drop"}]})) == 2


def test_a_faults_file_is_json_or_yaml(tmp_path: Path) -> None:
    as_json = tmp_path / "faults.json"
    as_json.write_text(json.dumps({"rules": [{"api": "InitProducerId", "error": "COORDINATOR_LOAD_IN_PROGRESS"}]}))
    as_yaml = tmp_path / "faults.yaml"
    as_yaml.write_text("rules:\n  - api: Produce\n    error: NOT_LEADER_OR_FOLLOWER\n    probability: 0.1\n")
    rules = FaultRules()
    rules.add(load_file(as_json))
    rules.add(load_file(as_yaml))
    assert [(r.api_key, r.probability) for r in rules.rules] == [(22, 1.0), (0, 0.1)]
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    with pytest.raises(FaultSpecError, match="not JSON"):
        load_file(broken)


def test_the_dispatcher_flag_is_on_only_while_something_is_steered() -> None:
    controls = Controls()
    assert not controls.engaged
    [rule] = controls.faults.add({"api": "Metadata", "error": "NOT_COORDINATOR"})
    assert controls.engaged
    controls.faults.remove(rule.id)
    assert not controls.engaged
    controls.faults.set_rtt(2, 100)
    assert controls.engaged
    controls.faults.clear()
    controls.set_api_range(22, -1, -1)
    assert controls.engaged and not controls.accepts(22, 4)
    assert controls.advertised([(3, 0, 13), (22, 0, 6)]) == [(3, 0, 13)]
    controls.reset_api_ranges()
    assert not controls.engaged


def test_request_keys_come_from_kafkas_entity_types() -> None:
    R = request_class(28)
    topic = R.TxnOffsetCommitRequestTopic
    req = R[3](transactional_id="tx", group_id="g", producer_id=5, producer_epoch=2, generation_id_or_member_epoch=-1,
               member_id="", group_instance_id=None, topics=[topic(name="a", partitions=[
                   topic.TxnOffsetCommitRequestPartition(partition_index=3, committed_offset=1,
                                                         committed_leader_epoch=-1, committed_metadata="")])])
    keys = request_keys(28, req, lambda _: None)
    assert keys.to_json() == {"topics": {"a": [3]}, "transactional_ids": ["tx"], "group_ids": ["g"],
                              "producer_id": 5, "producer_epoch": 2}
    F = request_class(10)
    assert request_keys(10, F[4](key_type=1, coordinator_keys=["x", "y"]), lambda _: None).transactional_ids == ["x", "y"]
    fetch = request_class(9)
    group = fetch.OffsetFetchRequestGroup
    req = fetch[8](groups=[group(group_id="gg", topics=[group.OffsetFetchRequestTopics(name="z", partition_indexes=[1])])],
               require_stable=True)
    assert request_keys(9, req, lambda _: None).to_json() == {"topics": {"z": [1]}, "group_ids": ["gg"]}


def test_a_seeded_rule_set_is_reproducible() -> None:
    def run(seed: int) -> list[bool]:
        rules = FaultRules(seed=seed)
        rules.add({"api": "Produce", "error": "NOT_ENOUGH_REPLICAS", "probability": 0.5})
        return [rules.pick(1, 0, None, None) is not None for _ in range(64)]
    assert run(3) == run(3)
    assert 10 < sum(run(3)) < 54
