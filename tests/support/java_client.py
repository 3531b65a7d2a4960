"""Run the Java client scenarios (tests/java) against any Kafka-compatible bootstrap.

    jar = build_scenarios()                       # mvn -q package, only when sources are newer than the jar
    r = run_scenario("transactions", "127.0.0.1:9092")
    assert_scenario_ok(r, "transactions")

Each scenario prints progress lines starting with '#', and a last line 'OK <name>' (exit 0) or
'FAIL <name>: <what>' (exit 1; exit 2 when its own watchdog fired, with a thread dump on stderr).
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import time
from pathlib import Path

from .kafka_reference import REPO_ROOT, java_executable, mvn_executable

JAVA_DIR = REPO_ROOT / "tests" / "java"
SCENARIOS_JAR = JAVA_DIR / "target" / "client-scenarios.jar"

# Must match Scenarios.ALL in tests/java/src/main/java/dev/pykafka/Scenarios.java
# (tests/e2e/test_kafka_reference_smoke.py checks it against `java -jar ... list`).
SCENARIOS = (
    "admin",
    "produce-consume",
    "idempotent",
    "transactions",
    "consume-transform-produce",
    "groups",
    "admin-transactions",
    "consumer-protocol",
)


class ScenarioBuildError(RuntimeError):
    pass


def _newest_source_mtime() -> float:
    newest = (JAVA_DIR / "pom.xml").stat().st_mtime
    for p in (JAVA_DIR / "src").rglob("*"):
        if p.is_file():
            newest = max(newest, p.stat().st_mtime)
    return newest


def _jar_fresh() -> bool:
    return SCENARIOS_JAR.exists() and SCENARIOS_JAR.stat().st_mtime >= _newest_source_mtime()


def build_scenarios(force: bool = False, timeout: float = 900) -> Path:
    """Build tests/java into target/client-scenarios.jar unless it is newer than every source file."""
    if not force and _jar_fresh():
        return SCENARIOS_JAR
    (JAVA_DIR / "target").mkdir(exist_ok=True)
    with open(JAVA_DIR / "target" / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # parallel sessions / xdist workers build once
        if force or not _jar_fresh():
            t0 = time.monotonic()
            cmd = [mvn_executable(), "-B", "-q", "-f", str(JAVA_DIR / "pom.xml"), "package"]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
            if r.returncode != 0 or not SCENARIOS_JAR.exists():
                raise ScenarioBuildError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
            build_scenarios.last_build_seconds = time.monotonic() - t0  # type: ignore[attr-defined]
    return SCENARIOS_JAR


def run_scenario(name: str, bootstrap: str, timeout: float = 120,
                 env: dict[str, str] | None = None, jvm_args: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """Run one scenario against ``bootstrap`` ("host:port", any Kafka-compatible broker).

    The scenario's own watchdog is set a little below ``timeout`` so that a hang ends with a Java thread
    dump on stderr rather than a bare kill. Never raises for a failing scenario: check the result
    (see assert_scenario_ok). A Python-side timeout gives returncode -9 and 'TIMEOUT' in stderr."""
    jar = build_scenarios()
    inner = max(10, int(timeout) - 10)
    cmd = [java_executable(), "-Xmx512m", *jvm_args, "-jar", str(jar), name, bootstrap, "--timeout", str(inner)]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
                              env={**os.environ, **(env or {})})
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        return subprocess.CompletedProcess(cmd, -9, out, err + f"\nTIMEOUT: killed after {timeout}s")


def scenario_failure(result: subprocess.CompletedProcess, name: str) -> str | None:
    """None if the scenario passed, else a readable explanation (its FAIL line, output and stderr tail)."""
    lines = [ln for ln in result.stdout.splitlines() if ln.strip()]
    if result.returncode == 0 and lines and lines[-1] == f"OK {name}":
        return None
    fail = next((ln for ln in reversed(lines) if ln.startswith("FAIL ")), f"exit code {result.returncode}")
    err = "\n".join(result.stderr.splitlines()[-60:])
    return f"{fail}\n--- stdout ---\n{result.stdout[-4000:]}\n--- stderr (tail) ---\n{err}"


def assert_scenario_ok(result: subprocess.CompletedProcess, name: str) -> None:
    msg = scenario_failure(result, name)
    if msg is not None:
        raise AssertionError(f"scenario {name} failed: {msg}")


if __name__ == "__main__":
    # python -m tests.support.java_client build | run SCENARIO BOOTSTRAP
    import sys

    if sys.argv[1:2] == ["build"]:
        t0 = time.monotonic()
        print(f"{build_scenarios()} ({time.monotonic() - t0:.1f}s)")
    elif len(sys.argv) == 4 and sys.argv[1] == "run":
        res = run_scenario(sys.argv[2], sys.argv[3])
        sys.stdout.write(res.stdout)
        sys.stderr.write(res.stderr)
        raise SystemExit(0 if scenario_failure(res, sys.argv[2]) is None else 1)
    else:
        print("usage: python -m tests.support.java_client build | run SCENARIO BOOTSTRAP", file=sys.stderr)
        raise SystemExit(64)
