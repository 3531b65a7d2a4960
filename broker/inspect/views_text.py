"""The text form of the data-directory views (partitions, transactions): one ``name: value`` line
per partition or transactional id, its segments, producers and aborted transactions indented
under it, in the ``label: value`` style of Kafka's tools so the lines grep and diff well.

Renderers take the views' dicts only, so they serve the offline views and, later, the same
views fetched from a live broker."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def _fields(d: dict[str, Any], keys: list[str]) -> str:
    return " ".join(f"{k}: {_value(d.get(k))}" for k in keys)


def _value(v: Any) -> str:
    if v is None:
        return "none"
    if v is True or v is False:
        return str(v).lower()
    return str(v)


def partitions_lines(parts: list[dict[str, Any]]) -> Iterator[str]:
    for p in parts:
        where = f" broker: {p['broker']}" if p.get("broker") is not None else ""
        yield (f"{p['topic']}-{p['partition']}{where} topicId: {_value(p['topicId'])} "
               + _fields(p, ["logStartOffset", "logEndOffset", "highWatermark", "lastStableOffset", "recoveryPoint"]))
        for s in p["segments"]:
            yield "  segment " + _fields(s, ["baseOffset", "nextOffset", "batches", "sizeBytes", "maxTimestamp",
                                             "indexEntries", "timeIndexEntries", "txnIndexEntries"]) + (
                f" trailingBytes: {s['trailingBytes']}" if s["trailingBytes"] else "")
        snap = p["producerSnapshot"]
        if snap.get("error"):
            yield f"  snapshot {snap['snapshot']}: {snap['error']}"
        for e in snap["producers"]:
            yield f"  producer ({snap['snapshot']}) " + _fields(e, list(e))
        for t in p["openTransactions"]:
            yield "  open " + _fields(t, ["producerId", "producerEpoch", "firstOffset"])
        for a in p["abortedTransactions"]:
            yield "  aborted " + _fields(a, ["producerId", "firstOffset", "lastOffset", "lastStableOffset"])


def _partitions_text(tps: list[dict[str, Any]]) -> str:
    return "[" + ",".join(f"{t['topic']}-{p}" for t in tps for p in t["partitions"]) + "]"


def transactions_lines(view: dict[str, Any]) -> Iterator[str]:
    for t in view["transactions"]:
        yield (f"transactionalId: {t['transactionalId']} "
               + _fields(t, ["state", "producerId", "producerEpoch", "previousProducerId", "nextProducerId",
                             "nextProducerEpoch", "transactionTimeoutMs"])
               + f" partitions: {_partitions_text(t['topicPartitions'])} "
               + _fields(t, ["transactionStartTimestampMs", "transactionLastUpdateTimestampMs",
                             "clientTransactionVersion", "partition", "offset"]))
    for e in view["errors"]:
        yield f"error: __transaction_state-{e['partition']} offset {e['offset']}: {e['error']}"
