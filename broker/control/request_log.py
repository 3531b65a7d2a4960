"""The request log: every request the brokers received and how each was answered (API, version,
client, broker, connection, what it was about, the error codes of the answer, the fault applied,
how long it took), so a test asserts what a client did: "the producer retried EndTxn twice and
then got PRODUCER_FENCED". On while the control endpoint is; the newest ``control.request.log.size``
entries are kept.

Recording costs a few microseconds per request and holds no request or answer: the keys are read
when the request arrives and the error codes when it is answered.
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from broker.control.request_keys import FETCH, PRODUCE, RequestKeys
from broker.net.context import NoResponse, RawResponse
from protocol.errors import ErrorCode
from protocol.messages import api_name, response_class


@dataclass(slots=True)
class LoggedRequest:
    seq: int
    at_ms: int  # the broker's clock when it arrived
    broker: int
    connection: str
    client_id: str | None
    client_host: str
    principal: str
    api_key: int
    api_version: int
    correlation_id: int
    keys: RequestKeys | None
    started: float  # perf_counter
    fault: str | None = None
    duration_ms: float | None = None  # None while unanswered
    errors: list[int] | None = None  # the answer's non-zero error codes, in order of appearance
    answered: str = "pending"  # answered | none (acks=0) | dropped | closed | pending

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "seq": self.seq, "at_ms": self.at_ms, "broker": self.broker, "connection": self.connection,
            "client_id": self.client_id, "client_host": self.client_host, "principal": self.principal,
            "api": api_name(self.api_key),
            "api_key": self.api_key, "api_version": self.api_version, "correlation_id": self.correlation_id,
            "answered": self.answered,
        }
        if self.keys is not None:
            out.update(self.keys.to_json())
        if self.fault is not None:
            out["fault"] = self.fault
        if self.duration_ms is not None:
            out["duration_ms"] = round(self.duration_ms, 3)
        if self.errors is not None:
            out["errors"] = [_name(c) for c in self.errors]
            out["error"] = _name(self.errors[0]) if self.errors else "NONE"
        return out


def _name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


class RequestLog:
    def __init__(self, size: int = 10_000) -> None:
        self.entries: deque[LoggedRequest] = deque(maxlen=max(size, 1))
        self._seq = itertools.count(1)

    def record(self, at_ms: int, broker: int, connection: str, client_id: str | None, client_host: str,
               principal: str, api_key: int, api_version: int, correlation_id: int,
               keys: RequestKeys | None) -> LoggedRequest:
        entry = LoggedRequest(next(self._seq), at_ms, broker, connection, client_id, client_host, principal, api_key,
                              api_version, correlation_id, keys, time.perf_counter())
        self.entries.append(entry)
        return entry

    @staticmethod
    def answered(entry: LoggedRequest, response: Any, how: str = "answered") -> None:
        entry.duration_ms = (time.perf_counter() - entry.started) * 1000
        entry.answered = "none" if isinstance(response, NoResponse) else how
        if how == "answered":
            entry.errors = answer_errors(entry.api_key, entry.api_version, response)

    def clear(self) -> None:
        self.entries.clear()

    def query(self, *, api: int | None = None, broker: int | None = None, client_id: str | None = None,
              transactional_id: str | None = None, group_id: str | None = None, topic: str | None = None,
              since: int = 0, limit: int = 1000) -> list[dict[str, Any]]:
        """Entries after ``since`` (a seq), oldest first, that match every filter given."""
        out = []
        for e in self.entries:
            if e.seq <= since:
                continue
            if api is not None and e.api_key != api:
                continue
            if broker is not None and e.broker != broker:
                continue
            if client_id is not None and e.client_id != client_id:
                continue
            keys = e.keys
            if transactional_id is not None and (keys is None or transactional_id not in keys.transactional_ids):
                continue
            if group_id is not None and (keys is None or group_id not in keys.group_ids):
                continue
            if topic is not None and (keys is None or topic not in keys.topics):
                continue
            out.append(e.to_json())
            if len(out) >= limit:
                break
        return out


# --- error codes of an answer ---------------------------------------------------------------------

def answer_errors(api_key: int, version: int, response: Any) -> list[int] | None:
    """The non-zero error codes an answer carries (None when they cannot be read: a Fetch answer
    sent from the segment files)."""
    if isinstance(response, RawResponse):
        source: Any = response.source
        if api_key == PRODUCE and source is not None:
            return [p.error_code for t in source for p in t.partitions if p.error_code]
        if api_key == FETCH and source is not None:
            error, topics = source
            return [c for c in (error, *(p.error_code for t in topics for p in t.partitions)) if c]
        if response.regions:
            return None
        try:
            body = b"".join(bytes(b) for b in response.buffers)
            response = response_class(api_key).decode(body, version=version)
        except Exception:  # noqa: BLE001 - the log must never fail a request
            return None
    fields = getattr(type(response), "fields", None)
    if not isinstance(fields, dict):
        return None
    codes: list[int] = []
    _collect(response, fields.values(), codes)
    return codes


def _collect(obj: Any, fields: Iterable[Any], codes: list[int]) -> None:
    for f in fields:
        value = getattr(obj, f.name, None)
        if value is None:
            continue
        if f.name.endswith("error_code"):
            if isinstance(value, int) and value != 0:
                codes.append(value)
        elif isinstance(value, list) and getattr(f, "_fields", None):
            for element in value:
                _collect(element, f._fields, codes)
        elif getattr(f, "_fields", None) and not isinstance(value, (str, bytes, int, list)):
            _collect(value, f._fields, codes)
