"""``python -m broker.ops.healthcheck``: is the broker answering Kafka requests? Exit 0 if yes, 1 if not.

Sends a real ApiVersions v3 request (what every client sends first) and checks the answer's
correlation id, error code and that it lists ApiVersions itself: a live listener that cannot
serve requests fails, unlike a TCP port probe. Used by the image's HEALTHCHECK.

    python -m broker.ops.healthcheck                        # first client listener of the config
    python -m broker.ops.healthcheck --bootstrap host:9092  # an explicit address

Without ``--bootstrap`` the address comes from the same sources the broker reads
(``--config`` or ``$BROKER_CONFIG_FILE`` or ``/etc/kafka/server.properties`` if it exists, then
``KAFKA_*``): the first listener that is not CONTROLLER, with a wildcard host read as 127.0.0.1.
Imports nothing heavy, so it runs in well under a second.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import struct
import sys
import time

import structlog

from broker.config.broker_config import BrokerConfig

API_VERSIONS = 18
API_VERSIONS_VERSION = 3
DEFAULT_CONFIG = "/etc/kafka/server.properties"
_CORRELATION_ID = 0x6B61686B  # arbitrary, checked in the answer


def _compact_string(value: str) -> bytes:
    data = value.encode()
    return _uvarint(len(data) + 1) + data


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def api_versions_request(client_id: str = "healthcheck") -> bytes:
    """A framed ApiVersions v3 request: header v2 (client id, no tags), compact-string body."""
    cid = client_id.encode()
    header = struct.pack(">hhih", API_VERSIONS, API_VERSIONS_VERSION, _CORRELATION_ID, len(cid)) + cid + b"\x00"
    body = _compact_string("pykafka-healthcheck") + _compact_string("1") + b"\x00"
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def parse_response(frame: bytes) -> dict[int, tuple[int, int]]:
    """The {api_key: (min_version, max_version)} of an ApiVersions v3 answer (``frame`` without
    its size prefix); raises ValueError if it is not a good answer."""
    if len(frame) < 6:
        raise ValueError("short response")
    correlation_id, error_code = struct.unpack_from(">ih", frame, 0)
    if correlation_id != _CORRELATION_ID:
        raise ValueError(f"correlation id {correlation_id} does not match")
    if error_code != 0:
        raise ValueError(f"error code {error_code}")
    count, pos = _read_uvarint(frame, 6)
    apis = {}
    for _ in range(max(count - 1, 0)):
        api_key, lo, hi = struct.unpack_from(">hhh", frame, pos)
        apis[api_key] = (lo, hi)
        tags, pos = _read_uvarint(frame, pos + 6)
        if tags:
            raise ValueError("unexpected tagged fields in an ApiVersions entry")
    if API_VERSIONS not in apis:
        raise ValueError("ApiVersions missing from the advertised APIs")
    return apis


def check_response(frame: bytes) -> str | None:
    """None if ``frame`` is a good ApiVersions answer, else why not."""
    try:
        parse_response(frame)
    except (ValueError, struct.error, IndexError) as e:
        return str(e) or type(e).__name__
    return None


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise OSError("connection closed by the broker")
        buf += chunk
    return bytes(buf)


def api_versions(host: str, port: int, timeout: float = 5.0) -> dict[int, tuple[int, int]]:
    """One ApiVersions round trip: the broker's {api_key: (min, max)}. Raises OSError/ValueError."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(api_versions_request())
        (size,) = struct.unpack(">i", _recv_exact(sock, 4))
        if size <= 0 or size > 1 << 20:
            raise ValueError(f"implausible response size {size}")
        try:
            return parse_response(_recv_exact(sock, size))
        except (struct.error, IndexError) as e:
            raise ValueError(f"malformed ApiVersions response: {e}") from None


def probe(host: str, port: int, timeout: float = 5.0) -> str | None:
    """One ApiVersions round trip; None on success, else the reason it failed."""
    try:
        api_versions(host, port, timeout)
    except (OSError, ValueError) as e:
        return f"{type(e).__name__}: {e}"
    return None


def configured_address(config_file: str | None = None) -> tuple[str, int]:
    """The first non-CONTROLLER listener of the broker's configuration, as (host, port)."""
    # Unknown-property warnings are the broker's to report, not the probe's.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    path = config_file or os.environ.get("BROKER_CONFIG_FILE")
    if path is None and os.path.exists(DEFAULT_CONFIG):
        path = DEFAULT_CONFIG
    config = BrokerConfig.load(path)
    for name, host, port in config.listeners():
        if name != "CONTROLLER":
            return (host if host not in ("", "0.0.0.0", "::") else "127.0.0.1"), port
    raise ValueError("no client listener configured")


def _parse_bootstrap(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    return host.strip("[]") or "127.0.0.1", int(port)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m broker.ops.healthcheck", description=__doc__.splitlines()[0])
    p.add_argument("--bootstrap", "-b", help="host:port to probe (default: from the broker configuration)")
    p.add_argument("--config", "-c", help="server.properties to read the listener from")
    p.add_argument("--timeout", type=float, default=5.0, help="seconds per attempt (default 5)")
    p.add_argument("--wait", type=float, default=0.0,
                   help="keep trying for this many seconds before failing (default: one attempt)")
    p.add_argument("--quiet", "-q", action="store_true", help="print nothing on success")
    args = p.parse_args(argv)
    try:
        host, port = _parse_bootstrap(args.bootstrap) if args.bootstrap else configured_address(args.config)
    except (OSError, ValueError) as e:
        print(f"unhealthy: configuration: {e}", file=sys.stderr)
        return 1
    deadline = time.monotonic() + args.wait
    while True:
        started = time.monotonic()
        reason = probe(host, port, args.timeout)
        if reason is None:
            if not args.quiet:
                print(f"healthy: ApiVersions answered by {host}:{port} in "
                      f"{(time.monotonic() - started) * 1000:.1f} ms")
            return 0
        if time.monotonic() >= deadline:
            print(f"unhealthy: {host}:{port}: {reason}", file=sys.stderr)
            return 1
        time.sleep(0.5)


if __name__ == "__main__":
    sys.exit(main())
