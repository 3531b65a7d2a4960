"""Coordinator partitions that move between brokers: a broker coordinates a group or a
transactional id only while it leads its partition (onElection / onResignation)."""

from __future__ import annotations

import asyncio

from coordinator.group.coordinator import GroupCoordinator
from coordinator.txn.coordinator import TransactionCoordinator
from coordinator.txn.marker_channel import TxnMarker
from protocol import records as batches
from protocol.errors import ErrorCode
from tests.unit.coordinator.helpers import FakeEnv, FakePartitionWriter
from tests.unit.coordinator.test_loader import DEFAULTS, commit_record, replay

TXN_DEFAULTS = {
    "transaction.state.log.num.partitions": 4, "transaction.state.log.segment.bytes": 104857600,
    "transaction.max.timeout.ms": 900000, "transactional.id.expiration.ms": 604800000,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 10000,
    "transaction.remove.expired.transaction.cleanup.interval.ms": 3600000, "transaction.version": 2,
    "test.txn.stop.before.markers": "",
}


def _elected(config: dict) -> FakeEnv:
    env = FakeEnv(config)
    env.elected = True
    return env


async def test_a_group_is_coordinated_only_while_its_partition_is_led_here() -> None:
    gc = GroupCoordinator(_elected(DEFAULTS), FakePartitionWriter({"__consumer_offsets": 50}))
    await gc.start()
    try:
        p = gc.partition_for("g")
        assert gc.check("g") == ErrorCode.NOT_COORDINATOR
        gc.on_election(p, 3)
        assert gc.check("g") == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        await asyncio.sleep(0.01)
        assert gc.check("g") == ErrorCode.NONE
        assert gc.check("another-group-elsewhere") in (ErrorCode.NONE, ErrorCode.NOT_COORDINATOR)
        replay(gc, p, batches.build_batch([commit_record("g", 5)], timestamp=1), 0)
        assert gc.manager.fetch_offsets("g", [("t", [0])], False)[1][0][1][0].offset == 5
        gc.on_resignation(p)
        assert gc.check("g") == ErrorCode.NOT_COORDINATOR
        assert "g" not in gc.manager.offsets.committed  # the new coordinator has them now
    finally:
        await gc.shutdown()


async def test_a_single_node_coordinates_every_group_from_the_start() -> None:
    gc = GroupCoordinator(FakeEnv(DEFAULTS), FakePartitionWriter({"__consumer_offsets": 50}))
    await gc.start()
    try:
        assert gc.check("g") == ErrorCode.NONE
    finally:
        await gc.shutdown()


class _NoMarkers:
    def leader_known(self, tp: tuple[str, int]) -> bool:
        return True

    async def send(self, marker: TxnMarker) -> dict[tuple[str, int], ErrorCode]:
        return dict.fromkeys(marker.partitions, ErrorCode.NONE)


async def test_a_transactional_id_answers_not_coordinator_once_its_partition_moves() -> None:
    env = _elected(TXN_DEFAULTS)
    txn = TransactionCoordinator(env, FakePartitionWriter({"__transaction_state": 4}), _NoMarkers())
    await txn.start()
    try:
        p = txn.partition_for("tx")
        assert txn.state_manager.get_transaction_state("tx")[0] == ErrorCode.NOT_COORDINATOR
        txn.on_election(p, 7)
        assert txn.state_manager.get_transaction_state("tx")[0] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        await asyncio.sleep(0.01)
        assert txn.state_manager.get_transaction_state("tx") == (ErrorCode.NONE, None)
        txn.on_resignation(p)
        assert txn.state_manager.get_transaction_state("tx")[0] == ErrorCode.NOT_COORDINATOR
    finally:
        await txn.shutdown()
