"""InitProducerId (key 22), v0-5 (v6, KIP-939 two-phase commit, is unstable in Kafka 4.x and not
advertised).

Kafka 4.3.1's KafkaApis.handleInitProducerIdRequest + TransactionCoordinator.handleInitProducerId:

- ``producer_id``/``producer_epoch`` (v3+, KIP-360) must be both -1 or both set; exactly one -1
  is INVALID_REQUEST (producer id -1, epoch -1), whatever the transactional id.
- ``transactional_id`` null (idempotent producer): the coordinator "blindly accepts" and returns
  a brand-new producer id with epoch 0, ignoring ``producer_id``/``producer_epoch`` (an
  idempotent producer recovers from a sequence error by taking a new id, not by bumping) and not
  checking ``transaction_timeout_ms``. A failure to allocate is that exception's error code
  with id -1 / epoch -1.
- ``transactional_id`` set: timeout validation, fencing, epoch bumps, rotation at Short.MAX and
  CONCURRENT_TRANSACTIONS belong to ``broker.txn_coordinator.handle_init_producer_id``.
- v0-3 answer PRODUCER_FENCED as INVALID_PRODUCER_EPOCH: those clients do not know code 90.

Authorization: WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); without one,
IDEMPOTENT_WRITE on the cluster or WRITE on some topic (KIP-679; CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from collections.abc import Awaitable

import structlog

from broker.handlers.registry import api
from broker.net.context import RequestContext
from broker.security.checks import Operation, ResourceType, allowed, allowed_by_type, cluster_allowed
from protocol.error_versions import for_version
from protocol.errors import ErrorCode, error_code_of
from protocol.messages import ApiMessage, lazy_response

Response = lazy_response(22)
log = structlog.get_logger(__name__)

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


def _response(version: int, code: int, producer_id: int, producer_epoch: int) -> ApiMessage:
    code = for_version(22, version, ErrorCode(code))  # PRODUCER_FENCED as older versions know it
    return Response(throttle_time_ms=0, error_code=int(code), producer_id=producer_id, producer_epoch=producer_epoch)


def _error(version: int, code: int) -> ApiMessage:
    return _response(version, code, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)


async def _transactional(ctx: RequestContext, req: ApiMessage, producer_id: int,
                         producer_epoch: int) -> ApiMessage:
    code, pid, epoch = await ctx.broker.txn_coordinator.handle_init_producer_id(
        req.transactional_id, req.transaction_timeout_ms, producer_id, producer_epoch, ctx.api_version
    )
    return _response(ctx.api_version, code, pid, epoch)


@api(22, (0, 5))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage | Awaitable[ApiMessage]:
    version = ctx.api_version
    producer_id, producer_epoch = req.producer_id, req.producer_epoch
    if (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH):
        return _error(version, ErrorCode.INVALID_REQUEST)
    if req.transactional_id is not None:
        # KafkaApis.handleInitProducerIdRequest: WRITE on the transactional id
        if not allowed(ctx, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
            return _error(version, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        return _transactional(ctx, req, producer_id, producer_epoch)
    # an idempotent producer: IDEMPOTENT_WRITE on the cluster, or WRITE on some topic (KIP-679)
    if not cluster_allowed(ctx, Operation.IDEMPOTENT_WRITE) and \
            not allowed_by_type(ctx, Operation.WRITE, ResourceType.TOPIC):
        return _error(version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    try:
        return _response(version, ErrorCode.NONE, ctx.broker.producer_ids.generate(), 0)
    except Exception as e:  # noqa: BLE001 - Kafka answers Errors.forException(e)
        log.exception("producer id allocation failed")
        return _error(version, error_code_of(e))
