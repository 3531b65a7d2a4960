"""ListConfigResources (v0 client-metrics only, v1 by resource type) compared with Apache Kafka.

Normalised: topics and group configs other than this test's own are left out (each cluster has its
own set from other tests, and Kafka's broker learns changes a moment late), entries are compared in
sorted order (Kafka lists them in its maps' order), and the node id stands in for the broker and
broker-logger names.
"""

from __future__ import annotations

import pytest
from kafka.protocol.admin import ListConfigResourcesRequest

from tests.differential.harness import build, to_plain, unique

TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32


def listed(t, version: int, types: list[int] | None, mine: set[str]) -> tuple:
    with t.client() as c:
        r = to_plain(c.send(build(ListConfigResourcesRequest, version, resource_types=types or []), version))
    entries = []
    for e in r["config_resources"]:
        kind, name = e.get("resource_type"), e["resource_name"]
        if kind in (BROKER, BROKER_LOGGER) and name == str(t.node_id):
            name = "<node>"
        if kind in (TOPIC, GROUP) and name not in mine:
            continue  # another test's topic or group config, present on one broker and maybe not yet on the other
        entries.append((kind, name))
    # Kafka lists from its metadata image's maps, in no fixed order
    return r["error_code"], sorted(entries, key=repr)


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
