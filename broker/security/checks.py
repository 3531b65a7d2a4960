"""What handlers ask the authorizer, as Kafka's AuthHelper asks it: with no authorizer configured
every check passes and every authorized-operations field is full."""

from __future__ import annotations

from collections.abc import Iterable

from broker.net.context import RequestContext
from broker.security.acls import (
    CLUSTER_NAME,
    OPERATIONS_OMITTED,
    SUPPORTED_OPERATIONS,
    Operation,
    ResourceType,
)

__all__ = ["OPERATIONS_OMITTED", "Operation", "ResourceType", "allowed", "allowed_by_type", "authorized_operations",
           "cluster_allowed", "filter_allowed"]


def allowed(ctx: RequestContext, operation: Operation, resource_type: ResourceType, name: str) -> bool:
    authorizer = ctx.broker.authorizer
    return authorizer is None or authorizer.authorize(ctx.principal, ctx.client_ip, operation, resource_type, name)


def cluster_allowed(ctx: RequestContext, operation: Operation) -> bool:
    return allowed(ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME)


def filter_allowed(ctx: RequestContext, operation: Operation, resource_type: ResourceType,
                   names: Iterable[str]) -> set[str]:
    """The names (each asked once) the request may do ``operation`` on."""
    return {name for name in set(names) if allowed(ctx, operation, resource_type, name)}


def allowed_by_type(ctx: RequestContext, operation: Operation, resource_type: ResourceType) -> bool:
    authorizer = ctx.broker.authorizer
    return authorizer is None or authorizer.authorize_by_resource_type(ctx.principal, ctx.client_ip, operation,
                                                                       resource_type)


def authorized_operations(ctx: RequestContext, resource_type: ResourceType, name: str) -> int:
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return sum(1 << int(op) for op in SUPPORTED_OPERATIONS[resource_type])
    return authorizer.authorized_operations(ctx.principal, ctx.client_ip, resource_type, name)
