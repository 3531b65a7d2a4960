"""The partition-leader side of transaction markers (KafkaApis.handleWriteTxnMarkersRequest).

``write_txn_marker`` appends one COMMIT/ABORT control batch (Kafka's 78-byte marker with the
coordinator epoch) to a partition with origin COORDINATOR, so the producer state checks the
producer and coordinator epochs, completes the producer's transaction on the partition, moves
the LSO and, for an ABORT, adds the ``.txnindex`` entry. A marker in a ``__consumer_offsets``
partition then applies or drops the group's pending transactional offsets. Both the
WriteTxnMarkers handler and the coordinator's in-process marker channel
(``InProcessMarkerChannel``, the single-node ``coordinator.txn.marker_channel.MarkerChannel``)
call it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog

from protocol import records as rec
from protocol.errors import ErrorCode, error_code_of
from storage.producer.types import AppendOrigin

if TYPE_CHECKING:
    from broker.services import Services
    from coordinator.txn.marker_channel import TxnMarker

log = structlog.get_logger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"


def write_txn_marker(
    broker: Services,
    topic: str,
    partition: int,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    coordinator_epoch: int,
    transaction_version: int,
) -> ErrorCode:
    """Append the marker; the partition's error code (NONE once it is in the log)."""
    rm = broker.replica_manager
    plog = broker.log_manager.get(topic, partition)
    if plog is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    now = broker.clock.now_ms()
    batch = rec.build_control_batch(producer_id=producer_id, producer_epoch=producer_epoch, commit=commit,
                                    coordinator_epoch=coordinator_epoch, timestamp=now)
    try:
        plog.append(batch, rec.validate_batches(batch), leader_epoch=rm.leader_epoch(topic, partition), now_ms=now,
                    origin=AppendOrigin.COORDINATOR, transaction_version=transaction_version)
    except Exception as e:  # noqa: BLE001 - the partition's error code goes back to the coordinator
        code = error_code_of(e)
        if code == ErrorCode.UNKNOWN_SERVER_ERROR:
            log.exception("transaction marker append failed", topic=topic, partition=partition)
        else:
            log.info("transaction marker rejected", topic=topic, partition=partition, producer_id=producer_id,
                     producer_epoch=producer_epoch, error=code.name, detail=str(e))
        return code
    rm.wake(topic, partition)
    if topic == OFFSETS_TOPIC:
        gc = broker.group_coordinator
        if gc is not None:
            gc.complete_transaction(partition, producer_id, commit)
    return ErrorCode.NONE


class InProcessMarkerChannel:
    """This node leads every partition: the WriteTxnMarkers leader path, called directly."""

    def __init__(self, broker: Services) -> None:
        self.broker = broker

    def leader_known(self, tp: tuple[str, int]) -> bool:
        info = self.broker.metadata.get(tp[0])
        return info is not None and 0 <= tp[1] < info.partitions

    async def send(self, marker: TxnMarker) -> dict[tuple[str, int], ErrorCode]:
        return {
            tp: write_txn_marker(
                self.broker, tp[0], tp[1], marker.producer_id, marker.producer_epoch, marker.commit,
                marker.coordinator_epoch, marker.transaction_version,
            )
            for tp in marker.partitions
        }
