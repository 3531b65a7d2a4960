"""Answers after the group coordinator's writes are replicated.

Among several brokers, Kafka's coordinator runtime answers a request that wrote to
``__consumer_offsets`` only once the partition's ISR holds the write (its high watermark passed
it); a write that cannot be replicated is answered with the mapped error (NOT_ENOUGH_REPLICAS and
the like become what a client of that API understands). On one broker the partition has one
replica and nothing waits.
"""

from __future__ import annotations

from broker.net.context import RequestContext
from protocol.errors import ErrorCode


def waits(ctx: RequestContext) -> bool:
    """Whether answers of this broker wait for replication (several brokers in the process)."""
    return ctx.broker.shared is not None


async def replicated(ctx: RequestContext, group_id: str) -> ErrorCode:
    """NONE once the ISR of ``group_id``'s partition holds everything written for it so far."""
    if not waits(ctx):
        return ErrorCode.NONE
    return await ctx.broker.group_coordinator.replicated(group_id)
