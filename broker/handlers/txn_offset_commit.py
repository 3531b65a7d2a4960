"""TxnOffsetCommit (key 28), v0-6: offsets committed as part of a transaction.

Sent to the group coordinator after AddOffsetsToTxn. The offsets are written to the group's
``__consumer_offsets`` partition as a transactional batch of the producer and stay invisible to
OffsetFetch (require_stable answers UNSTABLE_OFFSET_COMMIT) until the transaction's COMMIT
marker reaches that partition; an ABORT drops them (``coordinator.txn.group_offsets``).

v0-2 carry no group membership (a consumer with group management is not checked); v3+ add
generation id, member id and group instance id, validated as OffsetCommit does but without
blocking on rebalances. Partitions of unknown topics answer UNKNOWN_TOPIC_OR_PARTITION. If the
offsets partition is not in the transaction: INVALID_TXN_STATE (TRANSACTION_ABORTABLE from v4);
a stale epoch: INVALID_PRODUCER_EPOCH. v0-1 answer COORDINATOR_LOAD_IN_PROGRESS as
COORDINATOR_NOT_AVAILABLE.

v5 is Transactions V2: no AddOffsetsToTxn comes first, the offsets partition is added to the
transaction here (``add_offsets_partition``) before the commit; an error of that step
(CONCURRENT_TRANSACTIONS while the previous transaction completes, INVALID_PRODUCER_EPOCH, ...)
answers every partition.

v6 (KIP-1319, Apache Kafka 4.4; built from Kafka 4.4.0's spec and bytecode) names topics by id:
an unknown id answers UNKNOWN_TOPIC_ID for each of its partitions, and a group that does not
exist with a generation >= 0 answers GROUP_ID_NOT_FOUND instead of ILLEGAL_GENERATION
(STALE_MEMBER_EPOCH belongs to KIP-848 groups, which this broker does not have).

Authorization: WRITE on the transactional id and READ on the group (the error on every partition),
then READ on each topic (TOPIC_AUTHORIZATION_FAILED per partition).
"""

from __future__ import annotations

from collections.abc import Awaitable

from broker.handlers.group_writes import replicated
from broker.handlers.registry import api
from broker.net.context import RequestContext
from broker.security.checks import Operation, ResourceType, allowed, filter_allowed
from coordinator.group.manager import CommitPartition
from coordinator.group.txn_offsets import TopicCommits, add_offsets_partition, commit_transactional_offsets
from protocol.errors import ErrorCode
from protocol.messages import ApiMessage, lazy_response

Response = lazy_response(28)
TopicResp = Response.TxnOffsetCommitResponseTopic
PartResp = TopicResp.TxnOffsetCommitResponsePartition
Errors = dict[tuple[str, int], ErrorCode]  # (topic, partition) -> its answer


@api(28, (0, 6))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage | Awaitable[ApiMessage]:
    v = ctx.api_version
    broker = ctx.broker
    # KafkaApis.handleTxnOffsetCommitRequest: WRITE on the transactional id, READ on the group (every
    # partition carries the refusal), then READ on each topic
    if not allowed(ctx, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
        return _every(ctx, req, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not allowed(ctx, Operation.READ, ResourceType.GROUP, req.group_id):
        return _every(ctx, req, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    topics, unknown_ids = broker.metadata.named_by_id(req.topics) if v >= 6 else (req.topics, {})
    readable = filter_allowed(ctx, Operation.READ, ResourceType.TOPIC, (t.name for t in topics))
    refused = {(t.name, p.partition_index): ErrorCode.TOPIC_AUTHORIZATION_FAILED
               for t in topics if t.name not in readable for p in t.partitions}
    errors, known = broker.metadata.split_known_partitions([t for t in topics if t.name in readable])
    errors.update(unknown_ids)
    errors.update(refused)
    to_commit: TopicCommits = [
        (name, [CommitPartition(p.partition_index, p.committed_offset,
                                p.committed_leader_epoch if v >= 2 else -1, p.committed_metadata) for p in parts])
        for name, parts in known
    ]
    if to_commit and v >= 5:
        return _add_then_commit(ctx, req, errors, to_commit)
    if to_commit and broker.shared is not None:
        return _after_replication(ctx, req, _commit(ctx, req, errors, to_commit))
    return _commit(ctx, req, errors, to_commit)


async def _after_replication(ctx: RequestContext, req: ApiMessage, response: ApiMessage) -> ApiMessage:
    """Among several brokers, pending transactional offsets are answered once the ISR of their
    ``__consumer_offsets`` partition holds them (Kafka's coordinators answer after the commit)."""
    if not any(p.error_code == 0 for t in response.topics for p in t.partitions):
        return response
    code = await replicated(ctx, req.group_id)
    if code != ErrorCode.NONE:
        for t in response.topics:
            for p in t.partitions:
                if p.error_code == 0:
                    p.error_code = int(code)
    return response


async def _add_then_commit(ctx: RequestContext, req: ApiMessage, errors: Errors,
                           to_commit: TopicCommits) -> ApiMessage:
    code = await add_offsets_partition(ctx.broker.group_coordinator, req.group_id, req.transactional_id,
                                       req.producer_id, req.producer_epoch)
    if code != ErrorCode.NONE:
        errors.update({(t, p.partition): code for t, parts in to_commit for p in parts})
        to_commit = []
    if to_commit and ctx.broker.shared is not None:
        return await _after_replication(ctx, req, _commit(ctx, req, errors, to_commit))
    return _commit(ctx, req, errors, to_commit)


def _every(ctx: RequestContext, req: ApiMessage, code: ErrorCode) -> ApiMessage:
    """TxnOffsetCommitRequest.getErrorResponse: the error on every requested partition."""
    v = ctx.api_version
    return Response(throttle_time_ms=0, topics=[
        TopicResp(name=t.name if v < 6 else "", topic_id=t.topic_id if v >= 6 else None, partitions=[
            PartResp(partition_index=p.partition_index, error_code=int(code)) for p in t.partitions])
        for t in req.topics])


def _commit(ctx: RequestContext, req: ApiMessage, errors: Errors, to_commit: TopicCommits) -> ApiMessage:
    v = ctx.api_version
    broker = ctx.broker
    if to_commit:
        errors.update(commit_transactional_offsets(
            broker.group_coordinator, req.group_id, req.transactional_id, req.producer_id, req.producer_epoch,
            req.member_id if v >= 3 else "", req.group_instance_id if v >= 3 else None,
            req.generation_id_or_member_epoch if v >= 3 else -1, to_commit, v,
        ))
    if v < 2:
        errors = {k: ErrorCode.COORDINATOR_NOT_AVAILABLE if c == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS else c
                  for k, c in errors.items()}
    return Response(
        throttle_time_ms=0,
        topics=[
            TopicResp(name=t.name if v < 6 else "", topic_id=t.topic_id if v >= 6 else None, partitions=[
                PartResp(partition_index=p.partition_index, error_code=int(errors[(t.name, p.partition_index)]))
                for p in t.partitions
            ])
            for t in req.topics
        ],
    )
