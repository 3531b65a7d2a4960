"""Apache Kafka as a reference broker for tests and benchmarks.

``KafkaReference`` runs a real single-node KRaft Kafka (combined broker + controller) from the jars that
``tests/kafka_ref/pom.xml`` pulls from Maven Central, so every client scenario and perf tool can be run
against Apache Kafka and against our broker with the same code.

    ref = KafkaReference()
    ref.fetch()                      # mvn copy-dependencies once; cached under $KAFKA_REF_CACHE
    bootstrap = ref.start(tmp_path)  # "127.0.0.1:<port>", answers ApiVersions and Metadata
    ref.run_tool("org.apache.kafka.tools.ProducerPerformance", [...])
    ref.stop()

Needs ``java`` (17+) on PATH (or JAVA_HOME) and ``mvn`` for the first fetch. The cache lives in
``${KAFKA_REF_CACHE:-~/.cache/pykafka-ref}/kafka-<version>-<pom hash>/libs`` (outside git).
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
KAFKA_REF_POM = REPO_ROOT / "tests" / "kafka_ref" / "pom.xml"

STORAGE_TOOL = "kafka.tools.StorageTool"
KAFKA_MAIN = "kafka.Kafka"

# The JVM flags Kafka's own kafka-run-class.sh uses for the broker (minus GC logging), small heap.
BROKER_JVM_OPTS = (
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
)
TOOL_JVM_OPTS = ("-Xmx512m", "-Djava.awt.headless=true")

_LOG4J2_TEMPLATE = """\
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.target = {target}
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = {level}
rootLogger.appenderRef.out.ref = OUT
logger.kafka_request.name = kafka.request.logger
logger.kafka_request.level = WARN
logger.state_change.name = state.change.logger
logger.state_change.level = INFO
"""


class KafkaReferenceError(RuntimeError):
    pass


def kafka_version(pom: Path = KAFKA_REF_POM) -> str:
    """The Kafka version pinned in tests/kafka_ref/pom.xml (single source of truth)."""
    m = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", pom.read_text())
    if not m:
        raise KafkaReferenceError(f"no <kafka.version> in {pom}")
    return m.group(1).strip()


def cache_root() -> Path:
    env = os.environ.get("KAFKA_REF_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "pykafka-ref"


def java_executable() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    java = shutil.which("java")
    if not java:
        raise KafkaReferenceError("java not found (install openjdk-17-jre-headless or set JAVA_HOME)")
    return java


def mvn_executable() -> str:
    mvn = shutil.which("mvn")
    if not mvn:
        raise KafkaReferenceError("mvn not found (install maven)")
    return mvn


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def random_cluster_id() -> str:
    """What Kafka's Uuid.randomUuid().toString() looks like: 22 chars of url-safe base64, no leading '-'."""
    while True:
        s = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not s.startswith("-"):
            return s


# ---------------------------------------------------------------------------------------------------
# Readiness probe: a real ApiVersions (and Metadata) round trip, usable against any Kafka-compatible
# bootstrap (ours too).


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed by broker")
        buf += chunk
    return bytes(buf)


def _round_trip(sock: socket.socket, request, correlation_id: int) -> bytes:
    """Send ``request`` (a kafka-python ApiMessage at a fixed version), return the response body bytes
    after the correlation id (the caller knows whether a tagged-field header section follows)."""
    request.with_header(correlation_id=correlation_id, client_id="pykafka-probe")
    sock.sendall(request.encode(header=True, framed=True))
    (size,) = struct.unpack(">i", _recv_exact(sock, 4))
    frame = _recv_exact(sock, size)
    (corr,) = struct.unpack(">i", frame[:4])
    if corr != correlation_id:
        raise KafkaReferenceError(f"correlation id mismatch: sent {correlation_id}, got {corr}")
    return frame[4:]


def probe_kafka_api(host: str, port: int, timeout: float = 2.0, expect_broker: bool = True) -> dict:
    """One ApiVersions v3 + Metadata v12 exchange. Returns {'api_keys': {key: (min, max)}, 'brokers': [...]}.
    Raises on any failure (connection refused, error code, no brokers yet)."""
    from kafka.protocol.metadata import (
        ApiVersionsRequest,
        ApiVersionsResponse,
        MetadataRequest,
        MetadataResponse,
    )

    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        req = ApiVersionsRequest[3](client_software_name="pykafka-probe", client_software_version="1.0")
        body = _round_trip(sock, req, 1)
        # KIP-511: the ApiVersions response header is always v0 (correlation id only).
        resp = ApiVersionsResponse[3].decode(body)
        if resp.error_code != 0:
            raise KafkaReferenceError(f"ApiVersions error_code={resp.error_code}")
        api_keys = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
        if 3 not in api_keys:
            raise KafkaReferenceError("broker does not advertise Metadata")
        brokers: list[tuple[int, str, int]] = []
        if expect_broker:
            mreq = MetadataRequest[12](topics=[], allow_auto_topic_creation=False)
            mbody = _round_trip(sock, mreq, 2)
            # Metadata v12 is flexible: response header v1 = correlation id + tagged fields (empty: 0x00).
            if mbody[:1] != b"\x00":
                raise KafkaReferenceError("unexpected tagged fields in Metadata response header")
            mresp = MetadataResponse[12].decode(mbody[1:])
            brokers = [(b.node_id, b.host, b.port) for b in mresp.brokers]
            if not brokers:
                raise KafkaReferenceError("Metadata lists no brokers yet")
        return {"api_keys": api_keys, "brokers": brokers}


def wait_for_kafka_api(bootstrap: str, timeout: float = 60.0, proc: subprocess.Popen | None = None,
                       log: Path | None = None, interval: float = 0.1) -> dict:
    """Poll TCP connect + ApiVersions/Metadata until they succeed, the process dies, or timeout."""
    host, _, port = bootstrap.rpartition(":")
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise KafkaReferenceError(
                f"broker process exited with {proc.returncode} before answering; log tail:\n{_tail(log)}")
        try:
            return probe_kafka_api(host, int(port))
        except Exception as e:  # noqa: BLE001 - keep polling on anything
            last = e
            time.sleep(interval)
    raise KafkaReferenceError(f"{bootstrap} did not answer within {timeout}s: {last!r}\n{_tail(log)}")


def _end(proc: subprocess.Popen, sig: int, timeout: float) -> int | None:
    """Send ``sig`` (SIGTERM: Kafka's controlled shutdown), wait, then SIGKILL. The exit code."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    return proc.returncode


def _tail(path: Path | None, n: int = 40) -> str:
    if path is None or not path.exists():
        return ""
    lines = path.read_text(errors="replace").splitlines()
    return "\n".join(lines[-n:])


# ---------------------------------------------------------------------------------------------------


class KafkaReference:
    """A single-node Apache Kafka (KRaft, combined broker+controller) on free loopback ports."""

    def __init__(self, cache: Path | None = None, heap: str = "512m",
                 extra_props: Mapping[str, object] | None = None,
                 extra_listeners: Mapping[str, str] | None = None):
        """``extra_listeners``: {name: security protocol} served beside PLAINTEXT, each on a free
        port (``listener_ports``), with their settings in ``extra_props`` (listener.name.<l>.*)."""
        self.version = kafka_version()
        pom_hash = hashlib.sha256(KAFKA_REF_POM.read_bytes()).hexdigest()[:10]
        self.home = (cache or cache_root()) / f"kafka-{self.version}-{pom_hash}"
        self.libs = self.home / "libs"
        self.heap = heap
        self.extra_props = dict(extra_props or {})
        self.extra_listeners = dict(extra_listeners or {})
        self.listener_ports: dict[str, int] = {}
        self.proc: subprocess.Popen | None = None
        self.workdir: Path | None = None
        self.port: int | None = None
        self.controller_port: int | None = None
        self.timings: dict[str, float] = {}
        self.poll_interval = 0.1  # readiness polls; the benchmark polls every 10 ms, as for ours

    # -- fetch -------------------------------------------------------------------------------------
    @property
    def classpath(self) -> str:
        return str(self.libs / "*")

    def _fetched(self) -> bool:
        marker = self.home / ".complete"
        if not marker.exists():
            return False
        names = marker.read_text().split()
        return bool(names) and all((self.libs / n).exists() for n in names)

    def fetch(self) -> Path:
        """Copy Kafka's jars (and their dependencies) into the cache, once. Returns the libs dir."""
        t0 = time.monotonic()
        if self._fetched():
            self.timings["fetch"] = time.monotonic() - t0
            return self.libs
        self.home.mkdir(parents=True, exist_ok=True)
        with open(self.home / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # concurrent test sessions / xdist workers
            if not self._fetched():
                tmp = self.home / f"libs.tmp.{os.getpid()}"
                shutil.rmtree(tmp, ignore_errors=True)
                cmd = [mvn_executable(), "-B", "-q", "-f", str(KAFKA_REF_POM),
                       "dependency:copy-dependencies", f"-DoutputDirectory={tmp}"]
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
                if r.returncode != 0:
                    shutil.rmtree(tmp, ignore_errors=True)
                    raise KafkaReferenceError(f"{' '.join(cmd)} failed:\n{r.stdout}\n{r.stderr}")
                jars = sorted(p.name for p in tmp.glob("*.jar"))
                if not any(n.startswith("kafka_2.13-") for n in jars):
                    raise KafkaReferenceError(f"kafka_2.13 jar missing after fetch: {jars}")
                shutil.rmtree(self.libs, ignore_errors=True)
                tmp.rename(self.libs)
                (self.home / ".complete").write_text("\n".join(jars) + "\n")
        self.timings["fetch"] = time.monotonic() - t0
        return self.libs

    # -- configuration -----------------------------------------------------------------------------
    def server_properties(self, workdir: Path, port: int, controller_port: int) -> dict[str, object]:
        props: dict[str, object] = {
            "process.roles": "broker,controller",
            "node.id": 1,
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(workdir / "data"),
            "num.partitions": 1,
            "default.replication.factor": 1,
            "min.insync.replicas": 1,
            "offsets.topic.replication.factor": 1,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
            "share.coordinator.state.topic.replication.factor": 1,
            "share.coordinator.state.topic.min.isr": 1,
            "group.initial.rebalance.delay.ms": 0,
            "auto.create.topics.enable": "true",
            "delete.topic.enable": "true",
            # Tests write records with fixed timestamps years old: a retention pass during a session
            # would delete them (Kafka checks 30 s after start-up, then every 5 minutes by default).
            "log.retention.check.interval.ms": 3600000,
            "log.initial.task.delay.ms": 3600000,
        }
        for name, protocol in self.extra_listeners.items():
            port = self.listener_ports[name]
            props["listeners"] = f"{props['listeners']},{name}://127.0.0.1:{port}"
            props["advertised.listeners"] = f"{props['advertised.listeners']},{name}://127.0.0.1:{port}"
            props["listener.security.protocol.map"] = f"{props['listener.security.protocol.map']},{name}:{protocol}"
        props.update(self.extra_props)
        return props

    def _write_log4j(self, path: Path, level: str, target: str) -> Path:
        path.write_text(_LOG4J2_TEMPLATE.format(level=level, target=target))
        return path

    # -- lifecycle ---------------------------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        if self.port is None:
            raise KafkaReferenceError("not started")
        return f"127.0.0.1:{self.port}"

    def start(self, workdir: str | os.PathLike, timeout: float = 60.0, attempts: int = 3) -> str:
        """Format storage and start the broker in ``workdir``; return "127.0.0.1:<port>" once it answers."""
        if self.proc is not None:
            raise KafkaReferenceError("already started")
        t0 = time.monotonic()
        self.fetch()
        t_fetch = time.monotonic()
        workdir = Path(workdir).resolve()
        last: Exception | None = None
        for attempt in range(attempts):
            wd = workdir if attempt == 0 else workdir / f"retry{attempt}"
            try:
                self._start_once(wd, timeout)
                self.timings["start_total"] = time.monotonic() - t0
                self.timings["format_and_start"] = time.monotonic() - t_fetch
                return self.bootstrap
            except KafkaReferenceError as e:  # most likely a port grabbed between free_port() and bind
                last = e
                self.stop()
        raise KafkaReferenceError(f"Kafka reference failed to start after {attempts} attempts: {last}")

    def _start_once(self, workdir: Path, timeout: float) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.workdir = workdir
        self.port, self.controller_port = free_port(), free_port()
        while self.controller_port == self.port:
            self.controller_port = free_port()
        self.listener_ports = {}
        for name in self.extra_listeners:
            port = free_port()
            while port in (self.port, self.controller_port, *self.listener_ports.values()):
                port = free_port()
            self.listener_ports[name] = port
        props = self.server_properties(workdir, self.port, self.controller_port)
        conf = workdir / "server.properties"
        conf.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        log4j = self._write_log4j(workdir / "log4j2.properties", "INFO", "SYSTEM_OUT")
        java = java_executable()

        t = time.monotonic()
        fmt = subprocess.run(
            [java, *TOOL_JVM_OPTS, f"-Dlog4j2.configurationFile={log4j}", "-cp", self.classpath, STORAGE_TOOL,
             "format", "--standalone", "-t", random_cluster_id(), "-c", str(conf)],
            capture_output=True, text=True, timeout=120)
        (workdir / "format.log").write_text(fmt.stdout + fmt.stderr)
        if fmt.returncode != 0:
            raise KafkaReferenceError(f"storage format failed ({fmt.returncode}):\n{fmt.stdout}\n{fmt.stderr}")
        self.timings["format"] = time.monotonic() - t

        t = time.monotonic()
        log = workdir / "broker.log"
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(
                [java, f"-Xmx{self.heap}", f"-Xms{self.heap}", *BROKER_JVM_OPTS,
                 f"-Dlog4j2.configurationFile={log4j}", f"-Dkafka.logs.dir={workdir / 'logs'}",
                 "-cp", self.classpath, KAFKA_MAIN, str(conf)],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=workdir,
                start_new_session=True)
        atexit.register(self.stop)
        wait_for_kafka_api(self.bootstrap, timeout=timeout, proc=self.proc, log=log, interval=self.poll_interval)
        self.timings["start"] = time.monotonic() - t

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM (controlled shutdown), wait, then SIGKILL. Returns the exit code."""
        proc, self.proc = self.proc, None
        if proc is None:
            return None
        with contextlib.suppress(ProcessLookupError):
            atexit.unregister(self.stop)
        return _end(proc, signal.SIGTERM, timeout)

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, n: int = 60) -> str:
        return _tail(self.workdir / "broker.log" if self.workdir else None, n)

    def __enter__(self) -> KafkaReference:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- tools -------------------------------------------------------------------------------------
    def run_tool(self, main_class: str, args: Sequence[str] | Iterable[str], timeout: float = 120.0,
                 check: bool = False, jvm_args: Sequence[str] = (), log_level: str = "WARN",
                 env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess:
        """Run one of Kafka's tools (e.g. org.apache.kafka.tools.ProducerPerformance) with Kafka's
        classpath. Logging goes to stderr at ``log_level``; tool output stays on stdout.
        The tool can point at any bootstrap (this reference or our broker)."""
        self.fetch()
        conf_dir = self.home / "conf"
        conf_dir.mkdir(exist_ok=True)
        log4j = conf_dir / f"tools-log4j2-{log_level}.properties"
        if not log4j.exists():
            self._write_log4j(log4j, log_level, "SYSTEM_ERR")
        cmd = [java_executable(), *TOOL_JVM_OPTS, *jvm_args, f"-Dlog4j2.configurationFile={log4j}",
               "-cp", self.classpath, main_class, *[str(a) for a in args]]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                               env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
            err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
            r = subprocess.CompletedProcess(cmd, -9, out, err + f"\nTIMEOUT after {timeout}s")
        if check and r.returncode != 0:
            raise KafkaReferenceError(f"{main_class} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
        return r


class KafkaReferenceCluster:
    """N Apache Kafka nodes on loopback, each its own JVM: node 1 is broker and the (standalone)
    KRaft controller, nodes 2..N brokers only, as a small production cluster. Nodes can be stopped
    (SIGTERM: a controlled shutdown, or SIGKILL) and started again over the same data."""

    def __init__(self, nodes: int = 3, heap: str = "512m", extra_props: Mapping[str, object] | None = None):
        self.reference = KafkaReference(heap=heap, extra_props=extra_props)  # jars, tools, defaults
        self.count = nodes
        self.heap = heap
        self.cluster_id = random_cluster_id()
        self.ports: dict[int, int] = {}
        self.controller_port: int | None = None
        self.procs: dict[int, subprocess.Popen] = {}
        self.workdir: Path | None = None
        self.timings: dict[str, float] = {}

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{self.ports[i]}" for i in sorted(self.ports))

    def node_bootstrap(self, node_id: int) -> str:
        return f"127.0.0.1:{self.ports[node_id]}"

    def _props(self, node_id: int) -> dict[str, object]:
        assert self.workdir is not None and self.controller_port is not None
        port = self.ports[node_id]
        props = self.reference.server_properties(self.workdir / f"node-{node_id}", port, self.controller_port)
        props.update({
            "node.id": node_id,
            "default.replication.factor": self.count,
            "offsets.topic.replication.factor": self.count,
            "transaction.state.log.replication.factor": self.count,
            "share.coordinator.state.topic.replication.factor": self.count,
        })
        if node_id == 1:
            props["process.roles"] = "broker,controller"
        else:  # a broker only: no CONTROLLER listener of its own
            props["process.roles"] = "broker"
            props["listeners"] = props["advertised.listeners"] = f"PLAINTEXT://127.0.0.1:{port}"
        props.update(self.reference.extra_props)
        return props

    def start(self, workdir: str | os.PathLike, timeout: float = 90.0) -> str:
        t0 = time.monotonic()
        self.reference.fetch()
        self.workdir = Path(workdir).resolve()
        taken: set[int] = set()
        for i in range(1, self.count + 2):
            port = free_port()
            while port in taken:
                port = free_port()
            taken.add(port)
            if i <= self.count:
                self.ports[i] = port
            else:
                self.controller_port = port
        java = java_executable()
        for node_id in range(1, self.count + 1):
            d = self.workdir / f"node-{node_id}"
            d.mkdir(parents=True, exist_ok=True)
            conf = d / "server.properties"
            conf.write_text("".join(f"{k}={v}\n" for k, v in self._props(node_id).items()))
            self.reference._write_log4j(d / "log4j2.properties", "INFO", "SYSTEM_OUT")
            quorum = ["--standalone"] if node_id == 1 else ["--no-initial-controllers"]
            fmt = subprocess.run(
                [java, *TOOL_JVM_OPTS, f"-Dlog4j2.configurationFile={d / 'log4j2.properties'}", "-cp",
                 self.reference.classpath, STORAGE_TOOL, "format", *quorum, "-t", self.cluster_id, "-c", str(conf)],
                capture_output=True, text=True, timeout=120)
            if fmt.returncode != 0:
                raise KafkaReferenceError(f"format of node {node_id} failed:\n{fmt.stdout}\n{fmt.stderr}")
        self.timings["format"] = time.monotonic() - t0
        t = time.monotonic()
        for node_id in range(1, self.count + 1):
            self.start_node(node_id, wait=False)
        self.wait_for_brokers(self.count, timeout)
        self.timings["start"] = time.monotonic() - t
        return self.bootstrap

    def start_node(self, node_id: int, wait: bool = True, timeout: float = 60.0) -> None:
        assert self.workdir is not None
        d = self.workdir / f"node-{node_id}"
        with open(d / "broker.log", "ab") as out:
            self.procs[node_id] = subprocess.Popen(
                [java_executable(), f"-Xmx{self.heap}", f"-Xms{self.heap}", *BROKER_JVM_OPTS,
                 f"-Dlog4j2.configurationFile={d / 'log4j2.properties'}", f"-Dkafka.logs.dir={d / 'logs'}",
                 "-cp", self.reference.classpath, KAFKA_MAIN, str(d / "server.properties")],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=d, start_new_session=True)
        atexit.register(self.stop)
        if wait:
            wait_for_kafka_api(self.node_bootstrap(node_id), timeout=timeout, proc=self.procs[node_id],
                               log=d / "broker.log")

    def wait_for_brokers(self, count: int, timeout: float = 60.0) -> None:
        """Until the first node's Metadata lists ``count`` brokers."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                if len(probe_kafka_api("127.0.0.1", self.ports[1])["brokers"]) >= count:
                    return
            except Exception:  # noqa: BLE001 - still starting
                pass
            for node_id, proc in self.procs.items():
                if proc.poll() is not None:
                    raise KafkaReferenceError(f"node {node_id} exited:\n{self.log_tail(node_id)}")
            if time.monotonic() > deadline:
                raise KafkaReferenceError(f"{count} brokers not registered in {timeout}s:\n{self.log_tail(1)}")
            time.sleep(0.1)

    def stop_node(self, node_id: int, clean: bool = True, timeout: float = 60.0) -> int | None:
        proc = self.procs.pop(node_id, None)
        return None if proc is None else _end(proc, signal.SIGTERM if clean else signal.SIGKILL, timeout)

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            atexit.unregister(self.stop)
        for node_id in sorted(self.procs, reverse=True):  # the controller last
            self.stop_node(node_id)

    def log_tail(self, node_id: int, n: int = 60) -> str:
        return _tail(self.workdir / f"node-{node_id}" / "broker.log" if self.workdir else None, n)

    def run_tool(self, main_class: str, args: Sequence[str] | Iterable[str], **kwargs) -> subprocess.CompletedProcess:
        return self.reference.run_tool(main_class, args, **kwargs)


def main(argv: Sequence[str] | None = None) -> int:
    """python -m tests.support.kafka_reference fetch | run [WORKDIR]

    fetch: download the jars into the cache (a CI warm-up step).
    run:   start a reference Kafka, print its bootstrap, run until Ctrl-C / SIGTERM."""
    import argparse
    import sys
    import tempfile

    ap = argparse.ArgumentParser(prog="python -m tests.support.kafka_reference")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("fetch")
    run = sub.add_parser("run")
    run.add_argument("workdir", nargs="?")
    args = ap.parse_args(argv)
    ref = KafkaReference()
    if args.cmd == "fetch":
        ref.fetch()
        print(f"Apache Kafka {ref.version}: {ref.libs} ({ref.timings['fetch']:.1f}s)")
        return 0
    workdir = args.workdir or tempfile.mkdtemp(prefix="kafka-ref-")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        bootstrap = ref.start(workdir)
        print(f"Apache Kafka {ref.version} at {bootstrap} (workdir {workdir}); "
              + ", ".join(f"{k}={v:.1f}s" for k, v in ref.timings.items()), flush=True)
        while ref.is_running():
            time.sleep(1)
        print(f"broker exited:\n{ref.log_tail()}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        ref.stop()


if __name__ == "__main__":
    raise SystemExit(main())
