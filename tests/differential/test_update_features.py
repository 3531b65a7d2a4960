"""UpdateFeatures (key 57, v0-2; ``kafka-features.sh upgrade/downgrade``) compared with Apache Kafka.

Every answer is compared exactly (error codes and messages; the node id in "Local controller <id>" is
normalised), and the finalized levels ApiVersions reports afterwards, for the features both brokers
support (Kafka also finalizes kraft.version, share.version and streams.version, which ours does not
implement). The Kafka of the pair is shared by the whole session: every scenario that changes a level
restores the original levels at its end.

Deliberate differences: metadata.version stays 30 on both because Kafka 4.3.1 refuses every
downgrade from 30 (compared below); kraft/share/streams.version are "not supported" by ours.
"""

from __future__ import annotations

import re
import time
import uuid

import pytest
from kafka.protocol.admin import IncrementalAlterConfigsRequest
from kafka.protocol.metadata import ApiVersionsRequest

from protocol.messages import request_class
from tests.differential.harness import build, to_plain
from tests.support.broker_process import BrokerProcess

UpdateFeaturesRequest = request_class(57)
CGH, CGD = request_class(68), request_class(69)
OURS = ("group.version", "metadata.version", "transaction.version", "eligible.leader.replicas.version")
ORIGINAL = {"group.version": 1, "metadata.version": 30, "transaction.version": 2,
            "eligible.leader.replicas.version": 1}
UPGRADE, SAFE, UNSAFE = 1, 2, 3


def update(t, version: int, updates: list[tuple], validate_only: bool = False) -> dict:
    """updates: (feature, level[, upgrade type (v1+) / allow_downgrade (v0)])."""
    ups = []
    for u in updates:
        d = dict(feature=u[0], max_version_level=u[1])
        if version == 0:
            d["allow_downgrade"] = u[2] if len(u) > 2 else False
        else:
            d["upgrade_type"] = u[2] if len(u) > 2 else UPGRADE
        ups.append(d)
    data = dict(timeout_ms=60000, feature_updates=ups)
    if version >= 1:
        data["validate_only"] = validate_only
    with t.client() as c:
        r = to_plain(c.send(build(UpdateFeaturesRequest, version, **data), version))
    r.pop("throttle_time_ms", None)
    if r.get("error_message"):
        r["error_message"] = re.sub(r"Local controller \d+", "Local controller <node>", r["error_message"])
    return r


def finalized(t) -> tuple[int, dict[str, int]]:
    with t.client() as c:
        r = c.send(build(ApiVersionsRequest, 4, client_software_name="d", client_software_version="1"), 4)
    assert r.error_code == 0
    levels = {f.name: f.max_version_level for f in r.finalized_features if f.name in OURS}
    assert all(f.min_version_level == f.max_version_level for f in r.finalized_features)
    return r.finalized_features_epoch, levels


def finalized_after(t, epoch: int, timeout: float = 15.0) -> tuple[int, dict[str, int]]:
    """The levels once the answer's epoch is above ``epoch``: Kafka's broker learns an update from the
    metadata log a moment after the controller answered (ours at once)."""
    deadline = time.monotonic() + timeout
    while True:
        now = finalized(t)
        if now[0] > epoch or time.monotonic() > deadline:
            return now
        time.sleep(0.05)


def restore(t) -> None:
    _, levels = finalized(t)
    ups = [(n, v, UPGRADE if v >= levels.get(n, 0) else SAFE) for n, v in ORIGINAL.items()
           if n != "metadata.version" and levels.get(n, 0) != v]
    if ups:
        epoch = finalized(t)[0]
        assert update(t, 1, ups)["error_code"] == 0
        finalized_after(t, epoch)
    assert finalized(t)[1] == ORIGINAL, t


@pytest.fixture
def restored(pair):
    yield
    for t in pair:
        restore(t)


def test_initial_levels(pair):
    k, o = pair.run(lambda t: finalized(t)[1])
    assert k == o == ORIGINAL


REJECTED = [
    [("nope", 1)],
    [("", 1)],
    [("nope", 0)],
    [("nope", 0, SAFE)],
    [("transaction.version", 3)],
    [("transaction.version", -1)],
    [("transaction.version", 1)],  # a downgrade as an upgrade
    [("transaction.version", 1, 0)],  # unknown upgrade types
    [("transaction.version", 1, 4)],
    [("group.version", 2)],
    [("eligible.leader.replicas.version", 2, SAFE)],
    [("metadata.version", 31)],
    [("metadata.version", 6, SAFE)],
    [("metadata.version", 0, SAFE)],
    [("metadata.version", 29, SAFE)],
    [("metadata.version", 29, UNSAFE)],
    [("metadata.version", 7, UNSAFE)],
    [("metadata.version", 29)],
    [("transaction.version", 2, SAFE), ("group.version", 0, SAFE), ("nope", 1)],
    [("transaction.version", 3), ("nope", 1)],  # the first failure in Kafka's (HashMap) order
    [("group.version", 2), ("transaction.version", 3), ("eligible.leader.replicas.version", 5)],
    [("transaction.version", 1, SAFE), ("metadata.version", 29, SAFE)],
]


@pytest.mark.parametrize("version", [0, 1, 2])
@pytest.mark.parametrize("updates", REJECTED, ids=lambda u: ",".join(f"{x[0] or '<empty>'}={x[1]}" for x in u))
def test_rejected(pair, restored, version, updates):
    """Nothing is applied: the first failing feature fails the whole request (top-level error)."""
    def scenario(t):
        before = finalized(t)[1]
        ups = [u[:2] + ((u[2] != UPGRADE),) if version == 0 and len(u) > 2 else u for u in updates]
        answers = [update(t, version, ups, validate_only=vo) for vo in ((False, True) if version else (False,))]
        return answers, finalized(t)[1] == before

    k, o = pair.run(scenario)
    assert o == k
    assert all(a["error_code"] == 95 for a in k[0])


@pytest.mark.parametrize("version", [0, 1, 2])
def test_v0_allow_downgrade_is_ignored(pair, restored, version):
    def scenario(t):
        return update(t, 0, [("transaction.version", 1, True)]), finalized(t)[1]

    k, o = pair.run(scenario)
    assert o == k and k[0]["error_code"] == 95


ACCEPTED = [
    [],
    [("transaction.version", 2)],
    [("metadata.version", 30)],
    [("metadata.version", 30, SAFE)],
    [("transaction.version", 1, SAFE)],
    [("transaction.version", 0, UNSAFE), ("group.version", 0, SAFE), ("eligible.leader.replicas.version", 0, SAFE)],
    [("transaction.version", 2), ("transaction.version", 1, SAFE)],  # a name given twice: the last counts
    [("transaction.version", 1, SAFE), ("transaction.version", 2)],
    [("share.version", 0, SAFE)],
]


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("updates", ACCEPTED, ids=lambda u: ",".join(f"{x[0]}={x[1]}" for x in u) or "none")
def test_validate_only(pair, restored, version, updates):
    def scenario(t):
        before = finalized(t)
        return update(t, version, updates, validate_only=True), finalized(t)[1] == before[1]

    k, o = pair.run(scenario)
    assert o == k and k[0]["error_code"] == 0


@pytest.mark.parametrize("version", [0, 1, 2])
@pytest.mark.parametrize("updates", ACCEPTED, ids=lambda u: ",".join(f"{x[0]}={x[1]}" for x in u) or "none")
def test_applied(pair, restored, version, updates):
    """The levels change (a feature at 0 leaves FinalizedFeatures) and the epoch grows."""
    if version == 0 and any(len(u) > 2 and u[2] != UPGRADE for u in updates):
        pytest.skip("v0 cannot downgrade (AllowDowngrade is ignored)")

    def scenario(t):
        epoch, before = finalized(t)
        answer = update(t, version, updates)
        expected = dict(before)
        for name, level, *_ in updates:
            if name in OURS:
                expected[name] = level
        expected = {n: v for n, v in expected.items() if v > 0}
        # Kafka's broker learns the change from its metadata log a moment after answering: wait
        # until both the levels and the epoch have moved (at once on ours)
        deadline = time.monotonic() + 15
        while True:
            after_epoch, levels = finalized(t)
            if (levels == expected and (after_epoch > epoch or not updates)) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        return answer, levels, after_epoch > epoch or not updates

    k, o = pair.run(scenario)
    assert o == k and k[0]["error_code"] == 0 and k[2]


def test_transaction_version_levels(pair, restored):
    """Down to 1, to 0 (no longer finalized), back up to 2; every change grows the epoch."""
    def scenario(t):
        seen, epochs = [], [finalized(t)[0]]
        for level, kind in ((1, SAFE), (0, SAFE), (1, UPGRADE), (2, UPGRADE)):
            answer = update(t, 2, [("transaction.version", level, kind)])
            epoch, levels = finalized_after(t, epochs[-1])
            seen.append((answer, levels))
            epochs.append(epoch)
        return seen, epochs == sorted(set(epochs))

    k, o = pair.run(scenario)
    assert o == k and k[1]
    assert [lv.get("transaction.version") for _, lv in k[0]] == [1, None, 1, 2]


def test_group_version_0_turns_the_consumer_protocol_off(pair, restored):
    """ConsumerGroupHeartbeat and ConsumerGroupDescribe answer UNSUPPORTED_VERSION; ApiVersions
    still lists them."""
    def scenario(t):
        epoch = finalized(t)[0]
        assert update(t, 1, [("group.version", 0, SAFE)])["error_code"] == 0
        finalized_after(t, epoch)
        with t.client() as c:
            group = f"g-{uuid.uuid4().hex[:8]}"
            hb = to_plain(c.send(build(CGH, 1, group_id=group, member_id=uuid.uuid4().hex[:22], member_epoch=0,
                                       instance_id=None, rack_id=None, rebalance_timeout_ms=30000,
                                       subscribed_topic_names=["t"], subscribed_topic_regex=None,
                                       server_assignor=None, topic_partitions=[]), 1))
            hb.pop("throttle_time_ms")
            d = to_plain(c.send(build(CGD, 1, group_ids=[group, "other"], include_authorized_operations=False), 1))
            d.pop("throttle_time_ms")
            d["groups"][0]["group_id"] = "<group>"
        keys = {k: v for k, v in t.refresh_api_versions().items() if k in (68, 69)}
        return hb, d, keys

    k, o = pair.run(scenario)
    assert o == k
    assert k[0]["error_code"] == 35 and k[2] == {68: (0, 1), 69: (0, 1)}


def test_elr_0_lets_min_isr_be_set_per_broker(pair, restored):
    def scenario(t):
        def broker_min_isr():
            with t.client() as c:
                r = c.send(build(IncrementalAlterConfigsRequest, 1, validate_only=True, resources=[dict(
                    resource_type=4, resource_name="", configs=[dict(name="min.insync.replicas",
                                                                     config_operation=1, value=None)])]), 1)
            return [(x.error_code, x.error_message) for x in r.responses]

        out = [broker_min_isr()]
        for level, kind in ((0, SAFE), (1, UPGRADE)):
            epoch = finalized(t)[0]
            assert update(t, 2, [("eligible.leader.replicas.version", level, kind)])["error_code"] == 0
            finalized_after(t, epoch)
            out.append(broker_min_isr())
        return out

    k, o = pair.run(scenario)
    assert o == k
    assert k[0][0][0] == 40 and k[1] == [(0, None)] and k[2] == k[0]


def test_levels_survive_a_restart(tmp_path):
    from tests.differential.harness import Target

    b = BrokerProcess(tmp_path / "data", overrides={"transaction.version": "2"}).start()
    try:
        t = Target("ours", b.bootstrap)
        assert update(t, 2, [("transaction.version", 1, SAFE), ("group.version", 0, SAFE)])["error_code"] == 0
        epoch, levels = finalized(t)
    finally:
        assert b.stop() == 0
    # the property is only the level at first start: it does not undo the update
    b = BrokerProcess(tmp_path / "data", port=b.port, overrides={"transaction.version": "2"}).start()
    try:
        t = Target("ours", b.bootstrap)
        assert finalized(t) == (epoch, levels)
        assert levels == {"metadata.version": 30, "transaction.version": 1, "eligible.leader.replicas.version": 1}
        assert update(t, 1, [("transaction.version", 2)])["error_code"] == 0
        assert finalized(t) == (epoch + 1, {**levels, "transaction.version": 2})
    finally:
        assert b.stop() == 0
