"""ListTransactions (key 66), v0-2 (kafka-transactions.sh list, Admin.listTransactions).

Every transactional id this coordinator holds except Dead ones, filtered by state names
(unknown names are echoed in ``unknown_state_filters``), producer ids, v1+ a minimum running
duration (transactions started more than ``duration_filter`` ms ago) and v2+ a transactional-id
regular expression (full match; an invalid one is INVALID_REGULAR_EXPRESSION).
COORDINATOR_LOAD_IN_PROGRESS while ``__transaction_state`` is still loading.

Authorization: only the transactional ids the client may DESCRIBE are listed.
"""

from __future__ import annotations

from broker.handlers.registry import api
from broker.net.context import RequestContext
from broker.security.checks import Operation, ResourceType, allowed
from protocol.messages import ApiMessage, lazy_response

Response = lazy_response(66)
State = Response.TransactionState


@api(66, (0, 2))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage:
    txn = ctx.broker.txn_coordinator
    duration = req.duration_filter if ctx.api_version >= 1 else -1
    pattern = req.transactional_id_pattern if ctx.api_version >= 2 else None
    code, unknown, states = txn.handle_list_transactions(
        set(req.producer_id_filters or ()), set(req.state_filters or ()), duration, pattern,
    )
    return Response(
        throttle_time_ms=0,
        error_code=int(code),
        unknown_state_filters=unknown,
        # KafkaApis.handleListTransactionsRequest: only the ids the client may DESCRIBE
        transaction_states=[State(transactional_id=t, producer_id=pid, transaction_state=name)
                            for t, pid, name in states
                            if allowed(ctx, Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, t)],
    )
