"""A ``.log`` segment as DumpLogSegments reads it: every batch with the header fields it prints
(``printBatchLevel``), and with deep iteration every record (``printRecordMetadata``), a control
record's marker, and with ``--print-data-log`` the key and payload its parser makes of them.

Batches are walked as Kafka's FileLogInputStream walks them: a batch whose 12-byte prefix says
it runs past the end of the file ends the walk, and what is left is reported as invalid bytes.
A CRC mismatch does not stop the walk: the batch is shown with ``isvalid: false``. Records are
read with ``protocol.record_codec`` (decompressing as Kafka's streams do).
"""

from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass, field
from typing import Any

from crc32c import crc32c

from broker.inspect.record_decoders import Parser, string_parser
from protocol import compression
from protocol.record_codec import CorruptRecords, decode_records
from protocol.records import (
    CONTROL_FLAG,
    CRC_START,
    DELETE_HORIZON_FLAG,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG,
    increment_sequence,
    read_header,
)

INT32_MAX = 0x7FFFFFFF
HEADER_UP_TO_MAGIC = LOG_OVERHEAD + 5  # Kafka's Records.HEADER_SIZE_UP_TO_MAGIC
MIN_RECORD_OVERHEAD = 14  # LegacyRecord.RECORD_OVERHEAD_V0: the smallest size Kafka accepts
_OFFSET_SIZE = struct.Struct(">qi")
_CONTROL_KEY = struct.Struct(">hh")
_MARKER_VALUE = struct.Struct(">hi")
CONTROL_TYPES = {0: "ABORT", 1: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER", 4: "SNAPSHOT_FOOTER",
                 5: "KRAFT_VERSION", 6: "KRAFT_VOTERS"}


class LogDumpError(ValueError):
    """A segment DumpLogSegments itself would stop on (a batch size below any record's)."""


@dataclass(frozen=True, slots=True)
class LogDumpOptions:
    deep_iteration: bool = False
    print_data_log: bool = False
    parser: Parser = string_parser
    max_bytes: int = INT32_MAX


@dataclass(slots=True)
class _Walk:
    """What the walk of one file collects besides the batches."""

    last_offset: int = -1
    non_consecutive: list[tuple[int, int]] = field(default_factory=list)


def _read(path: str) -> bytes | mmap.mmap:
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return b""
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


def dump_log(path: str, options: LogDumpOptions) -> dict[str, Any]:
    """``{"logStartOffset", "batches": [...], "trailingBytes", "nonConsecutiveOffsets"}``."""
    data = _read(path)
    try:
        return _dump(path, data, options)
    finally:
        if isinstance(data, mmap.mmap):
            data.close()


def _dump(path: str, data: bytes | mmap.mmap, options: LogDumpOptions) -> dict[str, Any]:
    name = os.path.basename(path)
    end = min(len(data), options.max_bytes)
    deep = options.deep_iteration or options.print_data_log
    walk = _Walk()
    batches: list[dict[str, Any]] = []
    pos = 0
    while end - pos >= HEADER_UP_TO_MAGIC:
        _base, length = _OFFSET_SIZE.unpack_from(data, pos)
        if length < MIN_RECORD_OVERHEAD:
            raise LogDumpError(f"Found record size {length} smaller than minimum record overhead "
                               f"({MIN_RECORD_OVERHEAD}) in file {path}.")
        size = length + LOG_OVERHEAD
        if pos + size > end:
            break
        magic = data[pos + MAGIC_OFFSET]
        if magic < 2 or size < HEADER_SIZE:
            raise LogDumpError(f"{name}: a magic {magic} batch of {size} bytes at position {pos} "
                               "(only magic 2 record batches are read)")
        raw = bytes(data[pos : pos + size])
        batch = batch_fields(raw, pos)
        if deep:
            batch["records"] = _records(raw, batch, options, walk)
        batches.append(batch)
        pos += size
    return {
        "logStartOffset": int(name.split(".")[0]),
        "batches": batches,
        "trailingBytes": end - pos if options.max_bytes == INT32_MAX else 0,
        "nonConsecutiveOffsets": [list(p) for p in walk.non_consecutive],
    }


def batch_fields(raw: bytes, position: int) -> dict[str, Any]:
    """The fields of ``printBatchLevel`` for a magic 2 batch, in its order."""
    info = read_header(raw, 0)
    attrs = info.attributes
    crc = struct.unpack_from(">I", raw, 17)[0]
    return {
        "baseOffset": info.base_offset,
        "lastOffset": info.last_offset,
        "count": info.records_count,
        "baseSequence": info.base_sequence,
        "lastSequence": info.last_sequence,
        "producerId": info.producer_id,
        "producerEpoch": info.producer_epoch,
        "partitionLeaderEpoch": info.partition_leader_epoch,
        "isTransactional": bool(attrs & TRANSACTIONAL_FLAG),
        "isControl": bool(attrs & CONTROL_FLAG),
        "deleteHorizonMs": info.base_timestamp if attrs & DELETE_HORIZON_FLAG else None,
        "position": position,
        "timestampType": "LogAppendTime" if attrs & TIMESTAMP_TYPE_MASK else "CreateTime",
        "maxTimestamp": info.max_timestamp,
        "size": len(raw),
        "magic": raw[MAGIC_OFFSET],
        "compresscodec": compression.NAMES.get(attrs & 0x07, f"unknown({attrs & 0x07})"),
        "crc": crc,
        "isvalid": crc32c(raw[CRC_START:]) == crc,
    }


def _records(raw: bytes, batch: dict[str, Any], options: LogDumpOptions, walk: _Walk) -> list[dict[str, Any]]:
    try:
        records = decode_records(raw)
    except (CorruptRecords, compression.CompressionError) as e:
        return [{"error": str(e)}]
    out = []
    base_seq = batch["baseSequence"]
    for rec in records:
        # Kafka 4.3.1 compares the first record too, with -1: a segment that does not start at
        # offset 0 is reported as "-1 is followed by <base offset>". Kept, to print what it prints.
        if rec.offset != walk.last_offset + 1:
            walk.non_consecutive.append((walk.last_offset, rec.offset))
        walk.last_offset = rec.offset
        entry: dict[str, Any] = {
            "offset": rec.offset,
            "timestamp": rec.timestamp,
            "keySize": -1 if rec.key is None else len(rec.key),
            "valueSize": -1 if rec.value is None else len(rec.value),
            "sequence": -1 if base_seq < 0 else increment_sequence(base_seq, rec.offset - batch["baseOffset"]),
            "headerKeys": [name for name, _value in rec.headers],
        }
        if batch["isControl"]:
            entry.update(control_fields(rec.key, rec.value))
        elif options.print_data_log:
            key, payload = options.parser(rec.offset, rec.key, rec.value)
            if key is not None:
                entry["key"] = key
            if payload is not None:
                entry["payload"] = payload
        out.append(entry)
    return out


def control_fields(key: bytes | None, value: bytes | None) -> dict[str, Any]:
    """A transaction marker's type and coordinator epoch (EndTransactionMarker), or the type of
    any other control record (ControlRecordType)."""
    if key is None or len(key) < 4:
        return {"controlError": f"Invalid value size found for end control record key. Must have at least 4 "
                                f"bytes, but found only {0 if key is None else len(key)}"}
    _version, type_id = _CONTROL_KEY.unpack_from(key, 0)
    name = CONTROL_TYPES.get(type_id, "UNKNOWN")
    if type_id in (0, 1) and value is not None and len(value) >= _MARKER_VALUE.size:
        _v, coordinator_epoch = _MARKER_VALUE.unpack_from(value, 0)
        return {"endTxnMarker": name, "coordinatorEpoch": coordinator_epoch}
    return {"controlType": name, "controlTypeId": type_id}
