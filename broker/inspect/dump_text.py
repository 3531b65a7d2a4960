"""The text ``kafka-dump-log.sh`` prints, written from the dicts of ``broker.inspect.files``:
the same lines, labels, spacing and value forms (``OptionalLong.empty`` / ``OptionalLong[n]``,
``true``/``false``, header keys as ``[a,b]``, coordinator records as Jackson's compact JSON), on
the same streams: the dump on stdout, problems found while checking indexes and offsets on
stderr after every file, as DumpLogSegments prints them at the end of its run.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from broker.inspect import jackson
from broker.inspect.files import FileOptions
from coordinator.group.java_hash import java_string_hash


def _java(value: Any) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    return str(value)


def optional_long(value: int | None) -> str:
    return "OptionalLong.empty" if value is None else f"OptionalLong[{value}]"


def _parsed(value: Any) -> str:
    return value if isinstance(value, str) else jackson.dumps(value)


def batch_line(b: dict[str, Any]) -> str:
    return (f"baseOffset: {b['baseOffset']} lastOffset: {b['lastOffset']} count: {b['count']} "
            f"baseSequence: {b['baseSequence']} lastSequence: {b['lastSequence']} producerId: {b['producerId']} "
            f"producerEpoch: {b['producerEpoch']} partitionLeaderEpoch: {b['partitionLeaderEpoch']} "
            f"isTransactional: {_java(b['isTransactional'])} isControl: {_java(b['isControl'])} "
            f"deleteHorizonMs: {optional_long(b['deleteHorizonMs'])} position: {b['position']} "
            f"{b['timestampType']}: {b['maxTimestamp']} size: {b['size']} magic: {b['magic']} "
            f"compresscodec: {b['compresscodec']} crc: {b['crc']} isvalid: {_java(b['isvalid'])}")


def record_line(r: dict[str, Any], timestamp_type: str, skip_metadata: bool = False) -> str:
    if "error" in r:
        return f"| {r['error']}"
    parts = []
    prefix = "| "
    if not skip_metadata:
        parts.append(f"| offset: {r['offset']} {timestamp_type}: {r['timestamp']} keySize: {r['keySize']} "
                     f"valueSize: {r['valueSize']} sequence: {r['sequence']} "
                     f"headerKeys: [{','.join(r['headerKeys'])}]")
        if "endTxnMarker" in r:
            parts.append(f" endTxnMarker: {r['endTxnMarker']} coordinatorEpoch: {r['coordinatorEpoch']}")
        elif "controlType" in r:
            parts.append(f" controlType: {r['controlType']}({r['controlTypeId']})")
        elif "controlError" in r:
            parts.append(f" {r['controlError']}")
        prefix = " "
    if "key" in r:
        parts.append(f"{prefix}key: {_parsed(r['key'])}")
        prefix = " "
    if "payload" in r:
        parts.append(f"{prefix}payload: {_parsed(r['payload'])}")
    return "".join(parts)


def dump_lines(d: dict[str, Any], options: FileOptions) -> Iterator[str]:
    """The stdout lines of one file, ``Dumping <file>`` first."""
    yield f"Dumping {d['file']}"
    kind = d["kind"]
    if kind == "log":
        yield f"Log starting offset: {d['logStartOffset']}"
        for b in d["batches"]:
            yield batch_line(b)
            for r in b.get("records", ()):
                yield record_line(r, b["timestampType"], options.skip_record_metadata)
        if d["trailingBytes"] > 0:
            yield f"Found {d['trailingBytes']} invalid bytes at the end of {d['file'].rsplit('/', 1)[-1]}"
    elif kind == "index":
        if "sanity" in d:
            if d["empty"]:
                yield f"{d['file']} is empty."
            elif d["sanity"]:
                yield f"{d['file']} passed sanity check."
        elif not d["entries"]:
            yield f"{d['file']} is empty."
        elif not options.verify_index_only:
            yield from (f"offset: {e['offset']} position: {e['position']}" for e in d["entries"])
    elif kind == "timeindex":
        if d.get("sanity"):
            yield f"{d['file']} passed sanity check."
        elif not options.verify_index_only:
            yield from (f"timestamp: {e['timestamp']} offset: {e['offset']}" for e in d["entries"])
    elif kind == "txnindex":
        yield from (f"version: {e['version']} producerId: {e['producerId']} firstOffset: {e['firstOffset']} "
                    f"lastOffset: {e['lastOffset']} lastStableOffset: {e['lastStableOffset']}" for e in d["entries"])
    elif kind == "snapshot":
        for p in d["producers"]:
            line = (f"producerId: {p['producerId']} producerEpoch: {p['producerEpoch']} "
                    f"coordinatorEpoch: {p['coordinatorEpoch']} "
                    f"currentTxnFirstOffset: {optional_long(p['currentTxnFirstOffset'])} "
                    f"lastTimestamp: {p['lastTimestamp']}")
            if "lastOffset" in p:
                line += (f" firstSequence: {p['firstSequence']} lastSequence: {p['lastSequence']} "
                         f"lastOffset: {p['lastOffset']} offsetDelta: {p['offsetDelta']} timestamp: {p['timestamp']}")
            yield line


def immediate_errors(d: dict[str, Any]) -> Iterator[str]:
    """stderr lines DumpLogSegments prints while it reads the file."""
    if d["kind"] == "unknown":
        yield f"Ignoring unknown file {d['file']}"
    if d.get("error"):
        yield d["error"]
    if d.get("sanity") is False:
        yield f"{d['file']} failed sanity check (the broker would rebuild it)"


def java_hash_map_order(keys: list[str], *, compute_if_absent: bool = False) -> list[str]:
    """The order a java.util.HashMap of String keys, filled in this order, iterates them: by
    bucket (``(h ^ h >>> 16) & (capacity - 1)`` at the final capacity, 16 doubling whenever the
    size passes 3/4 of it), then by insertion within a bucket (resizing keeps each bucket's
    order): oldest first after ``put``, newest first after ``computeIfAbsent``, which puts a new
    key at the head of its bucket (DumpLogSegments fills its maps that way)."""
    capacity = 16
    while len(keys) > capacity * 3 // 4:
        capacity *= 2

    def bucket(key: str) -> int:
        h = java_string_hash(key) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    step = -1 if compute_if_absent else 1
    return [k for _i, k in sorted(enumerate(keys), key=lambda ik: (bucket(ik[1]), step * ik[0]))]


def _by_file(dumps: list[dict[str, Any]], field: str) -> list[tuple[str, list[list[int]]]]:
    """The files with problems of one kind, in the order DumpLogSegments' HashMap lists them."""
    found = {d["path"]: d[field] for d in dumps if d.get(field)}
    return [(path, found[path]) for path in java_hash_map_order(list(found), compute_if_absent=True)]


def _pairs(pairs: list[list[int]]) -> dict[int, int]:
    """A Java Map<Long, Long> filled with these pairs (a later pair replaces an earlier key)."""
    return {a: b for a, b in pairs}


def final_errors(dumps: Iterable[dict[str, Any]]) -> Iterator[str]:
    """stderr lines DumpLogSegments prints after every file: index mismatches (by index offset,
    highest first), time index problems (mismatched timestamps, out of order, offsets not found),
    then non-consecutive offsets (by offset)."""
    dumps = list(dumps)
    for path, pairs in _by_file(dumps, "mismatches"):
        yield f"Mismatches in :{path}"
        yield from (f"  Index offset: {i}, log offset: {o}" for i, o in sorted(_pairs(pairs).items(), reverse=True))
    for path, pairs in _by_file(dumps, "timestampMismatches"):
        yield f"Found timestamp mismatch in :{path}"
        yield from (f"  Index timestamp: {i}, log timestamp: {t}" for i, t in pairs)
    for path, pairs in _by_file(dumps, "outOfOrder"):
        yield f"Found out of order timestamp in :{path}"
        yield from (f"  Index timestamp: {i}, Previously indexed timestamp: {t}" for i, t in pairs)
    for path, pairs in _by_file(dumps, "notFound"):
        yield f"The following indexed offsets are not found in :{path}"
        yield from (f"Indexed offset: {i}, found log offset: {o}" for i, o in pairs)
    for path, pairs in _by_file(dumps, "nonConsecutiveOffsets"):
        yield f"Non-consecutive offsets in {path}"
        yield from (f"  {a} is followed by {b}" for a, b in sorted(_pairs(pairs).items()))
