"""``python -m broker.inspect live`` against a running broker (the runtime install, ``metrics.port``
set) after the inspector scenario's workload (``tests.support.inspector_scenario``): committed,
aborted, open and hanging transactions, groups with members and with pending transactional offsets.

Every view in text and ``--json``; ``hanging`` compared with Apache Kafka 4.3.1's own
``kafka-transactions.sh find-hanging`` run against the same broker (when Java and the reference jars
are there); a file decoded through the broker equal to the offline ``files`` command's text; the
``abort`` that unblocks a read_committed consumer; then, the broker stopped, the offline views of
the same data directory.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.broker_process import BrokerProcess, free_port
from tests.support.dump_log import kafka_libs
from tests.support.inspector_scenario import build_scenario, read_committed
from tests.support.runtime_env import runtime_env, runtime_python

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    root = tmp_path_factory.mktemp("inspect-live")
    port = free_port()
    b = BrokerProcess(root / "data", overrides={"metrics.port": str(port),
                                                "transaction.partition.verification.enable": "false"}).start()
    scenario = build_scenario(b.bootstrap)
    yield b, scenario, f"http://127.0.0.1:{port}", root
    try:
        scenario.close()
    finally:
        b.stop()


def inspect(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """``python -m broker.inspect ARGS`` as installed (the runtime venv), outside the source tree."""
    result = subprocess.run([runtime_python(), "-m", "broker.inspect", *args], capture_output=True, text=True,
                            cwd=root, env=runtime_env(), timeout=60)
    if check:
        assert result.returncode == 0, result.stderr
    return result


def test_transactions_and_their_states(live):
    _b, _s, url, root = live
    text = inspect(root, "live", "--url", url, "transactions").stdout.splitlines()
    states = {line.split()[1]: line.split("state: ")[1].split()[0] for line in text if line.startswith("transactionalId")}
    assert states == {"tx-aborted": "CompleteAbort", "tx-after": "CompleteCommit", "tx-committed": "CompleteCommit",
                      "tx-hanging": "Empty", "tx-open": "Ongoing"}
    doc = json.loads(inspect(root, "live", "--url", url, "transactions", "--state", "Ongoing", "--json").stdout)
    [opened] = doc["transactions"]
    assert opened["transactionalId"] == "tx-open" and opened["broker"] == 1 and opened["ageMs"] >= 0


def test_a_timeline_in_text(live):
    _b, _s, url, root = live
    text = inspect(root, "live", "--url", url, "timeline", "tx-committed").stdout
    assert "transaction #2 outcome: CompleteCommit states: [Ongoing -> PrepareCommit -> CompleteCommit] markers: 2" in text
    for expected in ("request FindCoordinator", "request InitProducerId", "request AddPartitionsToTxn",
                     "request Produce", "request EndTxn", "result: COMMIT", "state Ongoing -> PrepareCommit",
                     "marker COMMIT orders-0@2", "marker COMMIT orders-1@1", "state PrepareCommit -> CompleteCommit"):
        assert expected in text, expected
    assert text.index("request EndTxn") < text.index("state Ongoing -> PrepareCommit") < \
        text.index("marker COMMIT orders-0@2") < text.index("state PrepareCommit -> CompleteCommit")


def test_partitions_and_groups(live):
    _b, s, url, root = live
    doc = json.loads(inspect(root, "live", "--url", url, "partitions", "--topic", "orders", "--json").stdout)
    lso = {p["partition"]: p["lastStableOffset"] for p in doc["partitions"]}
    assert lso[0] == s.hanging_offset and lso[2] == 0
    text = inspect(root, "live", "--url", url, "partitions", "--open", "--leaders").stdout
    assert f"open producerId: {s.hanging_producer_id} producerEpoch: 0 firstOffset: {s.hanging_offset}" in text
    groups = inspect(root, "live", "--url", url, "groups").stdout
    assert "group: copier type: classic" in groups and "unstable: true" in groups
    assert "pending topic: orders partition: 2 offset: 7" in groups and "transactionalId: tx-open" in groups
    assert "group: readers type: classic state: Stable protocol: range" in groups


def _table(text: str) -> list[list[str]]:
    return [[cell.strip() for cell in line.split("\t") if cell.strip()] for line in text.splitlines() if line.strip()]


def test_hanging_is_what_kafka_s_find_hanging_finds(live):
    b, s, url, root = live
    ours = inspect(root, "live", "--url", url, "hanging", "--max-transaction-timeout-ms", "0").stdout
    rows = _table(ours)
    assert rows[0] == ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                       "LastTimestamp", "Duration(min)"]
    assert [r[:6] for r in rows[1:]] == [["orders", "0", str(s.hanging_producer_id), str(s.hanging_epoch), "-1",
                                          str(s.hanging_offset)]]
    libs = kafka_libs()
    if libs is None or shutil.which("java") is None:
        pytest.skip("needs java and the cached reference Kafka jars (python -m tests.support.kafka_reference fetch)")
    kafka = subprocess.run(["java", "-Xmx256m", "-cp", str(libs / "*"), "org.apache.kafka.tools.TransactionsCommand",
                            "--bootstrap-server", b.bootstrap, "find-hanging", "--broker-id", "1",
                            "--max-transaction-timeout", "0"], capture_output=True, text=True, timeout=120)
    assert kafka.returncode == 0, kafka.stderr
    theirs = _table(kafka.stdout)
    assert theirs[0] == rows[0]
    assert [r[:7] for r in theirs[1:]] == [r[:7] for r in rows[1:]]  # the same transaction, the same fields


def test_a_file_decoded_through_the_broker_is_the_offline_text(live):
    _b, _s, url, root = live
    data = root / "data"
    for name, flags in (("orders-1", ["--deep-iteration"]),
                        (next(p.name for p in data.glob("__transaction_state-*")
                              if (p / "00000000000000000000.log").stat().st_size), ["--transaction-log-decoder"])):
        segment = data / name / "00000000000000000000.log"
        live_text = inspect(root, "live", "--url", url, "files", name, segment.name, *flags)
        offline = inspect(root, "files", str(segment), *flags)
        assert live_text.stdout.replace(str(segment), "") == offline.stdout.replace(str(segment), "")
        assert live_text.stdout.count("baseOffset:") > 0
    listing = inspect(root, "live", "--url", url, "files", "orders-0").stdout
    assert "00000000000000000000.log kind: log" in listing


def test_abort_unblocks_a_read_committed_consumer_then_the_offline_views_agree(live):
    b, s, url, root = live
    assert read_committed(s.bootstrap, 0, 2.0) == [b"c0", b"c1"]
    refused = inspect(root, "live", "--url", url, "abort", "--topic", "orders", "--partition", "0", "--start-offset",
                      str(s.hanging_offset + 1), check=False)
    assert refused.returncode == 1 and "Could not find any open transactions starting at offset" in refused.stderr
    done = inspect(root, "live", "--url", url, "abort", "--topic", "orders", "--partition", "0", "--start-offset",
                   str(s.hanging_offset))
    assert f"producerId: {s.hanging_producer_id}" in done.stdout and "error: NONE" in done.stdout
    assert read_committed(s.bootstrap, 0, 10.0, expect=4) == [b"c0", b"c1", b"after-0", b"after-1"]
    assert len(_table(inspect(root, "live", "--url", url, "hanging", "--max-transaction-timeout-ms", "0").stdout)) == 1
    timeline = inspect(root, "live", "--url", url, "timeline", "tx-hanging").stdout
    assert "marker ABORT orders-0@" in timeline and "via: inspector -> NONE" in timeline
    s.close()
    assert b.stop() == 0
    unreachable = inspect(root, "live", "--url", url, "overview", check=False)
    assert unreachable.returncode == 1 and "cannot reach the inspector" in unreachable.stderr
    txns = json.loads(inspect(root, "offline", str(root / "data"), "transactions", "--json").stdout)
    states = {t["transactionalId"]: t["state"] for t in txns["transactions"]}
    assert states == {"tx-aborted": "CompleteAbort", "tx-after": "CompleteCommit", "tx-committed": "CompleteCommit",
                      "tx-hanging": "Empty", "tx-open": "CompleteAbort"}
    parts = json.loads(inspect(root, "offline", str(root / "data"), "partitions", "--topic", "orders", "--json").stdout)
    p0 = next(p for p in parts["partitions"] if p["partition"] == 0)
    assert p0["openTransactions"] == [] and [a["producerId"] for a in p0["abortedTransactions"]] == [s.hanging_producer_id]
