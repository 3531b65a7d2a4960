"""Static checks of the container files (Dockerfile, entrypoint, configs, compose): no container
runtime needed. The entrypoint is run for real with a stub ``python`` on PATH, and what it would
start the broker with is resolved through BrokerConfig exactly as the broker would."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from broker.config.broker_config import BrokerConfig

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "Dockerfile").read_text()
IMAGE_CONFIG = ROOT / "docker" / "server.properties"
ENTRYPOINT = ROOT / "docker" / "entrypoint.sh"


def _instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    out: list[tuple[str, str]] = []
    joined = re.sub(r"\\\n", " ", "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#")))
    for line in joined.splitlines():
        if line.strip():
            word, _, rest = line.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_dockerfile_is_multi_stage_slim_non_root() -> None:
    ins = _instructions(DOCKERFILE)
    froms = [args for word, args in ins if word == "FROM"]
    assert len(froms) == 2, froms
    assert all(f.startswith("python:${PYTHON_VERSION}-slim") for f in froms)
    assert re.search(r"^ARG PYTHON_VERSION=3\.1[12]$", DOCKERFILE, re.M)
    assert "AS build" in froms[0]
    runtime = ins[[i for i, (w, _) in enumerate(ins) if w == "FROM"][1]:]
    users = [args for word, args in runtime if word == "USER"]
    assert users and users[-1] not in ("root", "0"), "the broker must not run as root"
    words = dict((w, a) for w, a in runtime)
    assert words["VOLUME"] == '["/var/lib/kafka/data"]'
    assert set(words["EXPOSE"].split()) == {"9092", "9404"}
    assert "broker.ops.healthcheck" in words["HEALTHCHECK"]
    assert words["STOPSIGNAL"] == "SIGTERM"
    assert "docker-entrypoint.sh" in words["ENTRYPOINT"]
    # no compilers or build caches in the runtime stage: wheels only, from the build stage
    assert "--no-index" in DOCKERFILE and "pip wheel" in DOCKERFILE
    assert "apt-get install" not in DOCKERFILE


def test_dockerignore_keeps_the_context_small() -> None:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    assert lines[[line.strip() for line in lines].index("*")] == "*", "ignore everything, then allow"
    allowed = {line[1:].rstrip("/") for line in lines if line.startswith("!")}
    assert {"pyproject.toml", "README.md", "broker", "protocol", "storage", "coordinator", "docker"} <= allowed
    assert not allowed & {"tests", ".git", "data", "bench"}


def test_image_config_listens_everywhere_and_advertises_localhost() -> None:
    config = BrokerConfig.load(IMAGE_CONFIG, environ={})
    assert config.listeners() == [("PLAINTEXT", "0.0.0.0", 9092)]
    assert config.advertised_listeners() == [("PLAINTEXT", "localhost", 9092)]
    assert config.log_dirs == ["/var/lib/kafka/data"]
    assert config.get("metrics.port") == 9404
    assert config.get("offsets.topic.replication.factor") == 1
    config.validate_listeners()
    assert not [k for k in config.originals if k not in dict((n, v) for n, v, _ in config.items())]


# --- the entrypoint, run with a stub python ----------------------------------------------------

STUB = """#!/bin/sh
exec "{python}" -c 'import json, os, sys; print(json.dumps({{"argv": sys.argv[1:], "env": dict(os.environ)}}))' "$@"
"""


@pytest.fixture
def entrypoint(tmp_path: Path):
    if shutil.which("sh") is None:
        pytest.skip("no /bin/sh")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    stub = bindir / "python"
    stub.write_text(STUB.format(python=sys.executable))
    stub.chmod(0o755)

    def run(args: list[str] | None = None, env: dict[str, str] | None = None) -> tuple[list[str], dict[str, str]]:
        base = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_") and k != "CLUSTER_ID"}
        base["PATH"] = f"{bindir}:{base.get('PATH', '/usr/bin:/bin')}"
        base["BROKER_CONFIG_FILE"] = str(IMAGE_CONFIG)
        out = subprocess.run(["sh", str(ENTRYPOINT), *(args or [])], env={**base, **(env or {})},
                             capture_output=True, text=True, check=True, timeout=30)
        data = json.loads(out.stdout)
        return data["argv"], data["env"]

    return run


def _resolve(argv: list[str], env: dict[str, str]) -> BrokerConfig:
    """What ``python -m broker <argv>`` would run with, given ``env``."""
    from broker.ops.cli import parse_args

    assert argv[:2] == ["-m", "broker"], argv
    args = parse_args(argv[2:])
    return BrokerConfig.load(args.config or args.config_file, args.override, environ=env)


def test_entrypoint_defaults_to_the_image_config(entrypoint) -> None:
    argv, env = entrypoint()
    assert argv == ["-m", "broker", "--config", str(IMAGE_CONFIG)]
    config = _resolve(argv, env)
    assert config.advertised_listeners() == [("PLAINTEXT", "localhost", 9092)]


def test_entrypoint_kafka_env_overrides_the_file_and_arguments_override_env(entrypoint) -> None:
    argv, env = entrypoint(
        ["--override", "num.partitions=7"],
        {"KAFKA_ADVERTISED_LISTENERS": "PLAINTEXT://broker.example:9092", "KAFKA_NUM_PARTITIONS": "3",
         "KAFKA_LOG_RETENTION_HOURS": "1", "KAFKA_METRICS_PORT": "0"},
    )
    config = _resolve(argv, env)
    assert config.advertised_listeners() == [("PLAINTEXT", "broker.example", 9092)]
    assert config.get("num.partitions") == 7
    assert config.log_retention_ms == 3_600_000
    assert config.get("metrics.port") == 0


def test_entrypoint_reads_bitnami_and_apache_image_variables(entrypoint) -> None:
    argv, env = entrypoint(env={"KAFKA_CFG_NUM_PARTITIONS": "4", "KAFKA_CFG_AUTO_CREATE_TOPICS_ENABLE": "false",
                                "CLUSTER_ID": "MkU3OEVBNTcwNTJENDM2Qk"})
    assert not [k for k in env if k.startswith("KAFKA_CFG_")]
    config = _resolve(argv, env)
    assert config.get("num.partitions") == 4
    assert config.get("auto.create.topics.enable") is False
    assert config.get("cluster.id") == "MkU3OEVBNTcwNTJENDM2Qk"


def test_entrypoint_listeners_without_advertised_advertise_the_listeners(entrypoint) -> None:
    argv, env = entrypoint(env={"KAFKA_LISTENERS": "PLAINTEXT://0.0.0.0:19092"})
    config = _resolve(argv, env)
    assert config.advertised_listeners() == [("PLAINTEXT", "0.0.0.0", 19092)]  # as Kafka: = listeners


def test_entrypoint_runs_other_commands(entrypoint) -> None:
    argv, _ = entrypoint(["python", "-m", "broker.ops.admin_cli", "list-topics"])
    assert argv == ["-m", "broker.ops.admin_cli", "list-topics"]


# --- compose -----------------------------------------------------------------------------------

def _compose(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def _service_config(env: dict[str, str]) -> BrokerConfig:
    return BrokerConfig.load(IMAGE_CONFIG, environ={k: str(v) for k, v in env.items()})


def test_compose_two_listeners_healthcheck_volume_and_topic_init() -> None:
    doc = _compose(ROOT / "docker-compose.yml")
    kafka = doc["services"]["kafka"]
    assert "9092:9092" in kafka["ports"] and "9404:9404" in kafka["ports"]
    assert "kafka-data:/var/lib/kafka/data" in kafka["volumes"] and "kafka-data" in doc["volumes"]
    assert "broker.ops.healthcheck" in " ".join(kafka["healthcheck"]["test"])
    config = _service_config(kafka["environment"])
    config.validate_listeners()
    assert dict((n, (h, p)) for n, h, p in config.advertised_listeners()) == {
        "INTERNAL": ("kafka", 29092), "EXTERNAL": ("localhost", 9092)}
    assert {p for _n, _h, p in config.listeners()} == {29092, 9092}
    init = doc["services"]["init-topics"]
    assert init["depends_on"]["kafka"]["condition"] == "service_healthy"
    cmd = init["command"]
    assert cmd[:3] == ["python", "-m", "broker.ops.admin_cli"] and "create-topic" in cmd
    assert cmd[cmd.index("--bootstrap") + 1] == "kafka:29092", "containers must use the INTERNAL listener"


def test_compose_override_example_is_consistent() -> None:
    base = _compose(ROOT / "docker-compose.yml")["services"]["kafka"]["environment"]
    over = _compose(ROOT / "docker" / "compose.two-listeners.yml")["services"]
    env = {**base, **over["kafka"]["environment"]}
    env["KAFKA_ADVERTISED_LISTENERS"] = env["KAFKA_ADVERTISED_LISTENERS"].replace(
        "${KAFKA_EXTERNAL_HOST:-localhost}", "devbox.example.com")
    config = _service_config(env)
    config.validate_listeners()
    assert ("EXTERNAL", "devbox.example.com", 9092) in config.advertised_listeners()
    assert "kafka:29092" in over["client"]["command"]


def test_listener_validation_matches_kafka() -> None:
    def cfg(**props: str) -> BrokerConfig:
        return BrokerConfig({k.replace("_", "."): v for k, v in props.items()})

    with pytest.raises(ValueError, match="No security protocol defined for listener EXTERNAL"):
        cfg(listeners="EXTERNAL://:9092").validate_listeners()
    with pytest.raises(ValueError, match="serves PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL"):
        cfg(listeners="X://:9093", listener_security_protocol_map="X:SOMETHING").validate_listeners()
    cfg(listeners="SSL://:9093").validate_listeners()  # the keystore is read when the listener starts
    with pytest.raises(ValueError, match="not in listeners"):
        cfg(listeners="PLAINTEXT://:9092", advertised_listeners="OTHER://h:1").validate_listeners()
    cfg(listeners="PLAINTEXT://:9092,CONTROLLER://:9093").validate_listeners()


def test_wheel_carries_every_runtime_file(tmp_path):
    """The image installs the broker with pip: the wheel must hold every module and data file the
    packages load at run time (the vendored Kafka JSON specs in protocol/schemas, not only .py).
    Built from a fresh copy of the sources, so no earlier build/ or egg-info can mask a gap."""
    import zipfile

    packages = ("broker", "protocol", "storage", "coordinator")
    src = tmp_path / "src"
    junk = shutil.ignore_patterns("__pycache__", "*.pyc")
    for pkg in packages:
        shutil.copytree(ROOT / pkg, src / pkg, ignore=junk)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path / "dist"),
                    str(src)], check=True, cwd=tmp_path)
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    wanted = {str(p.relative_to(src)) for pkg in packages for p in (src / pkg).rglob("*")
              if p.is_file() and p.suffix in (".py", ".json")}
    assert wanted - names == set()
