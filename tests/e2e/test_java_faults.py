"""The Java client (kafka-clients 4.x, Transactions V2: Produce v12+ adds the partition, EndTxn v5 bumps
the epoch) through faults injected with the control endpoint, against three brokers: librdkafka's
transaction mock scenarios (``tests/0105-transactions_mock.c``: pushed request errors, a coordinator
moved or taken down, a leader change, a slow answer, a zombie fenced) with the stock producer.

The scenarios are the ``txn-faults`` scenario of tests/java (``TxnFaultsScenario``): one JVM runs
them in turn against one ``KafkaCluster(brokers=3)``, each with its own transactional id and its
faults scoped to it, and prints ``SUB OK <name>`` or ``SUB FAIL <name>: <what>``. Each asserts what
the client did (retried and committed, or failed with ProducerFencedException), what it sent (the
request log: ``GET /requests?api=EndTxn&transactional_id=...``: versions, epochs, the retries and
the brokers that answered) and that read_committed holds the committed records exactly once.
Each sub-scenario is reported here as its own test. Needs java 17+ and mvn (marker ``java``).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time

import pytest

from broker.testing import KafkaCluster
from tests.support.java_client import build_scenarios, run_scenario
from tests.support.runtime_env import runtime_python

pytestmark = [
    pytest.mark.java,
    pytest.mark.skipif(shutil.which("java") is None or shutil.which("mvn") is None,
                       reason="needs java and mvn on PATH"),
]

# Must match TxnFaultsScenario.SUBS (tests/java/src/main/java/dev/pykafka/TxnFaultsScenario.java).
SUBS = {
    "tv2-versions": "EndTxn v5 (epoch bumped by its answer), Produce v12+, no AddPartitionsToTxn; "
                    "EndTxn CONCURRENT_TRANSACTIONS retried at the same epoch",
    "find-coordinator-errors": "FindCoordinator COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR: retried, init succeeds",
    "init-producer-id-errors": "InitProducerId COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS: retried",
    "endtxn-not-coordinator-moved": "EndTxn NOT_COORDINATOR + coordinator moved: committed at the new one",
    "produce-leader-change": "Produce NOT_LEADER_OR_FOLLOWER + leader moved mid-transaction: written once",
    "endtxn-timeout-retry": "EndTxn answered after request.timeout.ms: retried at the same epoch, committed once",
    "zombie-fenced": "a second producer inits: the first's commit and send fail with ProducerFencedException",
    "zombie-send-fenced": "a second producer inits: the first's next record is refused INVALID_PRODUCER_EPOCH "
                          "(KIP-890 verification), its abort fails with ProducerFencedException",
    "coordinator-down": "the coordinator's broker down mid-transaction, then up: committed exactly once",
    "coordinator-down-during-commit": "the coordinator's broker down while the EndTxn answer is held: "
                                      "retried at the new coordinator, answered as committed, once",
}
# A sub-scenario that fails because of a broker bug: name -> reason (xfail, strict).
BROKER_BUGS: dict[str, str] = {}

SUB_LINE = re.compile(r"^SUB (OK|FAIL) ([^\s:]+):?(.*)$", re.MULTILINE)


@pytest.fixture(scope="module")
def txn_faults_run(tmp_path_factory) -> tuple[subprocess.CompletedProcess, dict[str, tuple[str, str]], str]:
    build_scenarios()
    t0 = time.monotonic()
    with KafkaCluster(brokers=3, python=runtime_python(),
                      data_dir=tmp_path_factory.mktemp("java-faults")) as kafka:
        result = run_scenario("txn-faults", kafka.bootstrap, timeout=240,
                              env={"CONTROL_URL": f"http://127.0.0.1:{kafka.control_port}", "TXN_FAULTS": ",".join(SUBS)})
        log_tail = kafka.log_tail(60)
    print(f"\n[java] txn-faults against three brokers: {time.monotonic() - t0:.1f}s")
    subs = {name: (status, rest.strip()) for status, name, rest in SUB_LINE.findall(result.stdout)}
    return result, subs, log_tail


@pytest.mark.parametrize("sub", list(SUBS), ids=list(SUBS))
def test_java_txn_fault(txn_faults_run, sub, request):
    if sub in BROKER_BUGS:
        request.applymarker(pytest.mark.xfail(strict=True, reason=BROKER_BUGS[sub]))
    result, subs, log_tail = txn_faults_run
    if sub not in subs:
        raise AssertionError(f"{sub} did not run (exit {result.returncode}):\n{result.stdout[-4000:]}\n"
                             f"--- stderr ---\n{result.stderr[-4000:]}\n--- broker ---\n{log_tail}")
    status, detail = subs[sub]
    assert status == "OK", (f"{sub} ({SUBS[sub]}) failed:{detail}\n--- stdout ---\n{result.stdout[-4000:]}\n"
                            f"--- stderr (tail) ---\n{result.stderr[-4000:]}")


def test_java_txn_faults_ran_every_sub_scenario(txn_faults_run):
    result, subs, _ = txn_faults_run
    assert set(subs) == set(SUBS), f"ran {sorted(subs)}, expected {sorted(SUBS)}:\n{result.stdout[-3000:]}"
    if not any(s == "FAIL" for s, _ in subs.values()):
        assert result.returncode == 0 and result.stdout.splitlines()[-1] == "OK txn-faults", result.stdout[-3000:]
