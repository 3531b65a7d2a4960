"""ListConfigResources (v0 client-metrics only, v1 by resource type) compared with Apache Kafka.

Normalised: topics other than this test's own (each cluster has its own set from other tests), and
the node id standing in for the broker and broker-logger names.
"""

from __future__ import annotations

import pytest
from kafka.protocol.admin import ListConfigResourcesRequest

from tests.differential.harness import build, to_plain, unique

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8


def listed(t, version: int, types: list[int] | None, mine: set[str]) -> tuple:
    with t.client() as c:
        r = to_plain(c.send(build(ListConfigResourcesRequest, version, resource_types=types or []), version))
    entries = []
    for e in r["config_resources"]:
        kind, name = e.get("resource_type"), e["resource_name"]
        if kind in (BROKER, BROKER_LOGGER) and name == str(t.node_id):
            name = "<node>"
        if kind == TOPIC and name not in mine:
            if entries and entries[-1] == (TOPIC, "<other>"):
                continue
            name = "<other>"
        entries.append((kind, name))
    return r["error_code"], entries


@pytest.fixture(scope="module")
def topics(pair) -> set[str]:
    prefix = unique("lcr")
    names = {f"{prefix}-b", f"{prefix}-a"}
    for n in sorted(names):
        pair.create_topic(n)
    return names


@pytest.mark.parametrize("types", [[], [2], [4], [8], [16], [32], [2, 4, 8, 16, 32], [2, 2], [1], [3], [99]],
                         ids=lambda v: "-".join(map(str, v)) or "all")
def test_list_config_resources_v1(pair, topics, types):
    k, o = pair.run(lambda t: listed(t, 1, types, topics))
    assert o == k


def test_list_config_resources_v0(pair, topics):
    k, o = pair.run(lambda t: listed(t, 0, None, topics))
    assert k == (0, [])
    assert o == k
