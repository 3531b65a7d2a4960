"""The partition-leader side of transaction markers (KafkaApis.handleWriteTxnMarkersRequest).

``write_txn_markers`` appends one COMMIT/ABORT control batch (Kafka's 78-byte marker with the
coordinator epoch) to each partition with origin COORDINATOR, so the producer state checks the
producer and coordinator epochs, completes the producer's transaction on the partition, moves
the LSO and, for an ABORT, adds the ``.txnindex`` entry. A marker in a ``__consumer_offsets``
partition then applies or drops the group's pending transactional offsets.

Kafka appends markers with acks=-1, so a partition's answer comes once its ISR holds the marker
(REQUEST_TIMED_OUT after request.timeout.ms, NOT_ENOUGH_REPLICAS before the append when the ISR
is below min.insync.replicas). An answer any earlier would let the coordinator write
CompleteCommit for a marker that a leader change then truncates: the partition's transaction
would never end, and the group's offsets would be dropped by the producer's next ABORT. The
WriteTxnMarkers handler, the coordinator's in-process marker channel (``InProcessMarkerChannel``)
and the inspector's abort call it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING

import structlog

from broker.net.inter_broker_client import InterBrokerClient
from protocol import records as rec
from protocol.errors import ErrorCode, error_code_of
from protocol.messages import request_class
from storage.producer.types import AppendOrigin

if TYPE_CHECKING:
    from broker.services import Services
    from coordinator.txn.marker_channel import TxnMarker

log = structlog.get_logger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
MAX_CLIENTS_PER_LEADER = 8


def write_txn_markers(
    broker: Services,
    partitions: Sequence[tuple[str, int]],
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    coordinator_epoch: int,
    transaction_version: int,
    via: str = "coordinator",
) -> Awaitable[dict[tuple[str, int], ErrorCode]]:
    """One marker to each of ``partitions``, appended now (a request the producer sends next
    already meets it), answered per partition by the awaitable once its ISR holds the marker
    (acks=-1, as Kafka writes markers)."""
    out: dict[tuple[str, int], ErrorCode] = {}
    replicating: dict[tuple[str, int], int] = {}
    for topic, partition in partitions:
        code, offset = _write_txn_marker(broker, topic, partition, producer_id, producer_epoch, commit,
                                         coordinator_epoch, transaction_version, via)
        out[(topic, partition)] = code
        if code == ErrorCode.NONE and broker.replication.needs_wait(topic, partition):
            replicating[(topic, partition)] = offset + 1
    return _replicated(broker, out, replicating)


async def _replicated(broker: Services, out: dict[tuple[str, int], ErrorCode],
                      replicating: dict[tuple[str, int], int]) -> dict[tuple[str, int], ErrorCode]:
    if replicating:
        timeout_s = int(broker.config.get("request.timeout.ms")) / 1000
        out.update(await broker.replication.wait_for_acks(replicating, timeout_s))
    return out


def _write_txn_marker(broker: Services, topic: str, partition: int, producer_id: int, producer_epoch: int,
                      commit: bool, coordinator_epoch: int, transaction_version: int,
                      via: str) -> tuple[ErrorCode, int]:
    """(error, the marker's offset or -1), recorded for the inspector's timeline; ``via`` says who
    asked (the coordinator in process, a WriteTxnMarkers request, the inspector's abort)."""
    code, offset = _append_marker(broker, topic, partition, producer_id, producer_epoch, commit, coordinator_epoch,
                                  transaction_version)
    recorder = broker.txn_recorder
    if recorder is not None and code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        recorder.marker(broker.node_id, topic, partition, producer_id, producer_epoch, commit, coordinator_epoch,
                        offset, code, via)
    return code, offset


def _append_marker(broker: Services, topic: str, partition: int, producer_id: int, producer_epoch: int,
                   commit: bool, coordinator_epoch: int, transaction_version: int) -> tuple[ErrorCode, int]:
    rm = broker.replica_manager
    plog = broker.log_manager.get(topic, partition)
    if plog is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1
    reg = broker.metadata.partition(topic, partition)
    if reg is not None and reg.leader != broker.node_id:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER, -1
    now = broker.clock.now_ms()
    batch = rec.build_control_batch(producer_id=producer_id, producer_epoch=producer_epoch, commit=commit,
                                    coordinator_epoch=coordinator_epoch, timestamp=now)
    try:
        if topic != OFFSETS_TOPIC:
            # Partition.appendRecordsToLeader with acks=-1 (the group coordinator's own partitions are
            # written with acks=1 and answered at the high watermark, which min.insync.replicas holds back)
            broker.replication.append_error(topic, partition, -1, plog)
        result = plog.append(batch, rec.validate_batches(batch), leader_epoch=rm.leader_epoch(topic, partition),
                             now_ms=now, origin=AppendOrigin.COORDINATOR, transaction_version=transaction_version)
    except Exception as e:  # noqa: BLE001 - the partition's error code goes back to the coordinator
        code = error_code_of(e)
        if code == ErrorCode.UNKNOWN_SERVER_ERROR:
            log.exception("transaction marker append failed", topic=topic, partition=partition)
        else:
            log.info("transaction marker rejected", topic=topic, partition=partition, producer_id=producer_id,
                     producer_epoch=producer_epoch, error=code.name, detail=str(e))
        return code, -1
    rm.wake(topic, partition)
    if topic == OFFSETS_TOPIC:
        gc = broker.group_coordinator
        if gc is not None:
            gc.complete_transaction(partition, producer_id, commit)
    return ErrorCode.NONE, result.last_offset


class InProcessMarkerChannel:
    """Markers to each partition's leader (Kafka's TransactionMarkerChannelManager): the
    partitions this broker leads are written directly (the WriteTxnMarkers leader path, as on a
    single node, where it leads them all); those led by another broker of the cluster go there in
    a WriteTxnMarkers request over the wire. An unreachable leader answers the coordinator with a
    retriable error, so it re-resolves the leader and tries again; the other partitions complete."""

    def __init__(self, broker: Services) -> None:
        self.broker = broker
        # per leader, clients for concurrent sends: a WriteTxnMarkers answer waits for the leader's
        # ISR, and one transaction's markers must not queue behind another's
        self._clients: dict[int, list[InterBrokerClient]] = {}

    def leader_known(self, tp: tuple[str, int]) -> bool:
        """Whether the partition still exists (its markers are dropped otherwise); one whose leader
        is down keeps its markers, retried until the leader is back."""
        return self.broker.metadata.partition(*tp) is not None

    async def send(self, marker: TxnMarker) -> dict[tuple[str, int], ErrorCode]:
        by_leader: dict[int, list[tuple[str, int]]] = {}
        for tp in marker.partitions:
            reg = self.broker.metadata.partition(*tp)
            leader = reg.leader if reg is not None else self.broker.node_id
            by_leader.setdefault(leader, []).append(tp)
        local = by_leader.pop(self.broker.node_id, [])
        waits: list[Awaitable[dict[tuple[str, int], ErrorCode]]] = []
        if local:  # appended before the first await, as on a single node
            waits.append(write_txn_markers(self.broker, local, marker.producer_id, marker.producer_epoch,
                                           marker.commit, marker.coordinator_epoch, marker.transaction_version))
        waits.extend(self._send_remote(leader, marker, tps) for leader, tps in by_leader.items())
        out: dict[tuple[str, int], ErrorCode] = {}
        for answered in await asyncio.gather(*waits):
            out.update(answered)
        return out

    async def _send_remote(self, leader: int, marker: TxnMarker, tps: list[tuple[str, int]]
                           ) -> dict[tuple[str, int], ErrorCode]:
        endpoint = self.broker.replication.endpoint_of(leader)
        if endpoint is None:  # the leader is down: retried until it is back
            return dict.fromkeys(tps, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        client = self._client(leader, endpoint)
        Request = request_class(27)
        topics: dict[str, list[int]] = {}
        for topic, partition in tps:
            topics.setdefault(topic, []).append(partition)
        request = Request(markers=[Request.WritableTxnMarker(
            producer_id=marker.producer_id, producer_epoch=marker.producer_epoch, transaction_result=marker.commit,
            topics=[Request.WritableTxnMarker.WritableTxnMarkerTopic(name=t, partition_indexes=ps)
                    for t, ps in topics.items()],
            coordinator_epoch=marker.coordinator_epoch, transaction_version=marker.transaction_version)])
        try:
            response = await client.send(request, 2)
        except (OSError, TimeoutError, asyncio.IncompleteReadError) as e:
            log.info("WriteTxnMarkers to the leader failed; will retry", leader=leader, error=str(e) or type(e).__name__)
            return dict.fromkeys(tps, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        out = dict.fromkeys(tps, ErrorCode.UNKNOWN_SERVER_ERROR)
        for m in response.markers:
            for t in m.topics:
                for p in t.partitions:
                    out[(t.name, p.partition_index)] = ErrorCode(p.error_code)
        return out

    def _client(self, leader: int, endpoint: tuple[str, int]) -> InterBrokerClient:
        """An idle client to ``leader``, or a new one (at most MAX_CLIENTS_PER_LEADER, then shared)."""
        clients = self._clients.setdefault(leader, [])
        client = next((c for c in clients if not c.waiting), None)
        if client is None and len(clients) < MAX_CLIENTS_PER_LEADER:
            client = InterBrokerClient(*endpoint, client_id=f"broker-{self.broker.node_id}-txn-markers",
                                       tls=self.broker.replication.inter_broker_tls())
            clients.append(client)
        if client is None:
            client = min(clients, key=lambda c: c.waiting)
        client.retarget(*endpoint)
        return client

    def close(self) -> None:
        for clients in self._clients.values():
            for client in clients:
                client.close()
