"""Client quotas: AlterClientQuotas validation and DescribeClientQuotas filters, against Kafka 4.3.1.

Kafka applies an alteration through its controller and the broker sees it a moment later, so a
describe after an alteration polls until the expected entity shows. Entity names carry a unique
prefix; the default entities (null names) are set and removed within one test.
"""

from __future__ import annotations

import time

import pytest
from kafka.protocol.admin import AlterClientQuotasRequest, DescribeClientQuotasRequest

from tests.differential.harness import build, normalise, unique


def alter(t, entries, validate_only=False, version=1):
    with t.client() as c:
        r = c.send(build(AlterClientQuotasRequest, version, entries=[
            dict(entity=[dict(entity_type=et, entity_name=en) for et, en in entity],
                 ops=[dict(key=k, value=v if v is not None else 0.0, remove=v is None) for k, v in ops])
            for entity, ops in entries], validate_only=validate_only), version)
    return [(e.error_code, e.error_message) for e in r.entries]


def describe(t, components, strict=False, version=1):
    with t.client() as c:
        r = c.send(build(DescribeClientQuotasRequest, version, components=[
            dict(entity_type=et, match_type=mt, match=m) for et, mt, m in components], strict=strict), version)
    entries = None if r.entries is None else sorted(
        ((tuple(sorted((e.entity_type, e.entity_name) for e in x.entity)),
          tuple(sorted((v.key, v.value) for v in x.values))) for x in r.entries), key=repr)
    # On success Kafka 4.3.1 answers a null or an empty message, varying from one answer to the next
    message = None if r.error_code == 0 and not r.error_message else r.error_message
    return r.error_code, message, entries


def mine(entries, prefix):
    """Only the entities this test made (named with its prefix, or the defaults it set)."""
    if entries is None:
        return None
    return [e for e in entries if all(n is None or n.startswith(prefix) for _, n in e[0])]


def settle(t, components, count, prefix, timeout=15.0):
    """Describe until ``count`` of this test's entities match (Kafka applies alterations a moment later)."""
    deadline = time.monotonic() + timeout
    while True:
        got = describe(t, components)
        if len(mine(got[2], prefix) or []) == count or time.monotonic() > deadline:
            return got
        time.sleep(0.1)


ALTER_CASES = {
    "empty entity": ([], [("producer_byte_rate", 1024.0)]),
    "unknown entity type": ([("group", "g")], [("producer_byte_rate", 1024.0)]),
    "duplicate type": ([("user", "a"), ("user", "b")], [("producer_byte_rate", 1024.0)]),
    "ip with user": ([("ip", "127.0.0.1"), ("user", "a")], [("connection_creation_rate", 5.0)]),
    "bad ip": ([("ip", "not an ip")], [("connection_creation_rate", 5.0)]),
    "unknown key": ([("user", "a")], [("no_such_quota", 1.0)]),
    "ip key on user": ([("user", "a")], [("connection_creation_rate", 5.0)]),
    "user key on ip": ([("ip", "127.0.0.1")], [("producer_byte_rate", 5.0)]),
    "fractional byte rate": ([("user", "a")], [("producer_byte_rate", 1.5)]),
    "zero byte rate": ([("user", "a")], [("producer_byte_rate", 0.0)]),
    "negative rate": ([("client-id", "c")], [("request_percentage", -1.0)]),
    "fractional percentage": ([("client-id", "c")], [("request_percentage", 12.5)]),
    "duplicate key": ([("user", "a")], [("producer_byte_rate", 1.0), ("producer_byte_rate", 2.0)]),
    "empty user name": ([("user", "")], [("producer_byte_rate", 1024.0)]),
    "empty client id": ([("client-id", "")], [("producer_byte_rate", 1024.0)]),
    "user and client": ([("user", "a"), ("client-id", "c")], [("producer_byte_rate", 1024.0),
                                                               ("consumer_byte_rate", 2048.0)]),
    "default user": ([("user", None)], [("producer_byte_rate", 1024.0)]),
    "default ip": ([("ip", None)], [("connection_creation_rate", 5.0)]),
    "mutation rate": ([("user", "a")], [("controller_mutation_rate", 2.5)]),
    "remove missing": ([("user", "a")], [("producer_byte_rate", None)]),
}


@pytest.mark.parametrize("case", list(ALTER_CASES))
def test_alter_validation(pair, case):
    entity, ops = ALTER_CASES[case]
    k, o = pair.run(lambda t: alter(t, [(entity, ops)], validate_only=True))
    assert o == k


DESCRIBE_ERRORS = {
    "duplicate type": [("user", 0, "a"), ("user", 1, None)],
    "exact without match": [("user", 0, None)],
    "default with match": [("user", 1, "a")],
    "any with match": [("user", 2, "a")],
    "unknown match type": [("user", 7, None)],
    "unknown entity type": [("group", 2, None)],
    "ip with user": [("ip", 2, None), ("user", 2, None)],
}


@pytest.mark.parametrize("case", list(DESCRIBE_ERRORS))
def test_describe_filter_errors(pair, case):
    k, o = pair.run(lambda t: describe(t, DESCRIBE_ERRORS[case]))
    assert k[0] != 0, k
    assert o == k


def test_set_describe_and_remove(pair):
    p = unique("q") + "-"
    u, c = p + "user", p + "client"
    entries = [
        ([("user", u)], [("producer_byte_rate", 1024.0), ("request_percentage", 25.5)]),
        ([("user", u), ("client-id", c)], [("consumer_byte_rate", 4096.0)]),
        ([("client-id", c)], [("producer_byte_rate", 2048.0)]),
        ([("user", None), ("client-id", c)], [("producer_byte_rate", 512.0)]),
    ]
    filters = {
        "user exact": ([("user", 0, u)], False),
        "user exact strict": ([("user", 0, u)], True),
        "client exact": ([("client-id", 0, c)], False),
        "user default": ([("user", 1, None)], False),
        "user any + client exact": ([("user", 2, None), ("client-id", 0, c)], False),
        "client exact strict": ([("client-id", 0, c)], True),
    }

    def scenario(t):
        out = {"alter": alter(t, entries)}
        settle(t, [("client-id", 0, c)], 3, p)  # every entity has landed
        settle(t, [("user", 0, u)], 2, p)
        for name, (components, strict) in filters.items():
            code, message, got = describe(t, components, strict)
            out[name] = (code, message, mine(got, p))
        out["remove"] = alter(t, [(e, [(k, None) for k, _ in ops]) for e, ops in entries])
        settle(t, [("client-id", 0, c)], 0, p)
        settle(t, [("user", 0, u)], 0, p)
        out["after remove"] = mine(describe(t, [("user", 2, None)])[2], p)
        return normalise(out)

    k, o = pair.run(scenario)
    assert k["alter"] == [[0, None]] * 4, k
    assert len(k["client exact"][2]) == 3 and len(k["client exact strict"][2]) == 1, k
    assert o == k
