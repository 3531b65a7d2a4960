"""The inspector pages 10,000 transactional ids in a real broker's coordinator (HTML and JSON,
filtered, any page, through the broker's own HTTP endpoint) and 10,000 partitions (stand-in logs
here: creating 10,000 real ones takes the broker half a minute). How long each page takes is
``bench/inspector_scale.py``'s to print; these check what the pages hold."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest

from broker.inspect.live import views, web
from coordinator.txn.state import TransactionState, new_metadata
from storage.clock import SYSTEM_CLOCK
from storage.producer.entry import ProducerStateEntry
from storage.producer.types import TxnMetadata
from tests.unit.inspect.test_live_views import start_broker

pytestmark = pytest.mark.timeout(120)
N = 10_000
STATES = [TransactionState.EMPTY, TransactionState.ONGOING, TransactionState.COMPLETE_COMMIT,
          TransactionState.COMPLETE_ABORT]


TXN_PAGES = ("/inspect/transactions", "/inspect/transactions?state=Ongoing&page=20",
             "/inspect/transactions?q=txn-09&size=1000", "/inspect/api/transactions?page=100",
             "/inspect/api/transactions?state=open&size=1000&page=3", "/inspect", "/inspect/api/overview")
PARTITION_QUERIES: tuple[dict[str, str], ...] = ({}, {"page": "73"}, {"open": "1", "size": "1000"},
                                                 {"q": "topic-05", "size": "1000"})


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.read()


def fill_transactions(broker) -> None:
    """N transactional ids in the coordinator's cache, a quarter of them in each state (run on the
    broker's loop)."""
    coordinator = broker.txn_coordinator
    assert coordinator.find_coordinator("any") == 0  # __transaction_state, its 50 partitions
    sm = coordinator.state_manager
    now = broker.clock.now_ms()
    for i in range(N):
        txn_id = f"txn-{i:05d}"
        m = new_metadata(txn_id, 1_000 + i, 60_000, now)
        m.producer_epoch = 0
        m.state = STATES[i % 4]
        if m.state == TransactionState.ONGOING:
            m.topic_partitions = {("orders", i % 8)}
            m.txn_start_timestamp = now - i
        sm.cache[sm.partition_for(txn_id)][txn_id] = m


@contextmanager
def broker_with_ten_thousand_ids(tmp_path: Path) -> Iterator[str]:
    """A broker whose coordinator holds N transactional ids; yields its inspector's base URL."""
    r = start_broker(tmp_path)
    try:
        broker = r.broker
        assert broker is not None
        r.call(lambda: fill_transactions(broker))
        yield f"http://127.0.0.1:{broker.metrics_port}"
    finally:
        r.stop()


def test_ten_thousand_transactional_ids_are_paged(tmp_path):
    with broker_with_ten_thousand_ids(tmp_path) as base:
        for path in TXN_PAGES:
            body = get(base + path)
            assert b"txn-" in body or path.endswith("overview") or path == "/inspect"
        page = get(base + "/inspect/transactions?state=Ongoing&page=20&size=100")
        assert page.count(b'data-state="Ongoing"') == 100 and b"page 20 of 25" in page


class _Manager:
    """The producer state a partition view reads."""

    def __init__(self, pid: int, first: int) -> None:
        self.producers = {pid: ProducerStateEntry(pid, 0, -1, 1_700_000_000_000, first)}
        self._ongoing = [TxnMetadata(pid, first)]

    def first_unstable_offset(self) -> int:
        return self._ongoing[0].first_offset

    def ongoing_transactions(self) -> list[TxnMetadata]:
        return self._ongoing


class _Log:
    def __init__(self, topic: str, partition: int) -> None:
        self.topic, self.partition = topic, partition
        self.dir = f"/data/{topic}-{partition}"
        self.topic_id = None
        self.offline = None
        self.log_start_offset, self.log_end_offset, self.high_watermark = 0, 100, 100
        self.recovery_point, self.leader_epoch = 100, 0
        self.segments: list[object] = []
        self.producer_state = SimpleNamespace(manager=_Manager(7, 40)) if partition % 10 == 0 else None
        self.last_stable_offset = 40 if self.producer_state is not None else 100


def partitions_broker() -> SimpleNamespace:
    """A broker stand-in with N partitions, one in ten holding an open transaction."""
    logs = [_Log(f"topic-{i // 100:03d}", i % 100) for i in range(N)]
    return SimpleNamespace(
        shared=None, node_id=1, clock=SYSTEM_CLOCK, txn_recorder=None,
        log_manager=SimpleNamespace(logs=lambda: iter(logs), partitions=lambda: [(x.topic, x.partition) for x in logs]),
        metadata=SimpleNamespace(partition=lambda topic, partition: None, topics={}, name_of=lambda _id: None),
        txn_coordinator=SimpleNamespace(state_manager=SimpleNamespace(cache={}, loading=set(), coordinator_epochs={})))


def test_ten_thousand_partitions_are_paged():
    broker = partitions_broker()
    for query in PARTITION_QUERIES:
        view = views.partitions(broker, query)
        html = web.partitions_html(view, query)
        assert view["partitions"] and "lsoLag" in view["partitions"][0] and html
        assert len(view["partitions"]) <= int(query.get("size", str(views.DEFAULT_PAGE_SIZE)))
    assert views.partitions(broker, {"open": "1"})["total"] == N // 10
