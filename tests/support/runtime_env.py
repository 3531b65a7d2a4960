"""The broker as users install it: a venv holding only the wheel built from this tree and its
runtime dependencies (no test extras, no source tree on ``sys.path``).

Every broker the tests start runs from here (``tests.support.broker_process.BrokerProcess``), so a module
or data file missing from the wheel, or a library only the test venv has (python-snappy, lz4 and
zstandard once hid that three codecs did not work), fails the tests instead of hiding.

The venv lives in ``.venv-runtime`` and is rebuilt when the sources change (a digest of the
packages, pyproject.toml and README.md is kept beside it); ``RUNTIME_PYTHON`` names another
interpreter to use instead (one with the broker installed the same way).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
VENV = ROOT / ".venv-runtime"
PACKAGES = ("broker", "protocol", "storage", "coordinator")
PROJECT_FILES = ("pyproject.toml", "README.md")
_DIGEST_FILE = "pykafka-broker.digest"


def _sources() -> list[Path]:
    files = [ROOT / name for name in PROJECT_FILES]
    for pkg in PACKAGES:
        files += sorted(p for p in (ROOT / pkg).rglob("*")
                        if p.is_file() and p.suffix in (".py", ".json", ".css", ".js"))  # the wheel's files
    return files


def source_digest() -> str:
    h = hashlib.sha256()
    for path in _sources():
        h.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def build_wheel(out_dir: Path) -> Path:
    """A wheel of this tree, built from a fresh copy of the sources (no earlier build/ or
    egg-info can add or hide a file)."""
    with tempfile.TemporaryDirectory(prefix="pykafka-src-") as tmp:
        src = Path(tmp) / "src"
        junk = shutil.ignore_patterns("__pycache__", "*.pyc")
        for pkg in PACKAGES:
            shutil.copytree(ROOT / pkg, src / pkg, ignore=junk)
        for name in PROJECT_FILES:
            shutil.copy(ROOT / name, src / name)
        subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out_dir), str(src)],
                       check=True, cwd=tmp, stdout=subprocess.DEVNULL)
    (wheel,) = out_dir.glob("pykafka_broker-*.whl")
    return wheel


def _base_python() -> str:
    """A Python without this venv's packages, to make the runtime venv from."""
    return getattr(sys, "_base_executable", None) or shutil.which("python3") or sys.executable


def ensure_runtime_venv(venv: Path = VENV) -> Path:
    """The runtime venv's interpreter, with the current sources' wheel installed."""
    python = venv / "bin" / "python"
    digest = source_digest()
    marker = venv / _DIGEST_FILE
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f"{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if python.exists() and marker.exists() and marker.read_text() == digest:
            return python
        if not python.exists():
            subprocess.run([_base_python(), "-m", "venv", str(venv)], check=True)
        marker.unlink(missing_ok=True)
        pip = [str(python), "-m", "pip", "-q", "--disable-pip-version-check"]
        with tempfile.TemporaryDirectory(prefix="pykafka-wheel-") as out:
            wheel = build_wheel(Path(out))
            # The wheel's version never changes: reinstall it over the last one, then add any
            # runtime dependency that is missing (and nothing else).
            subprocess.run(pip + ["install", "--force-reinstall", "--no-deps", str(wheel)], check=True)
            subprocess.run(pip + ["install", str(wheel)], check=True)
        marker.write_text(digest)
    return python


def runtime_python() -> str:
    """The interpreter brokers are started with: ``RUNTIME_PYTHON`` or the runtime venv's."""
    return os.environ.get("RUNTIME_PYTHON") or str(ensure_runtime_venv())


def runtime_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a broker process: no PYTHONPATH, no KAFKA_* of the caller's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_") and k != "PYTHONPATH"}
    env.update(extra or {})
    return env
