"""Apache Kafka as the reference: every Java client scenario, and Kafka's own tools, must pass against a
real Kafka broker. This proves the scenarios (and the harness) are right, so that the same scenarios can
then judge our broker (point run_scenario at its bootstrap).

Needs java 17+ and mvn (marker `java`); skipped when either is missing. The first run downloads Kafka's
jars (see tests/kafka_ref/pom.xml) into ${KAFKA_REF_CACHE:-~/.cache/pykafka-ref}.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time

import pytest

from tests.support.java_client import (
    SCENARIOS,
    assert_scenario_ok,
    build_scenarios,
    run_scenario,
)
from tests.support.kafka_reference import KafkaReference, probe_kafka_api

pytestmark = [
    pytest.mark.java,
    pytest.mark.skipif(shutil.which("java") is None or shutil.which("mvn") is None,
                       reason="needs java and mvn on PATH"),
]

TOOLS = "org.apache.kafka.tools."


@pytest.fixture(scope="session")
def scenarios_jar():
    t0 = time.monotonic()
    jar = build_scenarios()
    print(f"\n[java] scenarios jar ready in {time.monotonic() - t0:.1f}s: {jar}")
    return jar


@pytest.fixture(scope="session")
def kafka_reference(tmp_path_factory):
    ref = KafkaReference()
    workdir = tmp_path_factory.mktemp("kafka-ref")
    try:
        ref.start(workdir)
    except Exception:
        ref.stop()
        raise
    print(f"\n[java] Apache Kafka {ref.version} at {ref.bootstrap}; timings "
          + ", ".join(f"{k}={v:.1f}s" for k, v in ref.timings.items()))
    yield ref
    ref.stop()


def test_reference_answers_api_versions(kafka_reference):
    host, _, port = kafka_reference.bootstrap.rpartition(":")
    info = probe_kafka_api(host, int(port))
    assert info["brokers"] == [(1, "127.0.0.1", int(port))]
    keys = info["api_keys"]
    # the APIs the scenarios need (protocol-facts.md, section 1.1)
    for api in (0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 19, 20, 22, 24, 25, 26, 28, 32, 60, 61, 65, 66):
        assert api in keys, f"api key {api} not advertised"
    assert keys[0][1] >= 12 and keys[1][1] >= 17 and keys[18] == (0, 4)


def test_scenario_list_matches(scenarios_jar):
    from tests.support.kafka_reference import java_executable

    out = subprocess.run([java_executable(), "-jar", str(scenarios_jar), "list"],
                         capture_output=True, text=True, timeout=60, check=True).stdout.split()
    assert tuple(out) == SCENARIOS


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_scenario_against_apache_kafka(kafka_reference, scenarios_jar, scenario):
    t0 = time.monotonic()
    r = run_scenario(scenario, kafka_reference.bootstrap, timeout=120)
    print(f"\n[java] {scenario}: {time.monotonic() - t0:.1f}s")
    if r.returncode != 0:
        print(kafka_reference.log_tail(40))
    assert_scenario_ok(r, scenario)


def _ok(r: subprocess.CompletedProcess, what: str) -> str:
    assert r.returncode == 0, f"{what} exited {r.returncode}\nstdout:\n{r.stdout[-3000:]}\nstderr:\n{r.stderr[-3000:]}"
    return r.stdout


def test_kafka_tools_run(kafka_reference):
    """Kafka's perf and verification tools run from the fetched classpath (used later for benchmarks)."""
    ref = kafka_reference
    bs = ref.bootstrap
    topic = f"tools-{int(time.time())}"
    n = 20000

    out = _ok(ref.run_tool(TOOLS + "ProducerPerformance", [
        "--topic", topic, "--num-records", n, "--record-size", 100, "--throughput", -1,
        "--producer-props", f"bootstrap.servers={bs}", "acks=all", "linger.ms=5"]), "ProducerPerformance")
    assert f"{n} records sent" in out, out

    out = _ok(ref.run_tool(TOOLS + "ConsumerPerformance", [
        "--bootstrap-server", bs, "--topic", topic, "--num-records", n, "--timeout", 30000]), "ConsumerPerformance")
    header, row = [ln for ln in out.splitlines() if ln.strip()][-2:]
    stats = dict(zip([h.strip() for h in header.split(",")], [v.strip() for v in row.split(",")], strict=True))
    assert int(stats["data.consumed.in.nMsg"]) == n, out

    out = _ok(ref.run_tool(TOOLS + "EndToEndLatency", [
        "--bootstrap-server", bs, "--topic", topic + "-e2e", "--num-records", 500,
        "--producer-acks", "all", "--record-size", 100]), "EndToEndLatency")
    assert "Avg latency" in out, out

    out = _ok(ref.run_tool(TOOLS + "VerifiableProducer", [
        "--bootstrap-server", bs, "--topic", topic + "-in", "--max-messages", 1000]), "VerifiableProducer")
    events = [json.loads(ln) for ln in out.splitlines() if ln.startswith("{")]
    tool_data = [e for e in events if e.get("name") == "tool_data"][-1]
    assert tool_data["acked"] == 1000 and tool_data["sent"] == 1000, tool_data

    out = _ok(ref.run_tool(TOOLS + "TransactionalMessageCopier", [
        "--broker-list", bs, "--input-topic", topic + "-in", "--input-partition", 0,
        "--output-topic", topic + "-out", "--transactional-id", topic + "-copier",
        "--consumer-group", topic + "-copier-group", "--transaction-size", 100, "--max-messages", 1000,
        "--use-group-metadata"]), "TransactionalMessageCopier")
    events = [json.loads(ln) for ln in out.splitlines() if ln.startswith("{")]
    last = events[-1]
    assert last["stage"] == "ShutdownComplete" and last["totalProcessed"] == 1000 and last["remaining"] == 0, last

    out = _ok(ref.run_tool(TOOLS + "TransactionsCommand", ["--bootstrap-server", bs, "list"]),
              "TransactionsCommand list")
    assert topic + "-copier" in out, out
    out = _ok(ref.run_tool(TOOLS + "TransactionsCommand", [
        "--bootstrap-server", bs, "describe", "--transactional-id", topic + "-copier"]),
        "TransactionsCommand describe")
    assert "CompleteCommit" in out, out
    out = _ok(ref.run_tool(TOOLS + "TransactionsCommand", [
        "--bootstrap-server", bs, "describe-producers", "--topic", topic + "-out", "--partition", 0]),
        "TransactionsCommand describe-producers")
    assert "ProducerId" in out, out
