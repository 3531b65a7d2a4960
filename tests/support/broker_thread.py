"""A broker on its own event loop in a thread of the test process, for tests that look at its
state directly (``call``) as well as through the wire."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

from broker.broker import Broker
from broker.config.broker_config import BrokerConfig


class BrokerThread(threading.Thread):
    """``start()``, then ``ready.wait()``; ``error`` holds what stopped it from starting."""

    def __init__(self, properties: dict[str, str], name: str = "test-broker") -> None:
        super().__init__(name=name, daemon=True)
        self.properties = properties
        self.ready = threading.Event()
        self.error: BaseException | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.broker: Broker | None = None
        self._stop_event: asyncio.Event | None = None

    def run(self) -> None:
        async def main() -> None:
            self.loop = asyncio.get_running_loop()
            self._stop_event = asyncio.Event()
            self.broker = Broker(BrokerConfig(self.properties))
            await self.broker.start()
            self.ready.set()
            await self._stop_event.wait()
            await self.broker.stop()

        try:
            asyncio.run(main())
        except BaseException as e:  # noqa: BLE001 - reported to the test waiting for the start
            self.error = e
            self.ready.set()

    def start_and_wait(self, timeout: float = 30) -> BrokerThread:
        """Start the broker; raise what kept it from starting."""
        self.start()
        self.ready.wait(timeout)
        if self.error is not None:
            raise self.error
        return self

    def call(self, fn: Callable[[], Any]) -> Any:
        """``fn()`` on the broker's loop (what the broker's state is touched from)."""
        assert self.loop is not None

        async def run() -> Any:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(30)

    def stop(self) -> None:
        if self.loop is not None and self._stop_event is not None:
            self.loop.call_soon_threadsafe(self._stop_event.set)
        self.join(30)
