"""A real Spark standalone cluster on loopback, from the pyspark installation: one master and N workers,
each its own JVM (``spark-class org.apache.spark.deploy.master.Master`` / ``...worker.Worker``), as
``sbin/start-master.sh`` and ``sbin/start-worker.sh`` would start them (pip's pyspark ships
``bin/spark-class`` and the jars, not those two scripts). No Docker.

    cluster = SparkStandaloneCluster(tmp_path, workers=2).start()   # waits for the workers to register
    cluster.master_url                                            # spark://127.0.0.1:<port>
    proc = cluster.submit(["--conf", "spark.jars=...", "job.py", ...], log=tmp_path / "driver.log")
    cluster.kill_worker(1)      # kill -9 of the worker's JVM and of the executor JVMs it launched
    cluster.start_worker(1)     # a new worker JVM on the same work dir, registered again
    cluster.stop()

Everything is on 127.0.0.1 and free ports (``SPARK_LOCAL_IP``), with its own ``SPARK_CONF_DIR``,
work and scratch directories under the given directory; each daemon runs in a process group of its
own (the executors a worker launches are its children, in its group), and ``stop`` kills the groups.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.broker_process import free_port

# Small JVMs that start fast on 2 cores: C1 only, serial GC (as tests/e2e/test_pipeline.py's FAST_START).
FAST_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


@dataclass
class _Daemon:
    name: str
    proc: subprocess.Popen
    log: Path
    port: int = 0
    webui: int = 0
    work_dir: Path | None = None
    dead: list[int] = field(default_factory=list)  # pids killed


def _children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...; comm may hold spaces and parentheses
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid:
            out.append(int(d.name))
    return out


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        kids = _children(todo.pop())
        out += kids
        todo += kids
    return out


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


class SparkStandaloneCluster:
    """``workers`` workers of ``cores`` cores and ``memory`` each (what they offer applications, not
    what they use); ``python``: the executors' and submitted drivers' Python; ``java_opts``: the
    executors' JVM options (``session_conf``), fast start-up by default."""

    def __init__(self, base: str | os.PathLike, workers: int = 2, cores: int = 2, memory: str = "2g",
                 python: str | None = None, java_opts: str = FAST_JVM) -> None:
        self.base = Path(base)
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.python = python or sys.executable
        self.java_opts = java_opts
        self.home = spark_home()
        self.conf_dir = self.base / "conf"
        self.master: _Daemon | None = None
        self._workers: dict[int, _Daemon] = {}

    # -- environment -----------------------------------------------------------------------------------

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The environment of every Spark process here (daemons, executors through their worker,
        spark-submit): loopback only, this installation, this conf dir, the test's Python."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_"))}
        env.update({
            "SPARK_HOME": str(self.home),
            "SPARK_CONF_DIR": str(self.conf_dir),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOCAL_HOSTNAME": "127.0.0.1",
            "SPARK_DAEMON_MEMORY": "384m",
            "SPARK_DAEMON_JAVA_OPTS": FAST_JVM,  # the master and workers only schedule
            "PYSPARK_PYTHON": self.python,
            "PYSPARK_DRIVER_PYTHON": self.python,
        })
        env.update(extra or {})
        return env

    @property
    def master_url(self) -> str:
        assert self.master is not None
        return f"spark://127.0.0.1:{self.master.port}"

    @property
    def webui_url(self) -> str:
        assert self.master is not None
        return f"http://127.0.0.1:{self.master.webui}"

    def spark_class(self) -> str:
        return str(self.home / "bin" / "spark-class")

    def spark_submit(self) -> str:
        return str(self.home / "bin" / "spark-submit")

    # -- lifecycle ---------------------------------------------------------------------------------------

    def _spawn(self, name: str, args: list[str], env: dict[str, str] | None = None) -> tuple[subprocess.Popen, Path]:
        log = self.base / "logs" / f"{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as out:
            proc = subprocess.Popen([self.spark_class(), *args], cwd=self.base, env=self.env(env),
                                    stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        return proc, log

    def start(self, timeout: float = 120.0) -> SparkStandaloneCluster:
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        port, webui = free_port(), free_port()
        proc, log = self._spawn("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                           "--port", str(port), "--webui-port", str(webui)])
        self.master = _Daemon("master", proc, log, port, webui)
        try:
            self._wait(lambda s: s is not None, timeout, "the master's web UI")
            for i in range(1, self.workers + 1):
                self._spawn_worker(i)
            self.wait_for_workers(self.workers, timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _spawn_worker(self, i: int) -> None:
        work = self.base / f"worker-{i}"
        local = self.base / f"worker-{i}-local"
        work.mkdir(parents=True, exist_ok=True)
        local.mkdir(parents=True, exist_ok=True)
        port, webui = free_port(), free_port()
        proc, log = self._spawn(f"worker-{i}", [
            "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--port", str(port),
            "--webui-port", str(webui), "--cores", str(self.cores), "--memory", self.memory,
            "--work-dir", str(work), self.master_url], env={"SPARK_LOCAL_DIRS": str(local)})
        self._workers[i] = _Daemon(f"worker-{i}", proc, log, port, webui, work)

    def start_worker(self, i: int, timeout: float = 120.0) -> None:
        """(Re)start worker ``i`` and wait until the master lists it alive."""
        old = self._workers.get(i)
        if old is not None and old.proc.poll() is None:
            return
        self._spawn_worker(i)
        self.wait_for_workers(len([w for w in self._workers.values() if w.proc.poll() is None]), timeout)

    def stop(self) -> None:
        for d in [*self._workers.values(), *([self.master] if self.master else [])]:
            self._kill_group(d)
        self._workers.clear()
        self.master = None

    def __enter__(self) -> SparkStandaloneCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @staticmethod
    def _kill_group(d: _Daemon) -> list[int]:
        if d.proc.poll() is not None and not _descendants(d.proc.pid):
            return []
        pids = [d.proc.pid, *_descendants(d.proc.pid)]
        try:
            os.killpg(d.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        for pid in pids[1:]:  # anything that left the group
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        d.proc.wait(30)
        d.dead += pids
        return pids

    # -- state ---------------------------------------------------------------------------------------

    def state(self) -> dict | None:
        """The master's JSON (``/json/``): workers, apps, cores; None while it does not answer."""
        try:
            with urllib.request.urlopen(self.webui_url + "/json/", timeout=5) as r:
                return json.loads(r.read())
        except (OSError, ValueError):
            return None

    def _wait(self, ok, timeout: float, what: str):
        deadline = time.monotonic() + timeout
        while True:
            assert self.master is not None
            if self.master.proc.poll() is not None:
                raise RuntimeError(f"the Spark master exited {self.master.proc.returncode}:\n{self.log_tail('master')}")
            s = self.state()
            if ok(s):
                return s
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what} not there after {timeout}s; master state {s}\n"
                                   + "\n".join(self.log_tail(n) for n in ["master", *self._worker_names()]))
            time.sleep(0.2)

    def _worker_names(self) -> list[str]:
        return [f"worker-{i}" for i in self._workers]

    def alive_workers(self, state: dict | None = None) -> list[dict]:
        s = state if state is not None else self.state()
        return [w for w in (s or {}).get("workers", []) if w.get("state") == "ALIVE"]

    def wait_for_workers(self, count: int, timeout: float = 120.0) -> dict:
        """Until the master lists ``count`` workers ALIVE (each of the running worker JVMs)."""
        ports = {w.port for w in self._workers.values() if w.proc.poll() is None}

        def ok(s):
            alive = self.alive_workers(s) if s else []
            return len(alive) >= count and ports <= {w.get("port") for w in alive}

        return self._wait(ok, timeout, f"{count} alive workers")

    def worker(self, i: int) -> _Daemon:
        return self._workers[i]

    def executor_pids(self, i: int) -> list[int]:
        """The executor JVMs worker ``i`` launched (its children running CoarseGrainedExecutorBackend)."""
        w = self._workers[i]
        return [p for p in _descendants(w.proc.pid) if "CoarseGrainedExecutorBackend" in _cmdline(p)]

    def executor_logs(self, i: int) -> list[Path]:
        """stderr of every executor worker ``i`` ran: <work dir>/<app id>/<executor id>/stderr."""
        w = self._workers[i]
        assert w.work_dir is not None
        return sorted(w.work_dir.glob("app-*/*/stderr"))

    def kill_worker(self, i: int) -> list[int]:
        """kill -9 of worker ``i``'s JVM and of the executors it launched; returns the pids killed."""
        return self._kill_group(self._workers[i])

    def log_tail(self, name: str, n: int = 40) -> str:
        path = self.base / "logs" / f"{name}.log"
        try:
            return f"--- {name}\n" + "\n".join(path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    # -- drivers -------------------------------------------------------------------------------------

    def submit(self, args: list[str], log: Path, env: dict[str, str] | None = None,
               cwd: str | os.PathLike | None = None) -> subprocess.Popen:
        """``spark-submit --master spark://... <args>`` (client mode: the driver on this machine) in a
        process group of its own (spark-submit's JVM and the Python driver it starts)."""
        with open(log, "ab") as out:
            return subprocess.Popen([self.spark_submit(), "--master", self.master_url, *args], cwd=cwd or self.base,
                                    env=self.env(env), stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)

    def session_conf(self, cores_max: int = 2, executor_memory: str = "512m") -> dict[str, str]:
        """Spark settings for an application on this cluster: one 1-core executor per worker (up to
        ``cores_max`` cores in all, so two applications fit side by side), small heaps, fast JVMs."""
        conf = {
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.cores.max": str(cores_max),
            "spark.executor.cores": "1",
            "spark.executor.memory": executor_memory,
            "spark.pyspark.python": self.python,
        }
        if self.java_opts:
            conf["spark.executor.extraJavaOptions"] = self.java_opts
        return conf
