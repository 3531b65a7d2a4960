"""The authorizer, with Apache Kafka's StandardAuthorizer semantics (``authorizer.class.name=
org.apache.kafka.metadata.authorizer.StandardAuthorizer``); the ACLs live in the cluster metadata
(Kafka's AccessControlEntryRecord / RemoveAccessControlEntryRecord), so they survive restarts and
every broker of a process sees the same ones.

A request is allowed when its principal is in ``super.users`` (exact ``User:name`` strings; no
wildcard), else by the ACLs that apply to the resource (its literal name, the ``*`` wildcard of its
type, or a prefix): any matching DENY refuses, else any matching ALLOW allows; when ACLs apply but
none matches, it is refused; when none applies at all, ``allow.everyone.if.no.acl.found`` decides
(default false). An ACL matches the principal itself or ``User:*``, the client's IP or ``*``, and
the operation itself, ``ALL``, or (ALLOW only) an operation that implies it: READ, WRITE, DELETE and
ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

from broker.security.acls import (
    CLUSTER_NAME,
    IMPLIES_DESCRIBE,
    IMPLIES_DESCRIBE_CONFIGS,
    SUPPORTED_OPERATIONS,
    WILDCARD,
    WILDCARD_PRINCIPAL,
    Acl,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.config.broker_config import BrokerConfig

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
AUTHORIZERS = (STANDARD_AUTHORIZER, "kafka.security.authorizer.AclAuthorizer")  # the latter: the ZooKeeper-era name
MAX_RECORDS_PER_USER_OP = 10_000  # QuorumController: removals one DeleteAcls may make


class AclStorage(Protocol):
    """Where the ACLs are kept (the cluster metadata): id -> ACL, and how to change them durably;
    ``acls_generation`` grows with every change."""

    acls: dict[str, Acl]
    acls_generation: int

    def change_acls(self, added: dict[str, Acl], removed: Iterable[str]) -> None: ...


class AclError(Exception):
    def __init__(self, code: ErrorCode, message: str | None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class Authorizer:
    def __init__(self, storage: AclStorage, super_users: Iterable[str] = (), allow_if_no_acl: bool = False) -> None:
        self.storage = storage
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self._indexed_at = -1
        self._literal: dict[tuple[ResourceType, str], list[Acl]] = {}  # (type, name or "*") -> ACLs
        self._prefixed: dict[ResourceType, list[Acl]] = {}

    def _applicable(self, resource_type: ResourceType, name: str) -> list[Acl]:
        """The ACLs that apply to the resource, from an index rebuilt when the ACLs change."""
        if self._indexed_at != self.storage.acls_generation:
            self._literal, self._prefixed = {}, {}
            for acl in self.storage.acls.values():
                if acl.pattern_type == PatternType.LITERAL:
                    self._literal.setdefault((acl.resource_type, acl.name), []).append(acl)
                elif acl.pattern_type == PatternType.PREFIXED:
                    self._prefixed.setdefault(acl.resource_type, []).append(acl)
            self._indexed_at = self.storage.acls_generation
        found = list(self._literal.get((resource_type, name), ()))
        if name != WILDCARD:
            found += self._literal.get((resource_type, WILDCARD), ())
        found += [acl for acl in self._prefixed.get(resource_type, ()) if name.startswith(acl.name)]
        return found

    @classmethod
    def from_config(cls, config: BrokerConfig, storage: AclStorage) -> Authorizer | None:
        """The configured authorizer, or None (``authorizer.class.name`` empty: every check passes
        and the ACL APIs answer SECURITY_DISABLED). Raises ValueError for what cannot be used."""
        settings = authorizer_settings(config)
        return None if settings is None else cls(storage, *settings)

    # --- decisions ----------------------------------------------------------------------------

    def authorize(self, principal: str, host: str, operation: Operation, resource_type: ResourceType,
                  name: str) -> bool:
        """StandardAuthorizerData.authorize for one literal resource."""
        if principal in self.super_users:
            return True
        applicable = self._applicable(resource_type, name)
        allowed = False
        for acl in applicable:
            result = _result(acl, principal, host, operation)
            if result is Permission.DENY:
                return False
            if result is Permission.ALLOW:
                allowed = True
        if allowed:
            return True
        return not applicable and self.allow_if_no_acl

    def authorize_by_resource_type(self, principal: str, host: str, operation: Operation,
                                   resource_type: ResourceType) -> bool:
        """Authorizer.authorizeByResourceType (KIP-679): may the principal do ``operation`` on some
        resource of the type? Implied operations do not count here, as in Kafka's default method."""
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True
        deny: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        allow: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        wildcard_allow = False
        for acl in self.storage.acls.values():
            if acl.resource_type != resource_type or acl.host not in (WILDCARD, host):
                continue
            if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
                continue
            if acl.operation not in (operation, Operation.ALL):
                continue
            if acl.permission == Permission.DENY:
                if acl.pattern_type == PatternType.LITERAL and acl.name == WILDCARD:
                    return False
                deny[acl.pattern_type].add(acl.name)
            elif acl.permission == Permission.ALLOW:
                if acl.pattern_type == PatternType.LITERAL and acl.name == WILDCARD:
                    wildcard_allow = True
                allow[acl.pattern_type].add(acl.name)
        if wildcard_allow:
            return True
        for pattern_type, names in allow.items():
            for name in names:
                if pattern_type == PatternType.LITERAL and name in deny[PatternType.LITERAL]:
                    continue
                if not any(name[:i] in deny[PatternType.PREFIXED] for i in range(1, len(name) + 1)):
                    return True
        return False

    def authorized_operations(self, principal: str, host: str, resource_type: ResourceType, name: str) -> int:
        """The bit field of the operations allowed on the resource (AuthHelper.authorizedOperations)."""
        bits = 0
        for op in SUPPORTED_OPERATIONS.get(resource_type, ()):
            if self.authorize(principal, host, op, resource_type, name):
                bits |= 1 << int(op)
        return bits

    # --- the ACL APIs -------------------------------------------------------------------------

    def describe(self, acl_filter: AclFilter) -> list[Acl]:
        """The ACLs the filter matches, in Kafka's authorizer order (type, then name descending)."""
        found = [acl for acl in self.storage.acls.values() if acl_filter.matches(acl)]
        return sorted(found, key=_order)

    def create(self, acls: list[Acl]) -> list[AclError | None]:
        """One result per ACL (None: created, or already there); the new ones written at once."""
        results: list[AclError | None] = []
        added: dict[str, Acl] = {}
        existing = set(self.storage.acls.values())
        for acl in acls:
            error = validate_new(acl)
            results.append(error)
            if error is None and acl not in existing:
                existing.add(acl)
                added[_new_id(self.storage.acls, added)] = acl
        if added:
            self.storage.change_acls(added, ())
        return results

    def delete(self, filters: list[AclFilter]) -> list[tuple[AclError | None, list[Acl]]]:
        """Per filter: its error, or the ACLs it matched (all removed, atomically)."""
        out: list[tuple[AclError | None, list[Acl]]] = []
        removed: set[str] = set()
        for f in filters:
            if f.resource_type == ResourceType.UNKNOWN or f.pattern_type == PatternType.UNKNOWN:
                out.append((AclError(ErrorCode.INVALID_REQUEST, "Unknown patternFilter."), []))
                continue
            if f.operation == Operation.UNKNOWN or f.permission == Permission.UNKNOWN:
                out.append((AclError(ErrorCode.INVALID_REQUEST, "Unknown entryFilter."), []))
                continue
            matched = [(acl_id, acl) for acl_id, acl in self.storage.acls.items() if f.matches(acl)]
            removed.update(acl_id for acl_id, _ in matched)
            out.append((None, [acl for _, acl in sorted(matched, key=lambda item: _order(item[1]))]))
        if len(removed) > MAX_RECORDS_PER_USER_OP:
            error = AclError(ErrorCode.INVALID_REQUEST, f"Cannot remove more than {MAX_RECORDS_PER_USER_OP} acls "
                                                        "in a single delete operation.")
            return [(error, []) for _ in filters]
        if removed:
            self.storage.change_acls({}, removed)
        return out


def authorizer_settings(config: BrokerConfig) -> tuple[list[str], bool] | None:
    """(super.users, allow.everyone.if.no.acl.found) when an authorizer is configured; raises
    ValueError for settings that cannot be used."""
    name = str(config.get("authorizer.class.name") or "").strip()
    if not name:
        return None
    if name not in AUTHORIZERS:
        raise ValueError(f"authorizer.class.name {name}: the authorizer here is {STANDARD_AUTHORIZER}")
    supers = [s.strip() for s in str(config.get("super.users") or "").split(";") if s.strip()]
    for s in supers:
        if ":" not in s:
            raise ValueError(f"super.users: {s!r} is not a principal (User:<name>)")
    return supers, str(config.get("allow.everyone.if.no.acl.found") or "false").strip().lower() == "true"


def _result(acl: Acl, principal: str, host: str, operation: Operation) -> Permission | None:
    """findResult: ALLOW/DENY when the ACL matches the principal, host and operation, else None."""
    if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
        return None
    if acl.host != WILDCARD and acl.host != host:
        return None
    if acl.operation != Operation.ALL:
        if acl.permission == Permission.ALLOW:
            if operation == Operation.DESCRIBE:
                if acl.operation not in IMPLIES_DESCRIBE:
                    return None
            elif operation == Operation.DESCRIBE_CONFIGS:
                if acl.operation not in IMPLIES_DESCRIBE_CONFIGS:
                    return None
            elif operation != acl.operation:
                return None
        elif operation != acl.operation:
            return None
    if acl.permission == Permission.ALLOW:
        return Permission.ALLOW
    return Permission.DENY if acl.permission == Permission.DENY else None


def validate_new(acl: Acl) -> AclError | None:
    """AclApis' and AclControlManager.validateNewAcl's checks of one ACL to create."""
    if acl.resource_type == ResourceType.CLUSTER and acl.name != CLUSTER_NAME:
        return AclError(ErrorCode.INVALID_REQUEST, f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if not acl.name:
        return AclError(ErrorCode.INVALID_REQUEST, "Invalid empty resource name")
    if acl.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return AclError(ErrorCode.INVALID_REQUEST, f"Invalid resourceType {acl.resource_type.name}")
    if acl.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return AclError(ErrorCode.INVALID_REQUEST, f"Invalid patternType {acl.pattern_type.name}")
    if acl.operation in (Operation.UNKNOWN, Operation.ANY):
        return AclError(ErrorCode.INVALID_REQUEST, f"Invalid operation {acl.operation.name}")
    if acl.permission not in (Permission.DENY, Permission.ALLOW):
        return AclError(ErrorCode.INVALID_REQUEST, f"Invalid permissionType {acl.permission.name}")
    if ":" not in acl.principal:
        return AclError(ErrorCode.INVALID_REQUEST, f"Could not parse principal from `{acl.principal}` (no colon is "
                                                   "present separating the principal type from the principal name)")
    return None


def _order(acl: Acl) -> tuple:
    """StandardAcl's order: resource type, name descending, then the rest."""
    return (int(acl.resource_type), _Descending(acl.name), int(acl.pattern_type), int(acl.operation), acl.principal,
            acl.host, int(acl.permission))


class _Descending:
    __slots__ = ("value",)

    def __init__(self, value: str) -> None:
        self.value = value

    def __lt__(self, other: _Descending) -> bool:
        return self.value > other.value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Descending) and self.value == other.value


def _new_id(existing: dict[str, Acl], added: dict[str, Acl]) -> str:
    while True:
        acl_id = str(uuid.uuid4())
        if acl_id not in existing and acl_id not in added:
            return acl_id
