"""structlog set-up: JSON lines when stderr is not a terminal (containers), console otherwise.

One pipeline for everything: structlog events and stdlib ``logging`` records (asyncio,
kafka-python, any library) both end in the same ``ProcessorFormatter`` on one stderr handler,
so a container's log is uniformly one JSON object per line::

    {"timestamp": "2025-01-01T00:00:00.000000Z", "level": "info", "logger": "storage.log",
     "event": "segment_rolled", "topic": "orders", "partition": 0, "new_base_offset": 1200, ...}

Events name the state change and carry the ids as fields (``topic``, ``partition``,
``transactional_id``, ``producer_id``, ``group`` ...), never interpolated into the message.

``configure`` may run more than once (the CLI calls it before reading the configuration, so
that warnings about the configuration are rendered too, and again with ``log.level``); loggers
are cached on first use only after the final call (``cache=True``), so no module keeps an
early configuration. Modules get their logger with ``structlog.get_logger(__name__)``.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO

import structlog

_HANDLER_MARK = "_pykafka_broker_handler"


def _level(level: str | int) -> int:
    if isinstance(level, int):
        return level
    numeric = logging.getLevelName(str(level).strip().upper())
    if numeric == "Level WARN":  # accept log4j's WARN
        numeric = logging.WARNING
    return numeric if isinstance(numeric, int) else logging.INFO


_LEADING = ("timestamp", "level", "logger", "event")


def _leading_keys(_logger: Any, _method: str, event_dict: dict[str, Any]) -> dict[str, Any]:
    """timestamp, level, logger, event first: a JSON line reads like a log line."""
    head = {k: event_dict.pop(k) for k in _LEADING if k in event_dict}
    head.update(event_dict)
    return head


def configure(
    level: str | int = "INFO",
    json: bool | None = None,
    *,
    stream: TextIO | None = None,
    cache: bool = True,
) -> None:
    """Route structlog and stdlib logging through one renderer on ``stream`` (stderr).

    ``json`` None picks JSON unless ``stream`` is a TTY. ``cache`` False keeps loggers
    reconfigurable (for an early, provisional call).
    """
    stream = stream or sys.stderr
    if json is None:
        json = not (hasattr(stream, "isatty") and stream.isatty())
    numeric = _level(level)
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
    ]
    if json:
        final: list[Any] = [
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            _leading_keys,
            structlog.processors.JSONRenderer(default=str),
        ]
    else:
        final = [
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.dev.ConsoleRenderer(colors=hasattr(stream, "isatty") and stream.isatty()),
        ]
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[structlog.stdlib.ExtraAdder(), *shared],
        processors=final,
    )
    root = logging.getLogger()
    for h in [h for h in root.handlers if getattr(h, _HANDLER_MARK, False)]:
        root.removeHandler(h)
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter)
    setattr(handler, _HANDLER_MARK, True)
    root.addHandler(handler)
    root.setLevel(numeric)
    # Chatty libraries stay at WARNING unless the broker itself runs at DEBUG.
    for name in ("kafka", "asyncio"):
        logging.getLogger(name).setLevel(numeric if numeric <= logging.DEBUG else max(numeric, logging.WARNING))

    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.stdlib.LoggerFactory(),
        context_class=dict,
        cache_logger_on_first_use=cache,
    )
