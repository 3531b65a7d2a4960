"""broker.ops.logs: one renderer for structlog and stdlib logging, JSON off a TTY, console on a TTY,
the level applied to both, and loggers used before the final configuration not frozen."""

from __future__ import annotations

import io
import json
import logging

import pytest
import structlog

from broker.ops import logs


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _restore_logging():
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for h in list(root.handlers):
        if h not in handlers:
            root.removeHandler(h)
    root.setLevel(level)
    structlog.reset_defaults()


def _lines(stream: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]


def test_json_lines_for_structlog_and_stdlib_with_ids_as_fields() -> None:
    out = io.StringIO()
    logs.configure("INFO", stream=out)
    structlog.get_logger("storage.log").info("segment_rolled", topic="t", partition=3, new_base_offset=120)
    logging.getLogger("kafka.conn").warning("connection to %s lost", "x:1")
    structlog.get_logger("storage.log").debug("hidden")
    logging.getLogger("kafka.client").info("hidden too")  # kafka-python stays at WARNING unless DEBUG
    first, second = _lines(out)
    assert list(first)[:4] == ["timestamp", "level", "logger", "event"]
    assert first == {**first, "level": "info", "logger": "storage.log", "event": "segment_rolled", "topic": "t",
                     "partition": 3, "new_base_offset": 120}
    assert second["event"] == "connection to x:1 lost" and second["level"] == "warning"
    assert second["logger"] == "kafka.conn"


def test_exceptions_are_one_json_line() -> None:
    out = io.StringIO()
    logs.configure("INFO", stream=out)
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        structlog.get_logger("broker.ops.cli").exception("broker failed")
    (line,) = _lines(out)
    assert line["level"] == "error" and "RuntimeError: boom" in line["exception"]


def test_console_on_a_tty() -> None:
    out = _Tty()
    logs.configure("DEBUG", stream=out)
    structlog.get_logger("broker.broker").info("broker started", node_id=1)
    text = out.getvalue()
    assert "broker started" in text and "node_id" in text
    with pytest.raises(json.JSONDecodeError):
        json.loads(text.splitlines()[0])


def test_provisional_configuration_does_not_freeze_loggers() -> None:
    early = structlog.get_logger("broker.config.broker_config")
    first = io.StringIO()
    logs.configure(stream=first, cache=False)  # what the CLI does before reading the config
    early.warning("unknown broker property ignored", property="x")
    final = io.StringIO()
    logs.configure("ERROR", stream=final)  # log.level=ERROR
    early.warning("must not appear")
    early.error("appears", code=1)
    assert [e["event"] for e in _lines(first)] == ["unknown broker property ignored"]
    assert [e["event"] for e in _lines(final)] == ["appears"]


def test_level_names_accept_log4j_spelling() -> None:
    out = io.StringIO()
    logs.configure("warn", stream=out)
    structlog.get_logger("x").info("no")
    structlog.get_logger("x").warning("yes")
    assert [e["event"] for e in _lines(out)] == ["yes"]
