from __future__ import annotations

import uuid

import pytest

from tests.support.broker_process import BrokerProcess


@pytest.fixture(scope="session")
def broker(tmp_path_factory) -> BrokerProcess:
    """One broker for the whole session; tests use their own topic names."""
    b = BrokerProcess(tmp_path_factory.mktemp("shared-broker") / "data").start()
    yield b
    code = b.stop()
    assert code == 0, f"broker exited with {code} on SIGTERM:\n{b.log_tail()}"


@pytest.fixture
def fresh_broker(tmp_path) -> BrokerProcess:
    """A broker of the test's own, for restarts and crashes."""
    b = BrokerProcess(tmp_path / "data")
    yield b
    if b.proc is not None:
        b.kill()


@pytest.fixture
def topic_name() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"
