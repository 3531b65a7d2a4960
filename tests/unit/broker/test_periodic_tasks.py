"""The broker's periodic tasks run on its clock, the log tasks first after Kafka's
log.initial.task.delay.ms (LogManager's initialTaskDelayMs), then every period."""

from __future__ import annotations

import asyncio
from pathlib import Path

from broker.broker import Broker
from broker.config.broker_config import BrokerConfig
from storage.clock import ManualClock


async def _ticks() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_a_log_task_first_runs_after_the_initial_delay_then_every_period(tmp_path: Path) -> None:
    clock = ManualClock()
    broker = Broker(BrokerConfig({"log.dirs": str(tmp_path)}), clock)
    runs: list[int] = []
    broker._schedule(300_000, lambda: runs.append(clock.now_ms()), first_ms=30_000)
    start = clock.now_ms()
    await _ticks()
    try:
        clock.advance(29_999)
        await _ticks()
        assert runs == []
        clock.advance(1)
        await _ticks()
        assert runs == [start + 30_000]
        clock.advance(299_999)
        await _ticks()
        assert runs == [start + 30_000]
        clock.advance(1)
        await _ticks()
        assert runs == [start + 30_000, start + 330_000]
    finally:
        for task in broker._periodic:
            task.cancel()


def test_the_initial_delay_is_internal_settable_and_never_described() -> None:
    config = BrokerConfig({"log.initial.task.delay.ms": "100"})
    assert config.get("log.initial.task.delay.ms") == 100
    assert BrokerConfig().get("log.initial.task.delay.ms") == 30_000
    assert "log.initial.task.delay.ms" not in {name for name, _value, _source in config.items()}
