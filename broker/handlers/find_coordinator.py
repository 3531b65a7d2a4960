"""FindCoordinator (key 10), v0-6.

This single node coordinates everything, so the answer is always this broker on the listener
the client used, or an error:

- key_type 0 (GROUP): ``__consumer_offsets`` is created on first use (synchronously here, so
  the first answer already succeeds where Kafka would say COORDINATOR_NOT_AVAILABLE once);
  COORDINATOR_NOT_AVAILABLE if the group coordinator is not running or the topic cannot be made.
  Like Kafka, any key is accepted (even ""; it maps to partition 0).
- key_type 1 (TRANSACTION): asks ``broker.txn_coordinator.find_coordinator(key)``, which
  returns an ErrorCode (NONE when this node coordinates the id, after making sure
  ``__transaction_state`` exists; COORDINATOR_NOT_AVAILABLE while it is not active).
- key_type 2 (SHARE): share groups are not enabled: INVALID_REQUEST, as Kafka 4.0 answers.
- any other key_type: INVALID_REQUEST (Kafka's CoordinatorType.forId throws).

v0-3 carry one key and a top-level error with Kafka's error message ("NONE" on success, as
``Errors.message()`` gives); v4+ batch ``coordinator_keys`` with one entry (no message) each.

Authorization: DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED) or on the transactional id
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED), node -1.
"""

from __future__ import annotations

from broker.handlers.registry import api
from broker.net.context import RequestContext
from broker.security.checks import Operation, ResourceType, allowed
from coordinator.group.coordinator import OFFSETS_TOPIC
from coordinator.txn.state_manager import TRANSACTION_STATE_TOPIC
from protocol.error_messages import default_message
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import ApiMessage, lazy_response

Response = lazy_response(10)
Coordinator = Response.Coordinator

KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION, KEY_TYPE_SHARE = 0, 1, 2

# Errors.message() of the errors this API returns (the default exception messages).
MESSAGES = {
    ErrorCode.NONE: "NONE",
    ErrorCode.COORDINATOR_NOT_AVAILABLE: "The coordinator is not available.",
    ErrorCode.INVALID_REQUEST: (
        "This most likely occurs because of a request being malformed by the client library or the message was "
        "sent to an incompatible broker. See the broker logs for more details."
    ),
}


def lookup(ctx: RequestContext, key_type: int, key: str) -> ErrorCode:
    broker = ctx.broker
    # KafkaApis.handleFindCoordinatorRequest: DESCRIBE on the group or the transactional id
    if key_type == KEY_TYPE_GROUP and not allowed(ctx, Operation.DESCRIBE, ResourceType.GROUP, key):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    if key_type == KEY_TYPE_TRANSACTION and not allowed(ctx, Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    if key_type == KEY_TYPE_GROUP:
        gc = broker.group_coordinator
        if not gc.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        try:
            gc.ensure_offsets_topic()
        except KafkaError:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return ErrorCode.NONE
    if key_type == KEY_TYPE_TRANSACTION:
        return broker.txn_coordinator.find_coordinator(key)
    return ErrorCode.INVALID_REQUEST


def coordinator_node(ctx: RequestContext, key_type: int, key: str, code: ErrorCode) -> tuple[ErrorCode, int, str, int]:
    """The coordinator of ``key``: the leader of its partition of the coordinator's topic (this
    broker on a single node); COORDINATOR_NOT_AVAILABLE while that partition has no live leader."""
    broker = ctx.broker
    if code != ErrorCode.NONE:
        return code, -1, "", -1
    if broker.shared is None:
        host, port = broker.advertised_endpoint(ctx.listener, ctx.local_host)
        return code, broker.node_id, host, port
    if key_type == KEY_TYPE_GROUP:
        topic, partition = OFFSETS_TOPIC, broker.group_coordinator.partition_for(key)
    else:
        topic, partition = TRANSACTION_STATE_TOPIC, broker.txn_coordinator.partition_for(key)
    reg = broker.metadata.partition(topic, partition)
    node = broker.brokers.node(reg.leader) if reg is not None and broker.brokers.alive(reg.leader) else None
    if node is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    host, port = node.advertised_endpoint(ctx.listener, ctx.local_host)
    return code, node.node_id, host, port


@api(10, (0, 6))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage:
    key_type = req.key_type if ctx.api_version >= 1 else KEY_TYPE_GROUP

    if ctx.api_version < 4:
        code, nid, h, p = coordinator_node(ctx, key_type, req.key, lookup(ctx, key_type, req.key))
        return Response(throttle_time_ms=0, error_code=code, error_message=MESSAGES.get(code, default_message(code)),
                        node_id=nid, host=h, port=p)
    coordinators = []
    for key in req.coordinator_keys:
        code, nid, h, p = coordinator_node(ctx, key_type, key, lookup(ctx, key_type, key))
        coordinators.append(Coordinator(key=key, node_id=nid, host=h, port=p, error_code=code, error_message=None))
    return Response(throttle_time_ms=0, coordinators=coordinators)
