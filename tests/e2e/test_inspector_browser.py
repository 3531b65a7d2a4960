"""The inspector page in a real browser: Debian's Chromium, headless, driven by Selenium through
Debian's chromium-driver (``scripts/test.sh`` installs both), against a broker of the runtime
install with ``metrics.port`` set, after the inspector scenario's workload
(``tests.support.inspector_scenario``): committed, aborted, open and hanging transactions, a group
with members and one with pending transactional offsets.

Each page shows each of them as it is; the timeline of a committed transaction walks Kafka's
design (FindCoordinator, InitProducerId, AddPartitionsToTxn, Produce, EndTxn, PrepareCommit, the
markers, CompleteCommit); a segment file is decoded from the Files page; the abort action, behind
its confirmation, unblocks a read_committed consumer; the page refreshes itself when something
new happens. Screenshots of every page are kept in the test's tmp dir and in
``.cache/inspector-screenshots/``; with ``INSPECTOR_README_SCREENSHOT=1`` the timeline's is copied
to ``docs/inspector.png`` (the README's).
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from tests.support.broker_process import BrokerProcess, free_port
from tests.support.inspector_scenario import TOPIC, build_scenario, read_committed

webdriver = pytest.importorskip("selenium.webdriver", reason="the browser tests need selenium (pip install selenium)")
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

pytestmark = pytest.mark.timeout(120)
ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
if CHROMIUM is None or DRIVER is None:
    pytest.skip("needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)",
                allow_module_level=True)
ARTIFACTS = ROOT / ".cache" / "inspector-screenshots"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("inspector-browser")
    port = free_port()
    b = BrokerProcess(root / "data", overrides={"metrics.port": str(port),
                                                "transaction.partition.verification.enable": "false"}).start()
    scenario = build_scenario(b.bootstrap)
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                f"--user-data-dir={root / 'chromium-profile'}", "--window-size=1360,900"):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=Service(DRIVER))
    driver.implicitly_wait(0)
    shots = root / "screenshots"
    shots.mkdir()
    try:
        yield Site(driver, f"http://127.0.0.1:{port}", scenario, shots)
    finally:
        driver.quit()
        scenario.close()
        b.stop()


class Site:
    def __init__(self, driver, base: str, scenario, shots: Path) -> None:
        self.driver = driver
        self.base = base
        self.scenario = scenario
        self.shots = shots

    def open(self, path: str) -> None:
        self.driver.get(self.base + path)
        WebDriverWait(self.driver, 10).until(lambda d: d.find_elements(By.ID, "view"))

    def one(self, css: str):
        return self.driver.find_element(By.CSS_SELECTOR, css)

    def all(self, css: str) -> list:
        return self.driver.find_elements(By.CSS_SELECTOR, css)

    def shot(self, name: str, height: int | None = None) -> Path:
        """The whole page (up to 3000 px), kept as a test artifact."""
        d = self.driver
        full = d.execute_script("return document.documentElement.scrollHeight")
        d.set_window_size(1360, min(height or full, 3000))
        path = self.shots / f"{name}.png"
        d.save_screenshot(str(path))
        d.set_window_size(1360, 900)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, ARTIFACTS / path.name)
        return path


def test_the_overview_shows_the_broker_its_coordinators_and_the_hanging_transaction(site):
    site.open("/inspect?max_transaction_timeout_ms=0")
    cards = {c.get_attribute("data-card"): c.find_element(By.CSS_SELECTOR, ".n").text for c in site.all(".card")}
    assert cards["Hanging"] == "1" and cards["Transactional ids"] == "5" and cards["Open transactions"] == "1"
    row = site.one('#brokers tr[data-broker="1"]')
    assert "this page" in row.text and "50" in row.text  # coordinator of all 50 partitions of each internal topic
    assert "orders-0" in site.one(".alert").text
    site.shot("overview")


def test_the_transactions_page_shows_each_state_and_the_hanging_one(site):
    s = site.scenario
    site.open("/inspect/transactions?max_transaction_timeout_ms=0")
    states = {r.get_attribute("data-txn"): r.get_attribute("data-state") for r in site.all("#transactions tr[data-txn]")}
    assert states == {"tx-aborted": "CompleteAbort", "tx-after": "CompleteCommit", "tx-committed": "CompleteCommit",
                      "tx-hanging": "Empty", "tx-open": "Ongoing"}
    opened = site.one('#transactions tr[data-txn="tx-open"]').text
    assert f"{TOPIC}-2" in opened and "__consumer_offsets-" in opened
    [hanging] = site.all('#hanging-table tr[data-status="hanging"]')
    assert (hanging.get_attribute("data-topic"), hanging.get_attribute("data-partition"),
            hanging.get_attribute("data-producer-id")) == (TOPIC, "0", str(s.hanging_producer_id))
    assert "does not include orders-0" in hanging.text and str(s.hanging_offset) in hanging.text
    assert hanging.find_element(By.CSS_SELECTOR, "a.abort").text == "Abort…"
    site.shot("transactions")


def test_a_committed_transaction_s_timeline_walks_kafka_s_design(site):
    site.open("/inspect/transactions")
    site.one('#transactions tr[data-txn="tx-committed"] a').click()
    WebDriverWait(site.driver, 10).until(lambda d: d.find_elements(By.ID, "txn-id"))
    assert site.one("#txn-id").text == "tx-committed"
    assert site.one("#txn-state td[data-state]").get_attribute("data-state") == "CompleteCommit"
    commit = site.one('.timeline[data-outcome="CompleteCommit"]')
    rows = commit.find_elements(By.CSS_SELECTOR, "tr[data-kind]")
    walk = [r.get_attribute("data-api") or f'{r.get_attribute("data-kind")}:{r.get_attribute("data-to")}' for r in rows]
    assert walk[:2] == ["AddPartitionsToTxn", "state:Ongoing"]
    assert walk[2:4] == ["Produce", "Produce"] and walk[4:6] == ["EndTxn", "state:PrepareCommit"]
    assert walk[6:] == ["marker:", "marker:", "state:CompleteCommit"]
    assert "COMMIT marker orders-0 @2" in commit.text and "COMMIT marker orders-1 @1" in commit.text
    session = site.one('.timeline[data-outcome="Empty"]')
    # librdkafka may ask for the coordinator more than once (its first query can race the broker
    # connection); the walk is FindCoordinator, then InitProducerId.
    requests = [r.get_attribute("data-api") for r in session.find_elements(By.CSS_SELECTOR, 'tr[data-kind="request"]')]
    assert [api for i, api in enumerate(requests) if i == 0 or api != requests[i - 1]] \
        == ["FindCoordinator", "InitProducerId"]
    path = site.shot("timeline")
    if os.environ.get("INSPECTOR_README_SCREENSHOT") == "1":
        site.open("/inspect/transactions/tx-committed")
        readme = site.shot("readme", height=1000)
        (ROOT / "docs").mkdir(exist_ok=True)
        shutil.copy(readme, ROOT / "docs" / "inspector.png")
    assert path.stat().st_size > 10_000


def test_partitions_show_the_lso_held_by_the_open_transactions(site):
    s = site.scenario
    site.open(f"/inspect/partitions?topic={TOPIC}")
    lso = {r.get_attribute("data-tp"): int(r.get_attribute("data-lso")) for r in site.all("#partitions tr[data-tp]")}
    assert lso == {f"{TOPIC}-0": s.hanging_offset, f"{TOPIC}-1": 5, f"{TOPIC}-2": 0}
    p0 = site.one(f'#partitions tr[data-tp="{TOPIC}-0"]').text
    assert f"pid {s.hanging_producer_id} from {s.hanging_offset}" in p0 and "tx-hanging" in p0
    details = site.all("#partitions tr.details summary")[1]  # orders-1: its aborted range
    details.click()
    assert "Aborted transactions" in site.all("#partitions tr.details")[1].text
    site.shot("partitions")


def test_groups_show_members_offsets_and_pending_transactional_offsets(site):
    site.open("/inspect/groups")
    copier = site.one('section[data-group="copier"]')
    assert "UNSTABLE_OFFSET_COMMIT" in copier.text
    [pending] = copier.find_elements(By.CSS_SELECTOR, f'table.pending tr[data-tp="{TOPIC}-2"]')
    assert "7" in pending.text and pending.find_element(By.LINK_TEXT, "tx-open")
    readers = site.one('section[data-group="readers"]')
    assert "Stable" in readers.text and f"{TOPIC}-0" in readers.text and f"{TOPIC}-2" in readers.text
    assert readers.find_elements(By.CSS_SELECTOR, f'table.offsets tr[data-tp="{TOPIC}-0"]')
    site.shot("groups")


def test_a_segment_file_is_decoded_as_kafka_dump_log_prints_it(site):
    site.open("/inspect/files")
    box = site.one('input[name="q"]')
    box.send_keys(f"{TOPIC}-1")
    box.submit()
    WebDriverWait(site.driver, 10).until(lambda d: "q=" in d.current_url)
    site.driver.find_element(By.LINK_TEXT, f"{TOPIC}-1").click()
    row = WebDriverWait(site.driver, 10).until(
        lambda d: d.find_element(By.CSS_SELECTOR, 'tr[data-file="00000000000000000000.log"]'))
    row.find_element(By.LINK_TEXT, "--deep-iteration").click()
    dump = WebDriverWait(site.driver, 10).until(lambda d: d.find_element(By.ID, "dump")).text
    assert dump.startswith("Dumping ") and "endTxnMarker: ABORT coordinatorEpoch: 0" in dump
    site.shot("file")


def test_the_abort_action_after_its_confirmation_unblocks_a_read_committed_consumer(site):
    s = site.scenario
    assert read_committed(s.bootstrap, 0, 2.0) == [b"c0", b"c1"]  # held back by the hanging transaction
    site.open("/inspect/transactions?max_transaction_timeout_ms=0")
    site.one('#hanging-table tr[data-status="hanging"] a.abort').click()
    WebDriverWait(site.driver, 10).until(lambda d: d.find_elements(By.ID, "abort-form"))
    assert f"producer {s.hanging_producer_id}" in site.one(".note").text
    site.one("#do-abort").click()  # not confirmed: the form does not go
    time.sleep(0.3)
    assert "/inspect/abort?" in site.driver.current_url and not site.all("#abort-result")
    site.shot("abort-confirm")
    site.one("#confirm").click()
    site.one("#do-abort").click()
    result = WebDriverWait(site.driver, 10).until(lambda d: d.find_element(By.ID, "abort-result"))
    assert result.get_attribute("data-error") == "NONE"
    assert int(site.one("#lso-after").text) > s.hanging_offset
    site.shot("abort-done")
    assert read_committed(s.bootstrap, 0, 10.0, expect=4) == [b"c0", b"c1", b"after-0", b"after-1"]
    site.open("/inspect/transactions?max_transaction_timeout_ms=0")
    assert site.all("#no-hanging")
    site.open("/inspect/transactions/tx-hanging")
    assert "ABORT marker orders-0" in site.one(".timeline").text and "via inspector" in site.one(".timeline").text


def test_the_page_refreshes_itself_when_a_transaction_happens(site):
    from confluent_kafka import Producer

    site.open("/inspect/transactions")
    Select(site.one("#every")).select_by_value("1")
    site.driver.execute_script("window.__notReloaded = true")
    p = Producer({"bootstrap.servers": site.scenario.bootstrap, "transactional.id": "tx-late", "linger.ms": 0})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(TOPIC, b"late", partition=1)
    p.commit_transaction(30)
    row = WebDriverWait(site.driver, 10).until(
        lambda d: d.find_element(By.CSS_SELECTOR, '#transactions tr[data-txn="tx-late"]'))
    assert row.get_attribute("data-state") == "CompleteCommit"
    assert site.driver.execute_script("return window.__notReloaded === true")  # swapped in, not reloaded
    assert "updated" in site.one("#updated").text
