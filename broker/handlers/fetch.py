"""Fetch (key 1), v4-18 (v13+ name topics by id; v18 only adds a follower tag).

Reads whole batches up to the high watermark (read_uncommitted) or the LSO (read_committed,
with the aborted transactions overlapping the returned range). The response is bounded by
``max_bytes`` and each partition by ``partition_max_bytes``, except that the first partition
with data returns at least one whole batch, however large, so a consumer never stalls. When
less than ``min_bytes`` is available the request parks until an append to one of its
partitions or ``max_wait_ms``. v7+ fetches may use incremental fetch sessions (KIP-227,
``broker.replica.fetch_sessions``): which partitions are read and which are answered then comes from
the session. Large reads are FileRegions, sent from the segment file with sendfile as Kafka
sends its FileRecords (``broker.net.socket_writer``); over TLS they are copied.

Authorization: READ on each topic (TOPIC_AUTHORIZATION_FAILED per partition otherwise); a follower's
fetch CLUSTER_ACTION on the cluster (TOPIC_AUTHORIZATION_FAILED on every partition otherwise).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from broker.cluster.brokers import leader_endpoints
from broker.cluster.quotas import user_of
from broker.handlers.registry import api
from broker.net.context import RawResponse, RequestContext
from broker.replica.fetch_sessions import FetchContext, PartitionFetch
from broker.security.checks import Operation, ResourceType, cluster_allowed, filter_allowed
from protocol.errors import ErrorCode
from protocol.fetch_codec import (
    FetchPartitionResponse,
    FetchRequestView,
    FetchTopicResponse,
    decode_fetch_request,
    encode_fetch_response,
)
from storage.log.file_region import FileRegion

if TYPE_CHECKING:
    from broker.services import Services

Forget = tuple[str | None, uuid.UUID | None, int]  # a partition an incremental fetch drops from its session


def _requested(broker: Services, req: FetchRequestView, version: int) -> tuple[list[PartitionFetch], list[Forget]]:
    """The request's partitions (names resolved from ids at v13+) and those it forgets. A partition
    named twice is read once, as Kafka keys FetchRequest.fetchData by partition: in the place it
    was first named, with what it was named with last."""
    name_of = broker.metadata.name_of
    fetch: dict[tuple[uuid.UUID | str | None, int], PartitionFetch] = {}
    for t in req.topics:
        if version >= 13:
            name, topic_id = name_of(t.topic_id), t.topic_id
        else:
            name, topic_id = t.name, None
        for p in t.partitions:
            fetch[(topic_id if version >= 13 else name, p.partition)] = PartitionFetch(
                name, topic_id, p.partition, p.fetch_offset, p.partition_max_bytes, p.current_leader_epoch,
                p.last_fetched_epoch, p.log_start_offset)
    forget = [(t.name, t.topic_id, partition) for t in req.forgotten_topics for partition in t.partitions]
    return list(fetch.values()), forget


def _resolve(broker: Services, fetches: list[PartitionFetch]) -> None:
    """Session partitions named by id: the name as of now (None once the topic is gone)."""
    name_of = broker.metadata.name_of
    for f in fetches:
        if f.topic_id is not None:
            f.topic = name_of(f.topic_id)


def _denied(ctx: RequestContext, req: FetchRequestView, fetches: list[PartitionFetch]) -> set[str] | None:
    """KafkaApis.handleFetchRequest: a follower needs CLUSTER_ACTION on the cluster (every partition
    is TOPIC_AUTHORIZATION_FAILED otherwise: None here); a consumer READ on each topic (those it may
    not read are TOPIC_AUTHORIZATION_FAILED, before their existence is looked at)."""
    if ctx.broker.authorizer is None:
        return set()
    if req.replica_id >= 0:
        return set() if cluster_allowed(ctx, Operation.CLUSTER_ACTION) else None
    topics = {f.topic for f in fetches if f.topic is not None}
    return topics - filter_allowed(ctx, Operation.READ, ResourceType.TOPIC, topics)


def _read_all(broker: Services, fetches: list[PartitionFetch], req: FetchRequestView, version: int,
              denied: set[str] | None = None) -> tuple[list[FetchPartitionResponse], int, bool]:
    rm = broker.replica_manager
    # KIP-392: a consumer from v11 (which sends its client metadata) may read a follower, up to
    # the follower's high watermark; older consumers only the leader (FetchParams.fetchOnlyLeader)
    leader_only = version < 11
    # Kafka: min(the request's max_bytes, the broker's fetch.max.bytes)
    remaining = min(req.max_bytes if req.max_bytes > 0 else 0x7FFFFFFF, broker.config.get("fetch.max.bytes"))
    total = 0
    errors = False
    isolation = req.isolation_level
    out = []
    for f in fetches:
        if f.topic is None:
            out.append(FetchPartitionResponse(f.partition, ErrorCode.UNKNOWN_TOPIC_ID, aborted_transactions=[]))
            errors = True
            continue
        if denied is None or f.topic in denied:
            out.append(FetchPartitionResponse(f.partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED, aborted_transactions=[]))
            errors = True
            continue
        if req.replica_id >= 0:  # a follower (Kafka's replica fetcher)
            r = rm.read_for_follower(req.replica_id, f.topic, f.partition, f.fetch_offset, f.last_fetched_epoch,
                                     f.log_start_offset, min(f.max_bytes, remaining), f.current_leader_epoch,
                                     total == 0)
        else:
            r = rm.read(f.topic, f.partition, f.fetch_offset, min(f.max_bytes, remaining), isolation, total == 0,
                        f.current_leader_epoch, leader_only)
        size = len(r.records) if r.records else 0
        total += size
        remaining = max(remaining - size, 0)
        if r.error or r.diverging_epoch is not None:  # answered at once
            errors = True
        out.append(FetchPartitionResponse(
            f.partition, int(r.error), r.high_watermark, r.last_stable_offset, r.log_start_offset,
            # a FileRegion is sent with sendfile; protocol.fetch_codec's Buffer cannot name it (no storage import)
            r.aborted, -1, r.records if r.records is not None else b"", r.diverging_epoch, r.current_leader,
        ))
    return out, total, errors


def _response(broker: Services, version: int, context: FetchContext, parts: list[FetchPartitionResponse],
              ctx: RequestContext | None = None) -> RawResponse:
    """Encode the answer (a session's picks for an incremental fetch, consecutive partitions of
    one topic grouped); bytes out are counted here, once per response."""
    sessions = broker.fetch_sessions
    fetches = context.partitions
    session_id = 0
    if context.session is not None:
        session_id = context.session.id
        error, selected = sessions.select_incremental(context, [
            (f, p.error_code, p.high_watermark, p.log_start_offset, bool(p.records))
            for f, p in zip(fetches, parts, strict=True)])
        if error:
            return _encode(version, [], error, session_id)
        fetches, parts = [fetches[i] for i in selected], [parts[i] for i in selected]
    elif context.create_session:
        session_id = sessions.maybe_create_session(context, [
            (f, p.error_code, p.high_watermark, p.log_start_offset) for f, p in zip(fetches, parts, strict=True)
        ], broker.wire_clock.now_ms())
    topics: list[FetchTopicResponse] = []
    key: uuid.UUID | str | None = None
    partitions: list[FetchPartitionResponse] = []  # the last topic's
    for f, p in zip(fetches, parts, strict=True):
        if p.records and f.topic is not None:
            broker.metrics.fetched(f.topic, len(p.records))
        k = f.topic_id if version >= 13 else f.topic
        if not topics or k != key:
            partitions = []
            topics.append(FetchTopicResponse(f.topic, f.topic_id, partitions))
            key = k
        partitions.append(p)
    return _encode(version, topics, ErrorCode.NONE, session_id, ctx)


def _encode(version: int, topics: list[FetchTopicResponse], error: ErrorCode, session_id: int,
            ctx: RequestContext | None = None) -> RawResponse:
    endpoints = None
    if ctx is not None and version >= 16:  # KIP-951: where the named current leaders are
        leaders = [p.current_leader[0] for t in topics for p in t.partitions
                   if p.current_leader is not None and p.current_leader[0] >= 0]
        if leaders:
            endpoints = leader_endpoints(leaders, ctx.broker.brokers, ctx.listener, ctx.local_host)
    encoded = encode_fetch_response(version, topics=topics, error_code=int(error), session_id=session_id,
                                    node_endpoints=endpoints)
    if ctx is not None and ctx.broker.quotas.enforcing:
        # consumer_byte_rate counts the answer's bytes; over it, the answer says how long to back off
        quotas = ctx.broker.quotas
        throttle = quotas.record("consumer_byte_rate", ctx.client_id, encoded.size,
                                 user=user_of(ctx.principal))
        if throttle:
            quotas.mute(ctx.connection_id, throttle)
            encoded = encode_fetch_response(version, topics=topics, error_code=int(error), session_id=session_id,
                                            throttle_time_ms=throttle, node_endpoints=endpoints)
    buffers = encoded.buffers
    return RawResponse(buffers, encoded.size, any(type(b) is FileRegion for b in buffers), (error, topics))


@api(1, (4, 18), decode=decode_fetch_request)
def handle(ctx: RequestContext, req: FetchRequestView) -> RawResponse | Awaitable[RawResponse]:
    broker = ctx.broker
    version = ctx.api_version
    fetch, forget = _requested(broker, req, version)
    context = broker.fetch_sessions.new_context(version, req.session_id, req.session_epoch, fetch, forget,
                                                broker.wire_clock.now_ms())
    if context.error:
        return _encode(version, [], context.error, 0)
    if context.session is not None:
        _resolve(broker, context.partitions)
    denied = _denied(ctx, req, context.partitions)
    parts, total, errors = _read_all(broker, context.partitions, req, version, denied)
    keys = [(f.topic, f.partition) for f in context.partitions if f.topic is not None]
    if errors or total >= req.min_bytes or req.max_wait_ms <= 0 or not keys:
        return _response(broker, version, context, parts, ctx)
    # Watch for appends from this very read on: the coroutine below only starts on a later pass of
    # the loop, and an append handled in between would otherwise wake nobody (the fetch would then
    # sleep its whole max wait with the data in the log). Kafka's DelayedFetch re-checks likewise.
    waiter = broker.replica_manager.wait_for_data(keys, req.max_wait_ms / 1000)
    return _long_poll(ctx, req, context, keys, version, waiter, denied)


async def _long_poll(ctx: RequestContext, req: FetchRequestView, context: FetchContext,
                     keys: list[tuple[str, int]], version: int, waiter: asyncio.Future[None],
                     denied: set[str] | None) -> RawResponse:
    broker = ctx.broker
    deadline = broker.wire_clock.monotonic() + req.max_wait_ms / 1000
    while True:
        await waiter
        parts, total, errors = _read_all(broker, context.partitions, req, version, denied)
        remaining = deadline - broker.wire_clock.monotonic()
        if errors or total >= req.min_bytes or remaining <= 0 or broker.stopping:
            return _response(broker, version, context, parts, ctx)
        waiter = broker.replica_manager.wait_for_data(keys, remaining)
