"""The control endpoint: the cluster's topology driven from outside, for tests in any language
(``control.port``, off when 0; ``control.host``, loopback unless configured). HTTP/1.1 and JSON,
served on the brokers' event loop; librdkafka's mock cluster vocabulary (broker down/up, set
partition leader, set coordinator for a key) maps onto it one to one.

    GET  /cluster                                  brokers (id, alive, endpoint) and the controller's view
    GET  /topics/<topic>                           every partition's registration
    GET  /coordinators/(group|transaction)/<key>   the key's coordinator partition and its leader
    POST /brokers/<id>/down                        listeners closed, fetchers and coordinators stopped, data kept;
                                                   {"clean": false}: as kill -9 (recovery on the way up)
    POST /brokers/<id>/up                          recovered from its log dir, catches up, rejoins the ISR
    POST /topics/<topic>/partitions/<p>/leader     {"broker": id}: an election only it may win
    POST /coordinators/group/<group id>            {"broker": id}: move the group's coordinator
    POST /coordinators/transaction/<txn id>        {"broker": id}: move the transactional id's coordinator

Answers are JSON objects; an action that cannot be done answers 409 with Kafka's error name.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import structlog

from broker.ops.http_head import read_head
from coordinator.group.coordinator import OFFSETS_TOPIC
from coordinator.txn.state_manager import TRANSACTION_STATE_TOPIC
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.cluster_process import ClusterProcess

log = structlog.get_logger(__name__)

_READ_TIMEOUT = 10.0
_MAX_HEAD = 16 * 1024
_MAX_BODY = 64 * 1024


class HttpError(Exception):
    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status


def _response(status: str, payload: Any) -> bytes:
    body = (json.dumps(payload, sort_keys=True) + "\n").encode()
    head = f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    return head.encode("latin-1") + body


class ControlEndpoint:
    def __init__(self, cluster: ClusterProcess) -> None:
        self.cluster = cluster
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
                if not isinstance(body, dict):
                    raise HttpError("400 Bad Request", "the body must be a JSON object")
                payload = await self.handle(head.method, head.target.partition("?")[0], body)
                writer.write(_response("200 OK", payload))
            except HttpError as e:
                writer.write(_response(e.status, {"error": str(e)}))
            await asyncio.wait_for(writer.drain(), _READ_TIMEOUT)
        except Exception:  # noqa: BLE001 - a bad request must never hurt the brokers
            log.exception("control request failed")
        finally:
            writer.close()

    # --- the actions --------------------------------------------------------------------------

    async def handle(self, method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        segments = [unquote(s) for s in path.strip("/").split("/") if s]
        match method, segments:
            case "GET", ["cluster"]:
                return self.describe()
            case "GET", ["topics", topic]:
                return self.describe_topic(topic)
            case "POST", ["brokers", node, ("down" | "up") as action]:
                return await self.broker_action(_int(node, "broker id"), action, body.get("clean", True) is not False)
            case "POST", ["topics", topic, "partitions", partition, "leader"]:
                return self.move_leader(topic, _int(partition, "partition"), _broker_of(body))
            case "POST", ["coordinators", ("group" | "transaction") as kind, key]:
                return self.move_coordinator(kind, key, _broker_of(body))
            case "GET", ["coordinators", ("group" | "transaction") as kind, key]:
                return self.coordinator(kind, key)
        raise HttpError("404 Not Found", f"no action {method} {path}")

    def describe(self) -> dict[str, Any]:
        shared = self.cluster.shared
        brokers = []
        for node_id in range(1, self.cluster.count + 1):
            broker = self.cluster.brokers.get(node_id)
            alive = shared.brokers.alive(node_id)
            entry: dict[str, Any] = {"id": node_id, "alive": alive}
            if broker is not None and alive:
                entry["ports"] = dict(broker.bound_ports)
            brokers.append(entry)
        return {"cluster_id": self.cluster.cluster_id, "brokers": brokers,
                "topics": sorted(shared.metadata.topics)}

    def describe_topic(self, topic: str) -> dict[str, Any]:
        info = self.cluster.shared.metadata.get(topic)
        if info is None:
            raise HttpError("404 Not Found", f"no topic {topic}")
        return {"topic": topic, "partitions": [{"partition": p, **reg.to_json()}
                                               for p, reg in enumerate(info.registrations)]}

    async def broker_action(self, node_id: int, action: str, clean: bool = True) -> dict[str, Any]:
        if not 1 <= node_id <= self.cluster.count:
            raise HttpError("404 Not Found", f"no broker {node_id}")
        if action == "down":
            await self.cluster.stop_broker(node_id, clean)
        else:
            await self.cluster.start_broker(node_id)
        return {"broker": node_id, "alive": self.cluster.shared.brokers.alive(node_id)}

    def move_leader(self, topic: str, partition: int, node_id: int) -> dict[str, Any]:
        error = self.cluster.shared.replication_control.move_leader(topic, partition, node_id)
        if error not in (ErrorCode.NONE, ErrorCode.ELECTION_NOT_NEEDED):
            raise HttpError("409 Conflict", error.name)
        reg = self.cluster.shared.metadata.partition(topic, partition)
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
