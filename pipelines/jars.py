"""Fetch Spark's Kafka connector jars with Maven and cache them outside git.

Spark's Kafka source/sink (``spark-sql-kafka-0-10``) is not in the pyspark wheel. ``pipelines/pom.xml``
names it; this module runs

    mvn -B -q -f pipelines/pom.xml -Dspark.version=<installed pyspark> \\
        dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=<cache>/jars

once per (pyspark version, pom content) into ``${PYKAFKA_SPARK_CACHE:-~/.cache/pykafka-spark}`` and returns
the jar paths for ``spark.jars``. The version always comes from the installed pyspark, so the connector
matches the Spark it runs in. Concurrent callers (pytest workers, parallel sessions) fetch once (flock).

    python -m pipelines.jars            # fetch if needed, print the comma-separated spark.jars value
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

POM = Path(__file__).resolve().parent / "pom.xml"

# What the connector needs beyond pyspark/jars (the pom excludes everything Spark already ships).
EXPECTED_ARTIFACTS = ("spark-sql-kafka-0-10_", "spark-token-provider-kafka-0-10_", "kafka-clients-",
                      "commons-pool2-")


class JarFetchError(RuntimeError):
    pass


def pyspark_version() -> str:
    try:
        import pyspark
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise JarFetchError("pyspark is not installed (pip install -e '.[test]')") from e
    return pyspark.__version__


def cache_root() -> Path:
    env = os.environ.get("PYKAFKA_SPARK_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "pykafka-spark"


def cache_dir(spark_version: str | None = None) -> Path:
    version = spark_version or pyspark_version()
    pom_hash = hashlib.sha256(POM.read_bytes()).hexdigest()[:10]
    return cache_root() / f"spark-{version}-{pom_hash}"


def _jars_in(d: Path) -> list[Path]:
    return sorted(p for p in d.glob("*.jar") if p.is_file())


def _complete(jars: list[Path]) -> bool:
    names = [j.name for j in jars]
    return all(any(n.startswith(prefix) for n in names) for prefix in EXPECTED_ARTIFACTS)


def fetch(spark_version: str | None = None, timeout: float = 900) -> list[Path]:
    """Return the connector jars for ``spark_version`` (default: the installed pyspark), fetching them with
    Maven on first use. Raises JarFetchError with Maven's output when the fetch fails."""
    version = spark_version or pyspark_version()
    target = cache_dir(version)
    jars_dir = target / "jars"
    done = target / ".complete"
    if done.exists() and _complete(_jars_in(jars_dir)):
        return _jars_in(jars_dir)
    target.mkdir(parents=True, exist_ok=True)
    with open(target / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists() and _complete(_jars_in(jars_dir)):
            return _jars_in(jars_dir)
        mvn = shutil.which("mvn")
        if not mvn:
            raise JarFetchError("mvn not found (apt-get install maven)")
        tmp = target / "jars.partial"
        shutil.rmtree(tmp, ignore_errors=True)
        cmd = [mvn, "-B", "-q", "-f", str(POM), f"-Dspark.version={version}",
               "dependency:copy-dependencies", "-DincludeScope=runtime", f"-DoutputDirectory={tmp}"]
        t0 = time.monotonic()
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            raise JarFetchError(
                f"{' '.join(cmd)} failed ({r.returncode}); is org.apache.spark:spark-sql-kafka-0-10_2.13:{version} "
                f"on Maven Central?\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}")
        jars = _jars_in(tmp)
        if not _complete(jars):
            raise JarFetchError(f"maven copied {[j.name for j in jars]}, expected {EXPECTED_ARTIFACTS}")
        shutil.rmtree(jars_dir, ignore_errors=True)
        tmp.rename(jars_dir)
        done.write_text(f"{time.monotonic() - t0:.1f}s\n")
        fetch.last_fetch_seconds = time.monotonic() - t0  # type: ignore[attr-defined]
    return _jars_in(jars_dir)


def spark_jars_conf(spark_version: str | None = None) -> str:
    """The value for ``spark.jars``: comma-separated local paths."""
    return ",".join(str(p) for p in fetch(spark_version))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    version = argv[0] if argv else None
    try:
        print(spark_jars_conf(version))
    except JarFetchError as e:
        print(e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
