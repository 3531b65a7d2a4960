"""Smoke test of docker/compose.secure.yml through a stock client (confluent-kafka / librdkafka):

    python docker/smoke_secure.py [--certs docker/certs] [--sasl 127.0.0.1:9094] [--ssl 127.0.0.1:9093]

As alice over SASL_SSL (SCRAM-SHA-512): produce to "orders" (allowed) in a transaction with the
transactional id "alice-1" (allowed), and to "secrets" (refused: TOPIC_AUTHORIZATION_FAILED); a
transactional id she has no ACL for is refused (TRANSACTIONAL_ID_AUTHORIZATION_FAILED). As alice
over SSL with her client certificate: consume "orders" in group "billing" (allowed) and see the
committed records; a client without a certificate cannot connect. Exit 0 when all passed.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer


def step(msg: str) -> None:
    print(f"smoke: {msg}", flush=True)


def fail(msg: str) -> None:
    raise SystemExit(f"smoke: FAIL {msg}")


def delivery(conf: dict[str, str], topic: str) -> str | None:
    """The delivery report's error name, None when the record was acknowledged."""
    reports: list[object] = []
    producer = Producer({**conf, "message.timeout.ms": 10000})
    producer.produce(topic, b"x", on_delivery=lambda err, _msg: reports.append(err))
    producer.flush(20)
    if len(reports) != 1:
        fail(f"no delivery report for {topic}")
    error = reports[0]
    return None if error is None else error.name()  # type: ignore[attr-defined]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--certs", default=str(Path(__file__).resolve().parent / "certs"))
    p.add_argument("--sasl", default="127.0.0.1:9094")
    p.add_argument("--ssl", default="127.0.0.1:9093")
    p.add_argument("--timeout", type=float, default=90.0)
    args = p.parse_args()
    certs = Path(args.certs)
    scram = {"bootstrap.servers": args.sasl, "security.protocol": "SASL_SSL", "ssl.ca.location": str(certs / "ca.pem"),
             "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": "alice", "sasl.password": "alice-secret"}
    mtls = {"bootstrap.servers": args.ssl, "security.protocol": "SSL", "ssl.ca.location": str(certs / "ca.pem"),
            "ssl.certificate.location": str(certs / "alice.pem"), "ssl.key.location": str(certs / "alice.key.pem")}

    deadline = time.monotonic() + args.timeout  # the setup (SCRAM user, ACLs) may still be running
    while (error := delivery(scram, "orders")) is not None:
        if time.monotonic() > deadline:
            fail(f"alice cannot produce to orders over SASL_SSL: {error}")
        time.sleep(2)
    step("SASL_SSL/SCRAM: alice produced to orders")
    if (error := delivery(scram, "secrets")) != "TOPIC_AUTHORIZATION_FAILED":
        fail(f"a topic without ACLs answered {error}, not TOPIC_AUTHORIZATION_FAILED")
    step("SASL_SSL/SCRAM: secrets refused (TOPIC_AUTHORIZATION_FAILED)")

    marker = uuid.uuid4().hex.encode()
    producer = Producer({**scram, "transactional.id": "alice-1"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(10):
        producer.produce("orders", marker + b"-%d" % i, partition=0)
    producer.commit_transaction(30)
    step("SASL_SSL/SCRAM: a transaction with transactional id alice-1 committed")
    try:
        Producer({**scram, "transactional.id": "bob-1"}).init_transactions(30)
        fail("transactional id bob-1 was not refused")
    except KafkaException as e:
        if e.args[0].name() != "TRANSACTIONAL_ID_AUTHORIZATION_FAILED":
            fail(f"transactional id bob-1 answered {e.args[0].name()}")
    step("SASL_SSL/SCRAM: transactional id bob-1 refused (TRANSACTIONAL_ID_AUTHORIZATION_FAILED)")

    consumer = Consumer({**mtls, "group.id": "billing", "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed"})
    consumer.subscribe(["orders"])
    seen = 0
    deadline = time.monotonic() + 60
    while seen < 10 and time.monotonic() < deadline:
        msg = consumer.poll(1.0)
        if msg is not None and msg.error() is None and msg.value().startswith(marker):
            seen += 1
    consumer.close()
    if seen != 10:
        fail(f"alice's consumer (SSL, client certificate) read {seen} of the 10 committed records")
    step("SSL/mutual TLS: alice read the committed records as group billing")
    if delivery({k: v for k, v in mtls.items() if not k.startswith("ssl.certificate") and not k.startswith("ssl.key")},
                "orders") is None:
        fail("a client without a certificate was served")
    step("SSL: a client without a certificate refused")
    step("all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
