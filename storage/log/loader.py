"""Opening a partition's directory (Kafka's LogLoader): finish or roll back what a crash
interrupted (a cleaner swap, a deletion, an index write), rebuild missing or torn indexes, and
after an unclean shutdown re-validate every segment from the recovery point on, cutting the log at
the first torn or corrupt batch. ``PartitionLog.open`` builds the log from what this returns.
"""

from __future__ import annotations

import os
import struct
import uuid
from bisect import bisect_right
from dataclasses import dataclass

import structlog

from protocol.records import HEADER_SIZE, LOG_OVERHEAD, MIN_BATCH_LENGTH, BatchInfo
from storage import checkpoints
from storage.errors import InconsistentTopicId
from storage.log.leader_epoch import LeaderEpochCache
from storage.log.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    LogSegment,
)
from storage.log_config import LogConfig

log = structlog.get_logger(__name__)

_BASE_AND_LENGTH = struct.Struct(">qi")
_LAST_DELTA = struct.Struct(">i")


@dataclass(slots=True)
class LoadedLog:
    """What a load found (Kafka's LoadedLogOffsets plus the segments and the epoch cache)."""

    segments: list[LogSegment]
    epoch_cache: LeaderEpochCache
    topic_id: uuid.UUID | None
    log_start_offset: int
    recovery_point: int


def load(
    directory: str,
    topic: str,
    partition: int,
    config: LogConfig,
    *,
    topic_id: uuid.UUID | bytes | str | None,
    recovery_point: int,
    needs_recovery: bool,
    now: int,
    log_start_offset: int,
    leader_epoch: int | None,
) -> LoadedLog:
    """Load (or create) the partition directory.

    ``leader_epoch``: become leader at that epoch when the log records none (Kafka's makeLeader on
    an empty epoch cache), with one checkpoint write for the whole load.

    Leftover .deleted/.cleaned/.swap/.tmp files and orphan indexes are removed. A segment with a
    missing or torn index is rebuilt. With ``needs_recovery`` (no clean shutdown) every segment from
    the one containing ``recovery_point`` on is re-validated; on the first corruption the segment
    is cut there and all later segments are deleted (Kafka's LogLoader.recoverLog).
    """
    os.makedirs(directory, exist_ok=True)
    tid = checkpoints.to_uuid(topic_id) if topic_id is not None else None
    meta_path = os.path.join(directory, checkpoints.PARTITION_METADATA)
    stored = checkpoints.read_partition_metadata(meta_path)
    if stored is not None and tid is not None and stored != tid:
        raise InconsistentTopicId(
            f"Tried to assign topic ID {checkpoints.uuid_to_kafka_str(tid)} to log for {topic}-{partition}, "
            f"but log already contained topic ID {checkpoints.uuid_to_kafka_str(stored)}"
        )
    if stored is None and tid is not None:
        checkpoints.write_partition_metadata(meta_path, tid)
    tid = tid or stored

    bases = clean_directory(directory)
    segments = [
        LogSegment(directory, b, index_interval_bytes=config.index_interval_bytes,
                   max_index_size=config.segment_index_bytes, now_ms=now)
        for b in bases
    ]
    epoch_cache = LeaderEpochCache.load(os.path.join(directory, checkpoints.LEADER_EPOCH_CHECKPOINT))

    def on_batch(info: BatchInfo) -> None:
        ple = info.partition_leader_epoch
        latest = epoch_cache.latest_epoch
        if ple >= 0 and (latest is None or ple > latest):
            epoch_cache.assign(ple, info.base_offset, flush=False)  # written once, below

    rebuilt: dict[int, int] = {}  # base offset -> bytes truncated by the rebuild
    for seg in segments:
        if seg.needs_rebuild():
            log.warning(
                "segment_index_rebuild", topic=topic, partition=partition, base_offset=seg.base_offset
            )
            rebuilt[seg.base_offset] = seg.recover(on_batch=on_batch)

    if needs_recovery and segments:
        start = max(bisect_right(bases, recovery_point) - 1, 0)
        for i in range(start, len(segments)):
            seg = segments[i]
            if seg.base_offset in rebuilt:
                truncated = rebuilt[seg.base_offset]
            else:
                truncated = seg.recover(on_batch=on_batch)
            if truncated > 0:
                log.warning(
                    "log_recovery_truncated",
                    topic=topic,
                    partition=partition,
                    base_offset=seg.base_offset,
                    truncated_bytes=truncated,
                    next_offset=seg.next_offset,
                    deleted_segments=[s.base_offset for s in segments[i + 1 :]],
                )
                for later in segments[i + 1 :]:
                    later.delete()
                del segments[i + 1 :]
                break
    elif segments:
        # Trusted files: only make sure the active tail ends on a batch boundary.
        last = segments[-1]
        torn = last.trim_torn_tail()
        if torn:
            log.warning(
                "log_tail_truncated",
                topic=topic,
                partition=partition,
                base_offset=last.base_offset,
                truncated_bytes=torn,
            )

    def new_segment(base_offset: int) -> LogSegment:
        return LogSegment.create(directory, base_offset, index_interval_bytes=config.index_interval_bytes,
                                 max_index_size=config.segment_index_bytes, now_ms=now)

    if not segments:
        segments.append(new_segment(log_start_offset))
    leo = segments[-1].next_offset
    if leo < log_start_offset and segments[-1].size == 0 and len(segments) == 1:
        # The checkpointed start offset is past the (empty) log: restart the log there.
        segments[0].delete()
        segments[0] = new_segment(log_start_offset)
        leo = log_start_offset
    start_offset = max(log_start_offset, segments[0].base_offset)
    start_offset = min(start_offset, leo)
    epoch_cache.truncate_from_end(leo, flush=False)
    epoch_cache.truncate_from_start(start_offset, flush=False)
    if leader_epoch is not None and epoch_cache.latest_epoch is None:
        epoch_cache.assign(leader_epoch, leo, flush=False)
    epoch_cache.flush()
    rp = leo if not needs_recovery else min(recovery_point, leo)
    return LoadedLog(segments, epoch_cache, tid, start_offset, rp)


def _next_offset_of_file(path: str, base_offset: int) -> int:
    """The offset after the last whole batch of a .log file (``base_offset`` when it has none)."""
    nxt = base_offset
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    while len(data) - pos >= HEADER_SIZE:
        base, length = _BASE_AND_LENGTH.unpack_from(data, pos)
        if length < MIN_BATCH_LENGTH or pos + length + LOG_OVERHEAD > len(data):
            break
        nxt = base + _LAST_DELTA.unpack_from(data, pos + 23)[0] + 1
        pos += length + LOG_OVERHEAD
    return nxt


def clean_directory(directory: str) -> list[int]:
    """Delete leftovers of interrupted operations, finish or roll back an interrupted cleaner
    swap (see ``replace_segments`` for the protocol), drop orphan indexes; return the base
    offsets of the .log files."""
    segment_kinds = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
    regular: dict[int, dict[str, str]] = {}
    cleaned: dict[int, list[str]] = {}
    swaps: dict[int, dict[str, str]] = {}
    changed = False

    def unlink(path: str) -> None:
        nonlocal changed
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        changed = True

    def path_of(base: int, kind: str) -> str:
        return os.path.join(directory, f"{base:020d}{kind}")

    for name in os.listdir(directory):
        path = os.path.join(directory, name)
        stem, _dot, rest = name.partition(".")
        numbered = stem.isdigit() and len(stem) == 20
        kind = "." + rest
        if name.endswith((DELETED_SUFFIX, ".tmp")) or (
            not numbered and name.endswith((CLEANED_SUFFIX, SWAP_SUFFIX))
        ):
            unlink(path)
        elif not numbered:
            continue
        elif kind.endswith(CLEANED_SUFFIX):
            cleaned.setdefault(int(stem), []).append(path)
        elif kind.endswith(SWAP_SUFFIX) and kind[: -len(SWAP_SUFFIX)] in segment_kinds:
            swaps.setdefault(int(stem), {})[kind[: -len(SWAP_SUFFIX)]] = path
        elif kind.endswith(SWAP_SUFFIX):
            unlink(path)
        elif kind in segment_kinds:
            regular.setdefault(int(stem), {})[kind] = path

    # A cleaning that never reached its commit point: drop its output, the old files stand.
    for base, paths in cleaned.items():
        for path in paths:
            unlink(path)
        if LOG_SUFFIX + CLEANED_SUFFIX in {p[-len(LOG_SUFFIX + CLEANED_SUFFIX) :] for p in paths}:
            kinds = swaps.get(base, {})
            if LOG_SUFFIX not in kinds:
                for path in swaps.pop(base, {}).values():
                    unlink(path)
        log.warning("cleaner_output_discarded", dir=directory, base_offset=base)

    for base in sorted(swaps):
        kinds = swaps[base]
        if LOG_SUFFIX in kinds:
            # Committed: every unsuffixed segment file in [base, end of the swap file) is old.
            end = max(_next_offset_of_file(kinds[LOG_SUFFIX], base), base + 1)
            for old_base in [b for b in regular if base <= b < end]:
                for path in regular.pop(old_base).values():
                    unlink(path)
            order = [LOG_SUFFIX] + [k for k in kinds if k != LOG_SUFFIX]
            log.warning("cleaner_swap_completed", dir=directory, base_offset=base, end_offset=end)
        elif LOG_SUFFIX in regular.get(base, {}):
            # Interrupted in the last phase: the .log is already in place, finish its indexes.
            order = list(kinds)
        else:
            for path in kinds.values():
                unlink(path)
            continue
        for kind in order:
            os.replace(kinds[kind], path_of(base, kind))
            regular.setdefault(base, {})[kind] = path_of(base, kind)
            changed = True

    for base in [b for b, kinds in regular.items() if LOG_SUFFIX not in kinds]:
        for path in regular.pop(base).values():
            log.info("orphan_index_deleted", path=path)
            unlink(path)
    if changed:
        checkpoints.fsync_dir(directory)
    return sorted(regular)
