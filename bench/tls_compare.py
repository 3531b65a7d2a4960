"""What TLS costs: produce and consume MB/s over an SSL listener and over PLAINTEXT, on Apache Kafka
(the reference, tests/support/kafka_reference.py) and on our broker, in the same run, with Kafka's
own ProducerPerformance and ConsumerPerformance (the Java client).

    python bench/tls_compare.py                    # about 5 minutes on 2 CPUs
    python bench/tls_compare.py --records 100000 --runs 1

Each broker serves both listeners at once (TLS 1.3, a PKCS12 keystore, no client certificates);
the figures are medians of --runs runs, the brokers and listeners alternating run by run. Over TLS
our broker cannot send a Fetch answer from the segment file with sendfile (the bytes must be
encrypted in user space), as Kafka cannot use transferTo. Prints MB/s, SSL/PLAINTEXT per broker and
ours/Kafka per listener; not a test.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.kafka_compare import consumer_perf_args, create_topic, log, producer_perf, spawn_ours, tool  # noqa: E402
from tests.support.kafka_reference import KafkaReference, free_port, probe_kafka_api  # noqa: E402
from tests.support.pki import PASSWORD, make_pki  # noqa: E402


def ssl_server_props(pki) -> dict[str, str]:
    return {"listener.name.ssl.ssl.keystore.type": "PKCS12", "listener.name.ssl.ssl.keystore.location": str(pki.broker.p12),
            "listener.name.ssl.ssl.keystore.password": PASSWORD}


def client_props(pki, secure: bool) -> dict[str, str]:
    if not secure:
        return {}
    return {"security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca_pem),
            "ssl.endpoint.identification.algorithm": "https"}


def consume(ref: KafkaReference, bootstrap: str, topic: str, records: int, props: dict[str, str], timeout: float) -> float:
    out = tool(ref, "ConsumerPerformance", consumer_perf_args(bootstrap, topic, records, props), timeout)
    lines = [ln for ln in out.splitlines() if ln.strip()]
    at = next(i for i, ln in enumerate(lines) if ln.startswith("start.time"))
    stats = dict(zip([h.strip() for h in lines[at].split(",")], [v.strip() for v in lines[at + 1].split(",")],
                     strict=False))
    if "data.consumed.in.nMsg" not in stats:
        raise RuntimeError(f"no summary in ConsumerPerformance output:\n{out[-3000:]}")
    if int(stats["data.consumed.in.nMsg"]) < records:
        raise RuntimeError(f"ConsumerPerformance read {stats['data.consumed.in.nMsg']} of {records}")
    return float(stats["fetch.MB.sec"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--tool-timeout", type=float, default=600)
    a = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="tls-compare-"))
    pki = make_pki(work / "pki")
    ref = KafkaReference(extra_listeners={"SSL": "SSL"}, extra_props=ssl_server_props(pki))
    ref.fetch()
    ref.start(work / "kafka")
    port, ssl_port = free_port(), free_port()
    (work / "ours").mkdir()
    proc, log_file = spawn_ours(work / "ours", port, {
        "log.level": "WARNING", **ssl_server_props(pki),
        "listeners": f"PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{ssl_port}"})
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                probe_kafka_api("127.0.0.1", port)
                break
            except Exception:  # noqa: BLE001
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        brokers = {"kafka": {"PLAINTEXT": ref.bootstrap, "SSL": f"127.0.0.1:{ref.listener_ports['SSL']}"},
                   "ours": {"PLAINTEXT": f"127.0.0.1:{port}", "SSL": f"127.0.0.1:{ssl_port}"}}
        figures: dict[tuple[str, str, str], list[float]] = {}
        for run in range(-1, a.runs):  # run -1 warms both up
            order = [(b, listener) for b in brokers for listener in ("PLAINTEXT", "SSL")]
            for name, listener in (order if run % 2 == 0 else order[::-1]):
                addresses = brokers[name]
                props = client_props(pki, listener == "SSL")
                topic = f"tls-{listener.lower()}-{uuid.uuid4().hex[:8]}"
                create_topic(addresses["PLAINTEXT"], topic, 1)
                produced = producer_perf(ref, addresses[listener], topic, a.records, a.record_size,
                                         {"acks": "all", "enable.idempotence": "false", **props}, [], a.tool_timeout)
                consumed = consume(ref, addresses[listener], topic, a.records, props, a.tool_timeout)
                log(f"{'warm-up' if run < 0 else f'run {run + 1}'}: {name} {listener}: produce "
                    f"{produced['mb_per_s']:.1f} MB/s, consume {consumed:.1f} MB/s")
                if run >= 0:
                    figures.setdefault((name, listener, "produce"), []).append(produced["mb_per_s"])
                    figures.setdefault((name, listener, "consume"), []).append(consumed)
    finally:
        proc.terminate()
        proc.wait(30)
        log_file.close()
        ref.stop()

    def m(name: str, listener: str, what: str) -> float:
        return statistics.median(figures[(name, listener, what)])

    print(f"\nTLS against PLAINTEXT, Apache Kafka {ref.version} and ours; medians of {a.runs} runs "
          f"({a.records} x {a.record_size} B records, acks=all, one partition)")
    head = f"{'figure':<10} {'listener':<10} {'Kafka MB/s':>11} {'ours MB/s':>10} {'ours/Kafka':>11}"
    print(head)
    print("-" * len(head))
    for what in ("produce", "consume"):
        for listener in ("PLAINTEXT", "SSL"):
            k, o = m("kafka", listener, what), m("ours", listener, what)
            print(f"{what:<10} {listener:<10} {k:11.1f} {o:10.1f} {o / k:11.2f}")
    for what in ("produce", "consume"):
        print(f"SSL/PLAINTEXT {what}: Kafka {m('kafka', 'SSL', what) / m('kafka', 'PLAINTEXT', what):.2f}, "
              f"ours {m('ours', 'SSL', what) / m('ours', 'PLAINTEXT', what):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
