"""Test helpers for Python users: a broker or a cluster of brokers on free loopback ports, and the
control endpoint wrapped in Python.

    from broker.testing import KafkaCluster

    with KafkaCluster(brokers=3, virtual_clock=True) as kafka:
        producer = confluent_kafka.Producer({"bootstrap.servers": kafka.bootstrap, ...})
        kafka.faults.push("EndTxn", "NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS")
        kafka.broker(2).down()
        kafka.clock.advance(days=7)
        assert kafka.requests.list(api="EndTxn")[-1]["error"] == "NONE"

With pytest the ``kafka_cluster`` fixture (``broker.testing.pytest_plugin``, registered when this
package is installed) gives a started single broker; ``@pytest.mark.kafka_cluster(brokers=3, ...)``
passes ``KafkaCluster``'s arguments.

The brokers run as a subprocess (``python -m broker`` of the given interpreter, default this one),
or with ``in_process=True`` on an event loop in a thread of this process; either way the helper
talks to them through the control endpoint, so what a test does is what any language can do with
curl (see the README's "Control endpoint").
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from broker.config.broker_config import BrokerConfig
from broker.control.setup import build_controls, process_clock
from broker.ops.cli import run

__all__ = ["ControlError", "KafkaCluster"]


class ControlError(RuntimeError):
    """The control endpoint refused an action (``status`` is the HTTP status)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Control:
    def __init__(self, url: str) -> None:
        self.url = url

    def call(self, method: str, path: str, body: Any = None, query: dict[str, Any] | None = None,
             timeout: float = 60.0) -> Any:
        target = self.url + path
        if query:
            target += "?" + urllib.parse.urlencode({k: v for k, v in query.items() if v is not None})
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(target, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            try:
                message = json.loads(e.read()).get("error", "")
            except ValueError:
                message = str(e)
            raise ControlError(e.code, message) from None


class Faults:
    """Fault rules in librdkafka's mock vocabulary (``broker.control.faults``)."""

    def __init__(self, control: _Control) -> None:
        self._control = control

    def push(self, api: str | int, *errors: str | int | dict[str, Any], broker: int | None = None,
             delay_ms: int = 0, **match: Any) -> list[dict[str, Any]]:
        """rd_kafka_mock_push_request_errors (``broker``: ..._broker_push_request_error_rtts): the
        next len(errors) requests of ``api`` get these errors, in order. An error may be a dict
        ``{"error": "NOT_COORDINATOR", "delay_ms": 100}``; ``"NONE"`` with a delay is a slow answer."""
        rule: dict[str, Any] = {"api": api, "errors": list(errors), **match}
        if broker is not None:
            rule["broker"] = broker
        if delay_ms:
            rule["delay_ms"] = delay_ms
        return list(self._control.call("POST", "/faults", rule)["added"])

    def add(self, rule: dict[str, Any] | list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Any rule (see the README): ``{"api": "Produce", "error": "NOT_ENOUGH_REPLICAS", "probability": 0.1}``."""
        return list(self._control.call("POST", "/faults", rule)["added"])

    def set_topic_error(self, topic: str, error: str | int | None) -> None:
        """rd_kafka_mock_topic_set_error: Metadata describes ``topic`` with ``error`` (no partitions)
        and AddPartitionsToTxn fails its partitions, until set back to None (or "NONE")."""
        for rule in self.list()["rules"]:
            if rule.get("topic") == topic and rule.get("api") in ("Metadata", "AddPartitionsToTxn") \
                    and rule.get("count") == -1:
                self.remove(rule["id"])
        if error is not None and error not in ("NONE", 0):
            self.add([{"api": api, "topic": topic, "error": error, "count": -1}
                      for api in ("Metadata", "AddPartitionsToTxn")])

    def remove(self, rule_id: int) -> None:
        self._control.call("DELETE", f"/faults/{rule_id}")

    def clear(self) -> None:
        self._control.call("DELETE", "/faults")

    def list(self) -> dict[str, Any]:
        return dict(self._control.call("GET", "/faults"))


class Clock:
    """The brokers' clock (``virtual_clock=True``)."""

    def __init__(self, control: _Control) -> None:
        self._control = control

    def advance(self, ms: float = 0, *, seconds: float = 0, minutes: float = 0, hours: float = 0,
                days: float = 0) -> dict[str, Any]:
        """Move time forward: every timeout, expiry and retention that came due runs."""
        total = ms + seconds * 1000 + minutes * 60_000 + hours * 3_600_000 + days * 86_400_000
        return dict(self._control.call("POST", "/clock/advance", {"ms": total}))

    def now_ms(self) -> int:
        return int(self._control.call("GET", "/clock")["now_ms"])


class Requests:
    """The request log: what the clients sent and what they were answered."""

    def __init__(self, control: _Control) -> None:
        self._control = control

    def list(self, api: str | int | None = None, **filters: Any) -> list[dict[str, Any]]:
        """Entries oldest first; filters: broker, client_id, transactional_id, group_id, topic, since, limit."""
        query = {"api": api, **filters}
        return list(self._control.call("GET", "/requests", query=query)["requests"])

    def clear(self) -> None:
        self._control.call("DELETE", "/requests")


class BrokerHandle:
    def __init__(self, control: _Control, node_id: int) -> None:
        self._control = control
        self.id = node_id

    def down(self, clean: bool = True) -> None:
        """rd_kafka_mock_broker_set_down: listeners closed, others take over (``clean=False``: as kill -9)."""
        self._control.call("POST", f"/brokers/{self.id}/down", {"clean": clean})

    def up(self) -> None:
        self._control.call("POST", f"/brokers/{self.id}/up", {})

    def rtt(self, ms: int) -> None:
        """rd_kafka_mock_broker_set_rtt: every answer of this broker held ``ms``."""
        self._control.call("POST", f"/brokers/{self.id}/rtt", {"ms": ms})


class KafkaCluster:
    """Brokers on free loopback ports with the control endpoint on; a context manager."""

    def __init__(self, brokers: int = 1, *, data_dir: str | os.PathLike[str] | None = None,
                 config: dict[str, Any] | None = None, virtual_clock: bool = False,
                 faults: str | os.PathLike[str] | None = None, emulate_kafka: str | None = None,
                 in_process: bool = False, python: str | None = None, start_timeout: float = 60.0) -> None:
        self.count = brokers
        self._own_dir = data_dir is None
        self.data_dir = Path(data_dir) if data_dir is not None else Path(tempfile.mkdtemp(prefix="pykafka-broker-"))
        self.control_port = free_port()
        self.properties: dict[str, str] = {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(self.data_dir / "data"),
            "control.port": str(self.control_port),
            "group.initial.rebalance.delay.ms": "0",
            "cluster.brokers": str(brokers),
        }
        if brokers > 1:  # what a cluster of three needs for its internal topics, as Kafka's defaults
            self.properties.update({"offsets.topic.replication.factor": str(min(brokers, 3)),
                                    "transaction.state.log.replication.factor": str(min(brokers, 3)),
                                    "transaction.state.log.min.isr": str(min(brokers, 2))})
        if virtual_clock:
            self.properties["control.clock"] = "virtual"
        if faults is not None:
            self.properties["control.faults.file"] = str(faults)
        if emulate_kafka is not None:
            self.properties["control.kafka.version"] = emulate_kafka
        self.properties.update({k: str(v) for k, v in (config or {}).items()})
        self.in_process = in_process
        self.python = python or sys.executable
        self.start_timeout = start_timeout
        self._control = _Control(f"http://127.0.0.1:{self.control_port}")
        self.faults = Faults(self._control)
        self.clock = Clock(self._control)
        self.requests = Requests(self._control)
        self._proc: subprocess.Popen[bytes] | None = None
        self._thread: _InProcess | None = None
        self.log_path = self.data_dir / "broker.log"

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self) -> KafkaCluster:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self.in_process:
            self._thread = _InProcess(self.properties)
            self._thread.start()
        else:
            args = [self.python, "-m", "broker"]
            for key, value in self.properties.items():
                args += ["--override", f"{key}={value}"]
            log = open(self.log_path, "ab")  # noqa: SIM115 - lives as long as the process
            self._proc = subprocess.Popen(args, cwd=self.data_dir, stdout=log, stderr=subprocess.STDOUT)
            log.close()
        self._wait_started()
        return self

    def _wait_started(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        while True:
            if self._proc is not None and self._proc.poll() is not None:
                raise RuntimeError(f"the broker exited with {self._proc.returncode}:\n{self.log_tail()}")
            if self._thread is not None and self._thread.error is not None:
                raise RuntimeError("the broker failed to start") from self._thread.error
            try:
                cluster = self._control.call("GET", "/cluster", timeout=2)
                if all(b["alive"] and b.get("ports") for b in cluster["brokers"]):
                    return
            except (OSError, ControlError):
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the brokers did not start in {self.start_timeout} s:\n{self.log_tail()}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None
        if self._thread is not None:
            self._thread.stop()
            self._thread = None
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> KafkaCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    # --- what tests use ----------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        """``bootstrap.servers`` for clients: every running broker."""
        brokers = self._control.call("GET", "/cluster")["brokers"]
        return ",".join(f"127.0.0.1:{b['ports']['PLAINTEXT']}" for b in brokers if b["alive"])

    def port(self, node_id: int) -> int:
        for b in self._control.call("GET", "/cluster")["brokers"]:
            if b["id"] == node_id and b["alive"]:
                return int(b["ports"]["PLAINTEXT"])
        raise ControlError(409, f"broker {node_id} is not running")

    def broker(self, node_id: int) -> BrokerHandle:
        return BrokerHandle(self._control, node_id)

    def describe(self) -> dict[str, Any]:
        return dict(self._control.call("GET", "/cluster"))

    def topic(self, name: str) -> dict[str, Any]:
        return dict(self._control.call("GET", f"/topics/{urllib.parse.quote(name, safe='')}"))

    def set_partition_leader(self, topic: str, partition: int, broker: int) -> dict[str, Any]:
        """rd_kafka_mock_partition_set_leader."""
        return dict(self._control.call("POST", f"/topics/{urllib.parse.quote(topic, safe='')}/partitions/"
                                               f"{partition}/leader", {"broker": broker}))

    def set_coordinator(self, kind: str, key: str, broker: int) -> dict[str, Any]:
        """rd_kafka_mock_coordinator_set: ``kind`` "transaction" or "group"."""
        return dict(self._control.call("POST", f"/coordinators/{kind}/{urllib.parse.quote(key, safe='')}",
                                       {"broker": broker}))

    def coordinator(self, kind: str, key: str) -> int:
        return int(self._control.call("GET", f"/coordinators/{kind}/{urllib.parse.quote(key, safe='')}")["leader"])

    def emulate(self, kafka_version: str | None) -> dict[str, Any]:
        """Advertise the API versions of this Apache Kafka release (None: this broker's own)."""
        return dict(self._control.call("POST", "/versions", {"kafka": kafka_version}))

    def set_api_version(self, api: str | int, min_version: int, max_version: int) -> dict[str, Any]:
        """rd_kafka_mock_set_apiversion: advertise ``api`` at these versions only (-1, -1: not at all)."""
        return dict(self._control.call("POST", "/versions", {"api": api, "min": min_version, "max": max_version}))

    def set_features(self, **levels: int) -> dict[str, Any]:
        """``set_features(transaction_version=1)``: as kafka-features.sh upgrade/downgrade."""
        return dict(self._control.call("POST", "/features", {k.replace("_", "."): v for k, v in levels.items()}))


class _InProcess(threading.Thread):
    """The brokers on their own event loop in a thread of this process."""

    def __init__(self, properties: dict[str, str]) -> None:
        super().__init__(name="pykafka-broker", daemon=True)
        self.properties = properties
        self.error: BaseException | None = None
        self._loop: Any = None
        self._stop_event: Any = None

    def run(self) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop_event = asyncio.Event()
            config = BrokerConfig(self.properties)
            config.validate_listeners()
            task = asyncio.create_task(run(config, process_clock(config), build_controls(config),
                                           stop=self._stop_event, signals=False))
            await task

        try:
            asyncio.run(main())
        except BaseException as e:  # noqa: BLE001 - reported to the thread that waits for the start
            self.error = e

    def stop(self) -> None:
        if self._loop is not None and self._stop_event is not None:
            self._loop.call_soon_threadsafe(self._stop_event.set)
        self.join(30)
