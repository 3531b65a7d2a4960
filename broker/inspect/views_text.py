"""The text form of the views (partitions, transactions, and the live ones: groups, hanging
transactions, a transaction's timeline, the overview): one ``name: value`` line per partition or
transactional id, its segments, producers and aborted transactions indented under it, in the
``label: value`` style of Kafka's tools so the lines grep and diff well.

Renderers take the views' dicts only, so they serve the offline views (read from files) and the
same views fetched from a running broker (``broker.inspect.live_cli``), whose rows carry more keys:
those are printed when present (the offline text is unchanged). ``hanging_lines`` prints the table
of ``kafka-transactions.sh find-hanging`` as it does."""

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


def _present(d: dict[str, Any], keys: list[str]) -> str:
    """`` key: value`` for the keys ``d`` has (a live view's extra keys)."""
    return "".join(f" {k}: {_value(d[k])}" for k in keys if k in d)


def partitions_lines(parts: list[dict[str, Any]]) -> Iterator[str]:
    for p in parts:
        where = f" broker: {p['broker']}" if p.get("broker") is not None else ""
        yield (f"{p['topic']}-{p['partition']}{where} topicId: {_value(p['topicId'])} "
               + _fields(p, ["logStartOffset", "logEndOffset", "highWatermark", "lastStableOffset", "recoveryPoint"])
               + _present(p, ["lsoLag", "leader", "isr", "leaderEpoch", "abortedTransactionCount"]))
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
            yield "  open " + _fields(t, ["producerId", "producerEpoch", "firstOffset"]) + _present(
                t, ["coordinatorEpoch", "lastTimestamp", "ageMs", "holdsLso", "transactionalId"])
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
                             "clientTransactionVersion", "partition", "offset"])
               + _present(t, ["broker", "coordinatorEpoch", "pendingState", "ageMs", "timedOut"]))
        for m in t.get("pendingMarkers") or ():
            yield "  pending marker " + _fields(m, ["topic", "partition", "lastError", "attempts"])
    for e in view["errors"]:
        yield f"error: __transaction_state-{e['partition']} offset {e['offset']}: {e['error']}"


def _table(headers: list[str], rows: list[list[str]]) -> Iterator[str]:
    """TransactionsCommand.prettyPrintTable: each column padded to its widest value, then a tab."""
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    for row in [headers, *rows]:
        yield "".join(value.ljust(widths[i]) + "\t" for i, value in enumerate(row))


FIND_HANGING_HEADERS = ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                        "LastTimestamp", "Duration(min)"]


def hanging_lines(view: dict[str, Any]) -> Iterator[str]:
    """``kafka-transactions.sh find-hanging``'s table of the hanging transactions."""
    yield from _table(FIND_HANGING_HEADERS, [
        [t["topic"], str(t["partition"]), str(t["producerId"]), str(t["producerEpoch"]), str(t["coordinatorEpoch"]),
         str(t["startOffset"]), str(t["lastTimestamp"]), str(t["durationMin"])] for t in view["hanging"]])


def open_transactions_lines(view: dict[str, Any]) -> Iterator[str]:
    """Every open transaction on a partition with its status (ongoing, hanging, unverified, unknown)."""
    for t in view["open"]:
        yield (f"{t['topic']}-{t['partition']} " + _fields(t, ["status", "producerId", "producerEpoch",
                                                             "coordinatorEpoch", "startOffset", "lastTimestamp",
                                                             "durationMs", "transactionalId", "coordinatorState"])
               + (f" reason: {t['reason']}" if t.get("reason") else ""))


def groups_lines(view: dict[str, Any]) -> Iterator[str]:
    for g in view["groups"]:
        yield (f"group: {g['groupId']} " + _fields(g, ["type", "state", "protocol", "generation", "leader",
                                                        "coordinator", "offsetsPartition", "unstable"]))
        for m in g["members"]:
            yield "  member " + _fields(m, ["memberId", "groupInstanceId", "clientId", "clientHost"]) + \
                f" assignment: {_partitions_text(m['assignment'])}"
        for o in g["offsets"]:
            yield "  offset " + _fields(o, ["topic", "partition", "offset"]) + _present(
                o, ["highWatermark", "lastStableOffset", "lag"]) + (f" metadata: {o['metadata']}" if o["metadata"] else "")
        for o in g["pendingTransactionalOffsets"]:
            yield "  pending " + _fields(o, ["topic", "partition", "offset", "producerId", "transactionalId"])


def _event_text(e: dict[str, Any]) -> str:
    kind = e["kind"]
    if kind == "request":
        parts = " ".join(f"{p['topic']}-{p['partition']}"
                         + (f"@{p['offset']}" if p.get("offset") is not None and p["offset"] >= 0 else "")
                         for p in e.get("partitions", ()))
        extra = " ".join(x for x in (
            f"producerId: {e['producerId']} producerEpoch: {e['producerEpoch']}" if "producerId" in e else "",
            f"result: {e['result']}" if "result" in e else "",
            f"group: {e['groupId']}" if "groupId" in e else "",
            f"partitions: [{parts}]" if parts else "",
            f"coordinator: {e['coordinator']}" if "coordinator" in e else "",
            f"fault: {e['fault']}" if "fault" in e else "") if x)
        return f"request {e['api']} v{e['version']} {extra} -> {e.get('error', 'pending')}".replace("  ", " ")
    if kind == "state":
        tps = ",".join(f"{p['topic']}-{p['partition']}" for p in e["partitions"])
        return (f"state {e['from']} -> {e['to']} producerId: {e['producerId']} producerEpoch: {e['producerEpoch']} "
                f"partitions: [{tps}] __transaction_state-{e['statePartition']}@{e['offset']} "
                f"coordinatorEpoch: {e['coordinatorEpoch']}")
    if kind == "marker":
        return (f"marker {e['result']} {e['topic']}-{e['partition']}@{e['offset']} producerId: {e['producerId']} "
                f"producerEpoch: {e['producerEpoch']} coordinatorEpoch: {e['coordinatorEpoch']} via: {e['via']} "
                f"-> {e['error']}")
    if kind == "markerError":
        return f"marker {e['result']} {e['topic']}-{e['partition']} refused: {e['error']} (attempt {e['attempt']})"
    return kind


def timeline_lines(view: dict[str, Any]) -> Iterator[str]:
    """A transactional id's state, then each of its recorded transactions and their events."""
    t = view["transaction"]
    yield (f"transactionalId: {view['transactionalId']} statePartition: {view['statePartition']} "
           f"coordinator: {_value(view['coordinator'])}")
    if t is not None:
        yield "  " + _fields(t, ["state", "pendingState", "producerId", "producerEpoch", "transactionTimeoutMs",
                                 "ageMs"]) + f" partitions: {_partitions_text(t['topicPartitions'])}"
    for o in view["openTransactions"]:
        yield f"  open {o['topic']}-{o['partition']} " + _fields(o, ["producerId", "startOffset", "status"])
    if not view["recording"]:
        yield "  (the inspector records nothing: it is off)"
    for g in view["timeline"]:
        yield (f"transaction #{g['index']} outcome: {g['outcome']} states: [{' -> '.join(g['states'])}] "
               f"markers: {g['markers']}")
        start = g["startMs"]
        for e in g["events"]:
            yield f"  +{e['atMs'] - start}ms broker {e['broker']} {_event_text(e)}"


def overview_lines(view: dict[str, Any]) -> Iterator[str]:
    t = view["transactions"]
    yield (f"cluster: {view['clusterId']} broker: {view['thisBroker']} transactionalIds: {t['total']} "
           f"open: {t['open']} hanging: {len(view['hanging'])} partitionReplicas: {view['partitions']['replicas']} "
           f"groups: {view['groups']}")
    yield "states: " + " ".join(f"{k}: {v}" for k, v in t["byState"].items())
    for b in view["brokers"]:
        yield "broker " + _fields(b, ["id", "alive", "metricsPort", "partitionsLed", "transactionCoordinatorPartitions",
                                      "groupCoordinatorPartitions"])
    for topic in view["leaders"]:
        if not topic["internal"]:
            yield f"topic: {topic['topic']} leaders: {topic['leaders']}"
    for o in view["partitions"]["openTransactions"]:
        yield f"open {o['topic']}-{o['partition']} " + _fields(o, ["broker", "startOffset", "status", "transactionalId"])
