"""Topic administration and metadata, compared with Apache Kafka: Metadata for unknown / invalid /
internal topics (auto-creation off and on), CreateTopics (invalid names, validate_only, duplicates, bad
configs, partition and replication counts), DeleteTopics and CreatePartitions errors, DescribeConfigs.

Normalised everywhere: error messages (free text), throttle times, topic ids (per cluster: only
present-or-absent is compared), node ids / hosts / ports and cluster ids.
"""

from __future__ import annotations

import time

import pytest
from kafka.protocol.admin import CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest

from tests.differential.harness import build, normalise, unique

TOPIC_ID = {"topic_id": "<id>"}

def create_topics(t, topics: list[dict], validate_only: bool = False, version: int = 7):
    with t.client() as c:
        return c.send(build(CreateTopicsRequest, version, topics=topics, timeout_ms=30000,
                            validate_only=validate_only), version)


def creatable(name: str, partitions: int = 1, rf: int = 1, configs: dict | None = None) -> dict:
    return dict(name=name, num_partitions=partitions, replication_factor=rf, assignments=[],
                configs=[dict(name=k, value=v) for k, v in (configs or {}).items()])


def norm_configs(configs):
    """CreateTopics response configs: sorted by name (the order is not part of the contract)."""
    if configs is None:
        return None
    out = []
    for c in sorted(configs, key=lambda c: c["name"]):
        out.append(dict(c))
    return out


def norm_create(resp) -> list[dict]:
    out = []
    for t in normalise(resp, replace=TOPIC_ID)["topics"]:
        t["configs"] = norm_configs(t["configs"])
        out.append(t)
    return out


# -- Metadata ---------------------------------------------------------------------------------------

def metadata_topic(t, name: str, auto: bool, version: int = 12) -> dict:
    (mt,) = t.metadata([name], allow_auto_create=auto, version=version).topics
    return normalise(mt, replace=TOPIC_ID)


@pytest.mark.parametrize("version", [4, 9, 12])
def test_metadata_unknown_topic_auto_create_off(pair, version):
    """Metadata v1-3 have no allow_auto_topic_creation flag (the broker setting decides; it is on, see
    the next test); v4+ with the flag off."""
    name = unique("unknown")
    k, o = pair.run(lambda t: metadata_topic(t, name, False, version))
    assert k["error_code"] == 3
    assert o == k


@pytest.mark.parametrize("version", [1, 4, 12])
def test_metadata_unknown_topic_auto_create_on(pair, version):
    """auto.create.topics.enable=true and allow_auto_topic_creation=true: the topic gets created with
    num.partitions=1 and replication 1; the answer to the request that created it is
    UNKNOWN_TOPIC_OR_PARTITION (3) on both (Kafka's creation is still in flight at its controller)."""
    name = unique("auto")

    def scenario(t):
        first = metadata_topic(t, name, True, version)
        deadline = time.monotonic() + 30
        while True:
            m = metadata_topic(t, name, False, max(version, 4))
            if m["error_code"] == 0 and m["partitions"] and m["partitions"][0]["leader_id"] >= 0:
                break
            assert time.monotonic() < deadline, m
            time.sleep(0.05)
        for p in m["partitions"]:  # node ids are per cluster; both are single-node clusters
            p["leader_id"] = "<node>" if p["leader_id"] == t.node_id else p["leader_id"]
            p["replica_nodes"] = ["<node>" if n == t.node_id else n for n in p["replica_nodes"]]
            p["isr_nodes"] = ["<node>" if n == t.node_id else n for n in p["isr_nodes"]]
        return first["error_code"], m

    (k_first, k), (o_first, o) = pair.run(scenario)
    assert k_first == 3
    assert o_first == k_first
    assert o == k


@pytest.mark.parametrize("name", ["bad name!", "x" * 250, ".", "..", "a/b", "ünïcode"],
                         ids=["space", "too-long", "dot", "dotdot", "slash", "non-ascii"])
@pytest.mark.parametrize("auto", [False, True], ids=["auto-off", "auto-on"])
def test_metadata_invalid_topic_name(pair, name, auto):
    k, o = pair.run(lambda t: metadata_topic(t, name, auto))
    assert k["error_code"] in (3, 17)
    assert o == k


@pytest.mark.parametrize("name", ["__consumer_offsets", "__transaction_state"])
def test_metadata_internal_topic_flag(pair, name):
    """An internal topic is flagged is_internal=true, also in the error answer when it does not exist
    yet (Kafka: Topic.isInternal(name)). Which of the two exists depends on what ran before in the
    session, so only the flag and, when neither exists, the error code are compared."""
    k, o = pair.run(lambda t: metadata_topic(t, name, False))
    assert k["is_internal"] is True
    assert o["is_internal"] == k["is_internal"]
    if k["error_code"] and o["error_code"]:
        assert o["error_code"] == k["error_code"]


def test_metadata_all_topics_lists_created(pair, topic):
    def scenario(t):
        names = {mt.name: mt.error_code for mt in t.metadata(None).topics}
        return names.get(topic)

    k, o = pair.run(scenario)
    assert k == 0
    assert o == k


# -- CreateTopics -------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["bad name!", "x" * 250, ".", "..", "a/b", "", "ünïcode"],
                         ids=["space", "too-long", "dot", "dotdot", "slash", "empty", "non-ascii"])
def test_create_topics_invalid_name(pair, name):
    k, o = pair.run(lambda t: norm_create(create_topics(t, [creatable(name)])))
    assert k[0]["error_code"] == 17
    assert o == k


def test_create_topics_validate_only(pair):
    """validate_only answers as if created (partitions, replication, configs) and creates nothing.
    Kafka returns a throw-away topic id here; ids are compared only as present/absent elsewhere, and not
    at all here."""
    name = unique("validate")

    def scenario(t):
        r = normalise(create_topics(t, [creatable(name, 3, configs={"retention.ms": "1000"})], validate_only=True),
                      drop={"topic_id"})
        for tt in r["topics"]:
            tt["configs"] = norm_configs(tt["configs"])
        after = metadata_topic(t, name, False)["error_code"]
        return r, after

    k, o = pair.run(scenario)
    assert k[0]["topics"][0]["error_code"] == 0 and k[1] == 3
    assert o == k


def test_create_topics_success_response(pair):
    """The CreateTopics v7 answer lists partitions, replication and every topic config with its value
    and source (the override as TOPIC_CONFIG, the rest as DEFAULT_CONFIG)."""
    name = unique("created")
    k, o = pair.run(lambda t: norm_create(create_topics(
        t, [creatable(name, 2, configs={"retention.ms": "123456", "cleanup.policy": "compact"})])))
    assert k[0]["error_code"] == 0 and k[0]["topic_id"] == "<id>"
    assert o == k


def test_create_topics_already_exists(pair, topic):
    k, o = pair.run(lambda t: norm_create(create_topics(t, [creatable(topic)])))
    assert k[0]["error_code"] == 36
    assert o == k


def test_create_topics_duplicate_in_one_request(pair):
    """The same name twice in one request: INVALID_REQUEST, reported once (the response is keyed by name)
    and after the topics that were created."""
    name, before, after = unique("dup"), unique("dup-other"), unique("dup-other")
    k, o = pair.run(lambda t: norm_create(create_topics(t, [creatable(before), creatable(name), creatable(name),
                                                            creatable(after)])))
    assert [(x["name"], x["error_code"]) for x in k] == [(before, 0), (after, 0), (name, 42)]
    assert o == k


@pytest.mark.parametrize("configs", [
    {"cleanup.policy": "bogus"},
    {"no.such.config": "1"},
    {"retention.ms": "abc"},
    {"min.insync.replicas": "0"},
    {"max.message.bytes": "-5"},
    {"compression.type": "brotli"},
    {"segment.bytes": "1048575"},
    {"segment.bytes": "100"},
], ids=["enum", "unknown", "not-a-number", "min-isr-0", "negative", "codec", "segment-below-1MiB",
        "segment-100-bytes"])
def test_create_topics_bad_config(pair, configs):
    name = unique("badcfg")
    k, o = pair.run(lambda t: norm_create(create_topics(t, [creatable(name, configs=configs)])))
    assert k[0]["error_code"] == 40
    assert o == k


def test_create_topics_internal_segment_bytes(pair):
    """Kafka 4's internal (testing) topic config: accepted below segment.bytes' 1 MiB minimum, and not
    listed among the topic's configs."""
    name = unique("internalseg")
    k, o = pair.run(lambda t: norm_create(create_topics(t, [creatable(name, configs={"internal.segment.bytes": "2048"})])))
    assert k[0]["error_code"] == 0
    assert o == k


def test_metadata_auto_create_cluster_metadata(pair):
    k, o = pair.run(lambda t: metadata_topic(t, "__cluster_metadata", True))
    assert o == k


@pytest.mark.parametrize("name", ["__cluster_metadata"])
def test_create_topics_internal_names(pair, name):
    """KRaft's metadata topic cannot be created by a client (the coordinators' topics can, before they exist)."""
    k, o = pair.run(lambda t: norm_create(create_topics(t, [creatable(name)])))
    assert k[0]["error_code"] != 0
    assert o == k


@pytest.mark.parametrize("partitions,rf,expected", [(0, 1, 37), (-5, 1, 37), (1, 0, 38), (1, -5, 38),
                                                    (-1, -1, 0), (3, -1, 0)])
def test_create_topics_counts(pair, partitions, rf, expected):
    """-1 means "the broker default" (num.partitions / default.replication.factor)."""
    name = unique("counts")
    k, o = pair.run(lambda t: norm_create(create_topics(t, [creatable(name, partitions, rf)])))
    assert k[0]["error_code"] == expected
    assert o == k


def test_create_topics_replication_factor_above_broker_count(pair):
    """DELIBERATE DIFFERENCE: Kafka refuses replication factor 3 on a one-broker cluster
    (INVALID_REPLICATION_FACTOR, 38); ours is a single process that keeps one copy whatever is asked,
    and accepts it, so that clients and tools that default to RF=3 (Kafka Streams, Connect, some
    operators) work against it. Documented in the README."""
    name = unique("rf3")
    k, o = pair.run(lambda t: norm_create(create_topics(t, [creatable(name, 1, 3)])))
    assert k[0]["error_code"] == 38
    assert o[0]["error_code"] == 0 and o[0]["num_partitions"] == 1


# -- DeleteTopics / CreatePartitions -------------------------------------------------------------------

@pytest.mark.parametrize("version", [1, 4, 6])
def test_delete_topics_unknown_name(pair, version):
    name = unique("nope")
    if version >= 6:
        req = build(DeleteTopicsRequest, version, topics=[dict(name=name, topic_id=None)], timeout_ms=10000)
    else:
        req = build(DeleteTopicsRequest, version, topic_names=[name], timeout_ms=10000)

    def scenario(t):
        with t.client() as c:
            return normalise(c.send(req, version), replace=TOPIC_ID)

    k, o = pair.run(scenario)
    assert k["responses"][0]["error_code"] == 3
    assert o == k


def test_delete_topics_unknown_id(pair):
    req = build(DeleteTopicsRequest, 6, topics=[dict(name=None, topic_id="00000000-0000-0000-0000-0000000000aa")],
                timeout_ms=10000)

    def scenario(t):
        with t.client() as c:
            return normalise(c.send(req, 6))

    k, o = pair.run(scenario)
    assert k["responses"][0]["error_code"] == 100
    assert o == k


def test_delete_topics_then_metadata(pair):
    name = pair.create_topic(unique("del"), 2)

    def scenario(t):
        with t.client() as c:
            r = normalise(c.send(build(DeleteTopicsRequest, 6, topics=[dict(name=name, topic_id=None)],
                                       timeout_ms=10000), 6), replace=TOPIC_ID)
        deadline = time.monotonic() + 30
        while metadata_topic(t, name, False)["error_code"] != 3:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        return r

    k, o = pair.run(scenario)
    assert k["responses"][0]["error_code"] == 0
    assert o == k


def create_partitions(t, name: str, count: int, validate_only: bool = False):
    with t.client() as c:
        return normalise(c.send(build(CreatePartitionsRequest, 3, topics=[dict(name=name, count=count, assignments=None)],
                                      timeout_ms=10000, validate_only=validate_only), 3))


@pytest.mark.parametrize("count,validate_only,expected", [(1, False, 37), (2, False, 37), (5, True, 0), (4, False, 0)],
                         ids=["shrink", "same", "validate-grow", "grow"])
def test_create_partitions(pair, count, validate_only, expected):
    name = pair.create_topic(unique("parts"), 2)

    def scenario(t):
        r = create_partitions(t, name, count, validate_only)
        if expected == 0 and not validate_only:
            t.wait_topic(name, count)
        return r, len(metadata_topic(t, name, False)["partitions"])

    k, o = pair.run(scenario)
    assert k[0]["results"][0]["error_code"] == expected
    assert o == k


def test_create_partitions_unknown_topic(pair):
    name = unique("nope")
    k, o = pair.run(lambda t: create_partitions(t, name, 3))
    assert k["results"][0]["error_code"] == 3
    assert o == k


# -- DescribeConfigs ------------------------------------------------------------------------------------

TOPIC_OVERRIDES = {"retention.ms": "1234567", "cleanup.policy": "compact", "max.message.bytes": "5000",
                   "segment.bytes": "1048576"}


def config_table(resp, with_synonyms: bool = False) -> dict[str, dict]:
    (res,) = normalise(resp)["results"]
    out = {}
    for c in res["configs"]:
        c = dict(c)
        c.pop("documentation", None)
        if not with_synonyms:
            c.pop("synonyms", None)
        out[c.pop("name")] = c
    return out


@pytest.fixture(scope="module")
def configured_topic(pair) -> str:
    return pair.create_topic(unique("cfg"), 1, TOPIC_OVERRIDES)


def test_describe_configs_topic_all(pair, configured_topic):
    """Every topic config both brokers know: value, source, read-only, sensitive and type must match.
    Configs only Kafka has are listed (printed), not compared; there are none today."""
    k, o = pair.run(lambda t: config_table(t.describe_configs(2, configured_topic)))
    only_kafka = sorted(set(k) - set(o))
    only_ours = sorted(set(o) - set(k))
    print(f"\ntopic configs only Kafka has: {only_kafka}; only ours: {only_ours}")
    assert only_ours == []
    common = sorted(set(k) & set(o))
    assert {n: o[n] for n in common} == {n: k[n] for n in common}
    assert k["retention.ms"]["value"] == "1234567" and k["retention.ms"]["config_source"] == 1


def test_describe_configs_topic_selected_keys_with_synonyms(pair, configured_topic):
    """Selected keys with include_synonyms: the override first, then the broker-level synonyms that have
    a value (a broker config whose default is null, e.g. log.retention.ms, is not listed)."""
    keys = ["retention.ms", "cleanup.policy", "segment.bytes", "max.message.bytes", "flush.ms", "segment.ms",
            "segment.jitter.ms", "compression.type", "message.timestamp.type", "min.insync.replicas"]
    k, o = pair.run(lambda t: config_table(t.describe_configs(2, configured_topic, keys, synonyms=True), True))
    assert sorted(k) == sorted(keys)
    assert o == k


def test_describe_configs_topic_unknown_key(pair, configured_topic):
    k, o = pair.run(lambda t: config_table(t.describe_configs(2, configured_topic, ["no.such.config"])))
    assert k == {}
    assert o == k


@pytest.mark.parametrize("rtype,name_kind,expected", [
    (2, "unknown-topic", 3), (9, "topic", 42), (4, "wrong-broker", 42), (2, "invalid-topic", 17),
])
def test_describe_configs_errors(pair, configured_topic, rtype, name_kind, expected):
    name = {"unknown-topic": unique("nope"), "topic": configured_topic, "wrong-broker": "7",
            "invalid-topic": "bad name!"}[name_kind]

    def scenario(t):
        (res,) = normalise(t.describe_configs(rtype, name))["results"]
        return res

    k, o = pair.run(scenario)
    assert k["error_code"] == expected
    assert o == k


def test_describe_configs_broker_default_resource(pair):
    """BROKER resource with an empty name is the cluster-wide dynamic default: only dynamically set
    cluster defaults are listed (none have been set here), not this broker's configs."""
    keys = ["num.partitions", "log.retention.hours"]
    k, o = pair.run(lambda t: normalise(t.describe_configs(4, "", keys))["results"][0])
    assert k["error_code"] == 0 and k["configs"] == []
    assert o == k


def test_describe_configs_broker_values(pair):
    """This broker's configs: the values of settings that are not deployment-specific. Sources and
    read-only flags differ legitimately (Kafka lists what its server.properties set as STATIC; ours gets
    the same values as --override), so only values are compared."""
    keys = ["num.partitions", "default.replication.factor", "message.max.bytes", "log.retention.hours",
            "log.segment.bytes", "log.retention.bytes", "auto.create.topics.enable", "delete.topic.enable",
            "offsets.topic.num.partitions", "transaction.state.log.num.partitions", "transaction.max.timeout.ms",
            "group.min.session.timeout.ms", "group.max.session.timeout.ms", "log.cleanup.policy",
            "compression.type", "log.message.timestamp.type", "min.insync.replicas",
            "transactional.id.expiration.ms", "producer.id.expiration.ms"]

    def scenario(t):
        table = config_table(t.describe_configs(4, str(t.node_id), keys))
        return {n: c["value"] for n, c in table.items()}

    k, o = pair.run(scenario)
    assert sorted(k) == sorted(keys)
    assert o == k


@pytest.mark.parametrize("assignments", [[[1]], [[1], [1], [1]], [[]], [[1, 1]]],
                         ids=["too-few", "too-many", "empty", "repeated-broker"])
def test_create_partitions_with_assignments(pair, assignments):
    """kafka-python's NewPartitions(3, [[1]]) on a one-partition topic: the assignment count must be
    the number of new partitions, each a valid replica list (node ids: each cluster's own)."""
    name = pair.create_topic(unique("parts-assign"), 1)

    def scenario(t):
        with t.client() as c:
            r = c.send(build(CreatePartitionsRequest, 3, timeout_ms=10000, validate_only=True, topics=[dict(
                name=name, count=3,
                assignments=[dict(broker_ids=[t.node_id if b == 1 else b for b in a]) for a in assignments])]), 3)
        return normalise(r)

    k, o = pair.run(scenario)
    assert k["results"][0]["error_code"] != 0
    assert o == k


@pytest.mark.parametrize("api", ["create-topics", "create-partitions"])
def test_excessively_many_partitions_in_one_request(pair, api):
    """Kafka refuses more than 10,000 new partitions in one request before doing anything (a request
    for 100,000 once made ours create directories until it ran out of descriptors)."""
    name = pair.create_topic(unique("parts-many"), 1) if api == "create-partitions" else unique("many")

    def scenario(t):
        with t.client() as c:
            if api == "create-topics":
                r = c.send(build(CreateTopicsRequest, 7, timeout_ms=10000, validate_only=False, topics=[
                    dict(name=name, num_partitions=10_001, replication_factor=1, assignments=[], configs=[])]), 7)
            else:
                r = c.send(build(CreatePartitionsRequest, 3, timeout_ms=10000, validate_only=False, topics=[
                    dict(name=name, count=10_002, assignments=None)]), 3)
        return normalise(r, replace={"topic_id": "<id>"}), metadata_topic(t, name, False)["error_code"]

    k, o = pair.run(scenario)
    assert o == k
