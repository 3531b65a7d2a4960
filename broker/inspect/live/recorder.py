"""What happened to each transactional id, for the inspector's timeline: the transactional requests
as the dispatcher sees them (FindCoordinator, InitProducerId, AddPartitionsToTxn, Produce,
AddOffsetsToTxn, TxnOffsetCommit, EndTxn) with their answers, the coordinator's durable state
changes (Empty, Ongoing, PrepareCommit, CompleteCommit ...) with their ``__transaction_state``
offsets, and the markers the partition leaders wrote (partition, offset, result).

Built only when the inspector can be read (``metrics.port`` > 0); otherwise the broker holds
None and nothing is recorded. Bounded: a ring of ``inspector.timeline.events.per.id`` events per
transactional id and ``inspector.timeline.max.events`` events in all, the least recently active ids
forgotten first. Recording costs a few microseconds per transactional request and nothing for the
others: a non-transactional Produce is passed over after one attribute read.

Producer ids are mapped back to transactional ids (InitProducerId answers, state changes) so that
a marker, which carries only the producer id, lands on its transaction's timeline.
"""

from __future__ import annotations

import itertools
import struct
import time
from collections import OrderedDict, deque
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from broker.control.request_keys import request_keys
from broker.control.request_log import answer_errors
from broker.net.context import NoResponse, RawResponse
from coordinator.txn.state import TransactionState
from protocol.errors import ErrorCode
from protocol.messages import api_name

if TYPE_CHECKING:
    from broker.control.request_keys import TopicNamer
    from coordinator.txn.state import TxnTransitMetadata
    from storage.clock import Clock

PRODUCE, FIND_COORDINATOR, INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN = 0, 10, 22, 24
ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT = 25, 26, 28
# the APIs a transaction's timeline shows (markers are recorded where they are written)
TXN_APIS = frozenset({PRODUCE, FIND_COORDINATOR, INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN,
                      END_TXN, TXN_OFFSET_COMMIT})
COORDINATOR_TYPE_TRANSACTION = 1
# RecordBatch v2: producerId int64 at 43, producerEpoch int16 at 51, baseSequence int32 at 53, records int32 at 57
_BATCH_HEAD = struct.Struct(">qhii")
_COMPLETED = frozenset({TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT})


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


def _state_name(state: int) -> str:
    try:
        return TransactionState(state).state_name
    except ValueError:
        return str(state)


class TxnEvent:
    """One thing that happened to a transactional id. ``data`` holds what the kind has (see
    ``TxnRecorder``); a request's answer fills in ``error`` and the answer's fields later."""

    __slots__ = ("seq", "at_ms", "kind", "broker", "data", "_started")

    def __init__(self, seq: int, at_ms: int, kind: str, broker: int, data: dict[str, Any]) -> None:
        self.seq = seq
        self.at_ms = at_ms
        self.kind = kind  # request | state | marker | markerError
        self.broker = broker
        self.data = data
        self._started = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "atMs": self.at_ms, "kind": self.kind, "broker": self.broker, **self.data}


class PendingRequest:
    """A recorded request waiting for its answer (the dispatcher calls ``answered``)."""

    __slots__ = ("recorder", "event", "api_key", "version", "ids")

    def __init__(self, recorder: TxnRecorder, event: TxnEvent, api_key: int, version: int,
                 ids: list[str]) -> None:
        self.recorder = recorder
        self.event = event
        self.api_key = api_key
        self.version = version
        self.ids = ids

    def answered(self, response: Any) -> None:
        try:
            self.recorder._answered(self, response)
        except Exception:  # noqa: BLE001 - the inspector must never fail a request
            self.event.data["answer"] = "unreadable"


class TxnRecorder:
    """The bounded event store. Kinds of events and what they hold:

    - ``request``: ``api``, ``version``, ``clientId``, ``producerId``/``producerEpoch``, ``partitions``
      (``[{"topic", "partition", ...}]``: Produce adds ``records``, ``baseSequence`` and, once answered,
      ``offset``; TxnOffsetCommit adds ``committedOffset``), ``groupId``, ``result`` (EndTxn), then
      ``error``, ``durationMs`` and the answer's ids (InitProducerId, EndTxn v5) or ``coordinator``;
    - ``state``: ``from``, ``to``, ``producerId``/``producerEpoch``, ``partitions``, ``statePartition``,
      ``offset`` (in ``__transaction_state``), ``coordinatorEpoch``;
    - ``marker``: ``topic``, ``partition``, ``result`` (COMMIT/ABORT), ``offset`` (-1 if refused),
      ``producerId``/``producerEpoch``, ``coordinatorEpoch``, ``error``, ``via`` (coordinator,
      WriteTxnMarkers, inspector);
    - ``markerError``: a marker a leader did not take (``topic``, ``partition``, ``error``): retried.
    """

    def __init__(self, clock: Clock, events_per_id: int = 200, max_events: int = 100_000,
                 namer: TopicNamer | None = None) -> None:
        self.clock = clock
        self.max_events = max(int(max_events), 1)
        self.events_per_id = min(max(int(events_per_id), 1), self.max_events)
        self.namer: TopicNamer = namer or (lambda _topic_id: None)
        self._ids: OrderedDict[str, deque[TxnEvent]] = OrderedDict()
        self._producers: OrderedDict[int, str] = OrderedDict()  # producer id -> transactional id
        self._marker_errors: dict[str, dict[tuple[str, int], tuple[str, int, int]]] = {}
        self._count = 0
        self._seq = itertools.count(1)
        self.forgotten_ids = 0  # ids dropped to keep max_events
        self.unattributed_markers = 0  # markers of producer ids never seen with a transactional id

    # --- storage ----------------------------------------------------------------------------

    def _add(self, txn_id: str, event: TxnEvent) -> None:
        ring = self._ids.get(txn_id)
        if ring is None:
            ring = self._ids[txn_id] = deque(maxlen=self.events_per_id)
        else:
            self._ids.move_to_end(txn_id)
        if len(ring) == ring.maxlen:
            self._count -= 1
        ring.append(event)
        self._count += 1
        while self._count > self.max_events and len(self._ids) > 1:
            old_id, old = self._ids.popitem(last=False)
            self._count -= len(old)
            self._marker_errors.pop(old_id, None)
            self.forgotten_ids += 1

    def _event(self, kind: str, broker: int, data: dict[str, Any]) -> TxnEvent:
        return TxnEvent(next(self._seq), self.clock.now_ms(), kind, broker, data)

    def learn_producer(self, producer_id: int, txn_id: str) -> None:
        if producer_id < 0:
            return
        if self._producers.get(producer_id) != txn_id:
            self._producers[producer_id] = txn_id
        self._producers.move_to_end(producer_id)
        while len(self._producers) > max(self.max_events, 1024):
            self._producers.popitem(last=False)

    def transactional_id_of(self, producer_id: int) -> str | None:
        return self._producers.get(producer_id)

    # --- reads ------------------------------------------------------------------------------

    def events(self, txn_id: str) -> list[dict[str, Any]]:
        """Every event kept for ``txn_id``, oldest first."""
        return [e.to_json() for e in self._ids.get(txn_id, ())]

    def known_ids(self) -> Iterable[str]:
        return self._ids.keys()

    def marker_errors(self, txn_id: str) -> dict[tuple[str, int], tuple[str, int, int]]:
        """(topic, partition) -> (last error, its time, attempts) of markers still being retried."""
        return self._marker_errors.get(txn_id, {})

    def stats(self) -> dict[str, Any]:
        return {"transactionalIds": len(self._ids), "events": self._count, "maxEvents": self.max_events,
                "eventsPerId": self.events_per_id, "forgottenIds": self.forgotten_ids,
                "producerIds": len(self._producers), "unattributedMarkers": self.unattributed_markers}

    # --- requests (the dispatcher) ----------------------------------------------------------

    def request(self, broker: int, api_key: int, version: int, client_id: str | None,
                request: Any) -> PendingRequest | None:
        """Record a transactional request as it arrives (None when it is not one: a Produce or
        FindCoordinator without a transactional id, an idempotent InitProducerId)."""
        try:
            return self._request(broker, api_key, version, client_id, request)
        except Exception:  # noqa: BLE001 - the inspector must never fail a request
            return None

    def _request(self, broker: int, api_key: int, version: int, client_id: str | None,
                 request: Any) -> PendingRequest | None:
        if api_key == PRODUCE and request.transactional_id is None:
            return None
        if api_key == FIND_COORDINATOR and getattr(request, "key_type", 0) != COORDINATOR_TYPE_TRANSACTION:
            return None
        if api_key == INIT_PRODUCER_ID and not request.transactional_id:
            return None
        keys = request_keys(api_key, request, self.namer)
        ids = list(dict.fromkeys(keys.transactional_ids))
        if not ids:
            return None
        data: dict[str, Any] = {"api": api_name(api_key), "version": version, "clientId": client_id}
        if keys.producer_id is not None:
            data["producerId"] = keys.producer_id
            data["producerEpoch"] = keys.producer_epoch
        if api_key == PRODUCE:
            data["partitions"] = _produce_partitions(request)
        elif api_key == TXN_OFFSET_COMMIT:
            data["groupId"] = request.group_id
            data["partitions"] = [{"topic": _topic_name(t, self.namer), "partition": p.partition_index,
                                   "committedOffset": p.committed_offset}
                                  for t in request.topics or () for p in t.partitions or ()]
        elif api_key == ADD_OFFSETS_TO_TXN:
            data["groupId"] = request.group_id
        elif api_key == END_TXN:
            data["result"] = "COMMIT" if request.committed else "ABORT"
        elif api_key == INIT_PRODUCER_ID:
            data["transactionTimeoutMs"] = request.transaction_timeout_ms
        elif keys.topics:
            data["partitions"] = [{"topic": t, "partition": p} for t, ps in keys.topics.items() for p in ps]
        if api_key == ADD_PARTITIONS_TO_TXN and version >= 4:
            data["verifyOnly"] = any(t.verify_only for t in request.transactions or ())
        event = self._event("request", broker, data)
        event._started = time.perf_counter()
        for txn_id in ids:
            self._add(txn_id, event)
        if keys.producer_id is not None and len(ids) == 1:
            self.learn_producer(keys.producer_id, ids[0])
        return PendingRequest(self, event, api_key, version, ids)

    def _answered(self, pending: PendingRequest, response: Any) -> None:
        event, data = pending.event, pending.event.data
        data["durationMs"] = round((time.perf_counter() - event._started) * 1000, 3)
        if isinstance(response, NoResponse) or response is None:
            data["error"] = "NONE"
            data["answer"] = "none"
            return
        api_key = pending.api_key
        if api_key == PRODUCE and isinstance(response, RawResponse) and response.source is not None:
            results = {(t.name, p.index): p for t in response.source for p in t.partitions}  # type: ignore[attr-defined]
            codes = []
            for part in data.get("partitions", ()):
                r = results.get((part["topic"], part["partition"]))
                if r is not None:
                    part["offset"] = r.base_offset
                    if r.error_code:
                        part["error"] = error_name(r.error_code)
                        codes.append(r.error_code)
            data["error"] = error_name(codes[0]) if codes else "NONE"
            return
        codes = answer_errors(api_key, pending.version, response) or []
        data["error"] = error_name(codes[0]) if codes else "NONE"
        if api_key == INIT_PRODUCER_ID and not codes:
            data["producerId"], data["producerEpoch"] = response.producer_id, response.producer_epoch
            for txn_id in pending.ids:
                self.learn_producer(response.producer_id, txn_id)
        elif api_key == END_TXN and pending.version >= 5 and not codes:
            data["nextProducerId"], data["nextProducerEpoch"] = response.producer_id, response.producer_epoch
        elif api_key == FIND_COORDINATOR:
            if pending.version >= 4:
                data["coordinator"] = [c.node_id for c in response.coordinators or ()]
            else:
                data["coordinator"] = [response.node_id]
        elif api_key in (TXN_OFFSET_COMMIT, ADD_PARTITIONS_TO_TXN):
            data["errors"] = [error_name(c) for c in codes]

    # --- the coordinator's state changes and marker rounds ------------------------------------

    def state_changed(self, broker: int, txn_id: str, previous_state: int, transit: TxnTransitMetadata,
                      state_partition: int, coordinator_epoch: int, offset: int) -> None:
        to = transit.txn_state
        data: dict[str, Any] = {
            "from": _state_name(previous_state), "to": to.state_name, "producerId": transit.producer_id,
            "producerEpoch": transit.producer_epoch,
            "partitions": [{"topic": t, "partition": p} for t, p in sorted(transit.topic_partitions)],
            "statePartition": state_partition, "offset": offset, "coordinatorEpoch": coordinator_epoch,
            "transactionVersion": transit.client_transaction_version,
        }
        if transit.next_producer_id >= 0:
            data["nextProducerId"] = transit.next_producer_id
        self._add(txn_id, self._event("state", broker, data))
        self.learn_producer(transit.producer_id, txn_id)
        if transit.next_producer_id >= 0:
            self.learn_producer(transit.next_producer_id, txn_id)
        if to in _COMPLETED or to == TransactionState.EMPTY:
            self._marker_errors.pop(txn_id, None)

    def markers_answered(self, broker: int, txn_id: str, producer_id: int, producer_epoch: int, commit: bool,
                         results: Mapping[tuple[str, int], ErrorCode]) -> None:
        """Only refusals are events (a written marker is recorded by its leader); they are kept as
        the pending markers' last error until the transaction completes."""
        errors = self._marker_errors.get(txn_id)
        for (topic, partition), code in results.items():
            if code == ErrorCode.NONE:
                if errors is not None:
                    errors.pop((topic, partition), None)
                continue
            if errors is None:
                errors = self._marker_errors[txn_id] = {}
            _last, _at, attempts = errors.get((topic, partition), ("", 0, 0))
            now = self.clock.now_ms()
            errors[(topic, partition)] = (code.name, now, attempts + 1)
            if attempts < 3 or attempts % 50 == 0:  # a retry loop must not flood the ring
                self._add(txn_id, self._event("markerError", broker, {
                    "topic": topic, "partition": partition, "result": "COMMIT" if commit else "ABORT",
                    "producerId": producer_id, "producerEpoch": producer_epoch, "error": code.name,
                    "attempt": attempts + 1}))

    # --- markers, where they are written (the partition leader) ---------------------------------

    def marker(self, broker: int, topic: str, partition: int, producer_id: int, producer_epoch: int, commit: bool,
               coordinator_epoch: int, offset: int, error: ErrorCode, via: str) -> None:
        txn_id = self._producers.get(producer_id)
        if txn_id is None:
            self.unattributed_markers += 1
            return
        self._add(txn_id, self._event("marker", broker, {
            "topic": topic, "partition": partition, "result": "COMMIT" if commit else "ABORT", "offset": offset,
            "producerId": producer_id, "producerEpoch": producer_epoch, "coordinatorEpoch": coordinator_epoch,
            "error": error.name, "via": via}))


class CoordinatorObserver:
    """``coordinator.runtime.TransactionObserver`` for one broker's transaction coordinator."""

    def __init__(self, recorder: TxnRecorder, broker: int) -> None:
        self.recorder = recorder
        self.broker = broker

    def transaction_state_changed(self, transactional_id: str, previous_state: int, transit: TxnTransitMetadata,
                                  state_partition: int, coordinator_epoch: int, offset: int) -> None:
        try:
            self.recorder.state_changed(self.broker, transactional_id, previous_state, transit, state_partition,
                                        coordinator_epoch, offset)
        except Exception:  # noqa: BLE001, S110 - the inspector must never fail the coordinator
            pass

    def markers_answered(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                         results: Mapping[tuple[str, int], ErrorCode]) -> None:
        try:
            self.recorder.markers_answered(self.broker, transactional_id, producer_id, producer_epoch, commit,
                                           results)
        except Exception:  # noqa: BLE001, S110
            pass


def _topic_name(t: Any, namer: TopicNamer) -> str:
    name = getattr(t, "name", None)
    if name is None and getattr(t, "topic_id", None) is not None:
        name = namer(t.topic_id) or str(t.topic_id)
    return name or "?"


def _produce_partitions(request: Any) -> list[dict[str, Any]]:
    out = []
    for t in request.topics:
        name = t.name if t.name is not None else str(t.topic_id)
        for p in t.partitions:
            part: dict[str, Any] = {"topic": name, "partition": p.index}
            records = p.records
            if records is not None and len(records) >= 61:
                _pid, _epoch, base_sequence, count = _BATCH_HEAD.unpack_from(records, 43)
                part["records"] = count
                part["baseSequence"] = base_sequence
            out.append(part)
    return out


def group_transactions(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A timeline cut into the producer's sessions and transactions: a group ends with a state
    change to Empty (InitProducerId), CompleteCommit, CompleteAbort or Dead (the id expired). Each group gets a summary:
    its outcome, the partitions written, the markers and the states it went through."""
    groups: list[dict[str, Any]] = []
    current: list[dict[str, Any]] = []

    def close() -> None:
        if not current:
            return
        states = [e["to"] for e in current if e["kind"] == "state"]
        outcome = states[-1] if states else "(requests only)"
        partitions = sorted({(p["topic"], p["partition"]) for e in current if e["kind"] == "request"
                             and e.get("api") == "Produce" for p in e.get("partitions", ())})
        markers = [e for e in current if e["kind"] == "marker"]
        groups.append({"outcome": outcome, "states": states, "firstSeq": current[0]["seq"],
                       "startMs": current[0]["atMs"], "endMs": current[-1]["atMs"],
                       "producedTo": [{"topic": t, "partition": p} for t, p in partitions],
                       "markers": len(markers), "events": list(current)})
        current.clear()

    for e in events:
        current.append(e)
        if e["kind"] == "state" and e["to"] in ("Empty", "CompleteCommit", "CompleteAbort", "Dead"):
            close()
    close()
    for i, g in enumerate(groups, 1):
        g["index"] = i
    return groups
