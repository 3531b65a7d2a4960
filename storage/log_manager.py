"""LogManager: every partition log on this broker, across one or more log dirs (Kafka's LogManager).

Start-up reads each dir's ``.kafka_cleanshutdown`` marker (present: trust the files, skip recovery;
it is deleted at once so a crash during this run forces recovery next time), the
recovery-point-offset-checkpoint and log-start-offset-checkpoint, and opens every
``<topic>-<partition>`` directory. Periodic work (checkpoint, flush_dirty, run_retention) is plain
methods the broker's event loop schedules. Shutdown closes every log, writes the checkpoints and the
clean-shutdown marker.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import structlog

from storage import checkpoints
from storage.clock import SYSTEM_CLOCK, Clock
from storage.errors import CorruptCheckpoint, KafkaStorageError
from storage.log.partition_log import PartitionLog
from storage.log_config import LogConfig, validate_topic_configs

log = structlog.get_logger(__name__)

DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
STRAY_DIR_SUFFIX = "-stray"
# This single node leads every partition at epoch 0. Like Partition.makeLeader, a log with no epoch
# records the epoch's start (its log end), so OffsetForLeaderEpoch answers even an empty log.
LEADER_EPOCH = 0
LOCK_FILE = ".lock"
_PARTITION_DIR = re.compile(r"^(.+)-(\d+)$")
_DELETE_DIR = re.compile(r"^(.+)-(\d+)\.([0-9a-f]{32})-delete$")

TopicOverrides = Callable[[str], Mapping[str, Any]]


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """``<topic>-<partition>`` -> (topic, partition); None for anything else."""
    m = _PARTITION_DIR.match(name)
    if not m or name.endswith((DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX)):
        return None
    return m.group(1), int(m.group(2))


def delete_dir_name(topic: str, partition: int, dir_suffix: str = DELETE_DIR_SUFFIX) -> str:
    """Kafka's logDeleteDirName (logStrayDirName with ``-stray``):
    ``<topic>-<partition>.<uuid hex>-delete``, capped at 255 chars."""
    suffix = f"-{partition}.{uuid.uuid4().hex}{dir_suffix}"
    return topic[: 255 - len(suffix)] + suffix


class LogManager:
    """All partition logs of the broker. Not thread-safe: lives on the event loop."""

    def __init__(
        self,
        log_dirs: list[str],
        broker_defaults: Mapping[str, Any] | None = None,
        *,
        topic_overrides: TopicOverrides | None = None,
        producer_state_config: Mapping[str, int] | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        """``broker_defaults``: broker-level values keyed by topic config name (e.g.
        ``{"retention.ms": "3600000"}``). ``topic_overrides(topic)``: the topic's own overrides,
        used when logs are loaded at start-up (the broker keeps topic configs)."""
        if not log_dirs:
            raise ValueError("at least one log dir is required")
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        self.clock = clock  # every log it opens reads time from it
        self.broker_defaults: dict[str, Any] = dict(broker_defaults or {})
        validate_topic_configs(self.broker_defaults)
        self._topic_overrides = topic_overrides
        # ProducerStateManager settings (producer_id_expiration_ms, max_transaction_timeout_ms):
        # every log gets producer state, as Kafka's UnifiedLog always has a ProducerStateManager.
        self.producer_state_config = dict(producer_state_config or {})
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self._dir_of: dict[tuple[str, int], str] = {}
        self._locks: dict[str, int] = {}
        self.had_clean_shutdown: dict[str, bool] = {}
        self.checkpointed_high_watermarks: dict[tuple[str, int], int] = {}
        self.started = False

    # --- configuration -------------------------------------------------------------------------

    def config_for(self, overrides: Mapping[str, Any] | None = None) -> LogConfig:
        return LogConfig.from_overrides(self.broker_defaults, overrides or {})

    def _config_for_topic(self, topic: str) -> LogConfig:
        overrides = self._topic_overrides(topic) if self._topic_overrides is not None else {}
        return self.config_for(overrides)

    def update_topic_config(self, topic: str, overrides: Mapping[str, Any]) -> LogConfig:
        """Apply a topic's new overrides to its open logs (IncrementalAlterConfigs)."""
        cfg = self.config_for(overrides)
        for (t, _), plog in self._logs.items():
            if t == topic:
                plog.update_config(cfg)
        return cfg

    def update_broker_defaults(
        self, broker_defaults: Mapping[str, Any], overrides_of: TopicOverrides
    ) -> None:
        """New broker-level defaults: recompute every log's config."""
        validate_topic_configs(broker_defaults)
        self.broker_defaults = dict(broker_defaults)
        for (t, _), plog in self._logs.items():
            plog.update_config(self.config_for(overrides_of(t)))

    def update_producer_state_config(self, **config: int) -> None:
        """New ProducerStateManager settings (``producer_id_expiration_ms``, a dynamic broker
        config in Kafka): for the logs opened from now on and for every open one."""

        self.producer_state_config.update(config)
        for plog in self._logs.values():
            if plog.producer_state is not None:
                for name, value in config.items():
                    setattr(plog.producer_state.manager, name, value)

    # --- start-up ------------------------------------------------------------------------------

    def _lock_dir(self, d: str) -> None:
        fd = os.open(os.path.join(d, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise KafkaStorageError(
                f"Failed to acquire lock on file .lock in {d}. A Kafka instance in another process "
                "or thread is using this directory."
            ) from None
        self._locks[d] = fd

    def startup(self, now_ms: int | None = None) -> None:
        """Lock the dirs, load every partition log (recovering those without a clean shutdown)."""
        now = now_ms if now_ms is not None else self.clock.now_ms()
        configs: dict[str, LogConfig] = {}  # one per topic, not per partition
        for d in self.log_dirs:
            os.makedirs(d, exist_ok=True)
            self._lock_dir(d)
        for d in self.log_dirs:
            clean = checkpoints.read_clean_shutdown(d) is not None
            if clean:
                os.unlink(os.path.join(d, checkpoints.CLEAN_SHUTDOWN_FILE))
                checkpoints.fsync_dir(d)
            self.had_clean_shutdown[d] = clean
            recovery_points = self._read_checkpoint(d, checkpoints.RECOVERY_POINT_CHECKPOINT)
            log_starts = self._read_checkpoint(d, checkpoints.LOG_START_OFFSET_CHECKPOINT)
            # what a replicated partition starts from (ReplicaManager's highWatermarkCheckpoints)
            self.checkpointed_high_watermarks.update(self._read_checkpoint(d, checkpoints.REPLICATION_OFFSET_CHECKPOINT))
            for name in sorted(os.listdir(d)):
                path = os.path.join(d, name)
                if not os.path.isdir(path):
                    continue
                if _DELETE_DIR.match(name):
                    log.info("deleting_leftover_partition_dir", path=path)
                    shutil.rmtree(path, ignore_errors=True)
                    continue
                parsed = parse_partition_dir(name)
                if parsed is None:
                    if name.endswith((FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX)):
                        log.warning("skipping_partition_dir", path=path)
                    continue
                if parsed in self._logs:
                    raise KafkaStorageError(
                        f"Duplicate log directories for {parsed[0]}-{parsed[1]} are found in both "
                        f"{self._dir_of[parsed]} and {d}"
                    )
                topic, partition = parsed
                plog = PartitionLog.open(
                    path,
                    topic,
                    partition,
                    configs.get(topic) or configs.setdefault(topic, self._config_for_topic(topic)),
                    recovery_point=recovery_points.get(parsed, 0),
                    needs_recovery=not clean,
                    now_ms=now,
                    log_start_offset=log_starts.get(parsed, 0),
                    leader_epoch=LEADER_EPOCH,
                    clock=self.clock,
                )
                plog.open_producer_state(now, **self.producer_state_config)
                self._logs[parsed] = plog
                self._dir_of[parsed] = d
            log.info("log_dir_loaded", log_dir=d, clean_shutdown=clean, partitions=self._count_in(d))
        self.started = True

    @staticmethod
    def _read_checkpoint(d: str, name: str) -> dict[tuple[str, int], int]:
        try:
            return checkpoints.read_offset_checkpoint(os.path.join(d, name))
        except (CorruptCheckpoint, OSError) as e:
            log.warning("checkpoint_unreadable", log_dir=d, file=name, error=str(e))
            return {}

    def ensure_meta_properties(self, cluster_id: str, node_id: int) -> dict[str, dict[str, str]]:
        """Read or create each dir's meta.properties (version=1, cluster.id, node.id, directory.id);
        a dir belonging to another cluster or node is an error, as in Kafka."""
        out: dict[str, dict[str, str]] = {}
        for d in self.log_dirs:
            os.makedirs(d, exist_ok=True)
            path = os.path.join(d, checkpoints.META_PROPERTIES)
            props = checkpoints.read_meta_properties(path)
            if props is None:
                props = {
                    "cluster.id": cluster_id,
                    "directory.id": checkpoints.uuid_to_kafka_str(checkpoints.random_kafka_uuid()),
                    "node.id": str(node_id),
                    "version": "1",
                }
                checkpoints.write_meta_properties(path, props)
            else:
                if props.get("cluster.id") not in (None, cluster_id):
                    raise KafkaStorageError(
                        f"The Cluster ID {cluster_id} doesn't match stored clusterId {props.get('cluster.id')} "
                        f"in meta.properties of {d}"
                    )
                if props.get("node.id") not in (None, str(node_id)):
                    raise KafkaStorageError(
                        f"Stored node id {props.get('node.id')} doesn't match the configured node id {node_id} in {d}"
                    )
            out[d] = props
        return out

    # --- lookup / create / delete --------------------------------------------------------------

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def logs(self) -> Iterator[PartitionLog]:
        return iter(list(self._logs.values()))

    def partitions(self) -> list[tuple[str, int]]:
        return list(self._logs)

    def partitions_of(self, topic: str) -> list[int]:
        return sorted(p for t, p in self._logs if t == topic)

    def dir_of(self, topic: str, partition: int) -> str | None:
        return self._dir_of.get((topic, partition))

    def _count_in(self, d: str) -> int:
        return sum(1 for v in self._dir_of.values() if v == d)

    def _next_log_dir(self) -> str:
        """The dir holding the fewest partitions (Kafka's nextLogDirs), first listed on a tie."""
        return min(self.log_dirs, key=self._count_in)

    def create(
        self,
        topic: str,
        partition: int,
        config: LogConfig | None = None,
        topic_id: uuid.UUID | bytes | str | None = None,
        now_ms: int | None = None,
    ) -> PartitionLog:
        """Get or create the log (Kafka's getOrCreateLog); a new one goes to the least loaded dir."""
        key = (topic, partition)
        existing = self._logs.get(key)
        if existing is not None:
            return existing
        d = self._next_log_dir()
        plog = PartitionLog.open(
            os.path.join(d, f"{topic}-{partition}"),
            topic,
            partition,
            config if config is not None else self._config_for_topic(topic),
            topic_id=topic_id,
            recovery_point=0,
            needs_recovery=False,
            now_ms=now_ms,
            leader_epoch=LEADER_EPOCH,
            clock=self.clock,
        )
        checkpoints.fsync_dir(d)
        plog.open_producer_state(now_ms if now_ms is not None else self.clock.now_ms(), **self.producer_state_config)
        self._logs[key] = plog
        self._dir_of[key] = d
        log.info("log_created", topic=topic, partition=partition, log_dir=d)
        return plog

    def delete_partition(self, topic: str, partition: int, *, stray: bool = False) -> bool:
        """Rename the dir to ``<topic>-<partition>.<uuid>-delete`` then remove it (Kafka's asyncDelete).
        A ``stray`` log (a replica the cluster no longer assigns here, found at start-up) is renamed
        ``-stray`` and kept for the operator, as Kafka does."""
        key = (topic, partition)
        plog = self._logs.pop(key, None)
        if plog is None:
            return False
        d = self._dir_of.pop(key)
        if plog.producer_state is not None:
            plog.producer_state.on_delete()
            plog.producer_state = None
        plog.close_without_flush()
        doomed = os.path.join(d, delete_dir_name(topic, partition, STRAY_DIR_SUFFIX if stray else DELETE_DIR_SUFFIX))
        try:
            plog.rename_dir(doomed)
            checkpoints.fsync_dir(d)
        except OSError as e:
            raise KafkaStorageError(f"cannot rename {plog.dir} for deletion: {e}") from e
        if not stray:
            plog.delete()
        self._checkpoint_dir(d)
        log.info("log_deleted", topic=topic, partition=partition, log_dir=d)
        return True

    def delete_topic(self, topic: str) -> list[int]:
        """Delete every partition of ``topic``; returns the partitions removed."""
        parts = self.partitions_of(topic)
        for p in parts:
            self.delete_partition(topic, p)
        return parts

    # --- periodic work -------------------------------------------------------------------------

    def _checkpoint_dir(self, d: str, *, fsync: bool = True) -> None:
        logs = {k: v for k, v in self._logs.items() if self._dir_of[k] == d}
        checkpoints.write_offset_checkpoint(
            os.path.join(d, checkpoints.RECOVERY_POINT_CHECKPOINT),
            {k: v.recovery_point for k, v in logs.items()},
            fsync=fsync,
        )
        checkpoints.write_offset_checkpoint(
            os.path.join(d, checkpoints.LOG_START_OFFSET_CHECKPOINT),
            {
                k: v.log_start_offset
                for k, v in logs.items()
                if v.log_start_offset > v.segments[0].base_offset
            },
            fsync=fsync,
        )
        # Kafka's ReplicaManager keeps the high watermarks here; with one replica HW == LEO.
        checkpoints.write_offset_checkpoint(
            os.path.join(d, checkpoints.REPLICATION_OFFSET_CHECKPOINT),
            {k: v.high_watermark for k, v in logs.items()},
            fsync=fsync,
        )

    def checkpoint(self) -> None:
        """Write recovery points and log start offsets of every dir (log.flush.offset.checkpoint.interval.ms)."""
        for d in self.log_dirs:
            self._checkpoint_dir(d)

    def flush_dirty(self, now_ms: int | None = None) -> int:
        """Flush logs past flush.ms since their last flush, and finish post-roll flushes; returns
        how many logs were flushed (log.flush.scheduler.interval.ms)."""
        now = now_ms if now_ms is not None else self.clock.now_ms()
        n = 0
        for plog in list(self._logs.values()):
            if plog.offline is not None:
                continue
            try:
                if now - plog.last_flush_ms >= plog.config.flush_ms:
                    plog.flush(now_ms=now)
                    n += 1
                elif plog.flush_pending(now):
                    n += 1
            except KafkaStorageError as e:  # the recovery point stays where it was; tried again next time
                log.warning("log_flush_failed", topic=plog.topic, partition=plog.partition, error=str(e))
        return n

    def run_retention(self, now_ms: int | None = None) -> int:
        """Apply retention to every log (log.retention.check.interval.ms); returns segments deleted."""
        now = now_ms if now_ms is not None else self.clock.now_ms()
        return sum(plog.apply_retention(now) for plog in list(self._logs.values()))

    def shutdown(self, broker_epoch: int = -1) -> None:
        """Clean shutdown: close (flush) every log, write checkpoints, then the clean-shutdown
        marker; a dir with a log that is offline or could not be flushed gets no marker, so the
        next start recovers it from its files."""
        unclean: set[str] = set()
        for key, plog in list(self._logs.items()):
            if plog.offline is not None:
                plog.close_without_flush()
                unclean.add(self._dir_of[key])
                continue
            try:
                plog.close()
            except (KafkaStorageError, OSError) as e:
                log.error("log_close_failed", topic=plog.topic, partition=plog.partition, error=str(e))
                plog.close_without_flush()
                unclean.add(self._dir_of[key])
        for d in self.log_dirs:
            try:
                self._checkpoint_dir(d)
                if d not in unclean:
                    checkpoints.write_clean_shutdown(d, broker_epoch)
            except (KafkaStorageError, OSError) as e:
                log.error("log_dir_checkpoint_failed", log_dir=d, error=str(e))
        for fd in self._locks.values():
            os.close(fd)
        self._locks.clear()
        self._logs.clear()
        self._dir_of.clear()
        log.info("log_manager_shutdown", log_dirs=self.log_dirs)

    def close_unclean(self) -> None:
        """Drop every log without flushing or writing a marker (tests simulating a crash)."""
        for plog in list(self._logs.values()):
            plog.close_without_flush()
        for fd in self._locks.values():
            os.close(fd)
        self._locks.clear()
        self._logs.clear()
        self._dir_of.clear()
