"""Producer id blocks, producer expiry and the InitProducerId handler, in process.

The wire-level versions of these (restarts, kill -9, stock clients) are in test_idempotence.py.
"""

from __future__ import annotations

import asyncio
import json
import os
from types import SimpleNamespace

import pytest

from broker.handlers import init_producer_id
from coordinator.producer_ids import (
    BLOCK_SIZE,
    INT64_MAX,
    ProducerIdManager,
    ProducerIdsExhausted,
    expire_idle_producers,
)
from protocol.messages import request_class
from protocol.records import build_batch, validate_batches
from storage.log_manager import LogManager

T0 = 1_700_000_000_000


def _state(tmp_path) -> dict:
    return json.loads((tmp_path / "__cluster_metadata" / "producer-ids").read_text())


# --- ProducerIdManager --------------------------------------------------------------------------


def test_first_block_starts_at_zero_and_is_persisted_before_use(tmp_path):
    m = ProducerIdManager(tmp_path)
    assert not (tmp_path / "__cluster_metadata").exists()  # nothing reserved until asked
    assert m.generate() == 0
    assert _state(tmp_path)["nextProducerId"] == BLOCK_SIZE
    assert [m.generate() for _ in range(BLOCK_SIZE - 1)] == list(range(1, BLOCK_SIZE))
    assert _state(tmp_path)["nextProducerId"] == BLOCK_SIZE
    assert m.generate() == BLOCK_SIZE
    assert _state(tmp_path) == {"version": 1, "nextProducerId": 2 * BLOCK_SIZE, "brokerId": 0}


def test_every_id_is_below_the_durable_mark_when_handed_out(tmp_path, monkeypatch):
    m = ProducerIdManager(tmp_path, block_size=7)
    real_write = m._write
    durable = []

    def write(next_id: int) -> None:
        real_write(next_id)
        durable.append(next_id)

    monkeypatch.setattr(m, "_write", write)
    for _ in range(30):
        pid = m.generate()
        assert durable and pid < durable[-1] == _state(tmp_path)["nextProducerId"]


def test_restart_never_reuses_an_id(tmp_path):
    m = ProducerIdManager(tmp_path, block_size=10)
    first = [m.generate() for _ in range(3)]
    # A restart (or kill -9) forgets the rest of the block: Kafka's broker asks for a new one.
    m2 = ProducerIdManager(tmp_path, block_size=10)
    assert m2.next_block_start == 10
    second = [m2.generate() for _ in range(12)]
    assert first == [0, 1, 2] and second == list(range(10, 22))
    assert ProducerIdManager(tmp_path, block_size=10).generate() == 30


def test_failed_write_hands_out_nothing(tmp_path, monkeypatch):
    m = ProducerIdManager(tmp_path)

    def fail(_next_id: int) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(m, "_write", fail)
    with pytest.raises(OSError):
        m.generate()
    monkeypatch.undo()
    assert m.generate() == 0


def test_torn_write_leaves_the_previous_mark(tmp_path):
    m = ProducerIdManager(tmp_path)
    m.generate()
    # A crash between writing the temporary file and the rename: the old file is the truth.
    (tmp_path / "__cluster_metadata" / "producer-ids.tmp").write_text('{"version": 1, "nextPro')
    m2 = ProducerIdManager(tmp_path)
    assert not (tmp_path / "__cluster_metadata" / "producer-ids.tmp").exists()
    assert m2.generate() == BLOCK_SIZE


@pytest.mark.parametrize("content", ["", "{", '{"version": 2, "nextProducerId": 5}', '{"version": 1}',
                                     '{"version": 1, "nextProducerId": -3}', "[1]"])
def test_unreadable_state_refuses_to_start(tmp_path, content):
    d = tmp_path / "__cluster_metadata"
    d.mkdir()
    (d / "producer-ids").write_text(content)
    with pytest.raises(RuntimeError, match="unreadable producer id state"):
        ProducerIdManager(tmp_path)


def test_exhausted_id_space(tmp_path):
    d = tmp_path / "__cluster_metadata"
    d.mkdir()
    (d / "producer-ids").write_text(json.dumps({"version": 1, "nextProducerId": INT64_MAX - BLOCK_SIZE}))
    m = ProducerIdManager(tmp_path)
    assert m.generate() == INT64_MAX - BLOCK_SIZE
    for _ in range(BLOCK_SIZE - 1):
        m.generate()
    with pytest.raises(ProducerIdsExhausted):
        m.generate()


def test_file_is_replaced_atomically(tmp_path):
    m = ProducerIdManager(tmp_path, block_size=2)
    m.generate()
    inode = os.stat(tmp_path / "__cluster_metadata" / "producer-ids").st_ino
    m.generate()
    m.generate()
    assert os.stat(tmp_path / "__cluster_metadata" / "producer-ids").st_ino != inode
    assert sorted(os.listdir(tmp_path / "__cluster_metadata")) == ["producer-ids"]


# --- expiry -------------------------------------------------------------------------------------


def test_expire_idle_producers_keeps_open_transactions_and_recent_ones(tmp_path):
    lm = LogManager([str(tmp_path / "logs")], producer_state_config={"producer_id_expiration_ms": 1000})
    lm.startup(T0)
    plog = lm.create("t", 0, now_ms=T0)

    def append(pid: int, ts: int, transactional: bool = False) -> None:
        buf = build_batch([(b"k", b"v")], timestamp=ts, producer_id=pid, producer_epoch=0, base_sequence=0,
                          transactional=transactional)
        plog.append(buf, validate_batches(buf), now_ms=ts)

    append(1, T0)  # idle since T0
    append(2, T0 + 900)  # recent
    append(3, T0, transactional=True)  # open transaction: never expires
    manager = plog.producer_state.manager
    assert expire_idle_producers(lm, T0 + 999) == 0
    assert expire_idle_producers(lm, T0 + 1000) == 1
    assert sorted(p.producer_id for p in manager.describe_producers()) == [2, 3]
    assert expire_idle_producers(lm, T0 + 10_000) == 1
    assert [p.producer_id for p in manager.describe_producers()] == [3]
    lm.shutdown()


# --- InitProducerId handler ----------------------------------------------------------------------


def _ctx(version: int, txn_coordinator=None, producer_ids=None):
    broker = SimpleNamespace(txn_coordinator=txn_coordinator, producer_ids=producer_ids or _Ids(), authorizer=None)
    return SimpleNamespace(broker=broker, api_version=version)


class _Ids:
    def __init__(self) -> None:
        self.next = 100

    def generate(self) -> int:
        self.next += 1
        return self.next


def _req(version: int, transactional_id: str | None = None, producer_id: int = -1, producer_epoch: int = -1):
    req = request_class(22)
    fields = dict(transactional_id=transactional_id, transaction_timeout_ms=1000)
    if version >= 3:
        fields.update(producer_id=producer_id, producer_epoch=producer_epoch)
    return req.decode(req[version](**fields).encode(version=version), version=version)


def _answer(resp) -> tuple[int, int, int]:
    return resp.error_code, resp.producer_id, resp.producer_epoch


@pytest.mark.parametrize("version", range(6))
def test_idempotent_producer_gets_a_new_id_with_epoch_zero(version):
    ctx = _ctx(version)
    assert _answer(init_producer_id.handle(ctx, _req(version))) == (0, 101, 0)
    if version >= 3:  # a current id/epoch is ignored without a transactional id
        assert _answer(init_producer_id.handle(ctx, _req(version, None, 101, 5))) == (0, 102, 0)
        assert _answer(init_producer_id.handle(ctx, _req(version, None, 101, -1))) == (42, -1, -1)
        assert _answer(init_producer_id.handle(ctx, _req(version, "tx", -1, 3))) == (42, -1, -1)


def test_allocation_failure_is_the_exceptions_error():
    class Broken:
        def generate(self) -> int:
            raise ProducerIdsExhausted("exhausted")

    assert _answer(init_producer_id.handle(_ctx(4, producer_ids=Broken()), _req(4))) == (-1, -1, -1)


@pytest.mark.parametrize(("version", "expected"), [(3, 47), (4, 90), (5, 90)])
def test_transactional_goes_to_the_coordinator(version, expected):
    calls = []

    class Coordinator:
        async def handle_init_producer_id(self, *args):
            calls.append(args)
            return (90, -1, -1) if args[2] == 7 else (0, 7, 3)

    ctx = _ctx(version, txn_coordinator=Coordinator())
    assert _answer(asyncio.run(init_producer_id.handle(ctx, _req(version, "tx")))) == (0, 7, 3)
    # PRODUCER_FENCED reaches v0-3 clients as INVALID_PRODUCER_EPOCH (KafkaApis.createResponse).
    assert _answer(asyncio.run(init_producer_id.handle(ctx, _req(version, "tx", 7, 3))))[0] == expected
    assert calls == [("tx", 1000, -1, -1, version), ("tx", 1000, 7, 3, version)]
