"""The control endpoint: the brokers of this process driven from outside, for tests in any
language (``control.port``, off when 0; ``control.host``, loopback unless configured). HTTP/1.1 and
JSON, served on the brokers' event loop, in librdkafka's mock cluster vocabulary (push request
errors with RTTs, broker down/up, broker RTT, set partition leader, set coordinator for a key),
so its scenarios translate one to one. It works the same on one broker and on ``--brokers N``.

Topology
    GET    /cluster                                  brokers (id, alive, ports), topics, the clock
    GET    /topics/<topic>                           every partition's registration
    GET    /coordinators/(group|transaction)/<key>   the key's coordinator partition and its leader
    POST   /coordinators/(group|transaction)/<key>   {"broker": id}: move the key's coordinator
    POST   /topics/<topic>/partitions/<p>/leader     {"broker": id}: an election only it may win (-1: no leader)
    POST   /brokers/<id>/down                        listeners closed, data kept ({"clean": false}: as kill -9)
    POST   /brokers/<id>/up                          recovered from its log dir, rejoins
    POST   /brokers/<id>/rtt                         {"ms": 100}: every answer of the broker held that long
Faults (broker.control.faults)
    GET    /faults                                   the rules in force and the RTTs
    POST   /faults                                   a rule, a list of rules or {"rules": [...]}
    DELETE /faults                                   every rule and RTT
    DELETE /faults/<id>                              one rule
Requests (broker.control.request_log)
    GET    /requests?api=&broker=&client_id=&transactional_id=&group_id=&topic=&since=&limit=
    DELETE /requests
Time (control.clock=virtual)
    GET    /clock                                    now, and how far the clock is ahead of real time
    POST   /clock/advance                            {"ms": N} (or "seconds", "minutes", "hours", "days")
Versions and features
    GET    /versions                                 the emulated Apache Kafka release, and the known ones
    POST   /versions                                 {"kafka": "3.9"}; {"kafka": null}: this broker's own;
                                                     {"api": "InitProducerId", "min": -1, "max": -1}: an API's
                                                     range (-1, -1: not advertised); {"reset": true}
    GET    /features                                 finalized feature levels
    POST   /features                                 {"transaction.version": 1}: as kafka-features.sh would

Answers are JSON objects; an action that cannot be done answers 409 with Kafka's error name, a
request that cannot be understood 400 with what is wrong.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Protocol
from urllib.parse import parse_qs, unquote

import structlog

from broker.broker import Broker
from broker.cluster.shared import SharedCluster
from broker.config import features
from broker.config.broker_config import BrokerConfig
from broker.control.controls import Controls
from broker.control.faults import FaultSpecError, api_key_of
from broker.control.kafka_versions import release, releases
from broker.ops.http_head import read_head
from coordinator.group.coordinator import OFFSETS_TOPIC
from coordinator.txn.state_manager import TRANSACTION_STATE_TOPIC
from protocol.errors import ErrorCode, KafkaError
from storage.clock import Clock, VirtualClock

log = structlog.get_logger(__name__)

_READ_TIMEOUT = 10.0
_MAX_HEAD = 16 * 1024
_MAX_BODY = 1024 * 1024  # a file's worth of fault rules
_UNITS_MS = {"ms": 1, "seconds": 1000, "minutes": 60_000, "hours": 3_600_000, "days": 86_400_000}


class Nodes(Protocol):
    """The brokers of this process: ``ClusterProcess`` (``--brokers N``) or ``SingleNode``."""

    config: BrokerConfig
    clock: Clock
    controls: Controls
    count: int

    @property
    def node_ids(self) -> list[int]: ...
    @property
    def brokers(self) -> dict[int, Broker]: ...
    @property
    def shared(self) -> SharedCluster: ...
    @property
    def cluster_id(self) -> str: ...
    def alive(self, node_id: int) -> bool: ...
    def running(self) -> list[Broker]: ...
    async def start_broker(self, node_id: int) -> Broker: ...
    async def stop_broker(self, node_id: int, clean: bool = True) -> None: ...


class HttpError(Exception):
    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status


def _response(status: str, payload: Any) -> bytes:
    body = (json.dumps(payload, sort_keys=True) + "\n").encode()
    head = f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    return head.encode("latin-1") + body


class ControlEndpoint:
    def __init__(self, nodes: Nodes) -> None:
        self.cluster = nodes
        self.server: asyncio.AbstractServer | None = None
        self.port: int | None = None

    async def start(self, host: str, port: int) -> None:
        self.server = await asyncio.start_server(self._serve, host, port, reuse_address=True, limit=_MAX_HEAD)
        self.port = self.server.sockets[0].getsockname()[1]
        log.info("control endpoint listening", host=host, port=self.port)

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await read_head(reader, _READ_TIMEOUT)
            if head is None:
                return
            try:
                if not head.method:
                    raise HttpError("400 Bad Request", "bad request line")
                try:
                    length = int(head.headers.get("content-length", "0") or 0)
                except ValueError:
                    raise HttpError("400 Bad Request", "bad Content-Length") from None
                if not 0 <= length <= _MAX_BODY:
                    raise HttpError("413 Payload Too Large", f"a body of at most {_MAX_BODY} bytes")
                raw = await asyncio.wait_for(reader.readexactly(length), _READ_TIMEOUT) if length else b""
                try:
                    body = json.loads(raw) if raw.strip() else {}
                except ValueError:
                    raise HttpError("400 Bad Request", "the body is not JSON") from None
                path, _, query = head.target.partition("?")
                payload = await self.handle(head.method, path, body, {k: v[-1] for k, v in parse_qs(query).items()})
                writer.write(_response("200 OK", payload))
            except HttpError as e:
                writer.write(_response(e.status, {"error": str(e)}))
            except FaultSpecError as e:
                writer.write(_response("400 Bad Request", {"error": str(e)}))
            await asyncio.wait_for(writer.drain(), _READ_TIMEOUT)
        except Exception:  # noqa: BLE001 - a bad request must never hurt the brokers
            log.exception("control request failed")
        finally:
            writer.close()

    # --- the actions --------------------------------------------------------------------------

    async def handle(self, method: str, path: str, body: Any, query: dict[str, str] | None = None) -> dict[str, Any]:
        segments = [unquote(s) for s in path.strip("/").split("/") if s]
        query = query or {}
        if method == "POST" and segments != ["faults"] and not isinstance(body, dict):
            raise HttpError("400 Bad Request", "the body must be a JSON object")
        match method, segments:
            case "GET", ["cluster"]:
                return self.describe()
            case "GET", ["topics", topic]:
                return self.describe_topic(topic)
            case "POST", ["brokers", node, ("down" | "up") as action]:
                return await self.broker_action(self._node(node), action, body.get("clean", True) is not False)
            case "POST", ["brokers", node, "rtt"]:
                return self.set_rtt(self._node(node), body)
            case "POST", ["topics", topic, "partitions", partition, "leader"]:
                return self.move_leader(topic, _int(partition, "partition"), _broker_of(body))
            case "POST", ["coordinators", ("group" | "transaction") as kind, key]:
                return self.move_coordinator(kind, key, _broker_of(body))
            case "GET", ["coordinators", ("group" | "transaction") as kind, key]:
                return self.coordinator(kind, key)
            case "GET", ["faults"]:
                return self.cluster.controls.faults.to_json()
            case "POST", ["faults"]:
                added = self.cluster.controls.faults.add(body)
                return {"added": [r.to_json() for r in added]}
            case "DELETE", ["faults"]:
                return {"removed": self.cluster.controls.faults.clear()}
            case "DELETE", ["faults", rule_id]:
                if not self.cluster.controls.faults.remove(_int(rule_id, "rule id")):
                    raise HttpError("404 Not Found", f"no fault rule {rule_id}")
                return {"removed": 1}
            case "GET", ["requests"]:
                return self.requests(query)
            case "DELETE", ["requests"]:
                self.cluster.controls.requests.clear()
                return {"cleared": True}
            case "GET", ["clock"]:
                return self.describe_clock()
            case "POST", ["clock", "advance"]:
                return await self.advance_clock(body)
            case "GET", ["versions"]:
                return self.describe_versions()
            case "POST", ["versions"]:
                return self.emulate(body)
            case "GET", ["features"]:
                return self.describe_features()
            case "POST", ["features"]:
                return self.update_features(body)
        raise HttpError("404 Not Found", f"no action {method} {path}")

    def _node(self, value: str) -> int:
        node_id = _int(value, "broker id")
        if node_id not in self.cluster.node_ids:
            raise HttpError("404 Not Found", f"no broker {node_id}")
        return node_id

    def describe(self) -> dict[str, Any]:
        brokers = []
        for node_id in self.cluster.node_ids:
            broker = self.cluster.brokers.get(node_id)
            alive = self.cluster.alive(node_id)
            entry: dict[str, Any] = {"id": node_id, "alive": alive}
            if broker is not None and alive:
                entry["ports"] = dict(broker.bound_ports)
            brokers.append(entry)
        return {"cluster_id": self.cluster.cluster_id, "brokers": brokers,
                "topics": sorted(self.cluster.shared.metadata.topics), "clock": self.describe_clock()}

    def describe_topic(self, topic: str) -> dict[str, Any]:
        info = self.cluster.shared.metadata.get(topic)
        if info is None:
            raise HttpError("404 Not Found", f"no topic {topic}")
        return {"topic": topic, "partitions": [{"partition": p, **reg.to_json()}
                                               for p, reg in enumerate(info.registrations)]}

    async def broker_action(self, node_id: int, action: str, clean: bool = True) -> dict[str, Any]:
        if action == "down":
            await self.cluster.stop_broker(node_id, clean)
        else:
            await self.cluster.start_broker(node_id)
        return {"broker": node_id, "alive": self.cluster.alive(node_id)}

    def set_rtt(self, node_id: int, body: dict[str, Any]) -> dict[str, Any]:
        ms = body.get("ms")
        if not isinstance(ms, int) or isinstance(ms, bool) or ms < 0:
            raise HttpError("400 Bad Request", 'the body must give the delay: {"ms": <whole number >= 0>}')
        self.cluster.controls.faults.set_rtt(node_id, ms)
        return {"broker": node_id, "rtt_ms": ms}

    def move_leader(self, topic: str, partition: int, node_id: int) -> dict[str, Any]:
        shared = self.cluster.shared
        if shared.metadata.partition(topic, partition) is None:
            raise HttpError("404 Not Found", f"no partition {topic}-{partition}")
        error = shared.replication_control.move_leader(topic, partition, node_id)
        if error not in (ErrorCode.NONE, ErrorCode.ELECTION_NOT_NEEDED):
            raise HttpError("409 Conflict", error.name)
        reg = shared.metadata.partition(topic, partition)
        assert reg is not None
        return {"topic": topic, "partition": partition, "leader": reg.leader, "leader_epoch": reg.leader_epoch}

    def _coordinator_partition(self, kind: str, key: str) -> tuple[str, int]:
        broker = next(iter(self.cluster.running()), None)
        if broker is None:
            raise HttpError("409 Conflict", "no broker is running")
        if kind == "group":
            topic, partition = OFFSETS_TOPIC, broker.group_coordinator.partition_for(key)
        else:
            topic, partition = TRANSACTION_STATE_TOPIC, broker.txn_coordinator.partition_for(key)
        if self.cluster.shared.metadata.partition(topic, partition) is None:
            raise HttpError("409 Conflict", f"{topic} does not exist yet")
        return topic, partition

    def coordinator(self, kind: str, key: str) -> dict[str, Any]:
        topic, partition = self._coordinator_partition(kind, key)
        reg = self.cluster.shared.metadata.partition(topic, partition)
        assert reg is not None
        return {"key": key, "topic": topic, "partition": partition, "leader": reg.leader,
                "leader_epoch": reg.leader_epoch}

    def move_coordinator(self, kind: str, key: str, node_id: int) -> dict[str, Any]:
        """A coordinator is the leader of its key's partition: moving one is moving that leader."""
        topic, partition = self._coordinator_partition(kind, key)
        return {"key": key, **self.move_leader(topic, partition, node_id)}

    def requests(self, query: dict[str, str]) -> dict[str, Any]:
        controls = self.cluster.controls
        try:
            entries = controls.requests.query(
                api=api_key_of(query["api"]) if "api" in query else None,
                broker=int(query["broker"]) if "broker" in query else None,
                client_id=query.get("client_id"), transactional_id=query.get("transactional_id"),
                group_id=query.get("group_id"), topic=query.get("topic"),
                since=int(query.get("since", 0)), limit=int(query.get("limit", 1000)))
        except ValueError as e:
            raise HttpError("400 Bad Request", str(e)) from None
        return {"logging": controls.logging, "requests": entries}

    def describe_clock(self) -> dict[str, Any]:
        clock = self.cluster.clock
        offset = clock.offset_ms if isinstance(clock, VirtualClock) else 0
        return {"virtual": isinstance(clock, VirtualClock), "now_ms": clock.now_ms(), "offset_ms": offset}

    async def advance_clock(self, body: dict[str, Any]) -> dict[str, Any]:
        clock = self.cluster.clock
        if not isinstance(clock, VirtualClock):
            raise HttpError("409 Conflict", "the clock is not virtual: start with control.clock=virtual")
        given = [(unit, body[unit]) for unit in _UNITS_MS if unit in body]
        if len(given) != 1 or not isinstance(given[0][1], (int, float)) or isinstance(given[0][1], bool) \
                or given[0][1] < 0:
            raise HttpError("400 Bad Request", 'the body must give how far: {"ms": N} (or seconds, minutes, '
                                               'hours, days), N >= 0')
        unit, amount = given[0]
        fired = await clock.advance(amount * _UNITS_MS[unit])
        return {**self.describe_clock(), "fired": fired}

    def describe_versions(self) -> dict[str, Any]:
        controls = self.cluster.controls
        current = controls.release
        return {"kafka": current.name if current is not None else None, "releases": releases(),
                "api_ranges": {str(k): list(v) for k, v in sorted(controls.api_ranges.items())},
                **({"apis": current.to_json()["apis"]} if current is not None else {})}

    def emulate(self, body: dict[str, Any]) -> dict[str, Any]:
        """{"kafka": "3.9"} (or null), and/or {"api": "InitProducerId", "min": -1, "max": -1}
        (rd_kafka_mock_set_apiversion; -1, -1: not advertised), or {"reset": true}."""
        controls = self.cluster.controls
        if not any(k in body for k in ("kafka", "api", "reset")):
            raise HttpError("400 Bad Request", 'the body must name the release: {"kafka": "3.9"} or {"kafka": null}, '
                                               'or an API range: {"api": "InitProducerId", "min": 0, "max": 3}')
        if body.get("reset"):
            controls.emulate(None)
            controls.reset_api_ranges()
        if "kafka" in body:
            name = body["kafka"]
            try:
                controls.emulate(None if name is None else release(str(name)))
            except ValueError as e:
                raise HttpError("400 Bad Request", str(e)) from None
        if "api" in body:
            low, high = body.get("min"), body.get("max")
            if not isinstance(low, int) or not isinstance(high, int) or isinstance(low, bool) \
                    or isinstance(high, bool):
                raise HttpError("400 Bad Request", 'an API range needs "min" and "max" (-1, -1: not advertised)')
            controls.set_api_range(api_key_of(body["api"]), low, high)
        return self.describe_versions()

    def _metadata_broker(self) -> Broker:
        broker = next(iter(self.cluster.running()), None)
        if broker is None:
            raise HttpError("409 Conflict", "no broker is running")
        return broker

    def describe_features(self) -> dict[str, Any]:
        broker = self._metadata_broker()
        epoch, levels = features.finalized(broker)
        return {"epoch": epoch, "finalized": dict(levels)}

    def update_features(self, body: dict[str, Any]) -> dict[str, Any]:
        """Upgrades and (safe) downgrades, validated as UpdateFeatures validates them."""
        broker = self._metadata_broker()
        current = dict(broker.metadata.features)
        updates = []
        for name, value in body.items():
            if not isinstance(value, int) or isinstance(value, bool):
                raise HttpError("400 Bad Request", f"{name}: a level is a whole number")
            kind = features.SAFE_DOWNGRADE if value < current.get(name, 0) else features.UPGRADE
            updates.append((name, value, kind))
        try:
            levels = features.validate(broker.node_id, current, updates)
        except KafkaError as e:
            raise HttpError("409 Conflict", f"{e.code.name}: {e.message}") from None
        if updates:
            features.apply(broker, levels)
        return self.describe_features()


def _int(value: str, what: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise HttpError("400 Bad Request", f"{what} must be a number") from None


def _broker_of(body: dict[str, Any]) -> int:
    node_id = body.get("broker")
    if not isinstance(node_id, int):
        raise HttpError("400 Bad Request", 'the body must name the broker: {"broker": <id>}')
    return node_id
