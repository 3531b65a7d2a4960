"""The inspector's decoders on their own (no Java): Jackson's JSON text, records read by Kafka's
message specs (field order, version gates, tagged fields and their defaults, compact encodings),
the coordinator parsers' answers for every kind of record, Java's HashMap order, and a .log's
batch and record fields."""

from __future__ import annotations

import struct

import pytest

from broker.inspect import jackson
from broker.inspect.dump_text import batch_line, java_hash_map_order, optional_long, record_line
from broker.inspect.log_dump import LogDumpOptions, dump_log
from broker.inspect.message_reader import MessageReadError, read_message
from broker.inspect.message_spec import (
    GROUP_RECORDS,
    TRANSACTION_RECORDS,
    Versions,
    coordinator_specs,
    load_spec,
)
from broker.inspect.record_decoders import MissingKeyError, offsets_parser, transaction_log_parser
from broker.inspect.snapshot_dump import decrement_sequence
from coordinator.group.records import OffsetCommitValue, offset_commit_key, offset_commit_value
from coordinator.txn.records import TransactionLogValue, encode_key, encode_log_value
from protocol.records import build_batch, build_control_batch

T0 = 1_700_000_000_000


def test_jackson_writes_compact_json_with_upper_case_escapes():
    value = {"s": 'a"b\\c\n\x01é/', "n": None, "t": True, "i": -5, "l": [1, "x"], "b": b"\x00\xff"}
    assert jackson.dumps(value) == '{"s":"a\\"b\\\\c\\n\\u0001é/","n":null,"t":true,"i":-5,"l":[1,"x"],"b":"AP8="}'
    assert jackson.plain({"b": [b"ab"]}) == {"b": ["YWI="]}


def test_versions_parse_kafkas_forms():
    assert 3 in Versions.parse("0+") and 7 not in Versions.parse("1-3") and 1 in Versions.parse("1")
    assert 0 not in Versions.parse("none") and 0 not in Versions.parse(None)


def test_every_shipped_spec_reads_and_pairs_keys_with_values():
    txn = coordinator_specs(TRANSACTION_RECORDS)
    group = coordinator_specs(GROUP_RECORDS)
    assert list(txn) == [0]
    assert {0, 1, 2, 3, 5, 6, 7, 8, 16, 17, 23} <= set(group)
    assert all(k.kind == "coordinator-key" and v.kind == "coordinator-value" for k, v in group.values())


def _txn(version: int, **tags) -> bytes:
    return encode_log_value(TransactionLogValue(5, 2, 30000, 1, [("t", [0, 2])], T0 + 1, T0, version=version, **tags))


def test_transaction_log_value_v1_tagged_fields_in_spec_order_only_when_not_default():
    spec = load_spec("TransactionLogValue")
    data = read_message(spec, 1, _txn(1, previous_producer_id=4, client_transaction_version=2)[2:])
    assert list(data) == ["producerId", "previousProducerId", "producerEpoch", "transactionTimeoutMs",
                          "transactionStatus", "transactionPartitions", "transactionLastUpdateTimestampMs",
                          "transactionStartTimestampMs", "clientTransactionVersion"]
    assert data["transactionPartitions"] == [{"topic": "t", "partitionIds": [0, 2]}]
    v0 = read_message(spec, 0, _txn(0)[2:])
    assert "previousProducerId" not in v0 and v0["producerId"] == 5


def test_a_key_is_read_at_its_record_type_as_the_generated_code_reads_it():
    # OffsetCommitKey's fields are "versions": "0"; Kafka reads the key at version 1 (its type)
    spec = load_spec("OffsetCommitKey")
    assert read_message(spec, 1, offset_commit_key("g", "t", 3)[2:]) == {"group": "g", "topic": "t", "partition": 3}


def test_truncated_bytes_do_not_read():
    with pytest.raises(MessageReadError):
        read_message(load_spec("TransactionLogValue"), 1, _txn(1)[2:9])


def test_coordinator_parsers_answer_as_dump_log_segments():
    key = encode_key("tx")
    assert transaction_log_parser(3, key, None) == ({"type": "0", "data": {"transactionalId": "tx"}}, "<DELETE>")
    assert transaction_log_parser(3, b"\x00\x07" + key[2:], _txn(1)) == (
        "Unknown record type 7 at offset 3, skipping.", None)
    assert transaction_log_parser(4, key, b"\x00\x02" + _txn(1)[2:]) == (
        "Error at offset 4, skipping. Found an unknown record version 2 for 0 type", None)
    assert transaction_log_parser(5, b"\x00", None)[0] == (
        "Error at offset 5, skipping. Could not read version from key's buffer.")
    with pytest.raises(MissingKeyError):
        transaction_log_parser(6, None, _txn(1))
    k, v = offsets_parser(0, offset_commit_key("g", "t", 0), offset_commit_value(OffsetCommitValue(9, 1, "m", T0)))
    assert k == {"type": "1", "data": {"group": "g", "topic": "t", "partition": 0}}
    assert v == {"version": "3", "data": {"offset": 9, "leaderEpoch": 1, "metadata": "m", "commitTimestamp": T0}}


def test_java_hash_map_order_is_javas():
    # the order java.util.HashMap iterated these keys in (JDK 17), across a resize to 64 buckets
    keys = [f"/data/orders-0/{i * 37:020d}.log" for i in range(30)]
    java = [15, 4, 19, 11, 12, 1, 23, 22, 21, 18, 0, 26, 29, 7, 3, 10, 27, 24, 13, 2, 9, 14, 16, 25, 5, 20, 6, 17,
            28, 8]
    assert java_hash_map_order(keys) == [keys[i] for i in java]
    # the same keys through computeIfAbsent (new keys at the head of their bucket), as DumpLogSegments fills its maps
    java = [15, 19, 4, 12, 11, 1, 23, 22, 21, 18, 0, 26, 29, 7, 10, 3, 27, 24, 13, 2, 16, 14, 9, 25, 20, 5, 17, 6,
            28, 8]
    assert java_hash_map_order(keys, compute_if_absent=True) == [keys[i] for i in java]
    keys = [f"/t/p-{i % 7}/{i:020d}.log" for i in range(40)]
    java = [21, 30, 19, 31, 6, 18, 5, 39, 17, 26, 28, 27, 4, 38, 16, 25, 13, 34, 7, 3, 29, 15, 37, 24, 12, 36, 8, 2,
            14, 23, 20, 11, 32, 35, 9, 1, 22, 33, 10, 0]
    assert java_hash_map_order(keys, compute_if_absent=True) == [keys[i] for i in java]


def test_sequences_wrap_both_ways():
    assert decrement_sequence(1, 5) == 2147483644 and decrement_sequence(10, 3) == 7
    assert decrement_sequence(-1, 0) == 2147483647  # Kafka's arithmetic, kept


def test_log_fields_and_text(tmp_path):
    seg = tmp_path / "00000000000000000010.log"
    data = build_batch([(b"k", b"v"), (None, None)], base_offset=10, timestamp=T0, producer_id=3, producer_epoch=0,
                       base_sequence=2147483647, transactional=True)
    data += build_control_batch(producer_id=3, producer_epoch=0, commit=True, coordinator_epoch=2, timestamp=T0 + 1,
                                base_offset=12)
    torn = bytes(build_batch([(b"t", b"x")], base_offset=13, timestamp=T0))[:20]
    seg.write_bytes(bytes(data) + torn)
    d = dump_log(str(seg), LogDumpOptions(deep_iteration=True, print_data_log=True))
    first, marker = d["batches"]
    assert (first["lastSequence"], [r["sequence"] for r in first["records"]]) == (0, [2147483647, 0])
    assert first["records"][1] == {"offset": 11, "timestamp": T0, "keySize": -1, "valueSize": -1, "sequence": 0,
                                   "headerKeys": []}
    assert marker["records"][0]["endTxnMarker"] == "COMMIT" and marker["records"][0]["coordinatorEpoch"] == 2
    assert d["trailingBytes"] == 20 and d["logStartOffset"] == 10
    assert d["nonConsecutiveOffsets"] == [[-1, 10]]  # as Kafka 4.3.1 reports a segment not at 0
    assert batch_line(first).startswith("baseOffset: 10 lastOffset: 11 count: 2 baseSequence: 2147483647 "
                                        "lastSequence: 0 producerId: 3 ")
    assert record_line(first["records"][0], "CreateTime") == (
        f"| offset: 10 CreateTime: {T0} keySize: 1 valueSize: 1 sequence: 2147483647 headerKeys: [] key: k "
        "payload: v")
    assert optional_long(None) == "OptionalLong.empty" and optional_long(7) == "OptionalLong[7]"


def test_a_batch_size_below_any_record_stops_the_dump(tmp_path):
    from broker.inspect.log_dump import LogDumpError

    seg = tmp_path / "00000000000000000000.log"
    seg.write_bytes(struct.pack(">qi", 0, 3) + b"\x00" * 20)
    with pytest.raises(LogDumpError, match="smaller than minimum record overhead"):
        dump_log(str(seg), LogDumpOptions())
