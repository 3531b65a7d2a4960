"""ACL APIs on a broker without an authorizer (Kafka's default: ``authorizer.class.name`` empty).

Kafka answers every DescribeAcls / CreateAcls / DeleteAcls with SECURITY_DISABLED ("No Authorizer is
configured on the broker" / "No Authorizer is configured."); ours must answer the same, messages included (so kafka-acls and Admin.describeAcls
report the same thing on both).
"""

from __future__ import annotations

import pytest
from kafka.protocol.admin import CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest

from tests.differential.harness import normalise
from tests.differential.wire import build

TOPIC, LITERAL, ANY, ALLOW, READ = 2, 3, 1, 3, 3


def _plain(resp):
    return normalise(resp, drop=()) | {"error_messages": _messages(resp)}


def _messages(resp) -> list:
    d = resp.to_dict()
    found = []

    def walk(x):
        if isinstance(x, dict):
            if "error_message" in x:
                found.append(x["error_message"])
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(d)
    return found


@pytest.mark.parametrize("version", [1, 2, 3])
def test_describe_acls_security_disabled(pair, request, version):
    pair.require(request, (29, version))
    req = build(DescribeAclsRequest, version, resource_type_filter=ANY, resource_name_filter=None,
                pattern_type_filter=ANY, principal_filter=None, host_filter=None, operation=ANY,
                permission_type=ANY)

    def scenario(t):
        with t.client() as c:
            return _plain(c.send(req, version))

    k, o = pair.run(scenario)
    assert k["error_code"] == 54 and k["error_messages"] == ["No Authorizer is configured on the broker"]
    assert o == k


@pytest.mark.parametrize("version", [1, 3])
def test_create_and_delete_acls_security_disabled(pair, request, version):
    pair.require(request, (30, version), (31, version))
    create = build(CreateAclsRequest, version, creations=[
        dict(resource_type=TOPIC, resource_name=name, resource_pattern_type=LITERAL, principal="User:alice",
             host="*", operation=READ, permission_type=ALLOW) for name in ("a", "b")])
    delete = build(DeleteAclsRequest, version, filters=[
        dict(resource_type_filter=TOPIC, resource_name_filter="a", pattern_type_filter=LITERAL,
             principal_filter=None, host_filter=None, operation=ANY, permission_type=ANY)])

    def scenario(t):
        with t.client() as c:
            return _plain(c.send(create, version)), _plain(c.send(delete, version))

    k, o = pair.run(scenario)
    assert [r["error_code"] for r in k[0]["results"]] == [54, 54]
    assert [r["error_code"] for r in k[1]["filter_results"]] == [54]
    assert set(k[0]["error_messages"] + k[1]["error_messages"]) == {"No Authorizer is configured."}
    assert o == k
