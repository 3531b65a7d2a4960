"""The package as users install it: the wheel built from this tree, in a venv with nothing but its
runtime dependencies, started with its console script ``pykafka-broker`` from a directory outside
the source tree. It must serve produce (every codec), transactions, a KIP-848 consumer group and
UpdateFeatures, which load the JSON schemas shipped in ``protocol/schemas`` and
``coordinator/group/schemas``.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker_process import api_versions_ok, free_port
from tests.support.runtime_env import ROOT, ensure_runtime_venv, runtime_env


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    python = ensure_runtime_venv()
    home = tmp_path_factory.mktemp("installed")
    port = free_port()
    log = open(home / "broker.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(
        [str(python.parent / "pykafka-broker"), "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
         "--override", "log.dirs=./data", "--override", "group.initial.rebalance.delay.ms=0"],
        cwd=home, stdout=log, stderr=subprocess.STDOUT, env=runtime_env())
    deadline = time.monotonic() + 30
    while not api_versions_ok("127.0.0.1", port):
        assert proc.poll() is None and time.monotonic() < deadline, (home / "broker.log").read_text()
        time.sleep(0.05)
    yield python, f"127.0.0.1:{port}", home
    proc.terminate()
    assert proc.wait(30) == 0, (home / "broker.log").read_text()[-3000:]
    log.close()


def test_runtime_venv_has_no_test_only_libraries_and_no_source_tree(installed):
    python, _bootstrap, home = installed
    code = (
        "import importlib.util, broker, protocol.compression as c\n"
        "missing = [m for m in ('snappy', 'lz4', 'zstandard', 'pytest') if importlib.util.find_spec(m) is None]\n"
        "print(broker.__file__); print(','.join(missing))\n"
    )
    out = subprocess.run([str(python), "-c", code], cwd=home, env=runtime_env(), capture_output=True, text=True,
                         check=True).stdout.split("\n")
    assert "site-packages" in out[0] and not out[0].startswith(str(ROOT) + "/broker"), out[0]
    assert out[1] == "snappy,lz4,zstandard,pytest"
    assert (home / "data" / "meta.properties").exists()  # log.dirs=./data, relative to where it runs


def test_produce_every_codec_and_a_transaction(installed):
    _python, bootstrap, _home = installed
    topic = f"pkg-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # must outlive the future
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        p = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "enable.idempotence": True})
        for i in range(50):
            p.produce(topic, key=b"k", value=f"{codec}-{i}".encode(), partition=0)
        assert p.flush(15) == 0
    t = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"pkg-{uuid.uuid4().hex[:6]}",
                  "compression.type": "lz4"})
    t.init_transactions(15)
    t.begin_transaction()
    t.produce(topic, value=b"committed", partition=0)
    t.commit_transaction(15)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"pkg-{uuid.uuid4().hex[:6]}",
                  "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    c.subscribe([topic])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 251 and time.monotonic() < deadline:
        got += [m.value() for m in c.consume(500, 1.0) if m.error() is None]
    c.close()
    assert len(got) == 251 and got[-1] == b"committed"


def test_kip848_consumer_group(installed):
    _python, bootstrap, _home = installed
    topic = f"pkg848-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # must outlive the future
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(15)
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(20):
        p.produce(topic, value=b"%d" % i, partition=i % 2)
    assert p.flush(15) == 0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"pkg848-{uuid.uuid4().hex[:6]}",
                  "group.protocol": "consumer", "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 20 and time.monotonic() < deadline:
        got += [m.value() for m in c.consume(100, 1.0) if m.error() is None]
    c.close()
    assert sorted(got, key=int) == [b"%d" % i for i in range(20)]


def test_update_features(installed):
    from kafka.admin import KafkaAdminClient

    _python, bootstrap, _home = installed
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        before = admin.describe_features()["group.version"]
        assert before["finalized"] == (1, 1)
        assert admin.update_features({"group.version": ("SAFE_DOWNGRADE", 0)}) == {"group.version": "OK"}
        assert "group.version" not in admin.describe_features() or \
            admin.describe_features()["group.version"].get("finalized") is None
        assert admin.update_features({"group.version": 1}) == {"group.version": "OK"}
        after = admin.describe_features()["group.version"]
        assert after["finalized"] == (1, 1) and after["finalized_epoch"] == before["finalized_epoch"] + 2
    finally:
        admin.close()


def test_schemas_ship_in_the_wheel():
    """Every JSON schema the packages load is in the installed tree."""
    python = ensure_runtime_venv()
    site = next(Path(python).parent.parent.glob("lib/python*/site-packages"))
    for folder in ("protocol/schemas", "coordinator/group/schemas", "broker/inspect/schemas"):
        shipped = sorted(p.name for p in (site / folder).glob("*.json"))
        assert shipped and shipped == sorted(p.name for p in (ROOT / folder).glob("*.json"))
    # the inspector page's stylesheet and script
    static = "broker/inspect/live/static"
    assert sorted(p.name for p in (site / static).iterdir()) == sorted(p.name for p in (ROOT / static).iterdir())
