"""franz-go's transactional producer (KIP-890 part 2: Produce v12+ adds the partition, EndTxn v5 bumps
the epoch) through faults injected with the control endpoint, against three brokers: librdkafka's
transaction mock scenarios (``tests/0105-transactions_mock.c``: pushed request errors, a coordinator
moved or taken down, a leader change, a slow answer, a zombie fenced) with the stock client.

The scenarios are the subtests of ``TestTxnFaults`` (tests/go/faults_test.go), run once by ``go test``
against one ``KafkaCluster(brokers=3)`` with FAULTS_SEEDS and FAULTS_CONTROL; each uses its own
transactional id with its faults scoped to it, and asserts what the client did (retried and
committed, or failed with kerr.ProducerFenced / InvalidProducerEpoch), what it sent (the request log:
``GET /requests?api=EndTxn&transactional_id=...``) and that read_committed holds the committed
records exactly once. Each subtest is reported here as its own test. Needs Go (marker ``go``).
"""

from __future__ import annotations

import os
import re
import subprocess
import time

import pytest

from broker.testing import KafkaCluster
from tests.e2e.test_franz_go import GO, GO_MODULE
from tests.support.runtime_env import runtime_python

pytestmark = [
    pytest.mark.go,
    pytest.mark.skipif(GO is None, reason="needs Go 1.21+ (go on PATH or /usr/local/go/bin/go)"),
]

# Must match the subtests of TestTxnFaults.
SUBS = {
    "tv2-versions": "EndTxn v5 (epoch bumped by its answer), Produce v12+, no AddPartitionsToTxn; "
                    "EndTxn CONCURRENT_TRANSACTIONS retried at the same epoch",
    "find-coordinator-errors": "FindCoordinator COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR: retried, commit",
    "init-producer-id-errors": "InitProducerId COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS: retried",
    "endtxn-not-coordinator-moved": "EndTxn NOT_COORDINATOR + coordinator moved: committed at the new one",
    "produce-leader-change": "Produce NOT_LEADER_OR_FOLLOWER + leader moved mid-transaction: written once",
    "endtxn-timeout-retry": "EndTxn answered after the request timeout: retried at the same epoch, once",
    "zombie-fenced": "a second producer inits: the first's commit fails with kerr.ProducerFenced",
    "zombie-send-fenced": "a second producer inits: the first's next record is refused INVALID_PRODUCER_EPOCH, "
                          "its abort fails with kerr.ProducerFenced",
    "coordinator-down": "the coordinator's broker down mid-transaction, then up: committed exactly once",
    "coordinator-down-during-commit": "the coordinator's broker down while the EndTxn answer is held: "
                                      "retried at the new coordinator, answered as committed, once",
}
# A subtest that fails because of a broker bug: name -> reason (xfail, strict).
BROKER_BUGS: dict[str, str] = {}

RESULT = re.compile(r"^\s*--- (PASS|FAIL|SKIP): TestTxnFaults/(\S+)", re.MULTILINE)


@pytest.fixture(scope="module")
def txn_faults_run(tmp_path_factory) -> tuple[subprocess.CompletedProcess, dict[str, str], str]:
    t0 = time.monotonic()
    with KafkaCluster(brokers=3, python=runtime_python(),
                      data_dir=tmp_path_factory.mktemp("franz-go-faults")) as kafka:
        env = {**os.environ, "GOFLAGS": "-mod=mod -buildvcs=false", "FAULTS_SEEDS": kafka.bootstrap,
               "FAULTS_CONTROL": f"http://127.0.0.1:{kafka.control_port}", "TXN_FAULTS": ",".join(SUBS)}
        try:
            run = subprocess.run([GO, "test", "-run", "^TestTxnFaults$", "-count=1", "-v", "."], cwd=GO_MODULE,
                                 env=env, capture_output=True, text=True, timeout=400)
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
            run = subprocess.CompletedProcess(e.cmd, -9, out, "TIMEOUT")
        log_tail = kafka.log_tail(60)
    print(f"\n[go] TestTxnFaults against three brokers: {time.monotonic() - t0:.1f}s")
    return run, {name: status for status, name in RESULT.findall(run.stdout)}, log_tail


def _subtest_output(stdout: str, sub: str) -> str:
    """The lines go test printed for one subtest (its t.Log/t.Fatal lines follow its === RUN)."""
    start = stdout.find(f"=== RUN   TestTxnFaults/{sub}\n")
    if start < 0:
        return stdout[-3000:]
    end = stdout.find("=== RUN", start + 1)
    return stdout[start:end if end > 0 else start + 4000]


@pytest.mark.parametrize("sub", list(SUBS), ids=list(SUBS))
def test_franz_go_txn_fault(txn_faults_run, sub, request):
    if sub in BROKER_BUGS:
        request.applymarker(pytest.mark.xfail(strict=True, reason=BROKER_BUGS[sub]))
    run, results, log_tail = txn_faults_run
    if sub not in results:
        raise AssertionError(f"{sub} did not run (exit {run.returncode}):\n{run.stdout[-4000:]}\n{run.stderr[-3000:]}"
                             f"\n--- broker ---\n{log_tail}")
    assert results[sub] == "PASS", f"{sub} ({SUBS[sub]}): {results[sub]}\n{_subtest_output(run.stdout, sub)}"


def test_franz_go_txn_faults_ran_every_subtest(txn_faults_run):
    run, results, _ = txn_faults_run
    assert set(results) == set(SUBS), f"ran {sorted(results)}, expected {sorted(SUBS)}:\n{run.stdout[-3000:]}"
    if all(s == "PASS" for s in results.values()):
        assert run.returncode == 0 and "--- PASS: TestTxnFaults" in run.stdout, run.stdout[-3000:]
