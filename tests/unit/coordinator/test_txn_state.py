"""TransactionMetadata's state machine and the __transaction_state record codec, in isolation.

The state table and the transition rules are Kafka 4.3's TransactionState/TransactionMetadata;
the record bytes are checked against layouts built by hand from TransactionLogValue.json.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.group.java_hash import partition_for
from coordinator.txn import records
from coordinator.txn.state import (
    TV_0,
    TV_2,
    VALID_PREVIOUS_STATES,
    IllegalTransition,
    TransactionState,
    TxnTransitMetadata,
    new_metadata,
)
from protocol.errors import KafkaError

S = TransactionState
NOW = 1_700_000_000_000


def test_state_ids_and_names_are_kafkas():
    assert [(s.value, s.state_name) for s in S] == [
        (0, "Empty"), (1, "Ongoing"), (2, "PrepareCommit"), (3, "PrepareAbort"), (4, "CompleteCommit"),
        (5, "CompleteAbort"), (6, "Dead"), (7, "PrepareEpochFence")]
    assert S.from_name("PrepareEpochFence") is S.PREPARE_EPOCH_FENCE and S.from_name("bogus") is None
    assert {s for s in S if s.expiration_allowed} == {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}


def test_valid_previous_states_table():
    assert {
        S.EMPTY: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
        S.ONGOING: {S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
        S.PREPARE_COMMIT: {S.ONGOING},
        S.PREPARE_ABORT: {S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
        S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
        S.COMPLETE_ABORT: {S.PREPARE_ABORT},
        S.DEAD: {S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT},
        S.PREPARE_EPOCH_FENCE: {S.ONGOING},
    } == VALID_PREVIOUS_STATES


def test_partition_is_abs_java_hash_mod_50():
    # abs("hello".hashCode()) % 50 = 99162322 % 50; Integer.MIN_VALUE maps to partition 0.
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("polygenelubricants", 50) == 0  # hashCode() == Integer.MIN_VALUE


def _ready(epoch_bumps: int = 0):
    m = new_metadata("t", 1000, 60000, NOW)
    m.complete_transition_to(m.prepare_increment_producer_epoch(60000, None, NOW))
    for _ in range(epoch_bumps):
        m.complete_transition_to(m.prepare_increment_producer_epoch(60000, None, NOW))
    return m


def test_full_commit_cycle_is_prepared_then_completed():
    m = _ready()
    assert (m.state, m.producer_epoch) == (S.EMPTY, 0)
    transit = m.prepare_add_partitions({("a", 0), ("b", 1)}, NOW + 1, TV_0)
    assert m.pending_state is S.ONGOING and m.state is S.EMPTY, "nothing changes before the log write"
    with pytest.raises(IllegalTransition):
        m.prepare_add_partitions({("c", 0)}, NOW + 1, TV_0)  # one pending transition at a time
    m.complete_transition_to(transit)
    assert (m.state, m.pending_state, m.txn_start_timestamp) == (S.ONGOING, None, NOW + 1)
    m.complete_transition_to(m.prepare_abort_or_commit(S.PREPARE_COMMIT, TV_0, -1, NOW + 2, False))
    assert m.state is S.PREPARE_COMMIT and m.producer_epoch == 0
    m.remove_partition(("a", 0))
    m.remove_partition(("b", 1))
    m.complete_transition_to(m.prepare_complete(NOW + 3))
    assert (m.state, m.topic_partitions, m.txn_start_timestamp) == (S.COMPLETE_COMMIT, set(), NOW + 1)


def test_illegal_transitions_are_refused():
    m = _ready()
    with pytest.raises(IllegalTransition):
        m.prepare_abort_or_commit(S.PREPARE_COMMIT, TV_0, -1, NOW, False)  # Empty -> PrepareCommit
    with pytest.raises(IllegalTransition):
        m.prepare_fence_producer_epoch()  # only an Ongoing transaction can be fenced
    other = m.prepare_add_partitions({("a", 0)}, NOW, TV_0)
    m.pending_state = None
    m.state = S.COMPLETE_ABORT
    with pytest.raises(IllegalTransition):
        m.complete_transition_to(other)  # not the pending transition


def test_fence_bumps_once_and_is_never_completed():
    m = _ready()
    m.complete_transition_to(m.prepare_add_partitions({("a", 0)}, NOW, TV_0))
    fence = m.prepare_fence_producer_epoch()
    assert (fence.txn_state, fence.producer_epoch, m.pending_state) == (S.PREPARE_EPOCH_FENCE, 1, S.PREPARE_EPOCH_FENCE)
    with pytest.raises(IllegalTransition):
        m.complete_transition_to(fence)
    m.pending_state = None
    m.has_failed_epoch_fence = True
    assert m.prepare_fence_producer_epoch().producer_epoch == 0, "a failed fence write is not bumped twice"


def test_init_producer_id_epoch_rules():
    m = _ready(2)
    assert m.producer_epoch == 2
    t = m.prepare_increment_producer_epoch(60000, 2, NOW)  # KIP-360 resume with the current epoch
    assert (t.producer_epoch, t.last_producer_epoch) == (3, 2)
    m.complete_transition_to(t)
    t = m.prepare_increment_producer_epoch(60000, 2, NOW)  # the same request retried: no second bump
    assert (t.producer_epoch, t.last_producer_epoch) == (3, 2)
    m.pending_state = None
    with pytest.raises(KafkaError) as e:
        m.prepare_increment_producer_epoch(60000, 1, NOW)
    assert e.value.code.name == "PRODUCER_FENCED"


def test_epoch_exhaustion_rotates_the_producer_id():
    m = _ready()
    m.producer_epoch = 32766
    assert m.is_producer_epoch_exhausted
    with pytest.raises(IllegalTransition):
        m.prepare_increment_producer_epoch(60000, None, NOW)
    t = m.prepare_producer_id_rotation(2000, 60000, NOW, True)
    assert (t.producer_id, t.producer_epoch, t.last_producer_epoch, t.prev_producer_id) == (2000, 0, 32766, 1000)
    m.complete_transition_to(t)
    assert (m.producer_id, m.producer_epoch, m.prev_producer_id) == (2000, 0, 1000)


def test_tv2_commit_bumps_the_epoch():
    m = _ready()
    m.complete_transition_to(m.prepare_add_partitions({("a", 0)}, NOW, TV_2))
    t = m.prepare_abort_or_commit(S.PREPARE_COMMIT, TV_2, -1, NOW, False)
    assert (t.producer_epoch, t.last_producer_epoch) == (1, 0)
    m.complete_transition_to(t)
    m.remove_partition(("a", 0))
    m.complete_transition_to(m.prepare_complete(NOW))
    assert (m.state, m.producer_epoch) == (S.COMPLETE_COMMIT, 1)


# --- records ------------------------------------------------------------------------------------


def _transit(state: TransactionState, parts=frozenset()) -> TxnTransitMetadata:
    return TxnTransitMetadata(1000, 999, -1, 3, -1, 60000, state, frozenset(parts), NOW, NOW + 5, TV_0)


def test_key_bytes():
    assert records.encode_key("tx") == b"\x00\x00\x00\x02tx"
    assert records.decode_key(b"\x00\x00\x00\x02tx") == "tx"


def test_value_v0_bytes_for_empty_and_ongoing():
    empty = records.encode_value(_transit(S.EMPTY), TV_0)
    assert empty == struct.pack(">hqhib", 0, 1000, 3, 60000, 0) + struct.pack(">i", -1) + struct.pack(">qq", NOW + 5, NOW)
    ongoing = records.encode_value(_transit(S.ONGOING, {("ab", 1), ("ab", 0), ("c", 4)}), TV_0)
    body = (struct.pack(">i", 2) + struct.pack(">h", 2) + b"ab" + struct.pack(">iii", 2, 0, 1)
            + struct.pack(">h", 1) + b"c" + struct.pack(">ii", 1, 4))
    assert ongoing == struct.pack(">hqhib", 0, 1000, 3, 60000, 1) + body + struct.pack(">qq", NOW + 5, NOW)


def test_value_v1_bytes_with_tagged_fields():
    t = TxnTransitMetadata(1000, 999, 1001, 3, -1, 60000, S.PREPARE_COMMIT, frozenset({("ab", 1)}), NOW, NOW + 5, TV_2)
    v1 = records.encode_value(t, TV_2)
    expected = (struct.pack(">hqhib", 1, 1000, 3, 60000, 2)
                + b"\x02" + b"\x03ab" + b"\x02" + struct.pack(">i", 1) + b"\x00"
                + struct.pack(">qq", NOW + 5, NOW)
                + b"\x03" + b"\x00\x08" + struct.pack(">q", 999) + b"\x01\x08" + struct.pack(">q", 1001)
                + b"\x02\x02" + struct.pack(">h", 2))
    assert v1 == expected
    decoded = records.decode_value(v1)
    assert (decoded.previous_producer_id, decoded.next_producer_id, decoded.client_transaction_version) == (999, 1001, 2)
    assert decoded.topic_partitions() == {("ab", 1)}


def test_empty_state_with_partitions_is_refused():
    with pytest.raises(ValueError):
        records.encode_value(_transit(S.EMPTY, {("a", 0)}))


def test_tombstone_and_unknown_version():
    assert records.decode_value(None) is None
    with pytest.raises(records.TxnRecordError):
        records.decode_value(struct.pack(">h", 7) + b"\x00" * 30)


@given(
    state=st.sampled_from([s for s in S if s not in (S.EMPTY, S.DEAD)]),
    parts=st.frozensets(st.tuples(st.text(min_size=1, max_size=12), st.integers(0, 1000)), max_size=8),
    epoch=st.integers(0, 32767),
    tv=st.sampled_from([0, 1, 2]),
)
def test_value_round_trip(state, parts, epoch, tv):
    t = TxnTransitMetadata(123, 7, -1, epoch, -1, 1000, state, parts, NOW, NOW + 1, tv)
    v = records.decode_value(records.encode_value(t, tv))
    assert (v.producer_id, v.producer_epoch, v.transaction_timeout_ms, v.transaction_status) == (123, epoch, 1000, state)
    assert (v.last_update_timestamp_ms, v.start_timestamp_ms, v.version) == (NOW + 1, NOW, 0 if tv == 0 else 1)
    assert v.topic_partitions() == set(parts)


# --- the state manager's view while loading ---------------------------------------------------------


def test_coordinator_load_in_progress_until_the_partition_is_loaded():
    from broker.config.broker_config import BrokerConfig
    from coordinator.txn.state_manager import TransactionStateManager
    from protocol.errors import ErrorCode
    from tests.unit.coordinator.helpers import FakeEnv, FakePartitionWriter

    config = BrokerConfig({"transaction.state.log.num.partitions": "4"})
    env = FakeEnv({})
    env.config = config
    sm = TransactionStateManager(env, FakePartitionWriter({"__transaction_state": 4}))
    txn_id = "tx-load"
    assert sm.get_transaction_state(txn_id) == (ErrorCode.NOT_COORDINATOR, None)
    assert sm.start_loading() == [0, 1, 2, 3]
    assert sm.get_transaction_state(txn_id) == (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, None)
    assert sm.list_transaction_states(set(), set(), -1, None)[0] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    for p in range(4):
        sm.load_partition(p, lambda epoch, m: None)
    assert sm.get_transaction_state(txn_id) == (ErrorCode.NONE, None)
    assert sm.validate_transaction_timeout_ms(900000) and not sm.validate_transaction_timeout_ms(900001)
