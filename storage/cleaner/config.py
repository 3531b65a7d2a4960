"""Kafka's CleanerConfig (``log.cleaner.*``) and the signal that a cleaning was abandoned.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

# --- configuration ------------------------------------------------------------------------------

# Module-level so ``from_broker_config`` can fall back to them: a slots dataclass has no class-level
# field defaults to read (``cls.<field>`` is the slot descriptor).
DEFAULT_DEDUPE_BUFFER_SIZE = 128 * 1024 * 1024
DEFAULT_IO_BUFFER_SIZE = 512 * 1024
DEFAULT_BACKOFF_MS = 15_000
DEFAULT_MAX_MESSAGE_SIZE = 1048588


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    """Kafka's CleanerConfig (``log.cleaner.*``), plus the slice length of this broker."""

    enable: bool = True
    threads: int = 1  # accepted for compatibility; there is one cooperative cleaner
    dedupe_buffer_size: int = DEFAULT_DEDUPE_BUFFER_SIZE
    dedupe_buffer_load_factor: float = 0.9
    io_buffer_size: int = DEFAULT_IO_BUFFER_SIZE
    io_max_bytes_per_second: float = math.inf
    backoff_ms: int = DEFAULT_BACKOFF_MS
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    slice_ms: float = 5.0  # not Kafka's: how long the cleaner runs before giving the loop back

    @classmethod
    def from_broker_config(cls, cfg: Any) -> CleanerConfig:
        def get(name: str, default: Any) -> Any:
            value = cfg.get(name)
            return default if value is None else value

        return cls(
            enable=bool(get("log.cleaner.enable", True)),
            threads=int(get("log.cleaner.threads", 1)),
            dedupe_buffer_size=int(get("log.cleaner.dedupe.buffer.size", DEFAULT_DEDUPE_BUFFER_SIZE)),
            dedupe_buffer_load_factor=float(get("log.cleaner.io.buffer.load.factor", 0.9)),
            io_buffer_size=int(get("log.cleaner.io.buffer.size", DEFAULT_IO_BUFFER_SIZE)),
            io_max_bytes_per_second=float(get("log.cleaner.io.max.bytes.per.second", math.inf)),
            backoff_ms=int(get("log.cleaner.backoff.ms", DEFAULT_BACKOFF_MS)),
            max_message_size=int(get("message.max.bytes", DEFAULT_MAX_MESSAGE_SIZE)),
        )


class CleaningAborted(Exception):
    """The log changed under a cleaning (segments removed, log closed, no longer compacted)."""
