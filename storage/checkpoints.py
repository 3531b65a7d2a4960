"""Kafka's small metadata files, byte-compatible so Kafka tools and brokers can read our log dirs.

- offset checkpoints (recovery-point-offset-checkpoint, log-start-offset-checkpoint,
  replication-offset-checkpoint): ``0\\n<count>\\n<topic> <partition> <offset>\\n...``
- leader-epoch-checkpoint: ``0\\n<count>\\n<epoch> <startOffset>\\n...``
- partition.metadata: ``version: 0\\ntopic_id: <Uuid.toString>\\n``
- meta.properties: Java properties
- .kafka_cleanshutdown: ``{"version":0,"brokerEpoch":N}``

Every write goes to ``<file>.tmp``, is fsynced, renamed over the target and the directory fsynced
(Kafka's CheckpointFile + Utils.atomicMoveWithFallback), so a crash leaves the old or the new file.
"""

from __future__ import annotations

import base64
import json
import os
import time
import uuid
from collections.abc import Iterable, Mapping

from storage.errors import CorruptCheckpoint

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"
META_PROPERTIES = "meta.properties"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"

CHECKPOINT_VERSION = 0


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: str, data: bytes, *, fsync: bool = True) -> None:
    """tmp file, fsync, rename, fsync dir: the file is either the old or the new content."""
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if fsync:
        fsync_dir(os.path.dirname(os.path.abspath(path)))


def _read_checkpoint_lines(path: str, fields: int) -> list[list[str]] | None:
    """The entry lines of a version-0 checkpoint file, or None if the file does not exist."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    try:
        version = int(lines[0])
        count = int(lines[1])
    except (IndexError, ValueError):
        raise CorruptCheckpoint(f"Malformed header in checkpoint file {path}") from None
    if version != CHECKPOINT_VERSION:
        raise CorruptCheckpoint(f"Unrecognized version {version} of checkpoint file {path}")
    entries = lines[2:]
    if len(entries) != count:
        raise CorruptCheckpoint(
            f"Expected {count} entries in checkpoint file {path} but found {len(entries)}"
        )
    out = []
    for line in entries:
        parts = line.split(" ")
        if len(parts) != fields:
            raise CorruptCheckpoint(f"Malformed line in checkpoint file {path}: {line!r}")
        out.append(parts)
    return out


def _format_checkpoint(lines: list[str]) -> bytes:
    return (f"{CHECKPOINT_VERSION}\n{len(lines)}\n" + "".join(line + "\n" for line in lines)).encode()


def read_offset_checkpoint(path: str) -> dict[tuple[str, int], int]:
    """{(topic, partition): offset}; empty when the file is missing."""
    lines = _read_checkpoint_lines(path, 3)
    if lines is None:
        return {}
    try:
        return {(t, int(p)): int(o) for t, p, o in lines}
    except ValueError:
        raise CorruptCheckpoint(f"Malformed line in checkpoint file {path}") from None


def write_offset_checkpoint(path: str, offsets: Mapping[tuple[str, int], int], *, fsync: bool = True) -> None:
    lines = [f"{t} {p} {o}" for (t, p), o in offsets.items()]
    write_atomic(path, _format_checkpoint(lines), fsync=fsync)


def read_leader_epoch_checkpoint(path: str) -> list[tuple[int, int]]:
    """[(epoch, start_offset)] in file order; empty when the file is missing."""
    lines = _read_checkpoint_lines(path, 2)
    if lines is None:
        return []
    try:
        return [(int(e), int(o)) for e, o in lines]
    except ValueError:
        raise CorruptCheckpoint(f"Malformed line in checkpoint file {path}") from None


def write_leader_epoch_checkpoint(
    path: str, entries: Iterable[tuple[int, int]], *, fsync: bool = True
) -> None:
    write_atomic(path, _format_checkpoint([f"{e} {o}" for e, o in entries]), fsync=fsync)


# --- Kafka Uuid ---------------------------------------------------------------------------------


def uuid_to_kafka_str(u: uuid.UUID | bytes) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, without padding."""
    raw = u.bytes if isinstance(u, uuid.UUID) else bytes(u)
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def kafka_str_to_uuid(s: str) -> uuid.UUID:
    """Kafka's Uuid.fromString."""
    try:
        raw = base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
    except ValueError:
        raise ValueError(f"Invalid Kafka uuid {s!r}") from None
    if len(raw) != 16:
        raise ValueError(f"Invalid Kafka uuid {s!r}: {len(raw)} bytes")
    return uuid.UUID(bytes=raw)


def to_uuid(value: uuid.UUID | bytes | str) -> uuid.UUID:
    """Accept a topic id as UUID, 16 raw bytes, or Kafka's string form."""
    if isinstance(value, uuid.UUID):
        return value
    if isinstance(value, bytes | bytearray):
        return uuid.UUID(bytes=bytes(value))
    return kafka_str_to_uuid(value)


def random_kafka_uuid() -> uuid.UUID:
    """Kafka's Uuid.randomUuid: never one of the 100 reserved ids, never a string starting with '-'."""
    while True:
        u = uuid.uuid4()
        if u.int >= 100 and not uuid_to_kafka_str(u).startswith("-"):
            return u


# --- partition.metadata -------------------------------------------------------------------------


def read_partition_metadata(path: str) -> uuid.UUID | None:
    """The topic id recorded in partition.metadata, or None when the file is missing."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
    except FileNotFoundError:
        return None
    try:
        k1, v1 = lines[0].split(": ", 1)
        k2, v2 = lines[1].split(": ", 1)
        if k1 != "version" or k2 != "topic_id":
            raise ValueError
        if int(v1) != 0:
            raise CorruptCheckpoint(f"Unrecognized version {v1} of partition metadata file {path}")
        return kafka_str_to_uuid(v2.strip())
    except (IndexError, ValueError):
        raise CorruptCheckpoint(f"Malformed partition metadata file {path}") from None


def write_partition_metadata(path: str, topic_id: uuid.UUID | bytes | str) -> None:
    write_atomic(path, f"version: 0\ntopic_id: {uuid_to_kafka_str(to_uuid(topic_id))}\n".encode())


# --- meta.properties (java.util.Properties) -----------------------------------------------------


def _unescape(s: str) -> str:
    out = []
    i = 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            n = s[i + 1]
            i += 2
            if n == "u" and i + 4 <= len(s):
                out.append(chr(int(s[i : i + 4], 16)))
                i += 4
            else:
                out.append({"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(n, n))
            continue
        out.append(c)
        i += 1
    return "".join(out)


def parse_properties(text: str) -> dict[str, str]:
    """Java Properties.load: comments (#, !), key/value separated by '=', ':' or whitespace."""
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = (pending + raw.lstrip()) if pending else raw.lstrip()
        if not pending and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending = line[:-1]
            continue
        pending = ""
        logical.append(line)
    if pending:
        logical.append(pending)
    props: dict[str, str] = {}
    for line in logical:
        i = 0
        key_chars = []
        while i < len(line):
            c = line[i]
            if c == "\\" and i + 1 < len(line):
                key_chars.append(line[i : i + 2])
                i += 2
                continue
            if c in "=: \t\f":
                break
            key_chars.append(c)
            i += 1
        rest = line[i:].lstrip(" \t\f")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" \t\f")
        props[_unescape("".join(key_chars))] = _unescape(rest)
    return props


def _escape(s: str, is_key: bool) -> str:
    out = []
    for i, c in enumerate(s):
        if c == " " and (is_key or i == 0):
            out.append("\\ ")
        elif c in "\\=:#!":
            out.append("\\" + c)
        elif c == "\t":
            out.append("\\t")
        elif c == "\n":
            out.append("\\n")
        elif c == "\r":
            out.append("\\r")
        elif c == "\f":
            out.append("\\f")
        elif ord(c) < 0x20 or ord(c) > 0x7E:
            out.append(f"\\u{ord(c):04X}")
        else:
            out.append(c)
    return "".join(out)


def format_properties(props: Mapping[str, str]) -> str:
    """Java Properties.store(writer, ""): an empty comment line, a date comment, then key=value."""
    date = time.strftime("%a %b %d %H:%M:%S %Z %Y")
    lines = ["#", "#" + date]
    lines += [f"{_escape(k, True)}={_escape(str(v), False)}" for k, v in props.items()]
    return "\n".join(lines) + "\n"


def read_meta_properties(path: str) -> dict[str, str] | None:
    """meta.properties of a log dir (version, cluster.id, node.id, directory.id), None if missing."""
    try:
        with open(path, encoding="utf-8") as f:
            return parse_properties(f.read())
    except FileNotFoundError:
        return None


def write_meta_properties(path: str, props: Mapping[str, str]) -> None:
    write_atomic(path, format_properties(props).encode())


# --- .kafka_cleanshutdown ----------------------------------------------------------------------


def write_clean_shutdown(log_dir: str, broker_epoch: int = -1) -> None:
    """CleanShutdownFileHandler.write: a JSON body, fsynced; its presence means 'skip recovery'."""
    body = json.dumps({"version": 0, "brokerEpoch": broker_epoch}, separators=(",", ":")).encode()
    write_atomic(os.path.join(log_dir, CLEAN_SHUTDOWN_FILE), body)


def read_clean_shutdown(log_dir: str) -> int | None:
    """The broker epoch in the marker; None when there is no marker, -1 when it does not parse."""
    path = os.path.join(log_dir, CLEAN_SHUTDOWN_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return None
    try:
        return int(json.loads(text)["brokerEpoch"])
    except (ValueError, KeyError, TypeError):
        return -1
