"""Dynamic group configs (ConfigResource type GROUP = 32) compared with Apache Kafka 4.3.1:
DescribeConfigs (every group config, its default from the broker's group.* property, sources,
types, synonyms, documentation), IncrementalAlterConfigs and AlterConfigs (Kafka's validation,
error codes and messages, validate_only, DELETE back to the default), ListConfigResources (the
groups that have configs), and a group's consumer.heartbeat.interval.ms in ConsumerGroupHeartbeat.

Group ids are the same on both brokers; every scenario removes the configs it set, so the other
tests' ListConfigResources answers are not disturbed. Kafka applies a change asynchronously
(through its metadata log), so reads after a change poll until it shows; ours applies it before
answering.
"""

from __future__ import annotations

import time
import uuid

import pytest
from kafka.protocol.admin import (
    AlterConfigsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
    ListConfigResourcesRequest,
)

from protocol.messages import request_class
from tests.differential.harness import build, to_plain, unique

GROUP = 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
CONSUMER_GROUP_HEARTBEAT = 68


def _describe(t, name: str, keys=None, synonyms: bool = False, documentation: bool = False, version: int = 4):
    with t.client() as c:
        r = to_plain(c.send(build(DescribeConfigsRequest, version, include_synonyms=synonyms,
                                  include_documentation=documentation,
                                  resources=[dict(resource_type=GROUP, resource_name=name, configuration_keys=keys)]),
                            version))
    (res,) = r["results"]
    return res


def _inc(t, name: str, ops: list[tuple], validate_only: bool = False) -> list[tuple]:
    with t.client() as c:
        r = c.send(build(IncrementalAlterConfigsRequest, 1, validate_only=validate_only, resources=[dict(
            resource_type=GROUP, resource_name=name,
            configs=[dict(name=n, config_operation=o, value=v) for n, o, v in ops])]), 1)
    return [(x.error_code, x.error_message) for x in r.responses]


def _legacy(t, name: str, configs: list[tuple], validate_only: bool = False) -> list[tuple]:
    with t.client() as c:
        r = c.send(build(AlterConfigsRequest, 2, validate_only=validate_only, resources=[dict(
            resource_type=GROUP, resource_name=name, configs=[dict(name=n, value=v) for n, v in configs])]), 2)
    return [(x.error_code, x.error_message) for x in r.responses]


def _listed_groups(t) -> set[str]:
    with t.client() as c:
        r = c.send(build(ListConfigResourcesRequest, 1, resource_types=[GROUP]), 1)
    assert r.error_code == 0
    return {e.resource_name for e in r.config_resources}


def _values(t, group: str) -> dict:
    res = _describe(t, group, synonyms=True)
    return {e["name"]: (e["value"], e["config_source"], [(s["name"], s["value"], s["source"]) for s in e["synonyms"]])
            for e in res["configs"]}


def _until(read, want, timeout: float = 20.0):
    """``read()`` until it equals ``want`` (Kafka publishes a change asynchronously); the last value."""
    deadline = time.monotonic() + timeout
    while True:
        got = read()
        if got == want or time.monotonic() > deadline:
            return got
        time.sleep(0.1)


def _until_changed(read, before, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while True:
        got = read()
        if got != before or time.monotonic() > deadline:
            return got
        time.sleep(0.1)


@pytest.fixture
def group() -> str:
    return unique("gc")


# -- DescribeConfigs ---------------------------------------------------------------------------------


@pytest.mark.parametrize("synonyms", [False, True], ids=["plain", "synonyms"])
@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_describe_unconfigured_group(pair, group, version, synonyms):
    """Every group config Kafka lists, in its order, with the broker's group.* values as defaults."""
    k, o = pair.run(lambda t: _describe(t, group, synonyms=synonyms, version=version))
    assert k["configs"], k
    assert o == k


def test_describe_documentation(pair, group):
    k, o = pair.run(lambda t: _describe(t, group, documentation=True))
    assert all(e["documentation"] for e in k["configs"])
    assert o == k


@pytest.mark.parametrize("keys", [["consumer.heartbeat.interval.ms", "consumer.session.timeout.ms"],
                                  ["share.isolation.level", "nope"], ["nope"], []],
                         ids=["two", "one-unknown", "unknown", "empty"])
def test_describe_some_keys(pair, group, keys):
    k, o = pair.run(lambda t: _describe(t, group, keys=keys, synonyms=True))
    assert o == k


def test_describe_empty_group_name(pair):
    k, o = pair.run(lambda t: _describe(t, ""))
    assert k["error_code"] == 42, k  # INVALID_REQUEST "Group name must not be empty"
    assert o == k


# -- validation ------------------------------------------------------------------------------------------

INVALID = {
    "unknown-name": [("bogus", SET, "1")],
    "unknown-first": [("consumer.heartbeat.interval.ms", SET, "1"), ("zzz", SET, "1")],
    "hb-below-min": [("consumer.heartbeat.interval.ms", SET, "4999")],
    "hb-zero": [("consumer.heartbeat.interval.ms", SET, "0")],
    "hb-above-max": [("consumer.heartbeat.interval.ms", SET, "15001")],
    "session-below-min": [("consumer.session.timeout.ms", SET, "44999")],
    "session-above-max": [("consumer.session.timeout.ms", SET, "60001")],
    "not-an-int": [("consumer.session.timeout.ms", SET, "abc")],
    "empty-int": [("consumer.session.timeout.ms", SET, "")],
    "int-overflow": [("consumer.heartbeat.interval.ms", SET, "99999999999")],
    "parse-order": [("streams.heartbeat.interval.ms", SET, "1"), ("share.heartbeat.interval.ms", SET, "x"),
                    ("consumer.heartbeat.interval.ms", SET, "x")],
    "assignment-above-max": [("consumer.assignment.interval.ms", SET, "15001")],
    "assignment-negative": [("consumer.assignment.interval.ms", SET, "-1")],
    "share-session": [("share.session.timeout.ms", SET, "1000")],
    "share-hb": [("share.heartbeat.interval.ms", SET, "20000")],
    "share-lock-low": [("share.record.lock.duration.ms", SET, "10")],
    "share-lock-min": [("share.record.lock.duration.ms", SET, "14999")],
    "share-lock-max": [("share.record.lock.duration.ms", SET, "70000")],
    "share-delivery-low": [("share.delivery.count.limit", SET, "1")],
    "share-delivery-max": [("share.delivery.count.limit", SET, "11")],
    "share-locks-low": [("share.partition.max.record.locks", SET, "99")],
    "share-locks-max": [("share.partition.max.record.locks", SET, "4001")],
    "share-assignment-max": [("share.assignment.interval.ms", SET, "15001")],
    "share-reset-bad": [("share.auto.offset.reset", SET, "foo")],
    "share-reset-case": [("share.auto.offset.reset", SET, "EARLIEST")],
    "share-reset-negative": [("share.auto.offset.reset", SET, "by_duration:-PT1H")],
    "share-reset-empty-duration": [("share.auto.offset.reset", SET, "by_duration:")],
    "share-reset-prefix-case": [("share.auto.offset.reset", SET, "BY_DURATION:PT1H")],
    "share-isolation": [("share.isolation.level", SET, "READ_COMMITTED")],
    "share-renew": [("share.renew.acknowledge.enable", SET, "yes")],
    "streams-standby": [("streams.num.standby.replicas", SET, "3")],
    "streams-standby-negative": [("streams.num.standby.replicas", SET, "-1")],
    "streams-delay": [("streams.initial.rebalance.delay.ms", SET, "-1")],
    "streams-session": [("streams.session.timeout.ms", SET, "70000")],
    "streams-hb": [("streams.heartbeat.interval.ms", SET, "100")],
    "streams-assignment": [("streams.assignment.interval.ms", SET, "20000")],
    "null-value": [("consumer.session.timeout.ms", SET, None)],
    "duplicate-keys": [("consumer.session.timeout.ms", SET, "50000"), ("consumer.session.timeout.ms", SET, "50000")],
    "append": [("consumer.session.timeout.ms", APPEND, "1")],
    "subtract": [("consumer.session.timeout.ms", SUBTRACT, "1")],
    "append-unknown": [("zzz", APPEND, "1")],
    "subtract-before-unknown-op": [("consumer.session.timeout.ms", SUBTRACT, "1"), ("zzz", 9, "1")],
    "unknown-op": [("consumer.session.timeout.ms", 9, "1")],
}
VALID = {
    "session-and-hb": [("consumer.session.timeout.ms", SET, "50000"), ("consumer.heartbeat.interval.ms", SET, "6000")],
    "bounds": [("consumer.session.timeout.ms", SET, "60000"), ("consumer.heartbeat.interval.ms", SET, "5000")],
    "assignment-zero": [("consumer.assignment.interval.ms", SET, "0")],
    "plus-sign": [("consumer.heartbeat.interval.ms", SET, "+6000")],
    "delete-unknown": [("bogus", DELETE, None)],
    "share-all": [("share.session.timeout.ms", SET, "50000"), ("share.heartbeat.interval.ms", SET, "6000"),
                  ("share.record.lock.duration.ms", SET, "15000"), ("share.delivery.count.limit", SET, "10"),
                  ("share.partition.max.record.locks", SET, "100"), ("share.isolation.level", SET, "read_committed"),
                  ("share.renew.acknowledge.enable", SET, "FALSE"), ("share.assignment.interval.ms", SET, "0")],
    "share-reset-duration": [("share.auto.offset.reset", SET, "by_duration:P1DT2H3M4.5S")],
    "share-reset-lowercase-duration": [("share.auto.offset.reset", SET, "by_duration:pt1h")],
    "share-reset-zero": [("share.auto.offset.reset", SET, "by_duration:PT0S")],
    "streams-all": [("streams.session.timeout.ms", SET, "60000"), ("streams.heartbeat.interval.ms", SET, "15000"),
                    ("streams.num.standby.replicas", SET, "2"), ("streams.initial.rebalance.delay.ms", SET, "0"),
                    ("streams.assignment.interval.ms", SET, "15000")],
}


@pytest.mark.parametrize("ops", list(INVALID.values()) + list(VALID.values()), ids=list(INVALID) + list(VALID))
def test_incremental_validate_only(pair, group, ops):
    """Errors and messages as Kafka's (messages are Kafka's exact text here); nothing is kept."""
    k, o = pair.run(lambda t: (_inc(t, group, ops, validate_only=True), _listed_groups(t) & {group}))
    assert k[1] == set()
    assert o == k


@pytest.mark.parametrize("ops", [[("consumer.session.timeout.ms", SET, "50000")], [("zzz", SET, "1")],
                                 [("consumer.session.timeout.ms", SET, "50000"), ("consumer.session.timeout.ms", SET, "1")],
                                 [("consumer.session.timeout.ms", APPEND, "1")], [("x", 9, "1")]],
                         ids=["valid", "unknown", "duplicate", "append", "unknown-op"])
@pytest.mark.parametrize("validate_only", [True, False])
def test_default_group_resource(pair, ops, validate_only):
    k, o = pair.run(lambda t: _inc(t, "", ops, validate_only=validate_only))
    assert o == k


def test_same_group_twice(pair, group):
    def scenario(t):
        one = dict(resource_type=GROUP, resource_name=group,
                   configs=[dict(name="consumer.session.timeout.ms", config_operation=SET, value="50000")])
        with t.client() as c:
            r = c.send(build(IncrementalAlterConfigsRequest, 1, validate_only=True, resources=[one, one]), 1)
        return [(x.error_code, x.error_message) for x in r.responses]

    k, o = pair.run(scenario)
    assert o == k


@pytest.mark.parametrize("configs", [[("bogus", "1")], [("consumer.session.timeout.ms", None)], [("zzz", None)],
                                     [("consumer.session.timeout.ms", "50000"), ("consumer.session.timeout.ms", "5")],
                                     [("consumer.heartbeat.interval.ms", "1")], [("consumer.session.timeout.ms", "50000")]],
                         ids=["unknown", "null", "null-unknown", "duplicate", "hb-below-min", "valid"])
@pytest.mark.parametrize("name", ["g", ""], ids=["group", "default"])
def test_legacy_validate_only(pair, group, configs, name):
    k, o = pair.run(lambda t: _legacy(t, group if name else "", configs, validate_only=True))
    assert o == k


# -- changes -------------------------------------------------------------------------------------------------


def test_set_describe_delete(pair, group):
    """SET shows as GROUP_CONFIG with the broker's value as the next synonym (values as Kafka
    formats them), the group is listed; DELETE goes back to the default and the group is unlisted."""

    def scenario(t):
        before = _values(t, group)
        out = [_inc(t, group, [("consumer.heartbeat.interval.ms", SET, "+6000"),
                               ("share.renew.acknowledge.enable", SET, "FALSE"),
                               ("share.auto.offset.reset", SET, "earliest")])]
        during = _until_changed(lambda: _values(t, group), before)
        out += [during, _until(lambda: group in _listed_groups(t), True)]
        out.append(_inc(t, group, [("consumer.heartbeat.interval.ms", DELETE, None),
                                   ("consumer.session.timeout.ms", SET, "50000")]))
        out.append(_until_changed(lambda: _values(t, group), during))
        out.append(_inc(t, group, [("share.renew.acknowledge.enable", DELETE, None),
                                   ("share.auto.offset.reset", DELETE, None),
                                   ("consumer.session.timeout.ms", DELETE, None)]))
        out.append(_until(lambda: _values(t, group), before) == before)
        out.append(_until(lambda: group in _listed_groups(t), False))
        return out

    k, o = pair.run(scenario)
    assert k[-2] is True and k[-1] is False, k
    assert o == k


def test_validation_uses_the_whole_set(pair, group):
    """A change is checked with the group's other configs: the session timeout set before bounds
    nothing here (defaults keep session > heartbeat), but an unknown name already stored cannot be."""

    def scenario(t):
        out = [_inc(t, group, [("consumer.session.timeout.ms", SET, "60000")])]
        _until(lambda: _values(t, group)["consumer.session.timeout.ms"][0], "60000")
        out.append(_inc(t, group, [("consumer.heartbeat.interval.ms", SET, "15000")], validate_only=True))
        out.append(_inc(t, group, [("consumer.heartbeat.interval.ms", SET, "15001")], validate_only=True))
        out.append(_values(t, group)["consumer.session.timeout.ms"])
        out.append(_inc(t, group, [("consumer.session.timeout.ms", DELETE, None)]))
        out.append(_until(lambda: group in _listed_groups(t), False))
        return out

    k, o = pair.run(scenario)
    assert o == k


def test_legacy_alter_replaces_the_set(pair, group):
    def scenario(t):
        out = [_legacy(t, group, [("consumer.session.timeout.ms", "50000"), ("streams.num.standby.replicas", "1")])]
        out.append(_until(lambda: _values(t, group)["streams.num.standby.replicas"][0], "1"))
        out.append(_legacy(t, group, [("consumer.heartbeat.interval.ms", "6000")]))
        out.append(_until(lambda: _values(t, group)["streams.num.standby.replicas"][0], "0"))
        v = _values(t, group)
        out.append({n: v[n] for n in ("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms")})
        out.append(_legacy(t, group, []))
        out.append(_until(lambda: group in _listed_groups(t), False))
        return out

    k, o = pair.run(scenario)
    assert k[-1] is False, k
    assert o == k


# -- the consumer group coordinator uses them ---------------------------------------------------------------


def _heartbeat(t, group: str, member: str, epoch: int) -> tuple[int, int]:
    joining = epoch == 0
    with t.client() as c:
        r = c.send(build(request_class(CONSUMER_GROUP_HEARTBEAT), 1,
                         group_id=group, member_id=member, member_epoch=epoch, instance_id=None, rack_id=None,
                         rebalance_timeout_ms=30000 if joining else -1,
                         subscribed_topic_names=[f"{group}-none"] if joining else None,
                         subscribed_topic_regex=None, server_assignor=None,
                         topic_partitions=[] if joining else None), 1)
    return r.error_code, r.heartbeat_interval_ms


def test_heartbeat_interval_from_group_config(pair, request, group):
    """A member of a group with consumer.heartbeat.interval.ms is told that interval; another
    group's members get the broker's group.consumer.heartbeat.interval.ms."""
    pair.require(request, CONSUMER_GROUP_HEARTBEAT)
    other = unique("gc-other")

    def join(t, g: str) -> tuple[int, int]:
        member = uuid.uuid4().hex[:22]
        result = _heartbeat(t, g, member, 0)
        if result[0] == 0:
            _heartbeat(t, g, member, -1)  # leave
        return result

    def scenario(t):
        t.find_coordinator(group, 0)
        out = [_inc(t, group, [("consumer.heartbeat.interval.ms", SET, "7000")])]
        _until(lambda: _values(t, group)["consumer.heartbeat.interval.ms"][0], "7000")
        # Kafka's group coordinator takes the change from its metadata publisher, a moment later.
        out.append(_until(lambda: join(t, group), (0, 7000)))
        out.append(join(t, other))
        out.append(_inc(t, group, [("consumer.heartbeat.interval.ms", SET, "8000")]))
        out.append(_until(lambda: join(t, group), (0, 8000)))
        out.append(_inc(t, group, [("consumer.heartbeat.interval.ms", DELETE, None)]))
        out.append(_until(lambda: join(t, group), (0, 5000)))
        return out

    k, o = pair.run(scenario)
    assert k[1] == (0, 7000) and k[2] == (0, 5000), k
    assert o == k
