"""Producer id allocation, and the periodic expiry of idle producers from partition state.

Kafka splits allocation in two: the controller's ProducerIdControlManager hands out blocks of
1000 ids (``ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE``) and appends a ``ProducerIdsRecord``
whose ``nextProducerId`` is the block's end to the metadata log *before* the broker may use the
block; the broker's RPCProducerIdManager then hands the block's ids out one by one. A restarted
broker always asks for a fresh block, so an id is never handed out twice, even after a crash:
the ids left over in the old block are simply skipped. The first block of a new cluster starts
at 0, so the first producer id is 0, as on Kafka.

This single node keeps the "record" in ``<first log dir>/__cluster_metadata/producer-ids``
(JSON), rewritten with tmp + fsync + rename + directory fsync before any id of the new block is
returned. That fsync happens once per 1000 ids, on the event loop, which costs a few ms.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from protocol.errors import KafkaError

if TYPE_CHECKING:
    from storage.log_manager import LogManager

log = structlog.get_logger(__name__)

BLOCK_SIZE = 1000  # ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
INT64_MAX = (1 << 63) - 1
FILE_NAME = "producer-ids"
DIR_NAME = "__cluster_metadata"
FORMAT_VERSION = 1



class ProducerIdsExhausted(KafkaError):
    """Kafka throws UnknownServerException here; the handler answers UNKNOWN_SERVER_ERROR."""


class ProducerIdManager:
    """Hands out producer ids from durably reserved blocks; never reuses one across restarts."""

    def __init__(self, log_dir: str | os.PathLike[str], *, broker_id: int = 0, block_size: int = BLOCK_SIZE) -> None:
        self.dir = Path(log_dir) / DIR_NAME
        self.path = self.dir / FILE_NAME
        self.broker_id = broker_id
        self.block_size = block_size
        # [_next, _block_end) is what may still be handed out; empty until the first generate(),
        # so a restart that serves no producer burns no block (Kafka also fetches lazily).
        self._next_block_start = self._load()
        self._next = 0
        self._block_end = 0

    def _load(self) -> int:
        tmp = self.path.with_name(FILE_NAME + ".tmp")
        tmp.unlink(missing_ok=True)  # a write a crash cut short: the old file still holds
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return 0
        try:
            data = json.loads(text)
            if data.get("version") != FORMAT_VERSION:
                raise ValueError(f"unknown version {data.get('version')!r}")
            value = int(data["nextProducerId"])
            if value < 0:
                raise ValueError(f"negative nextProducerId {value}")
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            # Starting over from 0 would hand out ids that producers still use: refuse instead.
            raise RuntimeError(f"unreadable producer id state in {self.path}: {e}") from None
        return value

    @property
    def next_block_start(self) -> int:
        """The persisted ``nextProducerId``: every id below it may already have been handed out."""
        return self._next_block_start

    def generate(self) -> int:
        """The next producer id; reserves (durably) a new block when the current one is used up."""
        if self._next >= self._block_end:
            self._reserve_block()
        pid = self._next
        self._next += 1
        return pid

    def _reserve_block(self) -> None:
        first = self._next_block_start
        if first > INT64_MAX - self.block_size:
            raise ProducerIdsExhausted(
                "Exhausted all producerIds as the next block's end producerId has exceeded the int64 type limit"
            )
        end = first + self.block_size
        self._write(end)
        self._next_block_start = end
        self._next, self._block_end = first, end
        log.info("producer_id_block_reserved", first=first, last=end - 1)

    def _write(self, next_producer_id: int) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        data = json.dumps(
            {"version": FORMAT_VERSION, "nextProducerId": next_producer_id, "brokerId": self.broker_id}
        ).encode()
        tmp = self.path.with_name(FILE_NAME + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        dir_fd = os.open(self.dir, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def expire_idle_producers(log_manager: LogManager, now_ms: int | None = None) -> int:
    """Kafka's PeriodicProducerExpirationCheck (every producer.id.expiration.check.interval.ms),
    for every partition at once: drop producers idle for producer.id.expiration.ms that have no
    open transaction. This is what bounds producer-state memory. Returns how many were dropped."""
    now = log_manager.clock.now_ms() if now_ms is None else now_ms
    removed = 0
    for plog in log_manager.logs():
        if plog.producer_state is not None:
            removed += len(plog.producer_state.manager.remove_expired_producers(now))
    if removed:
        log.info("expired_idle_producers", count=removed)
    return removed
