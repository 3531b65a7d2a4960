"""``python -m broker.ops.admin_cli``: a small admin client for this broker (or any Kafka cluster).

    python -m broker.ops.admin_cli [-b HOST:PORT] create-topic orders:3 payments --config retention.ms=86400000
    python -m broker.ops.admin_cli [-b HOST:PORT] list-topics
    python -m broker.ops.admin_cli [-b HOST:PORT] delete-topic orders
    python -m broker.ops.admin_cli [-b HOST:PORT] describe-cluster
    python -m broker.ops.admin_cli [-b HOST:PORT] add-scram-user alice alice-secret [--mechanism SCRAM-SHA-512]
    python -m broker.ops.admin_cli [-b HOST:PORT] add-acl --principal User:alice --operation Read --topic orders

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


def add_scram_user(admin: Any, user: str, password: str, mechanism: str, iterations: int) -> int:
    from kafka.admin import ScramMechanism, UserScramCredentialUpsertion

    kind = ScramMechanism[mechanism.replace("-", "_")]
    errors = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(user, kind, password, iterations)])
    if errors.get(user):
        print(f"failed to set {mechanism} credentials of {user}: {errors[user]}", file=sys.stderr)
        return 1
    print(f"{mechanism} credentials of {user} set")
    return 0


def add_acls(admin: Any, args: argparse.Namespace) -> int:
    """As ``kafka-acls.sh --add``: each operation on each resource named."""
    from kafka.admin import (
        ACL,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        ResourcePattern,
        ResourceType,
    )

    pattern = ACLResourcePatternType.PREFIXED if args.prefixed else ACLResourcePatternType.LITERAL
    resources = [ResourcePattern(ResourceType.TOPIC, t, pattern) for t in args.topic]
    resources += [ResourcePattern(ResourceType.GROUP, g, pattern) for g in args.group]
    resources += [ResourcePattern(ResourceType.TRANSACTIONAL_ID, x, pattern) for x in args.transactional_id]
    if args.cluster:
        resources.append(ResourcePattern(ResourceType.CLUSTER, "kafka-cluster"))
    if not resources:
        print("add-acl: name at least one --topic, --group, --transactional-id or --cluster", file=sys.stderr)
        return 1
    permission = ACLPermissionType.DENY if args.deny else ACLPermissionType.ALLOW
    acls = [ACL(args.principal, args.host, ACLOperation[op.upper().replace("-", "_")], permission, resource)
            for resource in resources for op in args.operation]
    result = admin.create_acls(acls)
    for acl, error in result.get("failed", []):
        print(f"failed to add {acl}: {error}", file=sys.stderr)
    for acl in result.get("succeeded", []):
        print(f"added {acl}")
    return 1 if result.get("failed") else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m broker.ops.admin_cli",
                                description="Topics, SCRAM users and ACLs.")
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
    s = sub.add_parser("add-scram-user", help="set a user's SCRAM credentials (as kafka-configs.sh --alter "
                                              "--add-config SCRAM-SHA-512=[password=...])")
    s.add_argument("user")
    s.add_argument("password")
    s.add_argument("--mechanism", default="SCRAM-SHA-512", choices=("SCRAM-SHA-256", "SCRAM-SHA-512"))
    s.add_argument("--iterations", type=int, default=8192)
    a = sub.add_parser("add-acl", help="add ACLs (as kafka-acls.sh --add)")
    a.add_argument("--principal", required=True, help="User:<name>")
    a.add_argument("--operation", action="append", required=True, help="Read, Write, Describe, All ... (repeatable)")
    a.add_argument("--topic", action="append", default=[])
    a.add_argument("--group", action="append", default=[])
    a.add_argument("--transactional-id", action="append", default=[])
    a.add_argument("--cluster", action="store_true")
    a.add_argument("--prefixed", action="store_true", help="the names are prefixes (--resource-pattern-type prefixed)")
    a.add_argument("--deny", action="store_true", help="a DENY rule (default ALLOW)")
    a.add_argument("--host", default="*")
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
        if args.command == "add-scram-user":
            return add_scram_user(admin, args.user, args.password, args.mechanism, args.iterations)
        if args.command == "add-acl":
            return add_acls(admin, args)
        cluster = admin.describe_cluster()
        print(f"cluster_id={cluster['cluster_id']} controller={cluster['controller_id']}")
        for b in cluster["brokers"]:
            print(f"broker {b['broker_id']} at {b['host']}:{b['port']}")
        return 0
    finally:
        admin.close()


if __name__ == "__main__":
    sys.exit(main())
