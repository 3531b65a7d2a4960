"""ListPartitionReassignments (key 46), v0: ``kafka-reassign-partitions.sh --list/--verify``.

A reassignment on one node finishes the moment it is accepted (the only possible target is the
replica set it already has), so none is ever in progress: Kafka answers an empty list, also for
names it does not know.
"""

from __future__ import annotations

from broker.handlers.registry import api
from broker.net.context import RequestContext
from protocol.messages import ApiMessage, lazy_response

Response = lazy_response(46)


@api(46, (0, 0))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage:
    return Response(throttle_time_ms=0, error_code=0, error_message=None, topics=[])
