"""DescribeClientQuotas (key 48), v0-1: the stored client quotas matching a filter
(``kafka-configs.sh --describe --entity-type users/clients/ips``), as Kafka's ClientQuotasImage
answers it.

Each filter component names an entity type and how to match it: exactly a name (0), the default
entity (1) or any entity of the type, the default included (2). Non-strict filters match entities that have at least those
types; strict ones only entities with exactly those types.
Authorization (KafkaApis.handleDescribeClientQuotasRequest): DESCRIBE_CONFIGS on the cluster, else a
top-level CLUSTER_AUTHORIZATION_FAILED without a message and null entries.
"""

from __future__ import annotations

from broker.cluster.quotas import CLIENT_ID, IP, USER
from broker.handlers.registry import api
from broker.net.context import RequestContext
from broker.security.checks import Operation, cluster_allowed
from protocol.errors import ErrorCode
from protocol.messages import ApiMessage, lazy_response

Response = lazy_response(48)
Entry = Response.EntryData
EntityData = Entry.EntityData
ValueData = Entry.ValueData

EXACT, DEFAULT, SPECIFIED = 0, 1, 2


def _error(code: ErrorCode, message: str | None) -> ApiMessage:
    return Response(throttle_time_ms=0, error_code=code, error_message=message, entries=None)


@api(48, (0, 1))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage:
    # KafkaApis.handleDescribeClientQuotasRequest: DESCRIBE_CONFIGS on the cluster
    if not cluster_allowed(ctx, Operation.DESCRIBE_CONFIGS):
        return _error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    wanted: dict[str, tuple[int, str | None]] = {}
    for c in req.components:
        if c.entity_type in wanted:
            return _error(ErrorCode.INVALID_REQUEST, f"Entity type {c.entity_type} cannot appear more than once in "
                                                     f"the filter.")
        if c.entity_type not in (USER, CLIENT_ID, IP):
            return _error(ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {c.entity_type}")
        if c.match_type == EXACT and c.match is None:
            return _error(ErrorCode.INVALID_REQUEST, "Request specified MATCH_TYPE_EXACT, but set match string "
                                                     "to null.")
        if c.match_type in (DEFAULT, SPECIFIED) and c.match is not None:
            kind = "MATCH_TYPE_DEFAULT" if c.match_type == DEFAULT else "MATCH_TYPE_SPECIFIED"
            return _error(ErrorCode.INVALID_REQUEST, f"Request specified {kind}, but also specified a match string.")
        if c.match_type not in (EXACT, DEFAULT, SPECIFIED):
            return _error(ErrorCode.INVALID_REQUEST, f"Unknown match type {c.match_type}")
        wanted[c.entity_type] = (c.match_type, c.match)
    if IP in wanted and (USER in wanted or CLIENT_ID in wanted):
        return _error(ErrorCode.INVALID_REQUEST, "Invalid entity filter component combination. IP filter component "
                                                 "should not be used with user or clientId filter component.")
    entries = []
    for entity, values in ctx.broker.metadata.client_quotas.items():
        names = dict(entity)
        if req.strict and set(names) != set(wanted):
            continue
        if not all(t in names and _matches(names[t], how, match) for t, (how, match) in wanted.items()):
            continue
        entries.append(Entry(
            entity=[EntityData(entity_type=t, entity_name=n) for t, n in entity],
            values=[ValueData(key=k, value=v) for k, v in sorted(values.items())]))
    return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, entries=entries)


def _matches(name: str | None, how: int, match: str | None) -> bool:
    if how == EXACT:
        return name == match
    if how == DEFAULT:
        return name is None
    return True  # MATCH_TYPE_SPECIFIED: any entity of the type, the default one included
