"""The producer ``.snapshot`` file against Kafka's format (protocol-facts §4.7).

The decoder here is written from the format description alone (``struct`` and a bitwise
CRC-32C), not from storage.producer.snapshot, so an encoder bug cannot hide behind a matching
decoder bug. The Java tests run Kafka's own reader and writer on the same files.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from protocol.records import build_batch, build_control_batch, read_header
from storage.producer.manager import ProducerStateManager
from storage.producer.snapshot import (
    ENTRY,
    CorruptSnapshot,
    ProducerSnapshot,
    decode_snapshot,
    encode_snapshot,
    offset_from_file_name,
    read_snapshot,
    snapshot_file_name,
)
from storage.producer.types import TV_2, AppendOrigin


def crc32c_bitwise(data: bytes) -> int:
    """CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), one bit at a time."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def decode_independently(data: bytes) -> tuple[int, int, list[dict[str, int]]]:
    """§4.7: int16 version, uint32 crc over [6, EOF), int32 count, count x 46-byte entries."""
    version, crc = struct.unpack_from(">hI", data, 0)
    (count,) = struct.unpack_from(">i", data, 6)
    assert len(data) == 10 + 46 * count
    entries = []
    for i in range(count):
        pos = 10 + 46 * i
        pid, epoch, last_seq, last_offset, offset_delta, ts, coord_epoch, txn_first = struct.unpack_from(
            ">qhiqiqiq", data, pos
        )
        entries.append(
            {
                "producer_id": pid,
                "epoch": epoch,
                "last_sequence": last_seq,
                "last_offset": last_offset,
                "offset_delta": offset_delta,
                "timestamp": ts,
                "coordinator_epoch": coord_epoch,
                "current_txn_first_offset": txn_first,
            }
        )
    return version, crc, entries


def test_crc32c_reference_vector() -> None:
    assert crc32c_bitwise(b"123456789") == 0xE3069283


def _append(
    psm: ProducerStateManager, buf: bytearray, offset: int, origin=AppendOrigin.CLIENT, tv: int = -1
) -> int:
    info = read_header(buf)
    info.base_offset = offset
    pending = psm.validate_append([info], buf, origin, transaction_version=tv)
    psm.apply_append(pending, info.next_offset)
    return info.next_offset


def _written_state(tmp_path: Path) -> tuple[ProducerStateManager, Path]:
    tmp_path.mkdir(exist_ok=True)
    psm = ProducerStateManager(tmp_path)
    off = 0
    # pid 1000: idempotent, two batches (only the last one is stored)
    off = _append(
        psm,
        build_batch(
            [(None, b"a")] * 3,
            timestamp=1_700_000_000_001,
            producer_id=1000,
            producer_epoch=5,
            base_sequence=0,
        ),
        off,
    )
    off = _append(
        psm,
        build_batch(
            [(None, b"b")] * 2,
            timestamp=1_700_000_000_002,
            producer_id=1000,
            producer_epoch=5,
            base_sequence=3,
        ),
        off,
    )
    # pid 2**40: an open transaction starting at offset 5, sequence near the int32 wrap
    off = _append(
        psm,
        build_batch(
            [(None, b"c")] * 4,
            timestamp=1_700_000_000_003,
            producer_id=2**40,
            producer_epoch=32766,
            base_sequence=2**31 - 2,
            transactional=True,
        ),
        off,
    )
    # pid 7: a TV2 transaction committed: epoch bumped, coordinator epoch kept, no batch metadata
    off = _append(
        psm,
        build_batch(
            [(None, b"d")],
            timestamp=1_700_000_000_004,
            producer_id=7,
            producer_epoch=0,
            base_sequence=0,
            transactional=True,
        ),
        off,
    )
    marker = build_control_batch(
        producer_id=7, producer_epoch=1, commit=True, coordinator_epoch=9, timestamp=1_700_000_000_005
    )
    off = _append(psm, marker, off, AppendOrigin.COORDINATOR, TV_2)
    path = psm.take_snapshot()
    assert path is not None
    return psm, path


def test_snapshot_bytes_decoded_independently(tmp_path: Path) -> None:
    psm, path = _written_state(tmp_path)
    assert path.name == "00000000000000000011.snapshot" == snapshot_file_name(11)
    data = path.read_bytes()
    version, crc, entries = decode_independently(data)
    assert version == 1
    assert crc == crc32c_bitwise(data[6:])
    by_pid = {e["producer_id"]: e for e in entries}
    assert sorted(by_pid) == [7, 1000, 2**40]
    assert by_pid[1000] == {
        "producer_id": 1000,
        "epoch": 5,
        "last_sequence": 4,
        "last_offset": 4,
        "offset_delta": 1,
        "timestamp": 1_700_000_000_002,
        "coordinator_epoch": -1,
        "current_txn_first_offset": -1,
    }
    assert by_pid[2**40] == {
        "producer_id": 2**40,
        "epoch": 32766,
        "last_sequence": 1,  # 2**31 - 2 + 3 wraps to 1
        "last_offset": 8,
        "offset_delta": 3,
        "timestamp": 1_700_000_000_003,
        "coordinator_epoch": -1,
        "current_txn_first_offset": 5,
    }
    assert by_pid[7] == {
        "producer_id": 7,
        "epoch": 1,
        "last_sequence": -1,
        "last_offset": -1,
        "offset_delta": 0,
        "timestamp": 1_700_000_000_005,
        "coordinator_epoch": 9,
        "current_txn_first_offset": -1,
    }
    # the declarative construct definition reads the same bytes
    parsed = ProducerSnapshot.parse(data)
    assert parsed.version == 1 and parsed.crc == crc
    assert [
        dict((k, v) for k, v in e.items() if not k.startswith("_")) for e in parsed.producer_entries
    ] == entries


def test_struct_layout_matches_the_construct_reference() -> None:
    from storage.producer.snapshot import ProducerSnapshotEntry

    assert ENTRY.size == ProducerSnapshotEntry.sizeof() == 46


def test_importing_the_format_does_not_import_construct() -> None:
    """construct costs ~12 ms at start-up; the broker's snapshot path uses only struct."""
    code = "import sys, broker.broker, storage.producer; print('construct' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[3])
    assert out.stdout.strip() == "False"


def test_empty_snapshot_is_ten_bytes() -> None:
    data = encode_snapshot([])
    assert len(data) == 10
    assert decode_independently(data) == (1, crc32c_bitwise(b"\x00\x00\x00\x00"), [])


def test_decoder_rejects_bad_files() -> None:
    good = encode_snapshot([(1, 2, 3, 4, 5, 6, 7, -1)])
    assert list(decode_snapshot(good)) == [(1, 2, 3, 4, 5, 6, 7, -1)]
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 1
    bad_version = b"\x00\x02" + good[2:]
    for data in (bytes(bad_crc), bad_version, good[:9], good[:-1]):
        with pytest.raises(CorruptSnapshot):
            decode_snapshot(data)
    assert ENTRY.size == 46
    assert offset_from_file_name("00000000000000012345.snapshot") == 12345


# --- Kafka's own code on our files (needs java and the fetched reference jars) ---------------

JAVA_CHECK = r"""
import java.io.File;
import java.lang.reflect.Method;
import java.util.*;
import org.apache.kafka.storage.internals.log.*;

public class SnapshotCheck {
    public static void main(String[] args) throws Exception {
        if (args[0].equals("read")) {
            for (ProducerStateEntry e : ProducerStateManager.readSnapshot(new File(args[1]))) {
                StringBuilder sb = new StringBuilder();
                sb.append(e.producerId()).append(',').append(e.producerEpoch()).append(',').append(e.coordinatorEpoch())
                  .append(',').append(e.lastTimestamp()).append(',').append(e.currentTxnFirstOffset().orElse(-1L));
                for (BatchMetadata b : e.batchMetadata())
                    sb.append(',').append(b.lastSeq()).append(',').append(b.lastOffset()).append(',')
                      .append(b.offsetDelta()).append(',').append(b.timestamp());
                System.out.println(sb);
            }
        } else {
            Method addBatch = ProducerStateEntry.class.getDeclaredMethod(
                "addBatch", short.class, int.class, long.class, int.class, long.class);
            addBatch.setAccessible(true);
            Map<Long, ProducerStateEntry> m = new HashMap<>();
            for (int i = 2; i < args.length; i++) {  // pid,epoch,coordEpoch,lastTs,txnFirst[,lastSeq,lastOffset,delta,ts]
                String[] f = args[i].split(",");
                long txn = Long.parseLong(f[4]);
                ProducerStateEntry e = new ProducerStateEntry(Long.parseLong(f[0]), Short.parseShort(f[1]),
                    Integer.parseInt(f[2]), Long.parseLong(f[3]), txn >= 0 ? OptionalLong.of(txn) : OptionalLong.empty());
                if (f.length > 5)
                    addBatch.invoke(e, Short.parseShort(f[1]), Integer.parseInt(f[5]), Long.parseLong(f[6]),
                        Integer.parseInt(f[7]), Long.parseLong(f[8]));
                m.put(Long.parseLong(f[0]), e);
            }
            ProducerStateManager.writeSnapshot(new File(args[1]), m, true);
        }
    }
}
"""


@pytest.fixture(scope="module")
def kafka_libs() -> Path:
    from tests.support.kafka_reference import KafkaReference

    libs = KafkaReference().libs
    if shutil.which("java") is None or not any(libs.glob("kafka-storage-*.jar")):
        pytest.skip("needs java and the Kafka reference jars (tests/support/kafka_reference.py fetch)")
    return libs


def _java(libs: Path, tmp_path: Path, *args: str) -> str:
    src = tmp_path / "SnapshotCheck.java"
    src.write_text(JAVA_CHECK)
    r = subprocess.run(
        ["java", "-cp", f"{libs}/*", str(src), *args], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.mark.java
def test_kafka_reads_our_snapshot(kafka_libs: Path, tmp_path: Path) -> None:
    psm, path = _written_state(tmp_path / "log")
    lines = sorted(_java(kafka_libs, tmp_path, "read", str(path)).split())
    ours = sorted(
        ",".join(
            str(x)
            for x in (
                e.producer_id,
                e.producer_epoch,
                e.coordinator_epoch,
                e.last_timestamp,
                -1 if e.current_txn_first_offset is None else e.current_txn_first_offset,
                *(e.last_batch or ()),
            )
        )
        for e in psm.producers.values()
    )
    assert lines == ours


@pytest.mark.java
def test_we_read_kafkas_snapshot(kafka_libs: Path, tmp_path: Path) -> None:
    path = tmp_path / snapshot_file_name(42)
    _java(
        kafka_libs,
        tmp_path,
        "write",
        str(path),
        "7,3,2,5000,-1",
        "9,1,0,6000,40,12,41,1,6000",
        "1099511627776,32767,-1,-1,-1",
    )
    entries = {e.producer_id: e for e in read_snapshot(path)}
    assert sorted(entries) == [7, 9, 2**40]
    assert (entries[7].producer_epoch, entries[7].coordinator_epoch, entries[7].last_timestamp) == (
        3,
        2,
        5000,
    )
    assert entries[7].is_empty and entries[7].current_txn_first_offset is None
    assert entries[9].current_txn_first_offset == 40
    assert tuple(entries[9].last_batch) == (12, 41, 1, 6000) and entries[9].first_seq == 11
    assert entries[2**40].producer_epoch == 32767
    loaded = ProducerStateManager(tmp_path)
    assert loaded.load(0, 50, now_ms=6000) == 42
    assert loaded.first_unstable_offset() == 40


@pytest.mark.java
def test_kafka_dump_log_reads_our_snapshot(kafka_libs: Path, tmp_path: Path) -> None:
    _psm, path = _written_state(tmp_path / "log")
    r = subprocess.run(
        ["java", "-cp", f"{kafka_libs}/*", "org.apache.kafka.tools.DumpLogSegments", "--files", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert (
        "producerId: 1099511627776 producerEpoch: 32766 coordinatorEpoch: -1 currentTxnFirstOffset: OptionalLong[5] "
        "lastTimestamp: 1700000000003 firstSequence: 2147483646 lastSequence: 1 lastOffset: 8 offsetDelta: 3 "
        "timestamp: 1700000000003"
    ) in r.stdout
    assert (
        "producerId: 7 producerEpoch: 1 coordinatorEpoch: 9 currentTxnFirstOffset: OptionalLong.empty"
        in r.stdout
    )
