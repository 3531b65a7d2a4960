"""AlterClientQuotas (key 49), v0-1: set or remove client quotas (``kafka-configs.sh --alter
--entity-type users/clients/ips``), as Kafka's ClientQuotaControlManager validates them.

Each entry names an entity (user and/or client-id, or an ip; a null name is the default entity)
and operations (a key and a value, or a removal). An entry is applied whole or not at all and
answers its own error; ``validate_only`` checks without applying. Accepted quotas are persisted
with the cluster metadata and enforced for Produce and Fetch (broker/cluster/quotas.py).
Authorization (ControllerApis.handleAlterClientQuotas): ALTER_CONFIGS on the cluster, else every
entry is CLUSTER_AUTHORIZATION_FAILED with the error's default message (AlterClientQuotasRequest.
getErrorResponse) and nothing changes.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence

from broker.cluster.quotas import CLIENT_ID, CLIENT_KEYS, IP, IP_KEYS, USER, Entity, entity_key
from broker.handlers.registry import api
from broker.net.context import RequestContext
from broker.security.checks import Operation, cluster_allowed
from protocol.error_messages import default_message
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import ApiMessage, lazy_response

Response = lazy_response(49)
Entry = Response.EntryData
EntityData = Entry.EntityData


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_REQUEST, message)


def validate_entity(entity: Sequence[ApiMessage]) -> Entity:
    """Kafka's ClientQuotaControlManager.validateEntity."""
    if not entity:
        raise _invalid("Invalid empty client quota entity")
    seen: dict[str, str | None] = {}
    for e in entity:
        if e.entity_type not in (USER, CLIENT_ID, IP):
            raise _invalid(f"Unhandled client quota entity type: {e.entity_type}")
        # a type named twice: the last name counts, as Kafka builds the entity map
        if e.entity_name is not None and e.entity_name == "" and e.entity_type != IP:
            raise _invalid(f"Empty {e.entity_type} not supported")
        seen[e.entity_type] = e.entity_name
    if IP in seen:
        if len(seen) > 1:
            raise _invalid("Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId")
        name = seen[IP]
        if name is not None:
            try:
                ipaddress.ip_address(name)
            except ValueError:
                raise _invalid(f"{name} is not a valid IP or resolvable host.") from None
    return entity_key(seen.items())


def validate_ops(entity: Entity, ops: Iterable[ApiMessage]) -> dict[str, float | None]:
    """{key: value, or None to remove}; Kafka's checks of each key and value."""
    types = {t for t, _ in entity}
    allowed = IP_KEYS if IP in types else CLIENT_KEYS
    out: dict[str, float | None] = {}
    for op in ops:
        if op.key in out:
            raise _invalid(f"Ignoring duplicate entity ClientQuotaEntity(entries={_entity_str(entity)})")
        if op.key not in allowed:
            raise _invalid(f"Invalid configuration key {op.key}")
        if op.remove:
            out[op.key] = None
            continue
        value = op.value
        if allowed[op.key] and not float(value).is_integer():
            raise _invalid(f"{op.key} cannot be a fractional value.")
        if value <= 0:
            raise _invalid(f"Quota {op.key} must be greater than 0")
        out[op.key] = float(value)
    return out


def _entity_str(entity: Entity) -> str:
    return "{" + ", ".join(f"{t}={n}" for t, n in entity) + "}"


@api(49, (0, 1))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage:
    # ControllerApis.handleAlterClientQuotas: ALTER_CONFIGS on the cluster, else every entry refused
    if not cluster_allowed(ctx, Operation.ALTER_CONFIGS):
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return Response(throttle_time_ms=0, entries=[
            Entry(error_code=code, error_message=default_message(code), entity=[
                EntityData(entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity])
            for entry in req.entries])
    store = ctx.broker.metadata
    quotas = {e: dict(v) for e, v in store.client_quotas.items()}
    results: list[ApiMessage] = []
    for entry in req.entries:
        try:
            entity = validate_entity(entry.entity)
            ops = validate_ops(entity, entry.ops)
            code, message = ErrorCode.NONE, None
        except KafkaError as e:
            code, message = e.code, e.message
        if code == ErrorCode.NONE and not req.validate_only:
            values = quotas.setdefault(entity, {})
            for key, value in ops.items():
                if value is None:
                    values.pop(key, None)
                else:
                    values[key] = value
        results.append(Entry(error_code=code, error_message=message, entity=[
            EntityData(entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity]))
    if not req.validate_only:
        store.set_client_quotas(quotas)
    return Response(throttle_time_ms=0, entries=results)
