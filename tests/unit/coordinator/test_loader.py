"""Loading __consumer_offsets batches: plain, transactional (held until the marker) and control."""

from __future__ import annotations

from coordinator.group import records as rec
from coordinator.group.coordinator import GroupCoordinator
from protocol import records as batches
from tests.unit.coordinator.helpers import FakeEnv, FakePartitionWriter

DEFAULTS = {
    "offsets.topic.num.partitions": 50, "offsets.topic.segment.bytes": 104857600,
    "offsets.retention.check.interval.ms": 600000, "group.min.session.timeout.ms": 6000,
    "group.max.session.timeout.ms": 1800000, "group.initial.rebalance.delay.ms": 0, "group.max.size": 100,
    "offset.metadata.max.bytes": 4096, "offsets.retention.minutes": 10080,
}


def replay(gc: GroupCoordinator, partition: int, batch: bytearray, base_offset: int) -> None:
    batches.set_base_offset(batch, 0, base_offset)
    gc._replay_batch(partition, batches.read_header(batch), bytes(batch))


def commit_record(group: str, offset: int) -> tuple[bytes, bytes]:
    return rec.offset_commit_key(group, "t", 0), rec.offset_commit_value(rec.OffsetCommitValue(offset, -1, "", 1))


async def test_transactional_batches_wait_for_their_marker():
    gc = GroupCoordinator(FakeEnv(DEFAULTS), FakePartitionWriter())
    gc.active = True
    p = gc.partition_for("g")
    replay(gc, p, batches.build_batch([commit_record("g", 5)], timestamp=1), 0)
    txn = batches.build_batch([commit_record("g", 9)], timestamp=1, producer_id=42, producer_epoch=0,
                              base_sequence=0, transactional=True)
    replay(gc, p, txn, 1)
    assert gc.manager.fetch_offsets("g", [("t", [0])], True)[1][0][1][0].error.name == "UNSTABLE_OFFSET_COMMIT"
    assert gc.manager.fetch_offsets("g", [("t", [0])], False)[1][0][1][0].offset == 5
    replay(gc, p, batches.build_control_batch(producer_id=42, producer_epoch=0, commit=True, coordinator_epoch=0,
                                              timestamp=1), 2)
    assert gc.manager.fetch_offsets("g", [("t", [0])], True)[1][0][1][0].offset == 9
    # An aborted transaction leaves the committed offset alone.
    replay(gc, p, batches.build_batch([commit_record("g", 99)], timestamp=1, producer_id=43, producer_epoch=0,
                                      base_sequence=0, transactional=True), 3)
    replay(gc, p, batches.build_control_batch(producer_id=43, producer_epoch=0, commit=False, coordinator_epoch=0,
                                              timestamp=1), 4)
    assert gc.manager.fetch_offsets("g", [("t", [0])], True)[1][0][1][0].offset == 9
    # A garbled record is skipped, not fatal.
    replay(gc, p, batches.build_batch([(b"\x00\x01\x00", b"junk")], timestamp=1), 5)
    await gc.shutdown()
