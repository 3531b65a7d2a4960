"""Index file formats against an independent struct decoder, and Kafka's lookup/truncate rules."""

from __future__ import annotations

import os
import struct

import pytest

from storage.log.offset_index import OffsetIndex
from storage.log.time_index import TimeIndex
from storage.log.txn_index import AbortedTxn, TransactionIndex
from tests.unit.storage.helpers import (
    decode_offset_index,
    decode_time_index,
    decode_txn_index,
    read_bytes,
)


def test_offset_index_bytes_and_lookup(tmp_path):
    p = str(tmp_path / "00000000000000000100.index")
    idx = OffsetIndex(p, 100, 1024)
    for rel, pos in [(3, 0), (10, 4200), (25, 8500)]:
        idx.append(100 + rel, pos)
    idx.write_pending()  # entries are buffered until flush/close/roll/truncate
    assert decode_offset_index(read_bytes(p)) == [(3, 0), (10, 4200), (25, 8500)]
    assert idx.lookup(99) == (100, 0)  # below every entry: (base offset, 0)
    assert idx.lookup(103) == (103, 0)
    assert idx.lookup(109) == (103, 0)
    assert idx.lookup(110) == (110, 4200)
    assert idx.lookup(10**9) == (125, 8500)
    with pytest.raises(ValueError):
        idx.append(125, 9000)  # offsets must grow
    idx.truncate_to(110)  # drops entries with offset >= 110
    assert decode_offset_index(read_bytes(p)) == [(3, 0)]
    idx.close()


def test_offset_index_reads_kafka_bytes(tmp_path):
    p = tmp_path / "00000000000000000000.index"
    p.write_bytes(b"".join(struct.pack(">ii", r, pos) for r, pos in [(5, 0), (9, 5000)]))
    idx = OffsetIndex(str(p), 0, 1024)
    assert idx.entries == 2 and idx.sanity_ok()
    assert idx.lookup(8) == (5, 0)
    assert idx.max_entries == 128
    idx.close()
    # a torn file (size not a multiple of 8) is flagged, and a preallocated tail of zeros fails sanity
    p.write_bytes(p.read_bytes() + b"\x00\x00")
    assert OffsetIndex(str(p), 0, 1024).corrupt
    p.write_bytes(struct.pack(">ii", 5, 100) + b"\x00" * 16)
    assert not OffsetIndex(str(p), 0, 1024).sanity_ok()


def test_time_index_bytes_and_rules(tmp_path):
    p = str(tmp_path / "00000000000000000050.timeindex")
    ti = TimeIndex(p, 50, 120)
    assert ti.last_entry() == (-1, 50)
    ti.maybe_append(1000, 52)
    ti.maybe_append(1000, 55)  # same timestamp: ignored
    ti.maybe_append(2000, 60)
    ti.write_pending()
    assert decode_time_index(read_bytes(p)) == [(1000, 2), (2000, 10)]
    assert ti.lookup(999) == (-1, 50)
    assert ti.lookup(1500) == (1000, 52)
    assert ti.lookup(2000) == (2000, 60)
    with pytest.raises(ValueError):
        ti.maybe_append(1500, 61)  # timestamps never go back
    assert ti.max_entries == 10
    ti.truncate_to(60)
    assert ti.last_entry() == (1000, 52)
    ti.close()
    reopened = TimeIndex(p, 50, 120)
    assert reopened.entries == 1 and reopened.last_entry() == (1000, 52)
    reopened.close()


def test_txn_index_bytes_lazy_file_and_collect(tmp_path):
    p = str(tmp_path / "00000000000000000000.txnindex")
    ti = TransactionIndex(p, 0)
    assert not os.path.exists(p)  # created only on first append
    txns = [AbortedTxn(7, 0, 10, 11), AbortedTxn(8, 5, 20, 15), AbortedTxn(9, 30, 40, 41)]
    for t in txns:
        ti.append(t)
    assert decode_txn_index(read_bytes(p)) == [
        (0, 7, 0, 10, 11),
        (0, 8, 5, 20, 15),
        (0, 9, 30, 40, 41),
    ]
    with pytest.raises(ValueError):
        ti.append(AbortedTxn(1, 41, 40, 42))  # lastOffset must strictly increase
    # include if lastOffset >= fetch and firstOffset < upper; stop once lastStableOffset >= upper
    assert ti.collect_aborted(0, 12) == ([txns[0], txns[1]], True)
    assert ti.collect_aborted(11, 25) == ([txns[1]], True)
    assert ti.collect_aborted(0, 50) == (txns, False)
    assert ti.collect_aborted(11, 35) == ([txns[1], txns[2]], True)
    assert ti.collect_aborted(41, 100) == ([], False)
    ti.truncate_to(20)
    assert decode_txn_index(read_bytes(p)) == [(0, 7, 0, 10, 11)]
    ti.close()
    # reading bytes written by an independent encoder
    with open(p, "ab") as f:
        f.write(struct.pack(">hqqqq", 0, 99, 12, 13, 14))
    again = TransactionIndex(p, 0)
    assert again.entries == [txns[0], AbortedTxn(99, 12, 13, 14)]
    assert AbortedTxn(99, 12, 13, 14).as_aborted_transaction() == (99, 12)
    again.close()
