"""Metadata (key 3), v0-13.

Each partition as its registration in the cluster metadata says (leader, leader epoch, replicas,
ISR), with the replicas of stopped brokers offline and LEADER_NOT_AVAILABLE while it has no live
leader, as KRaftMetadataCache answers; a single node leads all of them at epoch 0. A null
topic list (an empty one in v0) means every topic. Unknown topics are created on the spot when
``auto.create.topics.enable`` and the request allow it; the request that caused the creation is
still answered UNKNOWN_TOPIC_OR_PARTITION, as Kafka 4 answers it while the creation goes through
its controller (clients ask again; kafka-go's tests count on it), and the next Metadata shows the
topic. v10+ carries topic ids and may look topics up by id.

Auto-created topics go into the cluster metadata with one durable write per request, and their
logs are made in slices that give the event loop back. The answer to a request for every topic is
kept, encoded, until the topics change, so clients refreshing their metadata cost one lookup
(without an authorizer: with one, each principal sees its own topics).

Authorization (KafkaApis.handleTopicMetadataRequest): DESCRIBE on each topic. A request for every
topic leaves out the others silently; a named topic the client may not describe is
TOPIC_AUTHORIZATION_FAILED (a known topic id keeps its id, and no name), whether it exists or not;
auto-creating one needs CREATE on the cluster or on the topic. Unknown ids come first, then the
authorized topics, then those refused creation, then those refused description. The authorized
operations of topics (v8+) and of the cluster (v8-10; none when the cluster's DESCRIBE is refused)
are the principal's.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from broker.cluster.brokers import BrokerRegistry, offline_replicas
from broker.cluster.controller import CLUSTER_METADATA_TOPIC
from broker.cluster.metadata import INTERNAL_TOPICS, TopicInfo, validate_topic_name
from broker.cluster.partition_change import PartitionRegistration
from broker.handlers.registry import api
from broker.net.context import RawResponse, RequestContext
from broker.security.acls import CLUSTER_NAME
from broker.security.checks import (
    Operation,
    ResourceType,
    allowed,
    authorized_operations,
    cluster_allowed,
    filter_allowed,
)
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


def topic_entry(info: TopicInfo, brokers: BrokerRegistry, ops: set[int] | None, version: int) -> ApiMessage:
    """``ops``: the authorized operations as kafka-python's set of codes, None when not asked for."""
    return Topic(
        error_code=0,
        name=info.name,
        topic_id=info.topic_id,
        is_internal=info.internal,
        partitions=[partition_entry(p, reg, brokers, version) for p, reg in enumerate(info.registrations)],
        authorized_operations=ops,
    )


def operation_codes(bits: int) -> set[int]:
    """An authorized-operations bit field as kafka-python models it: the set of operation codes."""
    return {code for code in range(32) if bits >> code & 1}


def _topic_ops(ctx: RequestContext, with_ops: bool, name: str) -> set[int] | None:
    if not with_ops:
        return None
    if ctx.broker.authorizer is None:
        return set(TOPIC_OPERATIONS)
    return operation_codes(authorized_operations(ctx, ResourceType.TOPIC, name))


def partition_entry(index: int, reg: PartitionRegistration, brokers: BrokerRegistry, version: int) -> ApiMessage:
    """KRaftMetadataCache.partitionMetadata: v0 leaves out the replicas of stopped brokers
    (REPLICA_NOT_AVAILABLE); a leader that is not live is -1, LEADER_NOT_AVAILABLE (v6+: a
    registered but fenced one is LISTENER_NOT_FOUND, as Kafka answers)."""
    replicas, isr = list(reg.replicas), list(reg.isr)
    error = ErrorCode.NONE
    if version == 0:
        replicas = [r for r in replicas if brokers.alive(r)]
        isr = [r for r in isr if brokers.alive(r)]
    offline = offline_replicas(reg.replicas, brokers)
    leader = reg.leader
    if not brokers.alive(leader):
        error = (ErrorCode.LISTENER_NOT_FOUND if version >= 6 and brokers.registered(leader)
                 else ErrorCode.LEADER_NOT_AVAILABLE)
        leader = -1
    elif len(replicas) < len(reg.replicas) or len(isr) < len(reg.isr):
        error = ErrorCode.REPLICA_NOT_AVAILABLE
    return Partition(error_code=error, partition_index=index, leader_id=leader, leader_epoch=reg.leader_epoch,
                     replica_nodes=replicas, isr_nodes=isr, offline_replicas=offline)


def error_entry(code: int, name: str | None, topic_id: uuid.UUID = ZERO_UUID) -> ApiMessage:
    # Kafka flags internal topic names as internal even when they do not exist (Topic.isInternal)
    return Topic(error_code=code, name=name, topic_id=topic_id, is_internal=name in INTERNAL_TOPICS, partitions=[])


def brokers_for(ctx: RequestContext) -> list[ApiMessage]:
    """The live brokers, each at its endpoint on the listener the request came in on."""
    out = []
    for node in ctx.broker.brokers.live():
        host, port = node.advertised_endpoint(ctx.listener, ctx.local_host)
        out.append(Broker_(node_id=node.node_id, host=host, port=port, rack=node.rack))
    return out


@api(3, (0, 13))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage | RawResponse | Awaitable[ApiMessage]:
    broker = ctx.broker
    version = ctx.api_version
    with_ops = bool(getattr(req, "include_topic_authorized_operations", False))
    allow_create = version < 4 or req.allow_auto_topic_creation
    cluster_ops = bool(getattr(req, "include_cluster_authorized_operations", False))
    unknown_ids: list[ApiMessage] = []
    topics: list[ApiMessage] = []
    refused_create: list[ApiMessage] = []
    refused_describe: list[ApiMessage] = []
    created: list[TopicInfo] = []
    if req.topics is None or (version == 0 and not req.topics):
        return _all_topics(ctx, version, with_ops, cluster_ops)
    may_create_any = None  # CREATE on the cluster, asked once if needed
    with broker.metadata.batch():
        for t in req.topics:
            name = t.name
            if version >= 10 and name is None:
                info = broker.metadata.by_id.get(t.topic_id)
                if info is None:
                    unknown_ids.append(error_entry(ErrorCode.UNKNOWN_TOPIC_ID, None, t.topic_id))
                elif not allowed(ctx, Operation.DESCRIBE, ResourceType.TOPIC, info.name):
                    refused_describe.append(Topic(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=None,
                                                  topic_id=t.topic_id, is_internal=False, partitions=[]))
                else:
                    topics.append(topic_entry(info, broker.brokers, _topic_ops(ctx, with_ops, info.name), version))
                continue
            if not allowed(ctx, Operation.DESCRIBE, ResourceType.TOPIC, name):
                refused_describe.append(Topic(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name,
                                              topic_id=ZERO_UUID, is_internal=False, partitions=[]))
                continue
            info = broker.metadata.get(name)
            if info is not None:
                topics.append(topic_entry(info, broker.brokers, _topic_ops(ctx, with_ops, name), version))
                continue
            if allow_create and broker.config.get("auto.create.topics.enable") and broker.authorizer is not None:
                if may_create_any is None:
                    may_create_any = cluster_allowed(ctx, Operation.CREATE)
                if not may_create_any and not allowed(ctx, Operation.CREATE, ResourceType.TOPIC, name):
                    refused_create.append(error_entry(ErrorCode.TOPIC_AUTHORIZATION_FAILED, name))
                    continue
            entry = _missing(ctx, name, allow_create, with_ops, created)
            if with_ops and entry.error_code != 0:  # authorized topics that do not exist carry ops too
                entry.authorized_operations = _topic_ops(ctx, with_ops, name)
            topics.append(entry)
    response = _response(ctx, unknown_ids + topics + refused_create + refused_describe, cluster_ops)
    return _after_logs(broker, created, response) if created else response


def _response(ctx: RequestContext, topics: list[ApiMessage], cluster_ops: bool) -> ApiMessage:
    broker = ctx.broker
    ops: set[int] | None = None
    if cluster_ops:
        if broker.authorizer is None:
            ops = set(CLUSTER_OPERATIONS)
        elif cluster_allowed(ctx, Operation.DESCRIBE):
            ops = operation_codes(authorized_operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME))
        else:
            ops = set()  # 0: the cluster's DESCRIBE refused
    return Response(
        throttle_time_ms=0,
        brokers=brokers_for(ctx),
        cluster_id=broker.cluster_id,
        controller_id=broker.brokers.random_alive_id(broker.node_id),
        topics=topics,
        authorized_operations=ops,
        error_code=0,
    )


def _all_topics(ctx: RequestContext, version: int, with_ops: bool, cluster_ops: bool) -> ApiMessage | RawResponse:
    """Every topic: the encoded answer is kept until the topics change (``MetadataStore.generation``),
    unless request quotas are on (the answer then carries its own throttle time)."""
    broker = ctx.broker
    metadata = broker.metadata
    if broker.authorizer is not None:  # only the topics this principal may describe, its own operations
        describable = filter_allowed(ctx, Operation.DESCRIBE, ResourceType.TOPIC, metadata.topics)
        return _response(ctx, [topic_entry(t, broker.brokers, _topic_ops(ctx, with_ops, t.name), version)
                               for t in metadata.topics.values() if t.name in describable], cluster_ops)
    everything = set(TOPIC_OPERATIONS) if with_ops else None
    if broker.quotas.enforcing_requests:
        return _response(ctx, [topic_entry(t, broker.brokers, everything, version) for t in metadata.topics.values()],
                         cluster_ops)
    if len(broker.brokers.all_ids()) > 1:  # the controller id is drawn for each answer, as Kafka's
        return _response(ctx, [topic_entry(t, broker.brokers, everything, version) for t in metadata.topics.values()],
                         cluster_ops)
    key = (version, with_ops, cluster_ops, broker.advertised_endpoint(ctx.listener, ctx.local_host),
           broker.config.get("broker.rack"), metadata.generation, broker.brokers.version)
    cache = metadata.response_cache
    body = cache.get(key)
    if body is None:
        topics = [topic_entry(t, broker.brokers, everything, version) for t in metadata.topics.values()]
        body = bytes(_response(ctx, topics, cluster_ops).encode(version=version))
        if len(cache) >= 16 or any(k[-2:] != key[-2:] for k in cache):
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
            return topic_entry(existing, broker.brokers, _topic_ops(ctx, with_ops, name), ctx.api_version)
        return error_entry(e.code, name)
    if info is not None:
        created.append(info)
    return error_entry(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name)
