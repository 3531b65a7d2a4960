"""Finding the partitions of a data directory, offline (the broker stopped or not: files are only
read): ``log.dirs`` as the broker takes it (comma-separated), a ``--brokers N`` data directory
(``broker-<i>/`` under it) standing for the log dirs of each broker, and in each log dir the
partition directories ``<topic>-<partition>`` with their segments, snapshots and checkpoints.

Directories Kafka leaves behind and no longer serves (``-delete``, ``-future``, ``-stray``) are not
partitions and are skipped.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from storage.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    PARTITION_METADATA,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    read_offset_checkpoint,
    read_partition_metadata,
    uuid_to_kafka_str,
)
from storage.errors import CorruptCheckpoint

_PARTITION_DIR = re.compile(r"(.+)-(\d+)")
_BROKER_DIR = re.compile(r"broker-(\d+)")
_FILE_OFFSET = re.compile(r"(\d{20})\.(log|snapshot)")


@dataclass(frozen=True, slots=True)
class PartitionDir:
    topic: str
    partition: int
    path: str
    log_dir: str
    broker: int | None  # the broker of a --brokers N data directory

    def files(self, suffix: str) -> list[tuple[int, str]]:
        """(offset in the name, path) of the ``<20 digits>.<suffix>`` files, by offset."""
        out = []
        for name in os.listdir(self.path):
            m = _FILE_OFFSET.fullmatch(name)
            if m and m.group(2) == suffix:
                out.append((int(m.group(1)), os.path.join(self.path, name)))
        return sorted(out)

    def topic_id(self) -> str | None:
        try:
            u = read_partition_metadata(os.path.join(self.path, PARTITION_METADATA))
        except CorruptCheckpoint:
            return None
        return None if u is None else uuid_to_kafka_str(u)


def log_dirs(spec: str) -> list[tuple[str, int | None]]:
    """(log dir, broker id or None) for ``spec``: comma-separated paths, each a log dir or a
    ``--brokers N`` data directory of ``broker-<i>`` log dirs (one without a ``meta.properties``
    of its own)."""
    out: list[tuple[str, int | None]] = []
    for path in filter(None, (p.strip() for p in spec.split(","))):
        if not os.path.isdir(path):
            raise FileNotFoundError(f"no such data directory: {path}")
        brokers = sorted((int(m.group(1)), os.path.join(path, n)) for n in os.listdir(path)
                         if (m := _BROKER_DIR.fullmatch(n)) and os.path.isdir(os.path.join(path, n)))
        if brokers and not os.path.exists(os.path.join(path, "meta.properties")):
            out += [(d, b) for b, d in brokers]
        else:
            out.append((path, None))
    return out


def partition_dirs(spec: str, topics: set[str] | None = None) -> list[PartitionDir]:
    """Every partition directory of the log dirs of ``spec`` (only ``topics`` when given), sorted by
    broker, topic and partition."""
    out = []
    for log_dir, broker in log_dirs(spec):
        for name in os.listdir(log_dir):
            m = _PARTITION_DIR.fullmatch(name)
            path = os.path.join(log_dir, name)
            if not m or not os.path.isdir(path):
                continue
            if topics is not None and m.group(1) not in topics:
                continue
            out.append(PartitionDir(m.group(1), int(m.group(2)), path, log_dir, broker))
    return sorted(out, key=lambda p: (p.broker or 0, p.topic, p.partition))


def checkpoint(log_dir: str, name: str) -> dict[tuple[str, int], int]:
    """A log dir's offset checkpoint (``recovery-point-offset-checkpoint`` ...), empty if missing
    or unreadable."""
    try:
        return read_offset_checkpoint(os.path.join(log_dir, name))
    except CorruptCheckpoint:
        return {}


CHECKPOINTS = {
    "logStartOffset": LOG_START_OFFSET_CHECKPOINT,
    "recoveryPoint": RECOVERY_POINT_CHECKPOINT,
    "highWatermark": REPLICATION_OFFSET_CHECKPOINT,
}
