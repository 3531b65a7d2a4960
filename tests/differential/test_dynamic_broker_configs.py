"""Dynamic broker configs: IncrementalAlterConfigs / AlterConfigs on a BROKER resource (this node's
id, or "" for the cluster default) give the same errors and leave the same values, sources and
synonyms as Apache Kafka 4.3.1, for the broker and for a topic that inherits them.

Every scenario restores what it set, so the session's brokers keep their static configs. Kafka
applies a dynamic change asynchronously (through its metadata log), so reads poll until the value
shows; ours applies it before answering.
"""

from __future__ import annotations

import time

from kafka.protocol.admin import AlterConfigsRequest, DescribeConfigsRequest, IncrementalAlterConfigsRequest

from tests.differential.harness import build, unique

BROKER = 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _inc(c, name: str, ops: list[tuple], validate_only: bool = False) -> tuple:
    req = build(IncrementalAlterConfigsRequest, 1, validate_only=validate_only, resources=[dict(
        resource_type=BROKER, resource_name=name,
        configs=[dict(name=n, config_operation=o, value=v) for n, o, v in ops])])
    (r,) = c.send(req, 1).responses
    return r.error_code, r.error_message


def _legacy(c, name: str, configs: dict[str, str]) -> tuple:
    req = build(AlterConfigsRequest, 2, validate_only=False, resources=[dict(
        resource_type=BROKER, resource_name=name, configs=[dict(name=n, value=v) for n, v in configs.items()])])
    (r,) = c.send(req, 2).responses
    return r.error_code, r.error_message


def _legacy_dup(c, name: str) -> tuple:
    req = build(AlterConfigsRequest, 2, validate_only=True, resources=[dict(
        resource_type=BROKER, resource_name=name,
        configs=[dict(name="log.retention.ms", value="1"), dict(name="log.retention.ms", value="2")])])
    (r,) = c.send(req, 2).responses
    return r.error_code, r.error_message


def _same_resource_twice(c, name: str) -> list:
    one = dict(resource_type=BROKER, resource_name=name,
               configs=[dict(name="log.retention.ms", config_operation=SET, value="1000")])
    r = c.send(build(IncrementalAlterConfigsRequest, 1, validate_only=True, resources=[one, one]), 1)
    return [(x.error_code, x.error_message) for x in r.responses]


def _describe_error(c, name: str) -> tuple:
    req = build(DescribeConfigsRequest, 4, include_synonyms=False, include_documentation=False,
                resources=[dict(resource_type=BROKER, resource_name=name, configuration_keys=["num.partitions"])])
    (r,) = c.send(req, 4).results
    return r.error_code, r.error_message, [(e.name, e.value) for e in r.configs]


def _describe(c, rtype: int, name: str, keys: list[str]) -> dict:
    req = build(DescribeConfigsRequest, 4, include_synonyms=True, include_documentation=False,
                resources=[dict(resource_type=rtype, resource_name=name, configuration_keys=keys)])
    (r,) = c.send(req, 4).results
    assert r.error_code == 0, r.error_message
    return {e.name: (e.value, e.read_only, e.config_source, [(s.name, s.value, s.source) for s in e.synonyms])
            for e in r.configs}


def _settled(entry: tuple) -> bool:
    """Kafka applies a change in steps: its entry's value can trail its first synonym for a moment."""
    value, _read_only, _source, synonyms = entry
    return bool(synonyms) and synonyms[0][1] == value


def _until(read, check, timeout: float = 15.0):
    deadline = time.monotonic() + timeout
    while True:
        value = read()
        if check(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.1)


def test_errors_for_broker_resources(pair):
    def scenario(t):
        me = str(t.node_id)
        with t.client() as c:
            return [
                _inc(c, me, [("num.partitions", SET, "3")]),
                _inc(c, "", [("log.dirs", SET, "/x")]),
                _inc(c, me, [("log.retention.ms", SET, "abc")]),
                _inc(c, me, [("log.cleaner.threads", SET, "x")]),
                _inc(c, me, [("log.preallocate", SET, "maybe")]),
                _inc(c, str(t.node_id + 1), [("log.retention.ms", SET, "1000")]),
                _inc(c, "x", [("log.retention.ms", SET, "1000")]),
                _inc(c, me, [("log.retention.ms", SUBTRACT, "1")]),
                _inc(c, me, [("log.retention.ms", SET, None)]),
                _inc(c, me, [("log.retention.ms", SET, "1"), ("log.retention.ms", SET, "2")]),
                _inc(c, "", [("listener.name.plaintext.ssl.keystore.location", SET, "/x")]),
                _inc(c, me, [("ssl.keystore.location", SET, "/x")]),
                _inc(c, me, [("log.retention.bytes", DELETE, None)]),  # deleting what is not set: fine
                _legacy(c, me, {"num.partitions": "2"}),
                # ranges and the reconfiguration checks (validate_only: nothing is kept either way)
                *[_inc(c, me, [(n, SET, v)], validate_only=True) for n, v in [
                    ("num.io.threads", "0"), ("num.io.threads", "1000"), ("num.io.threads", "2"),
                    ("num.io.threads", "1_0"), ("log.cleaner.threads", "0"), ("log.cleaner.threads", "100"),
                    ("log.cleaner.dedupe.buffer.size", "0"), ("log.cleaner.backoff.ms", "-1"),
                    ("producer.id.expiration.ms", "0"), ("producer.id.expiration.ms", "99999999999"),
                    ("background.threads", "0"), ("num.network.threads", "100"), ("max.connections", "-1"),
                    ("message.max.bytes", "-1"), ("log.index.size.max.bytes", "1"), ("log.roll.ms", "0"),
                    ("unstable.api.versions.enable", "true"), ("log.cleanup.policy", "foo"),
                    ("log.retention.bytes", "-5"), ("log.flush.interval.messages", "1")]],
                _inc(c, me, [("foo.bar", APPEND, "x")], validate_only=True),
                _inc(c, me, [("log.retention.ms", 7, "x")], validate_only=True),
                _inc(c, " " + me, [("log.retention.ms", SET, "1000")], validate_only=True),
                _legacy_dup(c, me),
                _same_resource_twice(c, me),
                *[_describe_error(c, name) for name in ("abc", str(t.node_id + 1), "0" + me)],
            ]

    k, o = pair.run(scenario)
    assert k[0] == (42, "Cannot update these configs dynamically: [num.partitions]")
    assert o == k


def test_set_describe_and_inherit(pair):
    topic = pair.create_topic(unique("dyn"), 1)
    keys = ["log.retention.ms", "log.retention.hours", "log.cleanup.policy", "log.cleaner.threads", "num.io.threads",
            "message.max.bytes", "num.partitions"]

    def scenario(t):
        me = str(t.node_id)
        out = {}
        with t.client() as c:
            try:
                out["set"] = [_inc(c, me, [("log.retention.ms", SET, "1000")]),
                              _inc(c, "", [("log.retention.ms", SET, "2000"), ("num.io.threads", SET, "9")]),
                              _inc(c, me, [("log.cleanup.policy", APPEND, "compact")]),
                              _inc(c, me, [("message.max.bytes", SET, "2000000")], validate_only=True)]
                out["broker"] = _until(lambda: _describe(c, BROKER, me, keys),
                                       lambda d: d["log.cleanup.policy"][0] == "delete,compact"
                                       and d["num.io.threads"][0] == "9")
                out["default"] = _describe(c, BROKER, "", ["log.retention.ms", "num.io.threads"])
                out["topic"] = _until(lambda: _describe(c, 2, topic, ["retention.ms", "cleanup.policy"]),
                                      lambda d: d["retention.ms"][0] == "1000")
                out["delete"] = _inc(c, me, [("log.retention.ms", DELETE, None)])
                out["topic after"] = _until(lambda: _describe(c, 2, topic, ["retention.ms"]),
                                            lambda d: d["retention.ms"][0] == "2000")
                out["legacy"] = _legacy(c, me, {"log.cleaner.threads": "2"})  # replaces the whole per-broker set
                out["broker after"] = _until(lambda: _describe(c, BROKER, me, keys),
                                             lambda d: d["log.cleaner.threads"][0] == "2"
                                             and d["log.cleanup.policy"][0] == "delete")
            finally:
                _legacy(c, me, {})
                _inc(c, "", [("log.retention.ms", DELETE, None), ("num.io.threads", DELETE, None)])
                _until(lambda: _describe(c, 2, topic, ["retention.ms"]), lambda d: d["retention.ms"][2] == 5)
        return out

    k, o = pair.run(scenario)
    assert k["set"] == [(0, None)] * 4
    assert k["broker"]["log.retention.ms"] == ("1000", False, 2, [("log.retention.ms", "1000", 2),
                                                                  ("log.retention.ms", "2000", 3),
                                                                  ("log.retention.hours", "168", 5)])
    assert k["topic"]["retention.ms"][2] == 2
    assert k["topic after"]["retention.ms"][:3] == ("2000", False, 3)
    assert o == k


def test_unknown_names_are_kept_hidden_and_layers_append_from_their_own_value(pair):
    def scenario(t):
        me = str(t.node_id)
        with t.client() as c:
            try:
                out = [_inc(c, me, [("my.custom.secret", SET, "hunter2")]),
                       _inc(c, "", [("log.cleanup.policy", SET, "compact")]),
                       _inc(c, me, [("log.cleanup.policy", APPEND, "delete")])]
                out.append(_until(lambda: _describe(c, BROKER, me, ["my.custom.secret", "log.cleanup.policy"]),
                                  lambda d: "my.custom.secret" in d and d["log.cleanup.policy"][2] == 2
                                  and _settled(d["log.cleanup.policy"])))
            finally:
                _legacy(c, me, {})
                _inc(c, "", [("log.cleanup.policy", DELETE, None)])
                _until(lambda: _describe(c, BROKER, me, ["log.cleanup.policy"]),
                       lambda d: d["log.cleanup.policy"][2] == 5)
            return out

    k, o = pair.run(scenario)
    assert k[3]["my.custom.secret"][0] is None  # unknown type: treated as sensitive
    assert k[3]["log.cleanup.policy"][0] == "delete"  # APPEND started from this broker's own (unset) value
    assert o == k


def test_min_insync_replicas_lives_at_the_cluster_level(pair):
    """Eligible leader replicas (finalized by default): min.insync.replicas is a cluster-level dynamic
    default from the first start (the static value), shown as such for brokers and topics; it may be
    changed there but not removed, and never set or deleted per broker (Kafka's messages)."""
    topic = pair.create_topic(unique("misr"), 1)

    def scenario(t):
        me = str(t.node_id)
        out = {}
        with t.client() as c:
            try:
                out["cluster"] = _describe(c, BROKER, "", ["min.insync.replicas"])
                out["broker"] = _describe(c, BROKER, me, ["min.insync.replicas"])
                out["topic"] = _describe(c, 2, topic, ["min.insync.replicas"])
                out["refused"] = [
                    _inc(c, "", [("min.insync.replicas", DELETE, None)]),
                    _inc(c, me, [("min.insync.replicas", SET, "2")]),
                    _inc(c, me, [("min.insync.replicas", DELETE, None)]),
                    _inc(c, me, [("min.insync.replicas", SET, "0")]),
                    _inc(c, "", [("min.insync.replicas", SET, "0")]),
                    _inc(c, "", [("min.insync.replicas", SET, "x")]),
                    _inc(c, "", [("min.insync.replicas", APPEND, "3")]),
                    _inc(c, "", [("min.insync.replicas", DELETE, None)], validate_only=True),
                    _legacy(c, "", {"log.cleaner.threads": "1"}),
                    _legacy(c, "", {}),
                    _legacy(c, me, {"min.insync.replicas": "2"}),
                ]
                out["accepted"] = [_legacy(c, me, {"log.cleaner.threads": "1"}),
                                   _legacy(c, "", {"min.insync.replicas": "1", "log.cleaner.threads": "1"}),
                                   _inc(c, "", [("min.insync.replicas", SET, "2")])]
                out["topic after"] = _until(lambda: _describe(c, 2, topic, ["min.insync.replicas"]),
                                            lambda d: _settled(d["min.insync.replicas"])
                                            and d["min.insync.replicas"][0] == "2")
            finally:
                _legacy(c, me, {})
                _legacy(c, "", {"min.insync.replicas": "1"})
                _until(lambda: _describe(c, 2, topic, ["min.insync.replicas"]),
                       lambda d: _settled(d["min.insync.replicas"]) and d["min.insync.replicas"][0] == "1")
        return out

    k, o = pair.run(scenario)
    assert k["cluster"]["min.insync.replicas"][2] == 3  # DYNAMIC_DEFAULT_BROKER_CONFIG
    assert k["refused"][0] == (40, "Cluster-level min.insync.replicas cannot be removed while ELR is enabled.")
    assert o == k
