"""Produce (key 0), v3-13 (advertised from v0 as Kafka 4 does for old librdkafka builds).

v13 names topics by topic id (KIP-516): an id this broker does not know gets UNKNOWN_TOPIC_ID
for each of its partitions, and the answer names topics by id too.

Per partition: one magic-2 batch, validated (structure, CRC, size, producer state) before a
single write; errors are per partition and never stop the others. acks=0 gets no response;
acks 1 is answered after the local append, and so is -1 on a partition with one replica; with
more replicas, acks=-1 waits until the high watermark passes the batch (Kafka's DelayedProduce)
or the request's timeout (REQUEST_TIMED_OUT). Any other acks value is INVALID_REQUIRED_ACKS for
every partition.

Transactions (ReplicaManager.handleProduceAppend): transactional batches of more than one
producer in one request fail the whole request with INVALID_PRODUCER_ID_MAPPING. v12 is
Transactions V2: a transactional batch opening the producer's transaction on a partition first
has the partition added to the transaction by the coordinator (``coordinator.txn.verification.
add_partitions``, retried on CONCURRENT_TRANSACTIONS for up to 100 ms), then is appended
verified; v11 and below need the client's AddPartitionsToTxn (KIP-890 verification only). The
plain (non-transactional) path stays synchronous, unless a partition carries a large compressed
batch: that one is validated (decompressed, every record read) in a worker thread first
(``broker.replica.produce_validation``), so it cannot hold the event loop the other clients share.

Authorization (KafkaApis.handleProduceRequest): transactional records need WRITE on the transactional
id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED on every partition; acks=0: the connection is closed); each
topic WRITE (TOPIC_AUTHORIZATION_FAILED on its partitions, which are not appended).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from broker.cluster.brokers import leader_endpoints
from broker.cluster.quotas import user_of
from broker.handlers.registry import api
from broker.net.context import NO_RESPONSE, NoResponse, RawResponse, RequestContext
from broker.net.dispatch import CloseConnection
from broker.replica.produce_validation import needs_offload, validate_payload
from broker.replica.replica_manager import ProduceResult
from broker.replica.txn_verification import (
    SupportedOperation,
    add_partitions,
    not_yet_in_transaction,
    produce_error,
)
from broker.security.checks import Operation, ResourceType, allowed, filter_allowed
from protocol import records as rec
from protocol.errors import ErrorCode, KafkaError
from protocol.primitives import NodeEndpoint
from protocol.produce_codec import (
    ProducePartitionResponse,
    ProduceRequestView,
    ProduceTopicResponse,
    decode_produce_request,
    encode_produce_response,
)

if TYPE_CHECKING:
    from broker.services import Services
    from storage.log.partition_log import PartitionLog

TopicPartition = tuple[str, int]
Reply = RawResponse | NoResponse  # the encoded answer, or none for acks=0
# A large compressed partition validated off the loop: its buffer and batches, or the refusal.
Validated = tuple[bytearray | memoryview, list[rec.BatchInfo]] | KafkaError
# A transactional batch's partition: its log and the batch's base sequence.
Targets = dict[TopicPartition, tuple["PartitionLog", int]]


def _partition(index: int, r: ProduceResult) -> ProducePartitionResponse:
    return ProducePartitionResponse(
        index, int(r.error), r.base_offset, r.log_append_time, r.log_start_offset, r.record_errors, r.error_message,
        r.current_leader,
    )


def _endpoints(ctx: RequestContext, responses: list[ProduceTopicResponse]) -> list[NodeEndpoint] | None:
    """KIP-951: the brokers named as current leaders, so the client goes straight there."""
    leaders = [p.current_leader[0] for t in responses for p in t.partitions
               if p.current_leader is not None and p.current_leader[0] >= 0]
    if not leaders:
        return None
    return leader_endpoints(leaders, ctx.broker.brokers, ctx.listener, ctx.local_host)


def _failed(e: KafkaError) -> ProduceResult:
    return ProduceResult(e.code, error_message=str(e) if str(e) != e.code.name else None)


def _has_transactional_records(req: ProduceRequestView) -> bool:
    """RequestUtils.hasTransactionalRecords: the first batch of some partition is transactional."""
    for t in req.topics:
        for p in t.partitions:
            records = p.records
            if records is not None and len(records) >= rec.HEADER_SIZE and records[rec.MAGIC_OFFSET] == 2 \
                    and rec.read_header(records, 0).is_transactional:
                return True
    return False


def _refused(ctx: RequestContext, req: ProduceRequestView) -> dict[TopicPartition, ProduceResult]:
    """KafkaApis.handleProduceRequest: WRITE on each topic; the partitions of a topic the client may
    not write get TOPIC_AUTHORIZATION_FAILED and are not appended (a topic id nobody knows is
    UNKNOWN_TOPIC_ID before that)."""
    named = [t.name for t in req.topics if t.name is not None]
    if ctx.broker.authorizer is None or not named:
        return {}
    writable = filter_allowed(ctx, Operation.WRITE, ResourceType.TOPIC, named)
    return {(t.name, p.index): ProduceResult(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            for t in req.topics if t.name is not None and t.name not in writable for p in t.partitions}


def _transactional_batches(broker: Services, req: ProduceRequestView,
                           refused: dict[TopicPartition, ProduceResult]) -> tuple[set[tuple[int, int]], Targets]:
    """The (producer id, epoch) of the request's transactional batches and, per partition that
    exists here, (log, base sequence) of its transactional batch (only the first batch counts:
    a Produce partition holds exactly one)."""
    producers: set[tuple[int, int]] = set()
    targets: Targets = {}
    log_manager = broker.log_manager
    for t in req.topics:
        for p in t.partitions:
            records = p.records
            if records is None or len(records) < rec.HEADER_SIZE or records[rec.MAGIC_OFFSET] != 2:
                continue  # the append answers what is wrong with it
            if (t.name, p.index) in refused:
                continue
            batch = rec.read_header(records, 0)
            if not batch.is_transactional or batch.producer_id < 0:
                continue
            producers.add((batch.producer_id, batch.producer_epoch))
            name = t.name
            if name is not None and (plog := log_manager.get(name, p.index)) is not None:
                targets[(name, p.index)] = (plog, batch.base_sequence)
    return producers, targets


def _respond(ctx: RequestContext, req: ProduceRequestView,
             pre_append: dict[TopicPartition, ProduceResult] | None = None, all_failed: ProduceResult | None = None,
             validated: dict[TopicPartition, Validated] | None = None) -> Reply | Awaitable[Reply]:
    broker = ctx.broker
    rm = broker.replica_manager
    version = ctx.api_version
    acks = req.acks
    responses = []
    pending: dict[TopicPartition, int] = {}  # acks=all partitions waiting for replication: last offset + 1
    for t in req.topics:
        name = t.name
        parts = []
        if name is None:  # v13: a topic id with no topic
            parts = [_partition(p.index, ProduceResult(ErrorCode.UNKNOWN_TOPIC_ID)) for p in t.partitions]
            broker.metrics.error(0, ErrorCode.UNKNOWN_TOPIC_ID.name)
        elif acks not in (-1, 0, 1):
            parts = [_partition(p.index, ProduceResult(ErrorCode.INVALID_REQUIRED_ACKS)) for p in t.partitions]
        else:
            for p in t.partitions:
                result = (pre_append.get((name, p.index)) if pre_append else None) or all_failed
                if result is None:
                    result = rm.append_records(name, p.index, p.records, api_version=version, acks=acks,
                                               transactional_id=req.transactional_id,
                                               validated=validated.get((name, p.index)) if validated else None)
                    if acks == -1 and not result.error and broker.replication.needs_wait(name, p.index):
                        pending[(name, p.index)] = result.last_offset + 1
                else:
                    broker.metrics.produce_failed(name)
                if result.error:
                    broker.metrics.error(0, result.error.name)
                parts.append(_partition(p.index, result))
        responses.append(ProduceTopicResponse(name, t.topic_id, parts))
    throttle = 0
    if broker.quotas.enforcing:
        # producer_byte_rate counts the request's record bytes; over it, the answer says how long to back off
        throttle = broker.quotas.record("producer_byte_rate", ctx.client_id,
                                        sum(len(p.records or b"") for t in req.topics for p in t.partitions),
                                        user=user_of(ctx.principal))
        broker.quotas.mute(ctx.connection_id, throttle)
    if acks == 0:
        return NO_RESPONSE
    if pending:
        return _after_replication(ctx, responses, pending, throttle, req.timeout_ms)
    body = encode_produce_response(version, responses, throttle_time_ms=throttle,
                                   node_endpoints=_endpoints(ctx, responses))
    return RawResponse([body], len(body), source=responses)


async def _after_replication(ctx: RequestContext, responses: list[ProduceTopicResponse],
                             pending: dict[TopicPartition, int], throttle: int, timeout_ms: int) -> Reply:
    """DelayedProduce: answer once the ISR holds every acks=all batch (each partition's error as
    Partition.checkEnoughReplicasReachOffset says), or REQUEST_TIMED_OUT for those it does not."""
    broker = ctx.broker
    errors = await broker.replication.wait_for_acks(pending, max(timeout_ms, 0) / 1000)
    out = []
    for t in responses:
        parts = []
        for p in t.partitions:
            error = errors.get((t.name, p.index), ErrorCode.NONE) if t.name is not None else ErrorCode.NONE
            if error != ErrorCode.NONE:
                broker.metrics.error(0, error.name)
                p = p._replace(error_code=int(error))
            parts.append(p)
        out.append(ProduceTopicResponse(t.name, t.topic_id, parts))
    body = encode_produce_response(ctx.api_version, out, throttle_time_ms=throttle,
                                   node_endpoints=_endpoints(ctx, out))
    return RawResponse([body], len(body), source=out)


async def _add_then_respond(ctx: RequestContext, req: ProduceRequestView, producer: tuple[int, int],
                            targets: Targets, validated: dict[TopicPartition, Validated] | None = None,
                            refused: dict[TopicPartition, ProduceResult] | None = None) -> Reply:
    """TV2: add the partitions to the transaction (with Produce's retry on
    CONCURRENT_TRANSACTIONS), then append; a partition that could not be added is not appended."""
    producer_id, producer_epoch = producer
    errors = await add_partitions(ctx.broker, req.transactional_id, producer_id, producer_epoch, targets,
                                  retry_concurrent=True)
    pre = {tp: _failed(produce_error(code, SupportedOperation.ADD_PARTITION)) for tp, code in errors.items()}
    reply = _respond(ctx, req, {**pre, **(refused or {})}, validated=validated)
    return await reply if inspect.isawaitable(reply) else reply


def _named(broker: Services, req: ProduceRequestView) -> ProduceRequestView:
    """v13: the request with each topic's name looked up from its id (None for an unknown id)."""
    name_of = broker.metadata.name_of
    return req._replace(topics=[t._replace(name=name_of(t.topic_id)) for t in req.topics])


@api(0, (3, 13), advertised_min=0, decode=decode_produce_request)
def handle(ctx: RequestContext, req: ProduceRequestView) -> Reply | Awaitable[Reply]:
    if ctx.api_version >= 13:
        req = _named(ctx.broker, req)
    # Transactional records need WRITE on the request's transactional id (none at all: refused even
    # without an authorizer, as Kafka refuses it); the whole request fails, acks=0 by a close.
    if _has_transactional_records(req) and (
            req.transactional_id is None
            or not allowed(ctx, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id)):
        if req.acks == 0:
            raise CloseConnection("acks=0 transactional produce without TransactionalId Write")
        return _respond(ctx, req, all_failed=ProduceResult(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
    refused = _refused(ctx, req)
    heavy = {(t.name, p.index): p.records for t in req.topics if t.name is not None
             for p in t.partitions if needs_offload(p.records) and (t.name, p.index) not in refused}
    if heavy and req.acks in (-1, 0, 1):
        return _validate_off_loop(ctx, req, heavy, refused)
    return _produce(ctx, req, refused=refused)


async def _validate_off_loop(ctx: RequestContext, req: ProduceRequestView,
                             heavy: dict[TopicPartition, memoryview | None],
                             refused: dict[TopicPartition, ProduceResult]) -> Reply:
    """The large compressed batches validated in a worker thread, one after the other; then the
    request goes on as any other, with those partitions' validation done."""
    validated: dict[TopicPartition, Validated] = {}
    for (name, index), records in heavy.items():
        plog = ctx.broker.log_manager.get(name, index)
        if plog is None:
            continue  # the append answers for a partition that is not here
        config = plog.config
        try:
            validated[(name, index)] = await asyncio.to_thread(
                validate_payload, records, ctx.api_version, config.max_message_bytes, config.compact, name, index)
        except KafkaError as e:
            validated[(name, index)] = e
    result = _produce(ctx, req, validated, refused)
    return await result if inspect.isawaitable(result) else result


def _produce(ctx: RequestContext, req: ProduceRequestView, validated: dict[TopicPartition, Validated] | None = None,
             refused: dict[TopicPartition, ProduceResult] | None = None) -> Reply | Awaitable[Reply]:
    refused = refused or {}
    if req.transactional_id is None or req.acks not in (-1, 0, 1):
        return _respond(ctx, req, refused, validated=validated)
    producers, targets = _transactional_batches(ctx.broker, req, refused)
    if len(producers) > 1:
        return _respond(ctx, req, refused, all_failed=ProduceResult(
            ErrorCode.INVALID_PRODUCER_ID_MAPPING,
            error_message="Transactional records contained more than one producer ID"))
    if ctx.api_version > 11 and targets:
        producer = next(iter(producers))
        targets = not_yet_in_transaction(targets, *producer)
        if targets:  # the transaction's first batch to some partition: the coordinator adds it first
            return _add_then_respond(ctx, req, producer, targets, validated, refused)
    return _respond(ctx, req, refused, validated=validated)
