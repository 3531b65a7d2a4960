"""Fault rules: what the brokers do instead of answering a request normally, in librdkafka's mock
cluster vocabulary (``rd_kafka_mock_push_request_errors``, ``..._broker_push_request_error_rtts``,
``rd_kafka_mock_broker_set_rtt``), added and removed at run time through the control endpoint or
loaded from a file at start-up (``--faults FILE``, JSON or YAML).

A rule matches requests by API (name or key), and optionally by broker, topic (and partition),
transactional id, group id and client id: a request matches when it names them. The fault applies
to the whole request (a Produce naming the topic among others fails on every partition, as
Kafka's error answer names every partition of it), except where an error can hit one topic alone:
a Metadata answer then describes that topic with the error (librdkafka's
``rd_kafka_mock_topic_set_error``), and AddPartitionsToTxn v0-3 fails its partitions with the
others OPERATION_NOT_ATTEMPTED (``broker.control.error_answers.scoped_error_answer``). What it
does, per matching request:

- ``error``: the request is not carried out; the answer is Kafka's error answer for that API with
  the given code (``broker.control.error_answers``; mapped to what the request's version knows),
- ``delay``: the request is carried out and its answer held ``delay_ms`` (a slow broker, an RTT),
- ``drop``: the request is carried out, the answer is lost and the connection goes silent (the
  client's request times out and it closes the connection),
- ``close``: the connection is closed instead of answering (with ``"apply": true``, after the
  request was carried out: the client cannot know it was).

An ``errors`` list is librdkafka's push: the next len(errors) matching requests get its entries in
order (``"NONE"`` with a ``delay_ms`` is answered normally after the delay), then the rule is
gone. A single fault applies to the next ``count`` matching requests (default 1; -1: until
removed), each with ``probability`` (default 1; a rule with a probability and no count lasts
until removed).

Faults never touch stored data: an error or a close happens before the handler runs, a delay or
drop after it answered.
"""

from __future__ import annotations

import itertools
import json
import random
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.control.request_keys import RequestKeys
from protocol.errors import ErrorCode
from protocol.messages import API_MODULES, NEWER_ONLY, api_name

ACTIONS = ("error", "delay", "drop", "close")
# the answer is formed normally, then held, lost or replaced by a close
APPLIED_BY_DEFAULT = {"error": False, "delay": True, "drop": True, "close": False}


class FaultSpecError(ValueError):
    """A fault rule that cannot be understood: the message says what is wrong."""


@dataclass(frozen=True, slots=True)
class Fault:
    """What one request gets."""

    action: str  # one of ACTIONS, or "none" (answered normally, after delay_ms)
    error: ErrorCode = ErrorCode.NONE
    delay_ms: int = 0
    apply: bool = True  # carry the request out first

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"action": self.action}
        if self.action == "error":
            out["error"] = self.error.name
        if self.delay_ms:
            out["delay_ms"] = self.delay_ms
        if self.action in ("error", "close"):
            out["apply"] = self.apply
        return out


@dataclass(slots=True)
class FaultRule:
    id: int
    api_key: int | None = None  # None: any API
    broker: int | None = None
    topic: str | None = None
    partition: int | None = None
    transactional_id: str | None = None
    group_id: str | None = None
    client_id: str | None = None
    steps: deque[Fault] = field(default_factory=deque)  # a push: consumed in order
    fault: Fault | None = None  # a repeated fault
    remaining: int = 1  # for ``fault``; -1 until removed
    probability: float = 1.0
    hits: int = 0

    @property
    def needs_keys(self) -> bool:
        return self.topic is not None or self.transactional_id is not None or self.group_id is not None

    def matches(self, broker: int, api_key: int, client_id: str | None, keys: RequestKeys | None) -> bool:
        if self.api_key is not None and self.api_key != api_key:
            return False
        if self.broker is not None and self.broker != broker:
            return False
        if self.client_id is not None and self.client_id != client_id:
            return False
        if keys is None:
            return not self.needs_keys
        if self.topic is not None and not keys.names_partition(self.topic, self.partition):
            return False
        if self.transactional_id is not None and self.transactional_id not in keys.transactional_ids:
            return False
        return self.group_id is None or self.group_id in keys.group_ids

    @property
    def exhausted(self) -> bool:
        return not self.steps and (self.fault is None or self.remaining == 0)

    def take(self, rng: random.Random) -> Fault | None:
        """The fault for one matching request (None: this one passes, by probability)."""
        if self.steps:
            self.hits += 1
            return self.steps.popleft()
        if self.fault is None or self.remaining == 0:
            return None
        if self.probability < 1.0 and rng.random() >= self.probability:
            return None
        if self.remaining > 0:
            self.remaining -= 1
        self.hits += 1
        return self.fault

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "hits": self.hits}
        if self.api_key is not None:
            out["api"] = api_name(self.api_key)
            out["api_key"] = self.api_key
        for name in ("broker", "topic", "partition", "transactional_id", "group_id", "client_id"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        if self.steps:
            out["errors"] = [f.to_json() for f in self.steps]
        elif self.fault is not None:
            out.update(self.fault.to_json())
            out["count"] = self.remaining
            if self.probability < 1.0:
                out["probability"] = self.probability
        return out


def api_key_of(value: Any) -> int:
    """An API given by key (``26``) or by Kafka's name (``"EndTxn"``)."""
    if isinstance(value, bool):
        raise FaultSpecError(f"unknown API {value!r}")
    if isinstance(value, int) or (isinstance(value, str) and value.strip().isdigit()):
        key = int(value)
        if key in API_MODULES or key in NEWER_ONLY:
            return key
        raise FaultSpecError(f"unknown API key {key}")
    if isinstance(value, str):
        wanted = value.replace("_", "").lower()
        for key in (*API_MODULES, *NEWER_ONLY):
            if api_name(key).lower() == wanted:
                return key
    raise FaultSpecError(f"unknown API {value!r} (a key such as 26 or a name such as \"EndTxn\")")


def error_code_of(value: Any) -> ErrorCode:
    """An error given by code (``16``) or by Kafka's name (``"NOT_COORDINATOR"``)."""
    try:
        if isinstance(value, int) and not isinstance(value, bool):
            return ErrorCode(value)
        if isinstance(value, str):
            name = value.strip().upper()
            return ErrorCode(int(name)) if name.lstrip("-").isdigit() else ErrorCode[name]
    except (KeyError, ValueError):
        pass
    raise FaultSpecError(f"unknown error {value!r} (a Kafka error name such as \"NOT_COORDINATOR\" or its code)")


def _nonneg_int(spec: dict[str, Any], name: str, default: int = 0) -> int:
    value = spec.get(name, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise FaultSpecError(f"{name} must be a whole number >= 0")
    return value


def _fault(spec: dict[str, Any], inherited_delay: int = 0) -> Fault:
    delay = _nonneg_int(spec, "delay_ms", inherited_delay)
    action = spec.get("action")
    if action is None:
        if "error" in spec:
            action = "error"
        elif delay:
            action = "delay"
        else:
            raise FaultSpecError('a fault needs an "error", an "action" (error, delay, drop, close) or a "delay_ms"')
    if action not in ACTIONS:
        raise FaultSpecError(f"unknown action {action!r}: one of {', '.join(ACTIONS)}")
    error = ErrorCode.NONE
    if action == "error":
        if "error" not in spec:
            raise FaultSpecError('the error action needs an "error"')
        error = error_code_of(spec["error"])
        if error == ErrorCode.NONE:
            action = "delay" if delay else "none"
    apply = spec.get("apply", APPLIED_BY_DEFAULT.get(action, True))
    if not isinstance(apply, bool):
        raise FaultSpecError("apply must be true or false")
    if action in ("delay", "drop") and not apply:
        raise FaultSpecError(f"a {action} always carries the request out (apply must be true)")
    return Fault(action, error, delay, apply)


_MATCH_FIELDS = ("broker", "topic", "partition", "transactional_id", "group_id", "client_id")
_KNOWN = {"api", "api_key", *_MATCH_FIELDS, "errors", "error", "action", "delay_ms", "apply", "count",
          "probability"}


def parse_rule(spec: Any, rule_id: int) -> FaultRule:
    if not isinstance(spec, dict):
        raise FaultSpecError("a fault rule is a JSON object")
    unknown = sorted(set(spec) - _KNOWN)
    if unknown:
        raise FaultSpecError(f"unknown field(s) {', '.join(unknown)}")
    rule = FaultRule(rule_id)
    api = spec.get("api", spec.get("api_key"))
    if api is not None and api != "*":
        rule.api_key = api_key_of(api)
    for name in ("broker", "partition"):
        if spec.get(name) is not None:
            setattr(rule, name, _nonneg_int(spec, name))
    for name in ("topic", "transactional_id", "group_id", "client_id"):
        value = spec.get(name)
        if value is not None:
            if not isinstance(value, str):
                raise FaultSpecError(f"{name} must be a string")
            setattr(rule, name, value)
    if rule.partition is not None and rule.topic is None:
        raise FaultSpecError("a partition needs its topic")
    if "errors" in spec:
        entries = spec["errors"]
        if not isinstance(entries, list) or not entries:
            raise FaultSpecError("errors must be a non-empty list")
        delay = _nonneg_int(spec, "delay_ms")
        for entry in entries:
            fault = _fault(entry if isinstance(entry, dict) else {"error": entry}, delay)
            rule.steps.append(fault)
        if "count" in spec or "probability" in spec:
            raise FaultSpecError("errors is a sequence, one per request: count and probability do not apply")
        return rule
    rule.fault = _fault(spec)
    probability = spec.get("probability", 1.0)
    if not isinstance(probability, (int, float)) or isinstance(probability, bool) or not 0 < probability <= 1:
        raise FaultSpecError("probability must be a number in (0, 1]")
    rule.probability = float(probability)
    count = spec.get("count", -1 if "probability" in spec else 1)
    if not isinstance(count, int) or isinstance(count, bool) or (count < 1 and count != -1):
        raise FaultSpecError("count must be a whole number >= 1, or -1 (until removed)")
    rule.remaining = count
    return rule


class FaultRules:
    """The rules in force, in the order they were added (the first that matches decides)."""

    def __init__(self, seed: int | None = None) -> None:
        self.rules: list[FaultRule] = []
        self.rtt_ms: dict[int, int] = {}  # broker id -> delay of every answer (rd_kafka_mock_broker_set_rtt)
        self._ids = itertools.count(1)
        self.rng = random.Random(seed)
        self.on_change: list[Any] = []  # callables run after every change (the dispatcher's fast flag)

    @property
    def active(self) -> bool:
        return bool(self.rules or self.rtt_ms)

    @property
    def need_keys(self) -> bool:
        return any(r.needs_keys for r in self.rules)

    def _changed(self) -> None:
        for fn in self.on_change:
            fn()

    def add(self, spec: Any) -> list[FaultRule]:
        """Add one rule, or several (a list, or {"rules": [...]}); all or none."""
        specs = spec.get("rules") if isinstance(spec, dict) and "rules" in spec else spec
        specs = specs if isinstance(specs, list) else [specs]
        added = [parse_rule(s, 0) for s in specs]
        for rule in added:
            rule.id = next(self._ids)
        self.rules.extend(added)
        self._changed()
        return added

    def remove(self, rule_id: int) -> bool:
        before = len(self.rules)
        self.rules = [r for r in self.rules if r.id != rule_id]
        self._changed()
        return len(self.rules) != before

    def clear(self) -> int:
        count = len(self.rules)
        self.rules.clear()
        self.rtt_ms.clear()
        self._changed()
        return count

    def set_rtt(self, broker: int, ms: int) -> None:
        if ms > 0:
            self.rtt_ms[broker] = ms
        else:
            self.rtt_ms.pop(broker, None)
        self._changed()

    def pick(self, broker: int, api_key: int, client_id: str | None,
             keys: RequestKeys | None) -> tuple[Fault, FaultRule] | None:
        """The fault this request gets, if any; consumes it from its rule. Rules for this broker
        are asked first, then the others, each in the order added (librdkafka's mock takes a
        broker's pushed errors before the cluster's)."""
        for rule in sorted(self.rules, key=lambda r: r.broker is None):
            if rule.matches(broker, api_key, client_id, keys):
                fault = rule.take(self.rng)
                if rule.exhausted:
                    self.rules.remove(rule)
                    self._changed()
                if fault is not None:
                    return fault, rule
        return None

    def to_json(self) -> dict[str, Any]:
        return {"rules": [r.to_json() for r in self.rules],
                "rtt_ms": {str(b): ms for b, ms in sorted(self.rtt_ms.items())}}


def load_file(path: str | Path) -> Any:
    """A faults file: JSON, or YAML when PyYAML is installed (``.yaml``/``.yml``)."""
    text = Path(path).read_text()
    if str(path).endswith((".yaml", ".yml")):
        try:
            import yaml  # noqa: PLC0415 - optional: only a YAML faults file needs it
        except ImportError:
            raise FaultSpecError(f"{path}: reading YAML needs PyYAML (pip install pyyaml); "
                                 "or write the file as JSON") from None
        return yaml.safe_load(text)
    try:
        return json.loads(text)
    except ValueError as e:
        raise FaultSpecError(f"{path}: not JSON: {e}") from None
