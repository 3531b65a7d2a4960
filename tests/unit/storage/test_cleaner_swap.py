"""Crash safety of the cleaner's swap (PartitionLog.replace_segments + storage.log.loader.clean_directory).

The partition directory is copied at every step of a real cleaning: while the ``.cleaned``
output is being written, and after every single rename, unlink and directory fsync of every
group's swap. Each copy is then opened as a broker restarting after a crash would, and must hold
exactly the records of the log before or after one of the group swaps (each swap is atomic, the
groups are swapped one after the other), with consistent indexes, the aborted-transaction index
intact, and no leftover ``.cleaned``/``.swap``/``.deleted`` file.
"""

from __future__ import annotations

import glob
import os
import shutil
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatch

from protocol.records import build_batch, build_control_batch, validate_batches
from storage.cleaner.cleaner import BlockingIO, FsyncRequest
from storage.log import loader
from storage.log.partition_log import PartitionLog
from storage.producer.types import TV_0, AppendOrigin
from tests.unit.storage.helpers import decode_log, decode_txn_index
from tests.unit.storage.test_cleaner import T0, append, check_indexes, cleaner_for, log_records, make_log

LEFTOVERS = (".cleaned", ".swap", ".deleted")


@pytest.fixture(autouse=True)
def _no_fsync(monkeypatch):
    monkeypatch.setattr(os, "fsync", lambda fd: None)


def txn_produce(plog, pid: int, epoch: int, seq: int, records) -> None:
    buf = build_batch(
        records, timestamp=T0, producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=True
    )
    plog.append(buf, validate_batches(buf), now_ms=T0)


def end_txn(plog, pid: int, epoch: int, commit: bool) -> None:
    buf = build_control_batch(
        producer_id=pid, producer_epoch=epoch, commit=commit, coordinator_epoch=0, timestamp=T0
    )
    plog.append(buf, validate_batches(buf), now_ms=T0, origin=AppendOrigin.COORDINATOR,
                       transaction_version=TV_0)


def aborted_txns(plog: PartitionLog) -> list[tuple[int, int, int, int]]:
    return [
        (t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset)
        for seg in plog.segments
        for t in seg.txn_index.entries
    ]


def build_history(plog) -> None:
    """Keys updated over several segments, tombstones, an aborted and a committed transaction."""
    for i in range(30):
        append(plog, [(b"k%d" % (i % 9), b"v%d" % i + b"x" * 30)], ts=T0 + i)
        if i == 12:
            txn_produce(plog, 7, 0, 0, [(b"k1", b"aborted"), (b"t1", b"aborted")])
            append(plog, [(b"k2", None)], ts=T0 + i)
            end_txn(plog, 7, 0, commit=False)
        if i == 20:
            txn_produce(plog, 8, 0, 0, [(b"c1", b"committed")])
            end_txn(plog, 8, 0, commit=True)
    plog.roll()


def dir_state(d: str | Path) -> tuple[list, list]:
    """Records (control ones too) of every unsuffixed .log file and the entries of every
    .txnindex file in a partition directory, read from the files alone."""
    records = []
    for path in sorted(glob.glob(os.path.join(d, "*.log"))):
        data = Path(path).read_bytes()
        for b in decode_log(data):
            records.extend(
                (r.offset, r.key, r.value) for r in DefaultRecordBatch(data[b["pos"] : b["pos"] + b["size"]])
            )
    txns = [
        (pid, first, last, lso)
        for path in sorted(glob.glob(os.path.join(d, "*.txnindex")))
        for _v, pid, first, last, lso in decode_txn_index(Path(path).read_bytes())
    ]
    return records, txns


def test_a_crash_at_any_step_recovers_to_the_state_before_or_after_it(tmp_path):
    lm, plog = make_log(tmp_path, segment_bytes=600, index_interval_bytes=100)
    build_history(plog)
    assert aborted_txns(plog)
    # A first cleaning leaves small segments; after more updates the next one merges them into
    # groups, some of whose trailing segments it empties entirely.
    cleaner_for(lm).clean_all(T0 + 500)
    for i in range(30):
        append(plog, [(b"k%d" % (i % 9), b"w%d" % i + b"y" * 30)], ts=T0 + 100 + i)
    plog.roll()
    plog.update_config(plog.config.replace(internal_segment_bytes=1200))  # groups of several segments
    states = [dir_state(plog.dir)]
    snapshots: list[tuple[int, str, Path]] = []  # (atomic steps applied, step, copy)
    committed = False
    steps_seen: list[str] = []

    def snap(step: str) -> None:
        nonlocal committed
        steps_seen.append(step)
        if not committed and step.endswith((".log.swap", ".log.deleted")):
            committed = True  # the atomic point of a swap, or of one emptied segment's removal
        dest = tmp_path / f"snap-{len(snapshots):04d}"
        shutil.copytree(plog.dir, dest)
        snapshots.append((len(states) - 1 + (1 if committed else 0), step, dest))
        if step == "done" or step.startswith("removed"):
            committed = False
            states.append(dir_state(plog.dir))

    cleaner = cleaner_for(lm)
    cleaner.cleaner.on_swap_step = snap
    ltc = cleaner.grab_filthiest(T0 + 1000)
    gen = cleaner.cleaner.clean(ltc, T0 + 1000)
    yields = 0
    try:
        item = next(gen)
        while True:
            if isinstance(item, FsyncRequest):
                item.run()
                snap("blocking io")
            elif isinstance(item, BlockingIO):
                item.run()  # a read of a segment or an append to the .cleaned one
            elif any(n.endswith(".cleaned") for n in os.listdir(plog.dir)):
                yields += 1
                if yields % 10 == 0:
                    snap("writing .cleaned")
            item = next(gen)
    except StopIteration:
        pass
    kinds = {step.split(" ")[0] for step in steps_seen}
    assert {
        "writing",
        "blocking",
        "swap",
        "committed",
        "delete",
        "deleted",
        "rename",
        "done",
        "removed",
    } <= kinds
    assert sum(1 for step in steps_seen if step == "done") >= 2
    assert states[-1] != states[0] and states[-1][1] == aborted_txns(plog)

    for n, (expected, step, copy) in enumerate(snapshots):
        # Trusting the files (as after a clean shutdown) is the strictest reading: only the swap
        # recovery in loader.clean_directory runs, no segment is re-validated.
        recovered = PartitionLog.open(str(copy), "t", 0, plog.config, needs_recovery=False, now_ms=T0)
        try:
            assert not [n for n in os.listdir(copy) if n.endswith(LEFTOVERS)], step
            assert dir_state(copy) == states[expected], f"after a crash at '{step}'"
            assert (log_records(recovered, control=True), aborted_txns(recovered)) == states[expected]
            for seg in recovered.segments:
                batches = {b["pos"]: b for b in decode_log(seg.read_at(0, seg.size))}
                for i in range(seg.offset_index.entries):
                    entry = seg.offset_index.entry(i)
                    assert batches[entry.position]["last"] == entry.offset, step
            if n % 10 == 0:
                check_indexes(recovered, copy)  # equal to a rebuild (slow: many ftruncates)
        finally:
            recovered.close()
    lm.shutdown()


def test_leftovers_of_each_phase_by_hand(tmp_path):
    """The recovery rules on hand-made file sets: an uncommitted swap rolls back, a committed one
    completes, a half-renamed last phase is finished, and unrelated files are left alone."""
    d = tmp_path / "t-0"
    d.mkdir()

    def write(name: str, data: bytes = b"") -> None:
        (d / name).write_bytes(data)

    def batch(offset: int, value: bytes) -> bytes:
        b = build_batch([(b"k", value)], timestamp=T0, base_offset=offset)
        return bytes(b)

    old0 = batch(0, b"old0") + batch(1, b"old1")
    old2 = batch(2, b"old2")
    new0 = batch(1, b"old1") + batch(2, b"old2")
    tail = batch(3, b"tail")

    # Phase 1 interrupted: indexes already .swap, the .log still .cleaned -> roll back.
    write("00000000000000000000.log", old0)
    write("00000000000000000002.log", old2)
    write("00000000000000000003.log", tail)
    write("00000000000000000000.log.cleaned", new0)
    write("00000000000000000000.index.swap")
    write("00000000000000000000.timeindex.swap")
    write("00000000000000000003.snapshot", b"")
    assert loader.clean_directory(str(d)) == [0, 2, 3]
    assert sorted(os.listdir(d)) == [
        "00000000000000000000.log",
        "00000000000000000002.log",
        "00000000000000000003.log",
        "00000000000000000003.snapshot",
    ]

    # Committed, old segments partly deleted: the .swap wins over every old file in its range.
    write("00000000000000000000.log.swap", new0)
    write("00000000000000000000.index.swap")
    write("00000000000000000000.txnindex.swap")
    write("00000000000000000000.index")  # old
    write("00000000000000000002.log.deleted", old2)
    assert loader.clean_directory(str(d)) == [0, 3]
    assert (d / "00000000000000000000.log").read_bytes() == new0
    assert sorted(os.listdir(d)) == [
        "00000000000000000000.index",
        "00000000000000000000.log",
        "00000000000000000000.txnindex",
        "00000000000000000003.log",
        "00000000000000000003.snapshot",
    ]

    # Last phase interrupted: the .log is in place, an index still .swap -> finish the rename.
    (d / "00000000000000000000.txnindex").rename(d / "00000000000000000000.txnindex.swap")
    (d / "00000000000000000000.txnindex.swap").write_bytes(b"\0" * 34)
    assert loader.clean_directory(str(d)) == [0, 3]
    assert (d / "00000000000000000000.txnindex").read_bytes() == b"\0" * 34

    # A lone index .swap with no segment at all is dropped.
    write("00000000000000000009.index.swap")
    assert loader.clean_directory(str(d)) == [0, 3]
    assert not (d / "00000000000000000009.index.swap").exists()
