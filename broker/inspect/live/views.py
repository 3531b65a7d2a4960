"""The inspector's views of a running process, as JSON-ready dicts: read from the brokers' memory
on the event loop (one consistent instant), never from requests to themselves.

Every list is filtered, sorted and then paged before its rows are built, so a view of 10,000
transactional ids or partitions costs one pass over cheap attributes plus the rows of one page.
The keys of the transactions and partitions rows are those of the offline views
(``broker.inspect.transactions_view``, ``partitions_view``) with live-only keys added, so the
same text renderers print both.

With several brokers in one process each broker holds what it leads (the coordinators' state of
the ``__transaction_state`` / ``__consumer_offsets`` partitions it leads, its replicas' logs): the
views walk every running broker and say which one each row comes from.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from broker.inspect.files import KINDS
from broker.inspect.live.hanging import coordinator_index, find_hanging, leader_of, members
from broker.inspect.live.recorder import group_transactions
from broker.inspect.live.settings import actions_enabled
from broker.inspect.message_reader import MessageReadError, read_message
from broker.inspect.message_spec import load_spec
from coordinator.txn.state import TransactionState
from storage.checkpoints import uuid_to_kafka_str

if TYPE_CHECKING:
    from broker.services import Services
    from coordinator.group.manager import GroupMetadataManager
    from coordinator.txn.state import TransactionMetadata
    from storage.log.partition_log import PartitionLog

T = TypeVar("T")
DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000
TXN_STATE_TOPIC = "__transaction_state"
OFFSETS_TOPIC = "__consumer_offsets"
OPEN_STATES = frozenset({TransactionState.ONGOING, TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT})
PREPARED = frozenset({TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT})
ABORTED_SHOWN = 20  # aborted transactions listed per partition (the newest); the count says how many
_PARTITION_DIR = re.compile(r"(.+)-(\d+)")


class BadRequest(ValueError):
    """A query the view cannot answer (a bad number, an unknown broker or file): HTTP 400/404."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


# --- paging and query parameters ----------------------------------------------------------------

def int_param(query: Mapping[str, str], name: str, default: int | None = None, low: int | None = None,
              high: int | None = None) -> int | None:
    raw = query.get(name, "")
    if raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadRequest(f"{name} must be an integer, not {raw!r}") from None
    if low is not None:
        value = max(value, low)
    if high is not None:
        value = min(value, high)
    return value


def page(items: Sequence[T], query: Mapping[str, str]) -> tuple[Sequence[T], dict[str, int]]:
    """The page asked for (``page`` from 1, ``size`` up to MAX_PAGE_SIZE) and its bounds."""
    size = int_param(query, "size", DEFAULT_PAGE_SIZE, 1, MAX_PAGE_SIZE) or DEFAULT_PAGE_SIZE
    total = len(items)
    pages = max((total + size - 1) // size, 1)
    number = int_param(query, "page", 1, 1, pages) or 1
    start = (number - 1) * size
    return items[start:start + size], {"page": number, "size": size, "pages": pages, "total": total}


def _grouped(tps: Iterable[tuple[str, int]]) -> list[dict[str, Any]]:
    by_topic: dict[str, list[int]] = {}
    for t, p in sorted(tps):
        by_topic.setdefault(t, []).append(p)
    return [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]


def _transactional_id_of(broker: Services, index: Mapping[int, Any], producer_id: int) -> str | None:
    view = index.get(producer_id)
    if view is not None:
        return str(view.transactional_id)
    recorder = broker.txn_recorder
    return recorder.transactional_id_of(producer_id) if recorder is not None else None


# --- transactions -------------------------------------------------------------------------------

def _all_transactions(broker: Services) -> tuple[list[tuple[int, int, int, TransactionMetadata]], list[dict[str, Any]]]:
    """(coordinator broker, ``__transaction_state`` partition, coordinator epoch, metadata) of every
    id, and the partitions still loading."""
    out = []
    loading = []
    for b in members(broker):
        sm = b.txn_coordinator.state_manager
        loading += [{"broker": b.node_id, "partition": p} for p in sorted(sm.loading)]
        for partition, entries in list(sm.cache.items()):
            epoch = sm.coordinator_epochs.get(partition, 0)
            out += [(b.node_id, partition, epoch, m) for m in entries.values()]
    return out, loading


def transaction_row(broker: Services, node: int, partition: int, epoch: int, m: TransactionMetadata,
                    now: int) -> dict[str, Any]:
    start = m.txn_start_timestamp
    is_open = m.state in OPEN_STATES
    recorder = broker.txn_recorder
    errors = recorder.marker_errors(m.transactional_id) if recorder is not None else {}
    pending = []
    if m.state in PREPARED:
        for t, p in sorted(m.topic_partitions):
            last = errors.get((t, p))
            pending.append({"topic": t, "partition": p, "lastError": last[0] if last else None,
                            "attempts": last[2] if last else 0})
    return {
        "transactionalId": m.transactional_id,
        "state": m.state.state_name,
        "pendingState": m.pending_state.state_name if m.pending_state is not None else None,
        "producerId": m.producer_id,
        "producerEpoch": m.producer_epoch,
        "previousProducerId": m.prev_producer_id,
        "nextProducerId": m.next_producer_id,
        "nextProducerEpoch": None,
        "transactionTimeoutMs": m.txn_timeout_ms,
        "topicPartitions": _grouped(m.topic_partitions),
        "transactionStartTimestampMs": start,
        "transactionLastUpdateTimestampMs": m.txn_last_update_timestamp,
        "clientTransactionVersion": m.client_transaction_version,
        "partition": partition,  # of __transaction_state
        "offset": None,
        "broker": node,  # the coordinator
        "coordinatorEpoch": epoch,
        "ageMs": now - start if is_open and start > 0 else None,
        "timedOut": m.state == TransactionState.ONGOING and start > 0 and start + m.txn_timeout_ms < now,
        "pendingMarkers": pending,
    }


def transactions(broker: Services, query: Mapping[str, str]) -> dict[str, Any]:
    """Every transactional id the coordinators of this process hold; ``state`` (names, comma-
    separated, or ``open``), ``q`` (a substring of the id) and ``producer_id`` filter; paged."""
    now = broker.clock.now_ms()
    rows, loading = _all_transactions(broker)
    counts: dict[str, int] = {}
    for _n, _p, _e, m in rows:
        counts[m.state.state_name] = counts.get(m.state.state_name, 0) + 1
    wanted = {s.strip().lower() for s in query.get("state", "").split(",") if s.strip()}
    q = query.get("q", "")
    producer_id = int_param(query, "producer_id")
    if wanted or q or producer_id is not None:
        def keep(m: TransactionMetadata) -> bool:
            if wanted and m.state.state_name.lower() not in wanted and not ("open" in wanted and m.state in OPEN_STATES):
                return False
            if q and q not in m.transactional_id:
                return False
            return producer_id is None or m.producer_id == producer_id
        rows = [r for r in rows if keep(r[3])]
    rows.sort(key=lambda r: r[3].transactional_id)
    shown, bounds = page(rows, query)
    return {"now": now, "states": dict(sorted(counts.items())), "loading": loading, **bounds,
            "transactions": [transaction_row(broker, *r, now) for r in shown], "errors": []}


def transaction(broker: Services, txn_id: str) -> dict[str, Any]:
    """One transactional id: its current state (None when no coordinator here holds it), its
    timeline (the recorder's events, cut into its transactions) and the open transactions of its
    producer id on partitions."""
    now = broker.clock.now_ms()
    row = None
    for b in members(broker):
        sm = b.txn_coordinator.state_manager
        partition = sm.partition_for(txn_id)
        m = sm.cache.get(partition, {}).get(txn_id)
        if m is not None:
            row = transaction_row(broker, b.node_id, partition, sm.coordinator_epochs.get(partition, 0), m, now)
            break
    recorder = broker.txn_recorder
    events = recorder.events(txn_id) if recorder is not None else []
    hanging = find_hanging(broker)
    producer_ids = {e["producerId"] for e in events if isinstance(e.get("producerId"), int)}
    if row is not None:
        producer_ids.add(row["producerId"])
    open_here = [t for t in hanging["open"] if t["producerId"] in producer_ids or t["transactionalId"] == txn_id]
    sm0 = members(broker)[0].txn_coordinator.state_manager
    return {"now": now, "transactionalId": txn_id, "statePartition": sm0.partition_for(txn_id),
            "coordinator": _partition_leader(broker, TXN_STATE_TOPIC, sm0.partition_for(txn_id)),
            "transaction": row, "recording": recorder is not None,
            "timeline": group_transactions(events), "openTransactions": open_here}


def _partition_leader(broker: Services, topic: str, partition: int) -> int | None:
    reg = broker.metadata.partition(topic, partition)
    return reg.leader if reg is not None else None


# --- partitions -----------------------------------------------------------------------------------

def _producers(plog: PartitionLog) -> list[dict[str, Any]]:
    """The partition's producer states, keyed as DumpLogSegments prints a snapshot's."""
    if plog.producer_state is None:
        return []
    out = []
    for pid, e in plog.producer_state.manager.producers.items():
        row: dict[str, Any] = {"producerId": pid, "producerEpoch": e.producer_epoch,
                               "coordinatorEpoch": e.coordinator_epoch,
                               "currentTxnFirstOffset": e.current_txn_first_offset, "lastTimestamp": e.last_timestamp}
        last = e.last_batch
        if last is not None:
            row.update({"firstSequence": last.first_seq, "lastSequence": last.last_seq, "lastOffset": last.last_offset,
                        "offsetDelta": last.offset_delta, "timestamp": last.timestamp})
        out.append(row)
    return out


def partition_row(broker: Services, b: Services, plog: PartitionLog, now: int,
                  index: Mapping[int, Any]) -> dict[str, Any]:
    try:
        return _partition_row(broker, b, plog, now, index)
    except Exception as e:  # noqa: BLE001 - a log gone offline (I/O error) is shown, not fatal
        return {"topic": plog.topic, "partition": plog.partition, "broker": b.node_id, "topicId": None,
                "dir": plog.dir, "leader": None, "replicas": [], "isr": [], "leaderEpoch": None,
                "logStartOffset": None, "logEndOffset": None, "highWatermark": None, "recoveryPoint": None,
                "lastStableOffset": None, "lsoLag": 0, "segments": [],
                "producerSnapshot": {"snapshot": "memory", "producers": []}, "openTransactions": [],
                "abortedTransactions": [], "abortedTransactionCount": 0,
                "offline": plog.offline or f"{type(e).__name__}: {e}"}


def _partition_row(broker: Services, b: Services, plog: PartitionLog, now: int,
                   index: Mapping[int, Any]) -> dict[str, Any]:
    reg = b.metadata.partition(plog.topic, plog.partition)
    hw, lso = plog.high_watermark, plog.last_stable_offset
    segments = []
    aborted: list[dict[str, Any]] = []
    for seg in plog.segments:
        segments.append({"baseOffset": seg.base_offset, "nextOffset": seg.next_offset, "batches": None,
                         "sizeBytes": seg.size, "trailingBytes": 0, "maxTimestamp": seg.max_timestamp_so_far,
                         "indexEntries": seg.offset_index.entries, "timeIndexEntries": seg.time_index.entries,
                         "txnIndexEntries": len(seg.txn_index.entries)})
        aborted += [{"producerId": a.producer_id, "firstOffset": a.first_offset, "lastOffset": a.last_offset,
                     "lastStableOffset": a.last_stable_offset} for a in seg.txn_index.entries]
    open_txns = []
    if plog.producer_state is not None:
        manager = plog.producer_state.manager
        for txn in manager.ongoing_transactions():
            e = manager.producers.get(txn.producer_id)
            last_ts = e.last_timestamp if e is not None else -1
            open_txns.append({"producerId": txn.producer_id, "producerEpoch": e.producer_epoch if e else None,
                              "firstOffset": txn.first_offset, "coordinatorEpoch": e.coordinator_epoch if e else None,
                              "lastTimestamp": last_ts, "ageMs": now - last_ts if last_ts >= 0 else None,
                              "holdsLso": txn.first_offset == lso,
                              "transactionalId": _transactional_id_of(broker, index, txn.producer_id)})
    return {
        "topic": plog.topic, "partition": plog.partition, "broker": b.node_id,
        "topicId": uuid_to_kafka_str(plog.topic_id) if plog.topic_id is not None else None,
        "dir": plog.dir,
        "leader": reg.leader if reg is not None else b.node_id,
        "replicas": list(reg.replicas) if reg is not None else [b.node_id],
        "isr": list(reg.isr) if reg is not None else [b.node_id],
        "leaderEpoch": plog.leader_epoch,
        "logStartOffset": plog.log_start_offset, "logEndOffset": plog.log_end_offset,
        "highWatermark": hw, "recoveryPoint": plog.recovery_point, "lastStableOffset": lso, "lsoLag": hw - lso,
        "segments": segments,
        "producerSnapshot": {"snapshot": "memory", "producers": _producers(plog)},
        "openTransactions": open_txns,
        "abortedTransactions": aborted[-ABORTED_SHOWN:], "abortedTransactionCount": len(aborted),
        "offline": plog.offline,
    }


def partitions(broker: Services, query: Mapping[str, str]) -> dict[str, Any]:
    """Every partition replica of this process (``role=leader`` for the leaders only); ``topic``
    (exact), ``q`` (a substring), ``internal=0`` (hide ``__`` topics), ``open=1`` (only those with
    open transactions), ``broker`` filter; paged."""
    now = broker.clock.now_ms()
    topic, q = query.get("topic") or None, query.get("q", "")
    only_open = query.get("open") in ("1", "true")
    hide_internal = query.get("internal") in ("0", "false")
    leaders_only = query.get("role") == "leader"
    node = int_param(query, "broker")
    found: list[tuple[str, int, int, Services, PartitionLog]] = []
    open_count = 0
    for b in members(broker):
        if node is not None and b.node_id != node:
            continue
        for plog in b.log_manager.logs():
            t = plog.topic
            has_open = plog.producer_state is not None and plog.producer_state.manager.first_unstable_offset() is not None
            open_count += has_open
            if (topic is not None and t != topic) or (q and q not in t) or (hide_internal and t.startswith("__")):
                continue
            if only_open and not has_open:
                continue
            if leaders_only:
                reg = b.metadata.partition(t, plog.partition)
                if reg is not None and reg.leader != b.node_id:
                    continue
            found.append((t, plog.partition, b.node_id, b, plog))
    found.sort(key=lambda r: (r[0], r[1], r[2]))
    shown, bounds = page(found, query)
    index, _loading = coordinator_index(broker) if shown else ({}, False)
    return {"now": now, "withOpenTransactions": open_count, **bounds,
            "partitions": [partition_row(broker, b, plog, now, index) for _t, _p, _n, b, plog in shown]}


# --- groups ---------------------------------------------------------------------------------------

def _assignment(raw: bytes) -> list[dict[str, Any]]:
    """A classic consumer member's assignment (ConsumerProtocolAssignment), by topic."""
    if len(raw) < 2:
        return []
    try:
        version = int.from_bytes(raw[:2], "big", signed=True)
        data = read_message(load_spec("ConsumerProtocolAssignment"), version, raw[2:])
    except (MessageReadError, ValueError, KeyError):
        return [{"topic": "?", "partitions": [], "undecoded": raw.hex()}]
    return [{"topic": t["topic"], "partitions": list(t["partitions"])} for t in data.get("assignedPartitions") or ()]


def _offsets_of(broker: Services, manager: GroupMetadataManager, gid: str,
                log_of: Callable[[str, int], PartitionLog | None]) -> list[dict[str, Any]]:
    out = []
    for topic, parts in sorted(manager.offsets.group_offsets(gid).items()):
        for p, om in sorted(parts.items()):
            plog = log_of(topic, p)
            row: dict[str, Any] = {"topic": topic, "partition": p, "offset": om.committed_offset,
                                   "leaderEpoch": om.leader_epoch, "metadata": om.metadata,
                                   "commitTimestampMs": om.commit_timestamp_ms}
            if plog is not None:
                row.update({"logEndOffset": plog.log_end_offset, "highWatermark": plog.high_watermark,
                            "lastStableOffset": plog.last_stable_offset,
                            "lag": max(plog.high_watermark - om.committed_offset, 0)})
            out.append(row)
    return out


def _group_row(broker: Services, b: Services, gid: str, index: Mapping[int, Any],
               log_of: Callable[[str, int], PartitionLog | None]) -> dict[str, Any]:
    gc = b.group_coordinator
    manager = gc.manager
    classic = manager.groups.get(gid)
    consumer = manager.consumer.groups.get(gid)
    row: dict[str, Any] = {"groupId": gid, "coordinator": b.node_id, "offsetsPartition": gc.partition_for(gid)}
    if consumer is not None:
        name_of = b.metadata.name_of
        row.update({"type": "consumer", "state": consumer.state, "protocolType": "consumer", "protocol": None,
                    "generation": consumer.group_epoch, "leader": None, "members": [
                        {"memberId": m.member_id, "groupInstanceId": m.instance_id, "clientId": m.client_id,
                         "clientHost": m.client_host, "memberEpoch": m.member_epoch, "memberState": m.state.name,
                         "assignment": [{"topic": name_of(t) or str(t), "partitions": sorted(ps)}
                                        for t, ps in m.assigned.items()],
                         "pendingRevocation": [{"topic": name_of(t) or str(t), "partitions": sorted(ps)}
                                               for t, ps in m.pending_revocation.items()]}
                        for m in consumer.members.values()]})
    elif classic is not None:
        row.update({"type": "classic", "state": str(classic.state), "protocolType": classic.protocol_type,
                    "protocol": classic.protocol_name, "generation": classic.generation_id,
                    "leader": classic.leader_id, "members": [
                        {"memberId": m.member_id, "groupInstanceId": m.group_instance_id, "clientId": m.client_id,
                         "clientHost": m.client_host,
                         "assignment": _assignment(m.assignment) if classic.protocol_type == "consumer" else []}
                        for m in classic.members.values()]})
    else:
        row.update({"type": "offsets only", "state": "Empty", "protocolType": None, "protocol": None,
                    "generation": None, "leader": None, "members": []})
    row["offsets"] = _offsets_of(broker, manager, gid, log_of)
    pending = []
    for pid, entries in manager.offsets.pending.items():
        for (g, t, p), om in entries.items():
            if g == gid:
                pending.append({"producerId": pid, "transactionalId": _transactional_id_of(broker, index, pid),
                                "topic": t, "partition": p, "offset": om.committed_offset,
                                "recordOffset": om.record_offset})
    row["pendingTransactionalOffsets"] = sorted(pending, key=lambda r: (r["topic"], r["partition"], r["producerId"]))
    row["unstable"] = bool(pending)  # OffsetFetch(require_stable) answers UNSTABLE_OFFSET_COMMIT
    return row


def _group_ids(b: Services) -> set[str]:
    manager = b.group_coordinator.manager
    ids = set(manager.groups) | set(manager.consumer.groups) | set(manager.offsets.committed)
    ids |= {g for entries in manager.offsets.pending.values() for (g, _t, _p) in entries}
    return ids


def groups(broker: Services, query: Mapping[str, str]) -> dict[str, Any]:
    """Every group the coordinators of this process hold (classic, consumer, or offsets only);
    ``q`` (a substring of the id) and ``pending=1`` (only those with pending transactional
    offsets) filter; paged."""
    q = query.get("q", "")
    only_pending = query.get("pending") in ("1", "true")
    found: list[tuple[str, Services]] = []
    for b in members(broker):
        pending_groups = {g for entries in b.group_coordinator.manager.offsets.pending.values()
                          for (g, _t, _p) in entries} if only_pending else set()
        for gid in _group_ids(b):
            if (q and q not in gid) or (only_pending and gid not in pending_groups):
                continue
            found.append((gid, b))
    found.sort(key=lambda r: (r[0], r[1].node_id))
    shown, bounds = page(found, query)
    index, _loading = coordinator_index(broker) if shown else ({}, False)
    cache: dict[tuple[str, int], PartitionLog | None] = {}

    def log_of(topic: str, partition: int) -> PartitionLog | None:
        if (topic, partition) not in cache:
            leader = leader_of(broker, topic, partition)
            cache[(topic, partition)] = leader.log_manager.get(topic, partition) if leader is not None else None
        return cache[(topic, partition)]

    return {"now": broker.clock.now_ms(), **bounds,
            "groups": [_group_row(broker, b, gid, index, log_of) for gid, b in shown]}


# --- files ----------------------------------------------------------------------------------------

def _broker(broker: Services, node: int | None) -> Services:
    for b in members(broker):
        if node is None or b.node_id == node:
            return b
    raise BadRequest(f"no running broker {node} in this process", 404)


def file_dirs(broker: Services, query: Mapping[str, str]) -> dict[str, Any]:
    """The partition directories of each broker's log dirs (``q`` filters by name; paged)."""
    q = query.get("q", "")
    rows: list[dict[str, Any]] = []
    for b in members(broker):
        for i, log_dir in enumerate(b.config.log_dirs):
            try:
                names = os.listdir(log_dir)
            except OSError:
                continue
            for name in names:
                if _PARTITION_DIR.fullmatch(name) and (not q or q in name) and os.path.isdir(os.path.join(log_dir, name)):
                    rows.append({"broker": b.node_id, "logDir": i, "logDirPath": log_dir, "dir": name})
    rows.sort(key=lambda r: (r["broker"], _dir_key(r["dir"]), r["logDir"]))
    shown, bounds = page(rows, query)
    return {**bounds, "dirs": list(shown)}


def _dir_key(name: str) -> tuple[str, int]:
    m = _PARTITION_DIR.fullmatch(name)
    return (m.group(1), int(m.group(2))) if m else (name, -1)


def partition_dir(broker: Services, node: int | None, name: str, log_dir: int | None = None) -> str:
    """The path of a partition directory, only ever one listed in a log dir of the broker."""
    b = _broker(broker, node)
    if not _PARTITION_DIR.fullmatch(name):
        raise BadRequest(f"not a partition directory: {name!r}")
    for i, d in enumerate(b.config.log_dirs):
        if log_dir is not None and i != log_dir:
            continue
        try:
            if name in os.listdir(d):
                return os.path.join(d, name)
        except OSError:
            continue
    raise BadRequest(f"broker {b.node_id} has no partition directory {name!r}", 404)


def files_in(path: str) -> list[dict[str, Any]]:
    out = []
    for name in sorted(os.listdir(path)):
        kind = KINDS.get(os.path.splitext(name)[1])
        if kind is None:
            continue
        try:
            size = os.path.getsize(os.path.join(path, name))
        except OSError:
            continue
        out.append({"file": name, "kind": kind, "sizeBytes": size})
    return out


def file_path(broker: Services, node: int | None, name: str, file: str, log_dir: int | None = None) -> str:
    directory = partition_dir(broker, node, name, log_dir)
    if file not in {f["file"] for f in files_in(directory)}:
        raise BadRequest(f"no segment file {file!r} in {name}", 404)
    return os.path.join(directory, file)


def default_decoder(dir_name: str) -> str:
    """The decoder kafka-dump-log.sh needs for a partition's records."""
    topic = _dir_key(dir_name)[0]
    return {TXN_STATE_TOPIC: "transaction-log", OFFSETS_TOPIC: "offsets"}.get(topic, "string")


# --- the overview ---------------------------------------------------------------------------------

def overview(broker: Services, query: Mapping[str, str]) -> dict[str, Any]:
    """The process at a glance: its brokers (which leads what), where each coordinator partition
    lives, transactions by state, open and hanging transactions, partitions, groups, and the recorder."""
    now = broker.clock.now_ms()
    running = members(broker)
    running_ids = {b.node_id for b in running}
    metadata = broker.metadata
    leads: dict[int, int] = {}
    leaders: list[dict[str, Any]] = []
    coordinators: dict[str, list[dict[str, Any]]] = {"transaction": [], "group": []}
    for info in sorted(metadata.topics.values(), key=lambda i: i.name):
        regs = info.registrations
        for reg in regs:
            leads[reg.leader] = leads.get(reg.leader, 0) + 1
        kind = {TXN_STATE_TOPIC: "transaction", OFFSETS_TOPIC: "group"}.get(info.name)
        if kind is not None:
            coordinators[kind] = [{"partition": p, "leader": reg.leader} for p, reg in enumerate(regs)]
        leaders.append({"topic": info.name, "internal": info.name.startswith("__"),
                        "leaders": [reg.leader for reg in regs], "isr": [list(reg.isr) for reg in regs]})
    brokers = []
    registry = broker.brokers
    for node in registry.all_ids() or sorted(running_ids):
        b = next((m for m in running if m.node_id == node), None)
        txn_loading = sorted(b.txn_coordinator.state_manager.loading) if b is not None else []
        brokers.append({
            "id": node, "alive": registry.alive(node) if registry.registered(node) else node in running_ids,
            "thisPage": node == broker.node_id, "listeners": dict(b.bound_ports) if b is not None else {},
            "metricsPort": getattr(b, "metrics_port", None) if b is not None else None,
            "partitionsLed": leads.get(node, 0),
            "transactionCoordinatorPartitions": sum(1 for c in coordinators["transaction"] if c["leader"] == node),
            "groupCoordinatorPartitions": sum(1 for c in coordinators["group"] if c["leader"] == node),
            "loadingTransactionPartitions": txn_loading,
        })
    rows, loading = _all_transactions(broker)
    states: dict[str, int] = {}
    open_count = 0
    oldest: int | None = None
    for _n, _p, _e, m in rows:
        states[m.state.state_name] = states.get(m.state.state_name, 0) + 1
        if m.state in OPEN_STATES:
            open_count += 1
            if m.txn_start_timestamp > 0:
                oldest = max(oldest or 0, now - m.txn_start_timestamp)
    hanging = find_hanging(broker, int_param(query, "max_transaction_timeout_ms", None, 0))
    partition_count = sum(len(b.log_manager.partitions()) for b in running)
    open_txns = [{"topic": t["topic"], "partition": t["partition"], "broker": t["broker"],
                "startOffset": t["startOffset"], "status": t["status"], "transactionalId": t["transactionalId"]}
               for t in hanging["open"]]
    group_count = sum(len(_group_ids(b)) for b in running)
    recorder = broker.txn_recorder
    return {
        "now": now, "clusterId": broker.cluster_id, "thisBroker": broker.node_id,
        "actionsEnabled": actions_enabled(broker.config), "brokers": brokers,
        "coordinators": coordinators, "leaders": leaders[:200], "topics": len(leaders),
        "transactions": {"total": len(rows), "byState": dict(sorted(states.items())), "open": open_count,
                         "oldestOpenMs": oldest, "loading": loading},
        "partitions": {"replicas": partition_count, "openTransactions": open_txns[:200],
                       "openTransactionCount": len(open_txns)},
        "hanging": hanging["hanging"], "maxTransactionTimeoutMs": hanging["maxTransactionTimeoutMs"],
        "groups": group_count,
        "recorder": recorder.stats() if recorder is not None else None,
    }


def hanging(broker: Services, query: Mapping[str, str]) -> dict[str, Any]:
    return {"now": broker.clock.now_ms(), "actionsEnabled": actions_enabled(broker.config),
            **find_hanging(broker, int_param(query, "max_transaction_timeout_ms", None, 0),
                           query.get("topic") or None, int_param(query, "partition"))}


__all__ = ["BadRequest", "file_dirs", "file_path", "files_in", "groups", "hanging", "overview",
           "page", "partition_dir", "partitions", "transaction", "transactions"]
