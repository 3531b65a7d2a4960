"""``python -m broker.ops.admin_cli``: a small admin client for this broker (or any Kafka cluster).

    python -m broker.ops.admin_cli [-b HOST:PORT] create-topic orders:3 payments --config retention.ms=86400000
    python -m broker.ops.admin_cli [-b HOST:PORT] list-topics
    python -m broker.ops.admin_cli [-b HOST:PORT] delete-topic orders
    python -m broker.ops.admin_cli [-b HOST:PORT] describe-cluster

Built on kafka-python's ``KafkaAdminClient`` (a dependency of the broker already, so the image
needs nothing more). ``create-topic`` takes ``NAME`` or ``NAME:PARTITIONS``; a topic that
already exists is reported and is not an error, so the command is safe to re-run (the
compose file's one-shot ``init-topics`` service relies on that). ``--wait`` retries the first
connection for that many seconds. The bootstrap address defaults to ``$BOOTSTRAP_SERVERS``,
else ``localhost:9092``. Exit status: 0 on success, 1 on an error.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any


def _admin(bootstrap: str, wait_s: float) -> Any:
    from kafka.admin import KafkaAdminClient
    from kafka.errors import KafkaError

    deadline = time.monotonic() + wait_s
    while True:
        try:
            return KafkaAdminClient(bootstrap_servers=bootstrap, client_id="pykafka-admin",
                                    request_timeout_ms=30000)
        except (KafkaError, OSError) as e:
            if time.monotonic() >= deadline:
                raise SystemExit(f"admin: cannot reach {bootstrap}: {e}") from None
            time.sleep(1.0)


def parse_topic(spec: str, default_partitions: int) -> tuple[str, int]:
    """'orders:3' -> ('orders', 3); 'orders' -> ('orders', default_partitions)."""
    name, sep, count = spec.rpartition(":")
    if not sep:
        return spec, default_partitions
    if not name or not count.isdigit() or int(count) < 1:
        raise ValueError(f"bad topic spec {spec!r}: expected NAME or NAME:PARTITIONS")
    return name, int(count)


def parse_configs(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--config expects key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def create_topics(admin: Any, specs: list[str], partitions: int, replication: int,
                  configs: dict[str, str]) -> int:
    from kafka.admin import NewTopic

    topics = [NewTopic(name, n, replication, topic_configs=configs or None)
              for name, n in (parse_topic(s, partitions) for s in specs)]
    result = admin.create_topics(topics, raise_errors=False)
    failed = 0
    for t in result["topics"]:
        code = t["error_code"]
        if code == 0:
            print(f"created topic {t['name']} ({t['num_partitions']} partitions)")
        elif code == 36:  # TOPIC_ALREADY_EXISTS
            print(f"topic {t['name']} already exists")
        else:
            failed += 1
            print(f"failed to create topic {t['name']}: error {code}: {t.get('error_message')}", file=sys.stderr)
    return 1 if failed else 0


def delete_topics(admin: Any, names: list[str]) -> int:
    from kafka.errors import KafkaError

    try:
        admin.delete_topics(names)
    except KafkaError as e:
        print(f"failed to delete topics: {e}", file=sys.stderr)
        return 1
    for name in names:
        print(f"deleted topic {name}")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m broker.ops.admin_cli", description="Topic administration.")
    p.add_argument("--bootstrap", "-b", default=os.environ.get("BOOTSTRAP_SERVERS", "localhost:9092"),
                   help="host:port[,host:port] (default: $BOOTSTRAP_SERVERS or localhost:9092)")
    p.add_argument("--wait", type=float, default=0.0, help="retry connecting for this many seconds")
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("create-topic", help="create topics (existing ones are left alone)")
    c.add_argument("topics", nargs="+", metavar="NAME[:PARTITIONS]")
    c.add_argument("--partitions", "-p", type=int, default=1, help="partitions when not given per topic")
    c.add_argument("--replication-factor", "-r", type=int, default=1)
    c.add_argument("--config", action="append", default=[], metavar="KEY=VALUE", help="topic config (repeatable)")
    d = sub.add_parser("delete-topic", help="delete topics")
    d.add_argument("topics", nargs="+")
    sub.add_parser("list-topics", help="list topic names")
    sub.add_parser("describe-cluster", help="cluster id, controller and brokers")
    args = p.parse_args(argv)
    try:
        configs = parse_configs(getattr(args, "config", []))
        if args.command == "create-topic":
            for spec in args.topics:
                parse_topic(spec, args.partitions)
    except ValueError as e:
        p.error(str(e))
    admin = _admin(args.bootstrap, args.wait)
    try:
        if args.command == "create-topic":
            return create_topics(admin, args.topics, args.partitions, args.replication_factor, configs)
        if args.command == "delete-topic":
            return delete_topics(admin, args.topics)
        if args.command == "list-topics":
            for name in sorted(admin.list_topics()):
                print(name)
            return 0
        cluster = admin.describe_cluster()
        print(f"cluster_id={cluster['cluster_id']} controller={cluster['controller_id']}")
        for b in cluster["brokers"]:
            print(f"broker {b['broker_id']} at {b['host']}:{b['port']}")
        return 0
    finally:
        admin.close()


if __name__ == "__main__":
    sys.exit(main())
