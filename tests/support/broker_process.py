"""Run the broker as a real subprocess on a free loopback port, for tests and benchmarks: from the
runtime install (``tests.support.runtime_env``), as users run it, never from the test venv."""

from __future__ import annotations

import os
import signal
import socket
import ssl
import struct
import subprocess
import time
from pathlib import Path

from tests.support.runtime_env import runtime_env, runtime_python

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_port_block(count: int) -> int:
    """A base port P with P .. P+count-1 free (``--brokers N`` listens on consecutive ports),
    chosen below Linux's ephemeral range so that no client connection takes one meanwhile."""
    import random

    for _ in range(200):
        base = random.randrange(20000, 32000 - count)
        socks = []
        try:
            for port in range(base, base + count):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError(f"no block of {count} free ports")


def api_versions_ok(host: str, port: int, timeout: float = 1.0,
                    tls: tuple[str, str, str] | None = None) -> bool:
    """Send a real ApiVersions v0 request and check the answer's error code; ``tls``: (CA, client
    certificate, key) PEM files for an SSL listener."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as plain:
            s = plain
            if tls is not None:
                context = ssl.create_default_context(cafile=tls[0])
                context.load_cert_chain(tls[1], tls[2])
                s = context.wrap_socket(plain, server_hostname=host)
            client = b"probe"
            body = struct.pack(">hhih", 18, 0, 1, len(client)) + client
            s.sendall(struct.pack(">i", len(body)) + body)
            head = _recv(s, 4)
            size = struct.unpack(">i", head)[0]
            resp = _recv(s, size)
            return struct.unpack_from(">ih", resp, 0) == (1, 0)
    except (OSError, ssl.SSLError):
        return False


def _recv(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise OSError("connection closed")
        buf += chunk
    return buf


class BrokerProcess:
    def __init__(self, data_dir: str | os.PathLike, port: int | None = None, overrides: dict | None = None,
                 env: dict | None = None, command_prefix: list[str] | None = None) -> None:
        self.data_dir = str(data_dir)
        self.port = port or free_port()
        self.overrides = {"group.initial.rebalance.delay.ms": "0", **(overrides or {})}
        self.env = env or {}
        self.command_prefix = command_prefix or []  # e.g. ["prlimit", "--nofile=2048"]
        self.proc: subprocess.Popen | None = None
        self.log_path = Path(self.data_dir).parent / f"broker-{self.port}.log"
        self.probe_tls: tuple[str, str, str] | None = None  # (CA, cert, key) when the probed listener is SSL

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> BrokerProcess:
        Path(self.data_dir).mkdir(parents=True, exist_ok=True)
        args = [*self.command_prefix, runtime_python(), "-m", "broker",
                "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
                "--override", f"log.dirs={self.data_dir}"]
        for k, v in self.overrides.items():
            args += ["--override", f"{k}={v}"]
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - lives as long as the process
        # Not started in the source tree: ``python -m`` puts the working directory on sys.path.
        self.proc = subprocess.Popen(args, cwd=Path(self.data_dir).parent, stdout=self._log,
                                     stderr=subprocess.STDOUT, env=runtime_env(self.env))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode}:\n{self.log_tail()}")
            if api_versions_ok("127.0.0.1", self.port, tls=self.probe_tls):
                return self
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"broker did not start in {timeout}s:\n{self.log_tail()}")

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait: the clean shutdown path. Returns the exit code."""
        if self.proc is None:
            return 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self.proc = None
        self._log.close()
        return code

    def kill(self) -> None:
        """SIGKILL: the crash path."""
        if self.proc is None:
            return
        self.proc.kill()
        self.proc.wait()
        self.proc = None
        self._log.close()

    def restart(self) -> BrokerProcess:
        self.stop()
        return self.start()

    def wait_for_cluster(self, control_port: int, timeout: float = 30.0) -> BrokerProcess:
        """``--brokers N``: the first broker answers before the others are up; wait for all of
        them through the control endpoint."""
        import json
        import urllib.request

        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{control_port}/cluster", timeout=5) as r:
                    if all(b["alive"] for b in json.loads(r.read())["brokers"]):
                        return self
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the cluster did not come up in {timeout}s:\n{self.log_tail()}")
            time.sleep(0.1)

    def log_tail(self, n: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""
