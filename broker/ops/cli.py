"""``python -m broker`` / ``pykafka-broker``: run a broker configured the way Kafka is.

    python -m broker [--config server.properties] [--override key=value ...] [--brokers N]
                     [--control-port P] [--faults FILE] [--virtual-clock] [--emulate-kafka 3.9]

KAFKA_<PROPERTY> environment variables apply between the file and the overrides. SIGTERM and
SIGINT shut down cleanly (in-flight requests finish, logs are flushed and closed) and exit 0.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

import structlog
import uvloop

from broker.cluster_process import ClusterProcess
from broker.config.broker_config import BrokerConfig
from broker.control.controls import Controls
from broker.control.setup import build_controls, process_clock
from broker.net.tls import check_listeners
from broker.ops import logs
from broker.security.authorizer import authorizer_settings
from broker.single_node import SingleNode
from storage.clock import SYSTEM_CLOCK, Clock


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="pykafka-broker", description="A Kafka-compatible broker.")
    p.add_argument("config_file", nargs="?", help="server.properties (positional, as kafka-server-start.sh takes it)")
    p.add_argument("--config", "-c", dest="config", help="server.properties file")
    p.add_argument("--override", "-o", action="append", default=[], metavar="KEY=VALUE",
                   help="set a broker property (repeatable)")
    p.add_argument("--brokers", type=int, metavar="N",
                   help="run a cluster of N brokers in this process (cluster.brokers): node ids 1..N, "
                        "each on the configured ports + (id - 1), data in <log.dirs>/broker-<id>/")
    p.add_argument("--control-port", type=int, metavar="P",
                   help="serve the control endpoint on P (control.port; loopback, control.host): topology, "
                        "fault rules, the request log, time, versions")
    p.add_argument("--faults", metavar="FILE",
                   help="fault rules to load at start-up, JSON or YAML (control.faults.file)")
    p.add_argument("--virtual-clock", action="store_true",
                   help="a clock the control endpoint can advance (control.clock=virtual; needs --control-port)")
    p.add_argument("--emulate-kafka", metavar="VERSION",
                   help="advertise the API versions of this Apache Kafka release, 3.0-4.4 (control.kafka.version)")
    return p.parse_args(argv)


def cli_overrides(args: argparse.Namespace) -> list[str]:
    """The flags as the properties they stand for (given after --override, so they win)."""
    out = list(args.override)
    if args.brokers is not None:
        out.append(f"cluster.brokers={args.brokers}")
    if args.control_port is not None:
        out.append(f"control.port={args.control_port}")
    if args.faults is not None:
        out.append(f"control.faults.file={args.faults}")
    if args.virtual_clock:
        out.append("control.clock=virtual")
    if args.emulate_kafka is not None:
        out.append(f"control.kafka.version={args.emulate_kafka}")
    return out


def raise_open_files_limit() -> None:
    """Soft RLIMIT_NOFILE up to the hard limit, as the JVM does for Kafka (MaxFDLimit): segments,
    indexes, connections and the descriptors of fetched file regions all count against it."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ImportError, ValueError, OSError):
        pass


async def run(config: BrokerConfig, clock: Clock = SYSTEM_CLOCK, controls: Controls | None = None,
              stop: asyncio.Event | None = None, signals: bool = True) -> int:
    """Run until SIGTERM/SIGINT (``signals``) or until ``stop`` is set (``broker.testing``'s thread)."""
    raise_open_files_limit()
    # Worker threads run pure-Python work off the loop (validating a huge compressed batch, decoding
    # a huge request). With the default 5 ms switch interval, the loop would wait up to 5 ms for the
    # GIL after each system call while one runs; 0.5 ms keeps other clients' requests flowing.
    sys.setswitchinterval(0.0005)

    node: SingleNode | ClusterProcess = SingleNode(config, clock, controls) if config.get("cluster.brokers") <= 1 \
        else ClusterProcess(config, clock, controls)
    loop = asyncio.get_running_loop()
    stop = stop or asyncio.Event()
    if signals:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
    await node.start()
    await stop.wait()
    await node.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logs.configure(cache=False)  # provisional, so warnings about the configuration are rendered too
    try:
        config = BrokerConfig.load(args.config or args.config_file, cli_overrides(args))
        if config.get("cluster.brokers") < 1:
            raise ValueError("cluster.brokers (--brokers) must be at least 1")
        config.validate_listeners()
        check_listeners(config)  # TLS keystores and truststores are read now: a bad one stops the start
        authorizer_settings(config)
        clock, controls = process_clock(config), build_controls(config)
    except (OSError, ValueError) as e:
        print(f"pykafka-broker: configuration error: {e}", file=sys.stderr)
        return 2
    logs.configure(str(config.get("log.level")))
    try:
        return uvloop.run(run(config, clock, controls))
    except Exception:
        structlog.get_logger(__name__).exception("broker failed")  # one JSON line, not a bare traceback
        return 1


if __name__ == "__main__":
    sys.exit(main())
