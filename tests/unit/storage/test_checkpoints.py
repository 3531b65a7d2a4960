"""Checkpoint files against Kafka's textual formats."""

from __future__ import annotations

import uuid

import pytest

from storage import checkpoints as ck
from storage.errors import CorruptCheckpoint
from tests.unit.storage.helpers import read_text


def test_offset_checkpoint_format(tmp_path):
    p = str(tmp_path / ck.RECOVERY_POINT_CHECKPOINT)
    ck.write_offset_checkpoint(p, {("orders", 0): 42, ("my-topic.v2", 11): 7})
    assert read_text(p) == "0\n2\norders 0 42\nmy-topic.v2 11 7\n"
    assert ck.read_offset_checkpoint(p) == {("orders", 0): 42, ("my-topic.v2", 11): 7}
    assert not (tmp_path / (ck.RECOVERY_POINT_CHECKPOINT + ".tmp")).exists()
    assert ck.read_offset_checkpoint(str(tmp_path / "missing")) == {}
    (tmp_path / "bad").write_text("0\n2\norders 0 42\n")
    with pytest.raises(CorruptCheckpoint):
        ck.read_offset_checkpoint(str(tmp_path / "bad"))
    (tmp_path / "v1").write_text("1\n0\n")
    with pytest.raises(CorruptCheckpoint):
        ck.read_offset_checkpoint(str(tmp_path / "v1"))


def test_leader_epoch_checkpoint_format(tmp_path):
    p = str(tmp_path / ck.LEADER_EPOCH_CHECKPOINT)
    ck.write_leader_epoch_checkpoint(p, [(0, 0), (3, 120)])
    assert read_text(p) == "0\n2\n0 0\n3 120\n"
    (tmp_path / "kafka").write_text("0\n1\n5 77\n")
    assert ck.read_leader_epoch_checkpoint(str(tmp_path / "kafka")) == [(5, 77)]


def test_kafka_uuid_string():
    # Kafka: new Uuid(0L, 1L).toString() == "AAAAAAAAAAAAAAAAAAAAAQ"
    assert ck.uuid_to_kafka_str(uuid.UUID(int=1)) == "AAAAAAAAAAAAAAAAAAAAAQ"
    u = uuid.uuid4()
    s = ck.uuid_to_kafka_str(u)
    assert len(s) == 22 and "=" not in s
    assert ck.kafka_str_to_uuid(s) == u
    assert ck.to_uuid(u.bytes) == u and ck.to_uuid(s) == u
    r = ck.random_kafka_uuid()
    assert r.int >= 100 and not ck.uuid_to_kafka_str(r).startswith("-")


def test_partition_metadata_format(tmp_path):
    p = str(tmp_path / ck.PARTITION_METADATA)
    u = uuid.UUID(int=1)
    ck.write_partition_metadata(p, u)
    assert read_text(p) == "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\n"
    assert ck.read_partition_metadata(p) == u
    assert ck.read_partition_metadata(str(tmp_path / "none")) is None


def test_meta_properties_roundtrip_and_java_style(tmp_path):
    p = str(tmp_path / ck.META_PROPERTIES)
    props = {"version": "1", "cluster.id": "MkU3OEVBNTcwNTJENDM2Qg", "node.id": "1", "directory.id": "abc-_x"}
    ck.write_meta_properties(p, props)
    text = read_text(p)
    assert text.startswith("#\n#") and "cluster.id=MkU3OEVBNTcwNTJENDM2Qg\n" in text
    assert ck.read_meta_properties(p) == props
    # As written by java.util.Properties.store, with escapes and other separators
    java = (
        "#\n#Mon Jan 01 00:00:00 UTC 2024\nnode.id=3\nversion : 1\ncluster.id=a\\=b\\:c\n  spaced\\ key = v\n"
    )
    assert ck.parse_properties(java) == {
        "node.id": "3",
        "version": "1",
        "cluster.id": "a=b:c",
        "spaced key": "v",
    }
    assert ck.parse_properties(ck.format_properties({"k:x": " lead", "u": "é"})) == {"k:x": " lead", "u": "é"}


def test_clean_shutdown_marker(tmp_path):
    assert ck.read_clean_shutdown(str(tmp_path)) is None
    ck.write_clean_shutdown(str(tmp_path), 17)
    assert (tmp_path / ".kafka_cleanshutdown").read_text() == '{"version":0,"brokerEpoch":17}'
    assert ck.read_clean_shutdown(str(tmp_path)) == 17
    (tmp_path / ".kafka_cleanshutdown").write_text("garbage")
    assert ck.read_clean_shutdown(str(tmp_path)) == -1
