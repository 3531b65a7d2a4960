"""Client quotas through the wire: stored across a restart, and producer_byte_rate /
consumer_byte_rate enforced as Kafka's ClientQuotaManager does (a throttle time in the answer,
and the connection reads nothing more until it has passed). The broker runs with two 1 s quota
windows so the throttle stays short."""

from __future__ import annotations

import time

import pytest
from kafka.protocol.admin import AlterClientQuotasRequest, CreateTopicsRequest, DescribeClientQuotasRequest
from kafka.protocol.producer import ProduceRequest

from broker.cluster.quotas import ClientQuotas
from protocol import records as rec
from tests.differential.harness import build
from tests.support.broker_process import BrokerProcess
from tests.support.raw_client import RawClient

QUOTA = 20_000  # bytes/s


@pytest.fixture
def quota_broker(tmp_path):
    b = BrokerProcess(tmp_path / "data", overrides={"quota.window.num": "2", "quota.window.size.seconds": "1"})
    b.start()
    yield b
    if b.proc is not None:
        b.kill()


def _alter(c: RawClient, entity: list[tuple[str, str | None]], ops: list[tuple[str, float | None]]) -> None:
    r = c.send(build(AlterClientQuotasRequest, 1, entries=[dict(
        entity=[dict(entity_type=t, entity_name=n) for t, n in entity],
        ops=[dict(key=k, value=v or 0.0, remove=v is None) for k, v in ops])], validate_only=False), 1)
    assert [e.error_code for e in r.entries] == [0]


def _describe(c: RawClient) -> list:
    r = c.send(build(DescribeClientQuotasRequest, 1, components=[dict(entity_type="client-id", match_type=2,
                                                                       match=None)], strict=False), 1)
    return sorted(((tuple((e.entity_type, e.entity_name) for e in x.entity), tuple((v.key, v.value) for v in x.values))
                   for x in r.entries), key=repr)


def _produce(c: RawClient, topic: str, size: int):
    batch = rec.build_batch([(None, b"x" * size)], timestamp=int(time.time() * 1000))
    req = build(ProduceRequest, 9,
                transactional_id=None, acks=1, timeout_ms=10000,
                topic_data=[dict(name=topic, partition_data=[dict(index=0, records=batch)])])
    started = time.monotonic()
    r = c.send(req, 9)
    assert r.responses[0].partition_responses[0].error_code == 0
    return r.throttle_time_ms, time.monotonic() - started


def test_producer_byte_rate_throttles_and_quotas_persist(quota_broker, topic_name):
    b = quota_broker
    with RawClient(b.bootstrap, client_id="admin") as c:
        r = c.send(build(CreateTopicsRequest, 7, topics=[dict(name=topic_name, num_partitions=1, replication_factor=1,
                                                             assignments=[], configs=[])],
                         timeout_ms=10000, validate_only=False), 7)
        assert r.topics[0].error_code == 0
        _alter(c, [("client-id", "slow")], [("producer_byte_rate", float(QUOTA))])
        stored = _describe(c)
    assert stored == [((("client-id", "slow"),), (("producer_byte_rate", float(QUOTA)),))]

    with RawClient(b.bootstrap, client_id="slow") as slow, RawClient(b.bootstrap, client_id="free") as free:
        throttle, _ = _produce(slow, topic_name, 100_000)
        # 100 kB against 20 kB/s over at least one 1 s window: Kafka's (rate - quota) / quota * window,
        # capped at the two windows
        assert 1000 <= throttle <= 2000
        # another client is not held back
        assert _produce(free, topic_name, 100_000)[0] == 0
        # the throttled connection reads its next request only once the throttle time has passed
        _, took = _produce(slow, topic_name, 10)
        assert took >= throttle / 1000 - 0.2

    b.kill()
    b.start()
    with RawClient(b.bootstrap, client_id="admin") as c:
        assert _describe(c) == stored
        _alter(c, [("client-id", "slow")], [("producer_byte_rate", None)])
        assert _describe(c) == []
    with RawClient(b.bootstrap, client_id="slow") as slow:
        assert _produce(slow, topic_name, 100_000)[0] == 0


def test_quota_resolution_follows_kafkas_order():
    class Store:
        client_quotas = {
            (("client-id", None),): {"producer_byte_rate": 1.0},
            (("client-id", "c"),): {"producer_byte_rate": 2.0},
            (("user", None),): {"producer_byte_rate": 3.0},
            (("client-id", "c"), ("user", None)): {"producer_byte_rate": 4.0},
            (("user", "ANONYMOUS"),): {"consumer_byte_rate": 5.0},
        }

    q = ClientQuotas(Store())
    assert q.quota("producer_byte_rate", "ANONYMOUS", "c") == ((("client-id", "c"), ("user", None)), 4.0)
    assert q.quota("producer_byte_rate", "ANONYMOUS", "other") == ((("user", None),), 3.0)
    assert q.quota("consumer_byte_rate", "ANONYMOUS", "c") == ((("user", "ANONYMOUS"),), 5.0)
    del Store.client_quotas[(("user", None),)], Store.client_quotas[(("client-id", "c"), ("user", None))]
    assert q.quota("producer_byte_rate", "ANONYMOUS", "c") == ((("client-id", "c"),), 2.0)
    assert q.quota("producer_byte_rate", "ANONYMOUS", "x") == ((("client-id", None),), 1.0)
    assert q.record("producer_byte_rate", "c", 100, now=0.0) > 0
    assert q.record("request_percentage", "c", 100, now=0.0) == 0
