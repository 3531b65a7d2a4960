"""Kafka's own DumpLogSegments reads our segments and finds our indexes consistent.

Runs only where Java and the reference Kafka jars (tests/support/kafka_reference.py cache) are
already present; it never downloads them.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess

import pytest

from protocol.records import build_control_batch, validate_batches
from storage.log.partition_log import PartitionLog
from storage.log.txn_index import AbortedTxn
from storage.log_config import LogConfig
from tests.unit.storage.helpers import append_batch

T0 = 1_700_000_000_000


def _kafka_libs() -> str | None:
    cache = os.environ.get("KAFKA_REF_CACHE", os.path.expanduser("~/.cache/pykafka-ref"))
    for libs in sorted(glob.glob(os.path.join(cache, "kafka-*", "libs"))):
        if glob.glob(os.path.join(libs, "kafka-tools-*.jar")):
            return libs
    return None


LIBS = _kafka_libs()
pytestmark = [
    pytest.mark.java,
    pytest.mark.skipif(LIBS is None or shutil.which("java") is None, reason="needs java + cached Kafka jars"),
]


def _dump(files: list[str], *args: str) -> str:
    cmd = ["java", "-Xmx256m", "-cp", os.path.join(LIBS, "*"), "org.apache.kafka.tools.DumpLogSegments"]
    out = subprocess.run(
        [*cmd, "--files", ",".join(files), *args], capture_output=True, text=True, timeout=120, check=True
    )
    return out.stdout


def test_dump_log_segments_verifies_our_files(tmp_path):
    plog = PartitionLog.open(
        str(tmp_path / "t-0"), "t", 0, LogConfig(segment_bytes=3000, index_interval_bytes=200), now_ms=T0
    )
    for i in range(40):
        append_batch(plog, 3, timestamp=T0 + i * 10, value_size=40)
    marker = build_control_batch(
        producer_id=5, producer_epoch=0, commit=False, coordinator_epoch=0, timestamp=T0
    )
    r = plog.append(marker, validate_batches(marker), now_ms=T0)
    plog.append_aborted_txn(AbortedTxn(5, 3, r.last_offset, r.last_offset + 1))
    plog.close()
    files = sorted(glob.glob(os.path.join(plog.dir, "0*")))
    indexes = [f for f in files if f.endswith((".index", ".timeindex"))]
    out = _dump(indexes, "--verify-index-only")
    assert "Mismatches" not in out and "not found" not in out
    out = _dump(indexes, "--index-sanity-check")
    assert out.count("passed sanity check") == len(indexes)
    out = _dump([f for f in files if f.endswith((".log", ".txnindex"))], "--deep-iteration")
    assert out.count("isvalid: true") == 41 and "isvalid: false" not in out
    assert f"producerId: 5 firstOffset: 3 lastOffset: {r.last_offset}" in out
