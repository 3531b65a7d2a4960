"""Metadata (key 3), v0-13.

One broker leads every partition with leader epoch 0, replicas = ISR = [this node]. A null
topic list (an empty one in v0) means every topic. Unknown topics are created on the spot when
``auto.create.topics.enable`` and the request allow it; the request that caused the creation is
still answered UNKNOWN_TOPIC_OR_PARTITION, as Kafka 4 answers it while the creation goes through
its controller (clients ask again; kafka-go's tests count on it), and the next Metadata shows the
topic. v10+ carries topic ids and may look topics up by id.

Auto-created topics go into the cluster metadata with one durable write per request, and their
logs are made in slices that give the event loop back. The answer to a request for every topic is
kept, encoded, until the topics change, so clients refreshing their metadata cost one lookup.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from broker.cluster.controller import CLUSTER_METADATA_TOPIC
from broker.cluster.metadata import INTERNAL_TOPICS, TopicInfo, validate_topic_name
from broker.handlers.registry import api
from broker.net.context import RawResponse, RequestContext
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import ApiMessage, lazy_response

if TYPE_CHECKING:
    from broker.services import Services

Response = lazy_response(3)
Broker_ = Response.MetadataResponseBroker
Topic = Response.MetadataResponseTopic
Partition = Topic.MetadataResponsePartition
ZERO_UUID = uuid.UUID(int=0)
# READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS: no authorizer.
# (kafka-python models these int32 bitfields as sets of operation codes; None = not requested)
TOPIC_OPERATIONS = frozenset({3, 4, 5, 6, 7, 8, 10, 11})
# CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE: Kafka's
# AclEntry.supportedOperations(CLUSTER), all of them with no authorizer (no WRITE on the cluster).
CLUSTER_OPERATIONS = frozenset({5, 7, 8, 9, 10, 11, 12})


def topic_entry(info: TopicInfo, node_id: int, with_ops: bool) -> ApiMessage:
    return Topic(
        error_code=0,
        name=info.name,
        topic_id=info.topic_id,
        is_internal=info.internal,
        partitions=[
            Partition(
                error_code=0,
                partition_index=p,
                leader_id=node_id,
                leader_epoch=0,
                replica_nodes=[node_id],
                isr_nodes=[node_id],
                offline_replicas=[],
            )
            for p in range(info.partitions)
        ],
        authorized_operations=set(TOPIC_OPERATIONS) if with_ops else None,
    )


def error_entry(code: int, name: str | None, topic_id: uuid.UUID = ZERO_UUID) -> ApiMessage:
    # Kafka flags internal topic names as internal even when they do not exist (Topic.isInternal)
    return Topic(error_code=code, name=name, topic_id=topic_id, is_internal=name in INTERNAL_TOPICS, partitions=[])


def brokers_for(ctx: RequestContext) -> list[ApiMessage]:
    host, port = ctx.broker.advertised_endpoint(ctx.listener, ctx.local_host)
    return [Broker_(node_id=ctx.broker.node_id, host=host, port=port, rack=ctx.broker.config.get("broker.rack"))]


@api(3, (0, 13))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage | RawResponse | Awaitable[ApiMessage]:
    broker = ctx.broker
    version = ctx.api_version
    with_ops = bool(getattr(req, "include_topic_authorized_operations", False))
    allow_create = version < 4 or req.allow_auto_topic_creation
    cluster_ops = bool(getattr(req, "include_cluster_authorized_operations", False))
    topics: list[ApiMessage] = []
    created: list[TopicInfo] = []
    if req.topics is None or (version == 0 and not req.topics):
        return _all_topics(ctx, version, with_ops, cluster_ops)
    with broker.metadata.batch():
        for t in req.topics:
            name = t.name
            if version >= 10 and name is None:
                info = broker.metadata.by_id.get(t.topic_id)
                if info is None:
                    topics.append(error_entry(ErrorCode.UNKNOWN_TOPIC_ID, None, t.topic_id))
                else:
                    topics.append(topic_entry(info, broker.node_id, with_ops))
                continue
            info = broker.metadata.get(name)
            if info is None:
                topics.append(_missing(ctx, name, allow_create, with_ops, created))
            else:
                topics.append(topic_entry(info, broker.node_id, with_ops))
    response = _response(ctx, topics, cluster_ops)
    return _after_logs(broker, created, response) if created else response


def _response(ctx: RequestContext, topics: list[ApiMessage], cluster_ops: bool) -> ApiMessage:
    broker = ctx.broker
    return Response(
        throttle_time_ms=0,
        brokers=brokers_for(ctx),
        cluster_id=broker.cluster_id,
        controller_id=broker.node_id,
        topics=topics,
        authorized_operations=set(CLUSTER_OPERATIONS) if cluster_ops else None,
        error_code=0,
    )


def _all_topics(ctx: RequestContext, version: int, with_ops: bool, cluster_ops: bool) -> ApiMessage | RawResponse:
    """Every topic: the encoded answer is kept until the topics change (``MetadataStore.generation``),
    unless request quotas are on (the answer then carries its own throttle time)."""
    broker = ctx.broker
    metadata = broker.metadata
    if broker.quotas.enforcing_requests:
        return _response(ctx, [topic_entry(t, broker.node_id, with_ops) for t in metadata.topics.values()],
                         cluster_ops)
    key = (version, with_ops, cluster_ops, broker.advertised_endpoint(ctx.listener, ctx.local_host),
           broker.config.get("broker.rack"), metadata.generation)
    cache = metadata.response_cache
    body = cache.get(key)
    if body is None:
        topics = [topic_entry(t, broker.node_id, with_ops) for t in metadata.topics.values()]
        body = bytes(_response(ctx, topics, cluster_ops).encode(version=version))
        if len(cache) >= 16 or any(k[-1] != metadata.generation for k in cache):
            cache.clear()
        cache[key] = body
    return RawResponse([body], len(body))


async def _after_logs(broker: Services, created: list[TopicInfo], response: ApiMessage) -> ApiMessage:
    await broker.controller.create_logs_in_slices(created)
    return response


def _missing(ctx: RequestContext, name: str, allow_create: bool, with_ops: bool,
             created: list[TopicInfo]) -> ApiMessage:
    broker = ctx.broker
    try:
        validate_topic_name(name)
    except KafkaError as e:
        return error_entry(e.code, name)
    if name in INTERNAL_TOPICS or name == CLUSTER_METADATA_TOPIC or \
            not (allow_create and broker.config.get("auto.create.topics.enable")):
        return error_entry(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name)
    try:
        info = broker.controller.create_topic(name, create_logs=False)
    except KafkaError as e:
        existing = broker.metadata.get(name)
        if e.code == ErrorCode.TOPIC_ALREADY_EXISTS and existing is not None:
            return topic_entry(existing, broker.node_id, with_ops)
        return error_entry(e.code, name)
    if info is not None:
        created.append(info)
    return error_entry(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name)
