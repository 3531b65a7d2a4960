"""Kafka's own ``kafka-dump-log.sh`` (org.apache.kafka.tools.DumpLogSegments of the reference jars)
beside ours (``python -m broker.inspect files``), and a field-by-field comparison of their text.

Kafka's side runs only where Java and the cached reference jars are (``python -m
tests.support.kafka_reference fetch``); it never downloads them, the caller skips.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.kafka_reference import cache_root, kafka_version

ROOT = Path(__file__).resolve().parents[2]
_LABEL = re.compile(r"([A-Za-z]+): (\S+)")


def kafka_libs() -> Path | None:
    """The cached jars of the pinned Kafka version, if they are there."""
    for libs in sorted(cache_root().glob(f"kafka-{kafka_version()}-*/libs")):
        if list(libs.glob("kafka-tools-*.jar")):
            return libs
    return None


def have_kafka_dump_log() -> bool:
    return kafka_libs() is not None and shutil.which("java") is not None


needs_dump_log = pytest.mark.skipif(
    not have_kafka_dump_log(),
    reason="needs java and the cached reference Kafka jars (python -m tests.support.kafka_reference fetch)")


def kafka_dump(files: list[str], *flags: str) -> subprocess.CompletedProcess:
    libs = kafka_libs()
    if libs is None or shutil.which("java") is None:
        pytest.skip("needs java and the cached reference Kafka jars (python -m tests.support.kafka_reference fetch)")
    cmd = ["java", "-Xmx256m", "-cp", str(libs / "*"), "org.apache.kafka.tools.DumpLogSegments",
           "--files", ",".join(files), *flags]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True)


def inspect(*args: str) -> subprocess.CompletedProcess:
    """``python -m broker.inspect ARGS`` from the source tree."""
    return subprocess.run([sys.executable, "-m", "broker.inspect", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)


def fields(line: str) -> dict[str, object]:
    """A DumpLogSegments line as its fields: ``label: value`` pairs, a record's key and payload
    (parsed as JSON when they are: the coordinator decoders); other lines whole."""
    head, _, payload = line.partition(" payload: ")
    head, _, key = head.partition(" key: ")
    if head.startswith("| payload: "):
        head, payload = "|", head[len("| payload: "):]
    if head.startswith("| key: "):
        head, key = "|", head[len("| key: "):]
    if line.startswith(("Dumping ", "Log starting offset: ")) or not (_LABEL.search(head) or key or payload):
        return {"line": line}
    out: dict[str, object] = dict(_LABEL.findall(head))
    for name, text in (("key", key), ("payload", payload)):
        if text:
            try:
                out[name] = json.loads(text)
            except ValueError:
                out[name] = text
    return out


def assert_same_dump(ours: str, kafka: str) -> None:
    """Line by line, field by field (naming the fields that differ); then the whole text."""
    ours_lines, kafka_lines = ours.splitlines(), kafka.splitlines()
    for i, (o, k) in enumerate(zip(ours_lines, kafka_lines, strict=False)):
        fo, fk = fields(o), fields(k)
        if fo != fk:
            diff = {f: (fo.get(f), fk.get(f)) for f in fo.keys() | fk.keys() if fo.get(f) != fk.get(f)}
            pytest.fail(f"line {i + 1} differs in {sorted(diff)}: (ours, kafka) {diff}\n  ours:  {o}\n  kafka: {k}")
    assert len(ours_lines) == len(kafka_lines), f"we printed {len(ours_lines)} lines, Kafka {len(kafka_lines)}"
    assert ours == kafka


def compare(files: list[str], *flags: str, stderr: bool = True) -> str:
    """Both tools on ``files`` with ``flags``: the same stdout (and stderr); ours is returned."""
    kafka = kafka_dump(files, *flags)
    ours = inspect("files", *files, *flags)
    assert ours.returncode == 0, ours.stderr
    assert_same_dump(ours.stdout, kafka.stdout)
    if stderr:
        assert ours.stderr.splitlines() == kafka.stderr.splitlines(), (
            f"stderr differs\n--- ours:\n{ours.stderr}--- kafka:\n{kafka.stderr}")
    return ours.stdout
