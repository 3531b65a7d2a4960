"""A producer-state ``.snapshot`` as DumpLogSegments prints it (``dumpProducerIdSnapshot``):
Kafka's ``ProducerStateManager.readSnapshot`` turns each stored row into a ProducerStateEntry,
with a batch (first and last sequence, last offset, offset delta, timestamp) only when the row
has a last offset, and the tool prints the entry and that batch.

The file's layout is ``storage.producer.snapshot``'s; the version and CRC are checked here with
Kafka's messages, which DumpLogSegments prints on stderr instead of the entries.
"""

from __future__ import annotations

from typing import Any

from crc32c import crc32c

from storage.producer.snapshot import ENTRIES_OFFSET, ENTRY, HEADER, SNAPSHOT_VERSION

INT32_MAX = 0x7FFFFFFF


def decrement_sequence(sequence: int, decrement: int) -> int:
    """DefaultRecordBatch.decrementSequence: sequences wrap at Int32.MAX."""
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def dump_snapshot(path: str) -> dict[str, Any]:
    """``{"producers": [...]}``, or ``{"producers": [], "error": <Kafka's message>}``."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < HEADER.size:
        return {"producers": [], "error": f"Snapshot failed schema validation: file of {len(data)} bytes "
                                          "is shorter than the snapshot header"}
    version, crc, count = HEADER.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        return {"producers": [], "error": f"Snapshot contained an unknown file version {version}"}
    computed = crc32c(data[ENTRIES_OFFSET:])
    if crc != computed:
        return {"producers": [], "error": f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {crc}. "
                                          f"Computed crc: {computed}"}
    end = HEADER.size + count * ENTRY.size
    if count < 0 or end > len(data):
        return {"producers": [], "error": f"Snapshot failed schema validation: {count} entries do not fit "
                                          f"in {len(data) - HEADER.size} bytes"}
    producers = []
    for pid, epoch, last_seq, last_offset, delta, timestamp, coordinator_epoch, txn_first in ENTRY.iter_unpack(
        data[HEADER.size : end]
    ):
        entry: dict[str, Any] = {
            "producerId": pid,
            "producerEpoch": epoch,
            "coordinatorEpoch": coordinator_epoch,
            "currentTxnFirstOffset": txn_first if txn_first >= 0 else None,
            "lastTimestamp": timestamp,
        }
        if last_offset >= 0:
            entry.update({
                "firstSequence": decrement_sequence(last_seq, delta),
                "lastSequence": last_seq,
                "lastOffset": last_offset,
                "offsetDelta": delta,
                "timestamp": timestamp,
            })
        producers.append(entry)
    return {"producers": producers}
