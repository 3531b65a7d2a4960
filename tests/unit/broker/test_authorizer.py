"""The authorizer's decisions, checked case by case against what Apache Kafka 4.3.1's
StandardAuthorizer answers (each case was run against the 4.3.1 jars: the expected values are
Kafka's), the ACL filters of DescribeAcls/DeleteAcls, principals from certificates, and ACLs kept
across a restart in the cluster metadata."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.cluster.metadata import MetadataStore
from broker.security.acls import Acl, AclFilter, Operation, PatternType, Permission, ResourceType, java_host
from broker.security.authorizer import Authorizer
from broker.security.principal import NoMatchingRule, map_subject, parse_rules
from protocol.errors import ErrorCode

T, G, C, X = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY
HOST = "127.0.0.1"


class Store:
    def __init__(self) -> None:
        self.acls: dict[str, Acl] = {}
        self.acls_generation = 0

    def change_acls(self, added: dict[str, Acl], removed) -> None:
        for acl_id in removed:
            self.acls.pop(acl_id, None)
        self.acls.update(added)
        self.acls_generation += 1


def authorizer(*acls: Acl, supers: tuple[str, ...] = (), allow_everyone: bool = False) -> Authorizer:
    a = Authorizer(Store(), supers, allow_everyone)
    assert a.create(list(acls)) == [None] * len(acls)
    return a


def acl(rtype: ResourceType, name: str, principal: str, op: Operation, perm: Permission = ALLOW,
        pattern: PatternType = LIT, host: str = "*") -> Acl:
    return Acl(rtype, name, pattern, principal, host, op, perm)


def test_allow_everyone_applies_only_where_no_acl_applies_at_all() -> None:
    assert authorizer(allow_everyone=True).authorize("User:alice", HOST, Operation.READ, T, "foo")  # 1
    a = authorizer(acl(T, "foo", "User:bob", Operation.READ), allow_everyone=True)
    assert not a.authorize("User:alice", HOST, Operation.READ, T, "foo")  # 2
    assert a.authorize("User:alice", HOST, Operation.READ, T, "foobar")  # 3
    assert not a.authorize("User:bob", HOST, Operation.WRITE, T, "foo")  # 4
    assert a.authorize("User:bob", HOST, Operation.DESCRIBE, T, "foo")  # 5: implied by READ
    a = authorizer(acl(T, "fo", "User:carol", Operation.READ, pattern=PRE), allow_everyone=True)
    assert not a.authorize("User:alice", HOST, Operation.READ, T, "fox")  # 6
    assert a.authorize("User:alice", HOST, Operation.READ, T, "f")  # 7
    assert a.authorize("User:alice", HOST, Operation.READ, G, "fox")  # 8: another resource type


def test_super_users_are_exact_principals() -> None:
    assert not authorizer(supers=("User:*",)).authorize("User:alice", HOST, Operation.READ, T, "x")  # 9
    assert authorizer(acl(T, "x", "User:admin", Operation.READ, DENY), supers=("User:admin",)).authorize(
        "User:admin", HOST, Operation.READ, T, "x")


def test_deny_wins_and_only_for_its_own_operation() -> None:
    a = authorizer(acl(T, "t", "User:alice", Operation.READ), acl(T, "t", "User:alice", Operation.READ, DENY))
    assert not a.authorize("User:alice", HOST, Operation.READ, T, "t")  # 10
    assert a.authorize("User:alice", HOST, Operation.DESCRIBE, T, "t")
    a.create([acl(T, "*", "User:alice", Operation.DESCRIBE, DENY)])
    assert not a.authorize("User:alice", HOST, Operation.DESCRIBE, T, "t")  # 11


def test_hosts_and_all() -> None:
    a = authorizer(acl(T, "h", "User:alice", Operation.ALL, host="10.0.0.1"), acl(T, "h2", "User:alice", Operation.ALL,
                                                                                  host=HOST))
    assert not a.authorize("User:alice", HOST, Operation.WRITE, T, "h")  # 12
    assert a.authorize("User:alice", HOST, Operation.ALTER_CONFIGS, T, "h2")  # 13
    a = authorizer(acl(T, "c", "User:alice", Operation.ALTER_CONFIGS))
    assert a.authorize("User:alice", HOST, Operation.DESCRIBE_CONFIGS, T, "c")  # 14
    assert not a.authorize("User:alice", HOST, Operation.DESCRIBE, T, "c")
    assert not authorizer().authorize("User:ANONYMOUS", HOST, Operation.READ, T, "c")  # 15
    assert authorizer(acl(T, "w", "User:*", Operation.READ)).authorize("User:ANONYMOUS", HOST, Operation.READ, T, "w")


def test_by_resource_type_as_kip_679_asks_it() -> None:
    def by_type(a: Authorizer, op: Operation = Operation.WRITE, who: str = "User:alice") -> bool:
        return a.authorize_by_resource_type(who, HOST, op, T)

    assert not by_type(authorizer())  # 20
    assert by_type(authorizer(allow_everyone=True))  # 21
    a = authorizer(acl(T, "abc", "User:alice", Operation.WRITE))
    assert by_type(a)  # 22
    a.create([acl(T, "ab", "User:alice", Operation.WRITE, DENY, PRE)])
    assert not by_type(a)  # 23
    a = authorizer(acl(T, "abc", "User:alice", Operation.ALL))
    assert by_type(a) and by_type(a, Operation.DESCRIBE)  # 24
    assert not by_type(authorizer(acl(T, "abc", "User:alice", Operation.READ)), Operation.DESCRIBE)  # 25: no implication
    a = authorizer(acl(T, "*", "User:bob", Operation.READ), allow_everyone=True)
    assert not by_type(a) and not a.authorize("User:alice", HOST, Operation.WRITE, T, "x")  # 26
    a = authorizer(acl(T, "abc", "User:alice", Operation.WRITE, pattern=PRE), acl(T, "abc", "User:alice", Operation.WRITE,
                                                                                  DENY))
    assert by_type(a)  # 27
    a = authorizer(acl(T, "r", "User:alice", Operation.WRITE, DENY, PRE), acl(T, "*", "User:alice", Operation.WRITE))
    assert by_type(a)  # 28: a wildcard allow, the prefix deny notwithstanding


def test_authorized_operation_bits() -> None:
    a = authorizer(acl(T, "t", "User:alice", Operation.READ), acl(C, "kafka-cluster", "User:alice", Operation.ALTER))
    assert a.authorized_operations("User:alice", HOST, T, "t") == 264  # READ + DESCRIBE
    assert a.authorized_operations("User:alice", HOST, C, "kafka-cluster") == 384  # ALTER + DESCRIBE
    assert authorizer(supers=("User:root",)).authorized_operations("User:root", HOST, T, "t") == 3576
    assert authorizer(supers=("User:root",)).authorized_operations("User:root", HOST, G, "g") == 3400
    assert authorizer(supers=("User:root",)).authorized_operations("User:root", HOST, C, "kafka-cluster") == 8096


def test_filters_match_as_describe_and_delete_acls_match() -> None:
    a = authorizer(acl(T, "foo", "User:a", Operation.READ), acl(T, "*", "User:a", Operation.READ),
                   acl(T, "fo", "User:a", Operation.READ, pattern=PRE),
                   acl(T, "foobar", "User:a", Operation.READ, pattern=PRE), acl(G, "foo", "User:a", Operation.READ))

    def names(pattern: PatternType, name: str | None = "foo", rtype: ResourceType = T) -> list[str]:
        return [f"{x.pattern_type.name}:{x.name}" for x in a.describe(
            AclFilter(rtype, name, pattern, None, None, Operation.ANY, Permission.ANY))]

    assert names(PatternType.MATCH) == ["LITERAL:foo", "PREFIXED:fo", "LITERAL:*"]
    assert names(PatternType.ANY) == ["LITERAL:foo"]
    assert names(LIT) == ["LITERAL:foo"]
    assert names(PRE) == []
    assert names(PatternType.ANY, None, ResourceType.ANY) == ["PREFIXED:foobar", "LITERAL:foo", "PREFIXED:fo",
                                                              "LITERAL:*", "LITERAL:foo"]
    [(error, removed)] = a.delete([AclFilter(T, "foo", PatternType.MATCH, None, None, Operation.ANY, Permission.ANY)])
    assert error is None and len(removed) == 3
    assert names(PatternType.ANY, None) == ["PREFIXED:foobar"]


def test_creation_is_validated_as_kafkas_controller_validates_it() -> None:
    a = authorizer()
    results = a.create([acl(C, "other", "User:a", Operation.ALTER), acl(T, "", "User:a", Operation.READ),
                        acl(T, "t", "alice", Operation.READ), acl(T, "t", "Group:x", Operation.READ),
                        acl(T, "t", "Group:x", Operation.READ)])
    assert [r.code if r else None for r in results] == [ErrorCode.INVALID_REQUEST] * 3 + [None, None]
    assert "kafka-cluster" in results[0].message and "no colon" in results[2].message
    assert len(a.storage.acls) == 1  # a duplicate is a success, stored once


def test_acls_survive_a_restart_in_the_cluster_metadata(tmp_path: Path) -> None:
    store = MetadataStore(tmp_path)
    store.load()
    a = Authorizer(store)
    a.create([acl(T, "t", "User:alice", Operation.READ), acl(G, "g", "User:alice", Operation.READ, pattern=PRE)])
    a.delete([AclFilter(G, None, PatternType.ANY, None, None, Operation.ANY, Permission.ANY)])
    again = MetadataStore(tmp_path)
    again.load()
    assert list(again.acls.values()) == [acl(T, "t", "User:alice", Operation.READ)]
    assert Authorizer(again).authorize("User:alice", HOST, Operation.DESCRIBE, T, "t")
    again.write_snapshot()
    third = MetadataStore(tmp_path)
    third.load()
    assert third.acls == again.acls


def test_principal_mapping_rules() -> None:
    rules = parse_rules("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/"
                        "$1@$2/L,RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,DEFAULT")
    assert map_subject(rules, "CN=kafka1,OU=ServiceUsers,O=Org,C=US") == "kafka1"
    assert map_subject(rules, "CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=x,ST=y,C=US") == "duke@javasoft"
    assert map_subject(rules, "OU=x,CN=Adm.in") == "adm.in"
    assert map_subject(parse_rules(None), "CN=a,O=b") == "CN=a,O=b"
    with pytest.raises(NoMatchingRule):
        map_subject(parse_rules("RULE:^CN=bob$/bob/"), "CN=alice")
    with pytest.raises(ValueError):
        parse_rules("RULE:^CN=(.*$/$1/")


def test_hosts_are_written_as_java_writes_them() -> None:
    assert java_host("127.0.0.1") == "127.0.0.1"
    assert java_host("::1") == "0:0:0:0:0:0:0:1"
    assert java_host("fe80::0db8:0001") == "fe80:0:0:0:0:0:db8:1"
    assert java_host("::ffff:10.1.2.3") == "10.1.2.3"
