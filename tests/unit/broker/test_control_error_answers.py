"""Kafka's error answer for every API a fault rule can fail, at every version this broker serves:
it encodes, decodes with the stock codec, and carries the error where Kafka's getErrorResponse
puts it (kafka-clients 4.3.1, read in tests against its builders for the tricky ones)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from broker.control.error_answers import ERROR_ANSWERS, error_answer
from broker.control.request_log import answer_errors
from broker.handlers.registry import HANDLERS, load_all
from broker.net.context import NO_RESPONSE, RawResponse
from protocol.errors import ErrorCode
from protocol.fetch_codec import decode_fetch_request
from protocol.messages import request_class, response_class
from protocol.produce_codec import decode_produce_request

load_all()

# (api, version) pairs whose error answer has nowhere to carry the error (as in Kafka)
INVISIBLE = {(35, 0), (35, 1), (35, 2)}  # DescribeLogDirs before v3 has no top-level error field


def _sample(cls: Any, version: int) -> Any:
    """A request of ``cls`` at ``version`` naming one of everything (one topic, one partition ...)."""
    values: dict[str, Any] = {}
    for name, f in cls.fields.items():
        lo, hi = f._versions
        if not lo <= version <= hi:
            continue
        values[name] = _value(f, version)
    return cls(**values)


def _value(f: Any, version: int) -> Any:
    type_str = f._type_str
    if type_str.startswith("[]"):
        inner = type_str[2:]
        if getattr(f, "array_of", None) is not None and hasattr(f.array_of, "fields") and f.array_of.fields:
            return [_sample(f.array_of, version)]
        return [_scalar(inner, f.name)]
    if getattr(f, "_fields", None) and hasattr(f, "fields"):
        return _sample(f, version)
    return _scalar(type_str, f.name)


def _scalar(type_str: str, name: str) -> Any:
    if type_str in ("int8", "int16", "int32", "int64", "uint16"):
        return 0
    if type_str == "bool":
        return False
    if type_str == "uuid":
        return uuid.UUID(int=7)
    if type_str in ("bytes", "records"):
        return b""
    if type_str == "float64":
        return 0.0
    return "t" if "topic" in name or name == "name" else "x"


def _request(api_key: int, version: int) -> Any:
    cls = request_class(api_key)
    req = _sample(cls, version)
    if api_key in (0, 1):  # decoded by the fast codecs, as the broker decodes them
        body = bytes(req.encode(version=version))
        return (decode_produce_request if api_key == 0 else decode_fetch_request)(body, version)
    return req


CASES = [(key, v) for key in sorted(ERROR_ANSWERS) if key in HANDLERS
         for v in range(HANDLERS[key].min_version, HANDLERS[key].max_version + 1)]


@pytest.mark.parametrize(("api_key", "version"), CASES)
def test_the_error_answer_encodes_and_carries_the_error(api_key: int, version: int) -> None:
    code = ErrorCode.NOT_COORDINATOR
    req = _request(api_key, version)
    if api_key == 0:
        req = req._replace(acks=-1)
    answer = error_answer(api_key, version, req, code, lambda _: None)
    if isinstance(answer, RawResponse):
        body = b"".join(bytes(b) for b in answer.buffers)
        assert len(body) == answer.size
    else:
        body = bytes(answer.encode(version=version))
    decoded = response_class(api_key).decode(body, version=version)
    errors = answer_errors(api_key, version, decoded)
    if (api_key, version) in INVISIBLE:
        assert errors == []
    else:
        assert errors and set(errors) == {int(code)}, decoded


def test_an_acks_0_produce_gets_no_answer() -> None:
    req = _request(0, 9)._replace(acks=0)
    assert error_answer(0, 9, req, ErrorCode.NOT_LEADER_OR_FOLLOWER, lambda _: None) is NO_RESPONSE


@pytest.mark.parametrize(("api_key", "version", "code", "answered"), [
    (22, 3, ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH),
    (22, 4, ErrorCode.PRODUCER_FENCED, ErrorCode.PRODUCER_FENCED),
    (26, 1, ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH),
    (26, 2, ErrorCode.PRODUCER_FENCED, ErrorCode.PRODUCER_FENCED),
    (28, 1, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE),
    (28, 2, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS),
    (2, 4, ErrorCode.OFFSET_NOT_AVAILABLE, ErrorCode.LEADER_NOT_AVAILABLE),
])
def test_an_error_a_version_does_not_know_is_answered_as_kafka_answers_it(
        api_key: int, version: int, code: ErrorCode, answered: ErrorCode) -> None:
    answer = error_answer(api_key, version, _request(api_key, version), code, lambda _: None)
    assert answer_errors(api_key, version, answer) == [int(answered)] * len(answer_errors(api_key, version, answer))
    assert answer_errors(api_key, version, answer)


def test_fetch_from_v13_carries_the_error_at_the_top_only_and_echoes_the_session() -> None:
    req = _request(1, 13)._replace(session_id=42)
    answer = error_answer(1, 13, req, ErrorCode.NOT_LEADER_OR_FOLLOWER, lambda _: None)
    decoded = response_class(1).decode(b"".join(bytes(b) for b in answer.buffers), version=13)
    assert decoded.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert decoded.session_id == 42
    assert decoded.responses == []
    older = error_answer(1, 12, _request(1, 12), ErrorCode.NOT_LEADER_OR_FOLLOWER, lambda _: None)
    decoded = response_class(1).decode(b"".join(bytes(b) for b in older.buffers), version=12)
    assert [p.error_code for t in decoded.responses for p in t.partitions] == [ErrorCode.NOT_LEADER_OR_FOLLOWER]


def test_find_coordinator_answers_node_minus_one_with_kafkas_text() -> None:
    old = error_answer(10, 3, _request(10, 3), ErrorCode.NOT_COORDINATOR, lambda _: None)
    assert (old.node_id, old.host, old.port) == (-1, "", -1)
    assert old.error_message == "This is not the correct coordinator."
    new = error_answer(10, 4, _request(10, 4), ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, lambda _: None)
    assert [(c.key, c.node_id, c.error_code) for c in new.coordinators] == [("x", -1, 14)]
