"""TxnOffsetCommit on top of the group coordinator: transactional offsets staged per producer.

Kafka's OffsetMetadataManager.commitTransactionalOffset for classic groups, written against the
group coordinator's public pieces (its groups, its OffsetStore and its record codec):

1. the group is validated as for OffsetCommit but transactionally (a missing group with
   generation -1 becomes a "simple" group; a missing one with a generation is
   ILLEGAL_GENERATION; members and generations are checked, rebalances do not block);
2. the group's ``__consumer_offsets`` partition must be in the producer's transaction
   (AddOffsetsToTxn): KIP-890 verification, in-process. TxnOffsetCommit v5+ (Transactions V2)
   has no AddOffsetsToTxn: ``add_offsets_partition`` first adds that partition through the
   coordinator (CoordinatorPartitionWriter.maybeStartTransactionVerification with
   ADD_PARTITION, no retry: CONCURRENT_TRANSACTIONS goes back to the client, which retries);
3. the OffsetCommit records go to that partition as one *transactional* batch carrying the
   producer id and epoch (origin COORDINATOR, so the partition's producer state opens a
   transaction there and holds its LSO);
4. the offsets wait in ``OffsetStore.pending`` for that producer; the COMMIT marker landing in
   the partition applies them, an ABORT drops them (``GroupCoordinator.complete_transaction``,
   called by the partition leader's marker path), and OffsetFetch with require_stable answers
   UNSTABLE_OFFSET_COMMIT meanwhile.

The partition and the KIP-890 checks are reached through the group coordinator's ports
(``coordinator.runtime.PartitionWriter`` and ``TransactionVerifier``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog

from coordinator.group.group import ClassicGroup
from coordinator.group.manager import CommitPartition, append_error_to_response_error
from coordinator.group.state import EMPTY
from coordinator.txn.operations import txn_offset_commit_operation
from protocol import records as rec
from protocol.errors import ErrorCode, KafkaError, error_code_of

if TYPE_CHECKING:
    from coordinator.group.coordinator import GroupCoordinator

log = structlog.get_logger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
TopicCommits = list[tuple[str, list[CommitPartition]]]


def _normalize(code: ErrorCode) -> ErrorCode:
    """GroupCoordinatorService.normalizeException."""
    return append_error_to_response_error(code)


async def add_offsets_partition(
    gc: GroupCoordinator, group_id: str | None, transactional_id: str | None, producer_id: int, producer_epoch: int,
) -> ErrorCode:
    """TxnOffsetCommit v5+: add the group's offsets partition to the transaction (Kafka does it
    before the commit's own checks, after the coordinator-active and group-id ones, which
    ``commit_transactional_offsets`` answers). NONE when added, already there, or left to the
    commit to answer."""
    if not gc.active or not group_id or gc.verifier is None:
        return ErrorCode.NONE
    try:
        plog = gc.offsets_log(group_id)
    except KafkaError as e:
        return _normalize(e.code)
    tp = (OFFSETS_TOPIC, plog.partition)
    errors = await gc.verifier.add_partitions(transactional_id, producer_id, producer_epoch,
                                              {tp: (plog, rec.NO_SEQUENCE)}, retry_concurrent=False)
    return _normalize(errors.get(tp, ErrorCode.NONE))


def commit_transactional_offsets(
    gc: GroupCoordinator,
    group_id: str | None,
    transactional_id: str | None,
    producer_id: int,
    producer_epoch: int,
    member_id: str,
    group_instance_id: str | None,
    generation_id: int,
    topics: TopicCommits,
    api_version: int,
) -> dict[tuple[str, int], ErrorCode]:
    """One error per (topic, partition); NONE means staged until the transaction ends."""
    requested = [(t, p.partition) for t, parts in topics for p in parts]

    def all_failed(code: ErrorCode) -> dict[tuple[str, int], ErrorCode]:
        return dict.fromkeys(requested, code)

    if not gc.active:
        return all_failed(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if not group_id:
        return all_failed(ErrorCode.INVALID_GROUP_ID)
    if (error := gc.check(group_id)) != ErrorCode.NONE:
        return all_failed(error)
    manager = gc.manager
    group = manager.groups.get(group_id)
    consumer_group = manager.consumer.groups.get(group_id) if group is None else None
    created: ClassicGroup | None = None  # a simple group, registered once its offsets are written
    if group is None and consumer_group is None:
        if generation_id >= 0:  # GROUP_ID_NOT_FOUND from v6 (TxnOffsetCommitRequest.supportsGroupIdNotFoundError)
            return all_failed(ErrorCode.GROUP_ID_NOT_FOUND if api_version >= 6 else ErrorCode.ILLEGAL_GENERATION)
        group = created = ClassicGroup(group_id, EMPTY, manager.time_ms())
    try:
        if consumer_group is not None:
            manager.consumer.validate_offset_commit(consumer_group, member_id, generation_id, True, api_version)
        elif group is not None:  # always, a missing group having been created above
            group.validate_offset_commit(member_id, group_instance_id, generation_id, is_transactional=True)
        plog = gc.offsets_log(group_id)
    except KafkaError as e:
        return all_failed(_normalize(e.code))
    code, guard = ErrorCode.NONE, None
    if gc.verifier is not None:
        code, guard = gc.verifier.verify(plog, transactional_id, producer_id, producer_epoch, 0,
                                         txn_offset_commit_operation(api_version))
    if code != ErrorCode.NONE:
        return all_failed(_normalize(code))

    now = manager.time_ms()
    results, staged, records = manager.offset_commit_records(group_id, topics, now, None)
    if records:
        batch = rec.build_batch(records, timestamp=now, producer_id=producer_id,
                                producer_epoch=producer_epoch, base_sequence=0, transactional=True)
        try:
            info = gc.writer.append(OFFSETS_TOPIC, plog.partition, batch, verification_guard=guard)
        except Exception as e:  # noqa: BLE001 - the append's error code answers every partition
            code = error_code_of(e)
            log.info("transactional offset commit rejected", group=group_id, producer_id=producer_id,
                     error=code.name, detail=str(e))
            return all_failed(_normalize(code))
        for i, (topic, partition, value) in enumerate(staged):
            value.record_offset = info.first_offset + i
            manager.offsets.replay(group_id, topic, partition, producer_id, value)
    if created is not None:
        manager.groups[group_id] = created
    return results
