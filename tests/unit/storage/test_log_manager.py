"""LogManager: dirs, clean-shutdown marker, checkpoints, recovery, deletion, periodic work."""

from __future__ import annotations

import os

import pytest

from storage import checkpoints as ck
from storage.errors import KafkaStorageError
from storage.log import segment as segment_mod
from storage.log_config import LogConfig
from storage.log_manager import LogManager, parse_partition_dir
from tests.unit.storage.helpers import append_batch

T0 = 1_700_000_000_000


def test_parse_partition_dir():
    assert parse_partition_dir("__consumer_offsets-12") == ("__consumer_offsets", 12)
    assert parse_partition_dir("my-topic.v2-3") == ("my-topic.v2", 3)
    assert parse_partition_dir("t-0.0123456789abcdef0123456789abcdef-delete") is None
    assert parse_partition_dir("t-0-future") is None and parse_partition_dir("noint-x") is None


def test_create_shutdown_restart_without_recovery(tmp_path, monkeypatch):
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    lm = LogManager(dirs, {"internal.segment.bytes": "1000"})
    lm.startup(T0)
    logs = [lm.create("orders", p, now_ms=T0) for p in range(4)]
    assert sorted(lm.dir_of("orders", p) for p in range(4)) == sorted(dirs * 2)  # least loaded dir
    assert lm.create("orders", 0) is logs[0]
    for i in range(20):
        append_batch(logs[i % 4], 1, timestamp=T0, value_size=100)
    lm.shutdown()
    for d in dirs:
        assert ck.read_clean_shutdown(d) == -1
        rp = ck.read_offset_checkpoint(os.path.join(d, ck.RECOVERY_POINT_CHECKPOINT))
        assert rp and all(v == 5 for v in rp.values())
    lm2 = LogManager(dirs)
    lm2.startup(T0)
    with pytest.raises(KafkaStorageError):  # .lock is held by lm2
        LogManager(dirs).startup(T0)
    lm2.close_unclean()

    def no_recover(*a, **k):
        raise AssertionError("clean shutdown: no recovery expected")

    monkeypatch.setattr(segment_mod.LogSegment, "recover", no_recover)
    # put the marker back (lm2 consumed it) and restart
    for d in dirs:
        ck.write_clean_shutdown(d)
    lm3 = LogManager(dirs, {"internal.segment.bytes": "1000"})
    lm3.startup(T0)
    assert all(lm3.had_clean_shutdown.values())
    assert not any(os.path.exists(os.path.join(d, ck.CLEAN_SHUTDOWN_FILE)) for d in dirs)
    assert sorted(lm3.partitions()) == [("orders", p) for p in range(4)]
    assert all(lm3.get("orders", p).log_end_offset == 5 for p in range(4))
    lm3.shutdown()


def test_crash_then_recovery_truncates_torn_tail(tmp_path):
    d = str(tmp_path / "data")
    lm = LogManager([d])
    lm.startup(T0)
    plog = lm.create("t", 0, now_ms=T0)
    for _ in range(5):
        append_batch(plog, 1, timestamp=T0)
    lm.checkpoint()
    seg_path = plog.active_segment.log_path
    lm.close_unclean()
    with open(seg_path, "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x05\x00\x00\x01\x00junk")  # torn batch
    lm2 = LogManager([d])
    lm2.startup(T0)
    assert lm2.had_clean_shutdown == {os.path.abspath(d): False}
    again = lm2.get("t", 0)
    assert again.log_end_offset == 5 and again.active_segment.size == os.path.getsize(seg_path)
    assert again.recovery_point == 0  # recovered, but only a flush advances it
    lm2.shutdown()


def test_delete_topic_and_topic_overrides(tmp_path):
    d = str(tmp_path / "data")
    overrides = {"x": {"retention.ms": "1000"}}
    lm = LogManager([d], topic_overrides=lambda t: overrides.get(t, {}))
    lm.startup(T0)
    for p in range(2):
        append_batch(lm.create("x", p, now_ms=T0), 1, timestamp=T0)
    lm.create("y", 0, now_ms=T0)
    assert lm.get("x", 0).config.retention_ms == 1000
    assert lm.get("y", 0).config.retention_ms == LogConfig().retention_ms
    assert lm.delete_topic("x") == [0, 1]
    assert sorted(os.listdir(d)) == sorted(
        [
            ".lock",
            "y-0",
            ck.RECOVERY_POINT_CHECKPOINT,
            ck.LOG_START_OFFSET_CHECKPOINT,
            ck.REPLICATION_OFFSET_CHECKPOINT,
        ]
    )
    assert ck.read_offset_checkpoint(os.path.join(d, ck.RECOVERY_POINT_CHECKPOINT)) == {("y", 0): 0}
    assert lm.get("x", 0) is None
    # a leftover "-delete" dir from a crash is removed at start-up
    lm.shutdown()
    os.makedirs(os.path.join(d, "x-0.0123456789abcdef0123456789abcdef-delete"))
    lm2 = LogManager([d])
    lm2.startup(T0)
    assert lm2.partitions() == [("y", 0)]
    assert not any(n.endswith("-delete") for n in os.listdir(d))
    lm2.update_topic_config("y", {"retention.ms": "5"})
    assert lm2.get("y", 0).config.retention_ms == 5
    lm2.shutdown()


def test_periodic_retention_flush_and_log_start_checkpoint(tmp_path):
    d = str(tmp_path / "data")
    lm = LogManager([d], {"internal.segment.bytes": "600", "retention.ms": "10000", "flush.ms": "1000"})
    lm.startup(T0)
    plog = lm.create("r", 0, now_ms=T0)
    for i in range(12):
        append_batch(plog, 1, timestamp=T0 + i, value_size=100)
    assert lm.flush_dirty(T0 + 500) == 1  # post-roll flush only
    assert 0 < plog.recovery_point < plog.log_end_offset
    assert lm.flush_dirty(T0 + 1000) == 0  # the post-roll flush counts as a flush
    assert lm.flush_dirty(T0 + 1500) == 1  # flush.ms elapsed
    assert plog.recovery_point == plog.log_end_offset
    assert lm.run_retention(T0 + 5000) == 0
    assert lm.run_retention(T0 + 10**6) > 0
    assert plog.log_start_offset == 12
    lm.checkpoint()
    assert ck.read_offset_checkpoint(os.path.join(d, ck.LOG_START_OFFSET_CHECKPOINT)) == {}
    plog.delete_records_before(12)
    append_batch(plog, 3, timestamp=T0 + 10**6)
    plog.delete_records_before(14)
    lm.checkpoint()
    assert ck.read_offset_checkpoint(os.path.join(d, ck.LOG_START_OFFSET_CHECKPOINT)) == {("r", 0): 14}
    lm.shutdown()
    lm2 = LogManager([d])
    lm2.startup(T0)
    assert lm2.get("r", 0).log_start_offset == 14
    lm2.shutdown()


def test_meta_properties(tmp_path):
    d = str(tmp_path / "data")
    lm = LogManager([d])
    props = lm.ensure_meta_properties("MkU3OEVBNTcwNTJENDM2Qg", 1)[os.path.abspath(d)]
    assert props["version"] == "1" and props["node.id"] == "1" and len(props["directory.id"]) == 22
    assert ck.read_meta_properties(os.path.join(d, "meta.properties")) == props
    assert lm.ensure_meta_properties("MkU3OEVBNTcwNTJENDM2Qg", 1)[os.path.abspath(d)] == props
    with pytest.raises(KafkaStorageError):
        lm.ensure_meta_properties("other", 1)
