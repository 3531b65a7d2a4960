"""ACLs as Kafka models them (``org.apache.kafka.common.acl`` / ``resource``): the wire codes, an
ACL binding, the filters DescribeAcls and DeleteAcls match with, and which ACLs apply to a
resource. Sans-IO: the authorizer (``broker.security.authorizer``) decides with these.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from enum import IntEnum
from typing import TypeVar


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class Permission(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"

# An ALLOW of any of these grants DESCRIBE; of ALTER_CONFIGS, DESCRIBE_CONFIGS (StandardAuthorizerData)
IMPLIES_DESCRIBE = frozenset({Operation.DESCRIBE, Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER})
IMPLIES_DESCRIBE_CONFIGS = frozenset({Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS})

# AclEntry.supportedOperations: the bits of the authorized-operations fields
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[Operation, ...]] = {
    ResourceType.TOPIC: (Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DELETE, Operation.ALTER,
                         Operation.DESCRIBE, Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS),
    ResourceType.GROUP: (Operation.READ, Operation.DELETE, Operation.DESCRIBE, Operation.DESCRIBE_CONFIGS,
                         Operation.ALTER_CONFIGS),
    ResourceType.CLUSTER: (Operation.CREATE, Operation.ALTER, Operation.DESCRIBE, Operation.CLUSTER_ACTION,
                           Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS, Operation.IDEMPOTENT_WRITE),
    ResourceType.TRANSACTIONAL_ID: (Operation.WRITE, Operation.DESCRIBE, Operation.TWO_PHASE_COMMIT),
    ResourceType.DELEGATION_TOKEN: (Operation.DESCRIBE,),
    ResourceType.USER: (Operation.CREATE_TOKENS, Operation.DESCRIBE_TOKENS),
}
OPERATIONS_OMITTED = -2147483648  # Integer.MIN_VALUE: authorized operations not asked for


E = TypeVar("E", bound=IntEnum)


def known(enum: type[E], code: int) -> E:
    """``fromCode``: a code the enum lacks is UNKNOWN."""
    try:
        return enum(code)
    except ValueError:
        return enum(0)


@dataclass(frozen=True, slots=True)
class Acl:
    """One ACL binding: a resource pattern and an access control entry."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: Operation
    permission: Permission

    def applies_to(self, resource_type: ResourceType, name: str) -> bool:
        """Whether this ACL covers the (literal) resource: its name, the wildcard, or a prefix."""
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == PatternType.LITERAL:
            return self.name == name or self.name == WILDCARD
        return self.pattern_type == PatternType.PREFIXED and name.startswith(self.name)

    def to_json(self) -> list[object]:
        return [int(self.resource_type), self.name, int(self.pattern_type), self.principal, self.host,
                int(self.operation), int(self.permission)]

    @classmethod
    def from_json(cls, value: list) -> Acl:
        return cls(ResourceType(value[0]), value[1], PatternType(value[2]), value[3], value[4],
                   Operation(value[5]), Permission(value[6]))


@dataclass(frozen=True, slots=True)
class AclFilter:
    """DescribeAcls' filter and DeleteAcls' filters (AclBindingFilter); None fields match anything."""

    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: Operation
    permission: Permission

    def matches(self, acl: Acl) -> bool:
        return self._pattern_matches(acl) and self._entry_matches(acl)

    def _pattern_matches(self, acl: Acl) -> bool:
        """ResourcePatternFilter.matches: MATCH is "every ACL that would apply to a resource named so"."""
        if self.resource_type != ResourceType.ANY and self.resource_type != acl.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and self.pattern_type != acl.pattern_type:
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, acl.pattern_type):
            return self.name == acl.name
        if acl.pattern_type == PatternType.LITERAL:
            return self.name == acl.name or acl.name == WILDCARD
        return acl.pattern_type == PatternType.PREFIXED and self.name.startswith(acl.name)

    def _entry_matches(self, acl: Acl) -> bool:
        """AccessControlEntryFilter.matches: exact principal and host, no implied operations."""
        if self.principal is not None and self.principal != acl.principal:
            return False
        if self.host is not None and self.host != acl.host:
            return False
        if self.operation != Operation.ANY and self.operation != acl.operation:
            return False
        return self.permission == Permission.ANY or self.permission == acl.permission


def java_host(ip: str) -> str:
    """A peer address as Java's InetAddress.getHostAddress() writes it (what ACL hosts are compared
    with): IPv4 as is, IPv6 as eight hex groups without leading zeros and without ``::``."""
    if ":" not in ip:
        return ip
    address = ipaddress.IPv6Address(ip.split("%")[0])
    if address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return ":".join(format(int(group, 16), "x") for group in address.exploded.split(":"))
