"""Fetch (key 1), v4-17 (v13+ name topics by id).

Reads whole batches up to the high watermark (read_uncommitted) or the LSO (read_committed,
with the aborted transactions overlapping the returned range). The response is bounded by
``max_bytes`` and each partition by ``partition_max_bytes``, except that the first partition
with data returns at least one whole batch, however large, so a consumer never stalls. When
less than ``min_bytes`` is available the request parks until an append to one of its
partitions or ``max_wait_ms``. Fetch sessions (KIP-227) are not kept: every response is a
full one with session id 0, which clients accept by sending full requests.
"""

from __future__ import annotations

import time
import uuid

from broker.context import RawResponse
from broker.handlers.registry import api
from protocol.errors import ErrorCode
from protocol.fetch_codec import (
    FetchPartitionResponse,
    FetchTopicResponse,
    decode_fetch_request,
    encode_fetch_response,
)


class _Plan:
    """The request's partitions resolved to names once; read again after each wake-up."""

    __slots__ = ("topics", "unknown_ids", "keys")

    def __init__(self, broker, req, version: int) -> None:
        self.topics: list[tuple[str | None, uuid.UUID | None, list]] = []
        self.keys: list[tuple[str, int]] = []
        for t in req.topics:
            if version >= 13:
                info = broker.metadata.by_id.get(t.topic_id)
                name = info.name if info is not None else None
                self.topics.append((name, t.topic_id, t.partitions))
            else:
                self.topics.append((t.name, None, t.partitions))
                name = t.name
            if name is not None:
                self.keys.extend((name, p.partition) for p in t.partitions)


def _read_all(broker, plan: _Plan, req, version: int) -> tuple[list, int, bool]:
    rm = broker.replica_manager
    remaining = req.max_bytes if req.max_bytes > 0 else 0x7FFFFFFF
    total = 0
    errors = False
    isolation = req.isolation_level
    out = []
    for name, topic_id, partitions in plan.topics:
        parts = []
        for p in partitions:
            if name is None:
                parts.append(FetchPartitionResponse(p.partition, ErrorCode.UNKNOWN_TOPIC_ID, aborted_transactions=[]))
                errors = True
                continue
            limit = min(p.partition_max_bytes, remaining)
            r = rm.read(name, p.partition, p.fetch_offset, limit, isolation, total == 0, p.current_leader_epoch)
            size = len(r.records) if r.records else 0
            total += size
            remaining = max(remaining - size, 0)
            if r.error:
                errors = True
            parts.append(FetchPartitionResponse(
                p.partition, int(r.error), r.high_watermark, r.last_stable_offset, r.log_start_offset,
                r.aborted, -1, r.records if r.records is not None else b"",
            ))
        out.append(FetchTopicResponse(name, topic_id, parts))
    return out, total, errors


def _response(broker, version: int, topics: list) -> RawResponse:
    """Encode the answer; bytes and records out are counted here, once per response."""
    for t in topics:
        if t.name is not None:
            for p in t.partitions:
                if p.records:
                    broker.metrics.fetched(t.name, p.records)
    encoded = encode_fetch_response(version, topics=topics, session_id=0)
    return RawResponse(encoded.buffers, encoded.size)


@api(1, (4, 17), decode=decode_fetch_request)
def handle(ctx, req):
    broker = ctx.broker
    version = ctx.api_version
    plan = _Plan(broker, req, version)
    topics, total, errors = _read_all(broker, plan, req, version)
    if errors or total >= req.min_bytes or req.max_wait_ms <= 0 or not plan.keys:
        return _response(broker, version, topics)
    return _long_poll(ctx, req, plan, version)


async def _long_poll(ctx, req, plan: _Plan, version: int):
    broker = ctx.broker
    deadline = time.monotonic() + req.max_wait_ms / 1000
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        await broker.replica_manager.wait_for_data(plan.keys, remaining)
        topics, total, errors = _read_all(broker, plan, req, version)
        if errors or total >= req.min_bytes:
            return _response(broker, version, topics)
        if broker.stopping:
            break
    topics, _, _ = _read_all(broker, plan, req, version)
    return _response(broker, version, topics)

