"""Cluster metadata: topics, their ids, configs and partitions (each a ``PartitionRegistration``:
replicas, ISR, leader and epochs), dynamic configs, quotas, credentials and features.

Kafka keeps this in the KRaft ``__cluster_metadata`` log: records appended, with a snapshot now
and then. So does this store, in ``<first log dir>/__cluster_metadata/``: ``topics.json`` is the
snapshot, ``journal.jsonl`` the changes made since, one line per change (a request's changes
together, so a torn last line drops the whole change and nothing else), fsynced before the change
is answered. Past JOURNAL_MAX_LINES lines, and on a clean stop, the snapshot is rewritten and
the journal emptied, so a change costs one small append however large the metadata is, and
``MetadataStore.batch()`` makes a request's many changes one append. Each partition directory
also carries Kafka's ``partition.metadata`` with the topic id, so the data directories stay
self-describing.
"""

from __future__ import annotations

import base64
import json
import os
import re
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from broker.cluster.partition_change import PartitionRegistration
from broker.cluster.scram_credentials import Credentials, ScramCredential
from broker.security.acls import Acl
from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from protocol.messages import ApiMessage

LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")  # fullmatch: "$" would let a final newline in
MAX_TOPIC_LENGTH = 249
JOURNAL_MAX_LINES = 1000
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


@dataclass(slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)
    # one per partition, index = partition id (kept as long as ``partitions`` by the store)
    registrations: list[PartitionRegistration] = field(default_factory=list)

    @property
    def internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


def validate_topic_name(name: str | None) -> None:
    """Kafka's Topic.validate (4.x wording): INVALID_TOPIC_EXCEPTION for an illegal name."""
    def invalid(why: str) -> KafkaError:
        return KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic name is invalid: {why}")

    if not name:
        raise invalid("the empty string is not allowed")
    if name in (".", ".."):
        raise invalid(f"'{name}' is not allowed")
    if len(name) > MAX_TOPIC_LENGTH:
        raise invalid(f"the length of '{name}' is longer than the max allowed length {MAX_TOPIC_LENGTH}")
    if not LEGAL_TOPIC.fullmatch(name):
        raise invalid(f"'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'")


def kafka_uuid_str(u: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 without padding."""
    import base64

    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def new_topic_id() -> uuid.UUID:
    # Kafka never hands out ids whose base64 form starts with '-' (Uuid.randomUuid).
    while True:
        u = uuid.uuid4()
        if not kafka_uuid_str(u).startswith("-") and u.int != 0 and u.int != 1:
            return u


class MetadataStore:
    def __init__(self, directory: str | os.PathLike, local_node: int = 1) -> None:
        # the replica of partitions stored before registrations were (a single node's metadata)
        self.local_node = local_node
        self._local: PartitionRegistration | None = None
        self.dir = Path(directory) / "__cluster_metadata"
        self.path = self.dir / "topics.json"
        self.journal_path = self.dir / "journal.jsonl"
        self.topics: dict[str, TopicInfo] = {}
        self.by_id: dict[uuid.UUID, TopicInfo] = {}
        # '.' and '_' folded to '_' -> the topic holding that key (Kafka refuses names that collide)
        self._collision_keys: dict[str, str] = {}
        self.scram: Credentials = {}  # AlterUserScramCredentials (Kafka's UserScramCredentialRecords)
        # Dynamic broker configs (Kafka's BROKER ConfigRecords): "" = cluster default, "<id>" = a broker
        self.broker_configs: dict[str, dict[str, str]] = {}
        # Dynamic group configs (Kafka's GROUP ConfigRecords): group id -> {name: value}
        self.group_configs: dict[str, dict[str, str]] = {}
        # Client quotas (Kafka's ClientQuotaRecords): entity ((type, name or None for the default), ...)
        # sorted by type -> {quota key: value}
        self.client_quotas: dict[tuple[tuple[str, str | None], ...], dict[str, float]] = {}
        # Finalized feature levels above 0 (Kafka's FeatureLevelRecords) and their epoch; empty until
        # broker.config.features.ensure_formatted records the initial ones.
        self.features: dict[str, int] = {}
        self.features_epoch = 0
        # ACLs (Kafka's AccessControlEntryRecords), by their ids; the generation grows on each change
        self.acls: dict[str, Acl] = {}
        self.acls_generation = 0
        self._batch: list[dict[str, Any]] | None = None  # changes of the batch() in progress
        self._journal_lines = 0
        # Bumped by every change to the topics: answers built from them (an all-topics Metadata
        # answer, kept encoded in ``response_cache``) are good while it stays the same.
        self.generation = 0
        self.response_cache: dict[tuple, bytes] = {}

    # --- persistence ---------------------------------------------------------------------------

    def load(self) -> None:
        if self.path.exists():
            self._apply_snapshot(json.loads(self.path.read_text()))
        if self.journal_path.exists():
            for line in self.journal_path.read_bytes().split(b"\n"):
                try:
                    records = json.loads(line)
                except ValueError:
                    continue  # a torn last line: that change was never answered
                for record in records:
                    self._apply(record)
                self._journal_lines += 1

    def _apply_snapshot(self, data: dict[str, Any]) -> None:
        for t in data.get("topics", []):
            self._put_topic(self._topic_from_json(t["name"], t))
        self.broker_configs = {name: dict(configs) for name, configs in data.get("broker_configs", {}).items()}
        self.group_configs = {name: dict(configs) for name, configs in data.get("group_configs", {}).items()}
        self.client_quotas = _quotas_from_json(data.get("client_quotas", []))
        features = data.get("features", {})
        self.features = {str(n): int(v) for n, v in features.get("levels", {}).items()}
        self.features_epoch = int(features.get("epoch", 0))
        self.scram = {user: _credentials_from_json(by_mechanism)
                      for user, by_mechanism in data.get("scram", {}).items()}
        self.acls = {acl_id: Acl.from_json(value) for acl_id, value in data.get("acls", {}).items()}
        self.acls_generation += 1

    def _apply(self, record: dict[str, Any]) -> None:
        """One journal record (what ``_record`` wrote)."""
        kind, key, value = record["kind"], record["key"], record["value"]
        if kind == "topic":
            old = self.topics.get(key)
            if old is not None:
                self._drop_topic(old)
            if value is not None:
                self._put_topic(self._topic_from_json(key, value))
        elif kind == "partition":
            info = self.topics.get(key[0])
            if info is not None and 0 <= key[1] < info.partitions:
                info.registrations[key[1]] = PartitionRegistration.from_json(value)
                self.generation += 1
        elif kind in ("broker_configs", "group_configs"):
            section = getattr(self, kind)
            if value:
                section[key] = dict(value)
            else:
                section.pop(key, None)
        elif kind == "scram":
            if value:
                self.scram[key] = _credentials_from_json(value)
            else:
                self.scram.pop(key, None)
        elif kind == "client_quotas":
            self.client_quotas = _quotas_from_json(value)
        elif kind == "features":
            self.features = {str(n): int(v) for n, v in value["levels"].items()}
            self.features_epoch = int(value["epoch"])
        elif kind == "acl":
            if value is not None:
                self.acls[key] = Acl.from_json(value)
            else:
                self.acls.pop(key, None)
            self.acls_generation += 1

    def _snapshot(self) -> dict[str, Any]:
        return {
            "version": 1,
            "topics": [{"name": t.name, **self._topic_to_json(t)} for t in self.topics.values()],
            "broker_configs": self.broker_configs,
            "group_configs": self.group_configs,
            "client_quotas": _quotas_to_json(self.client_quotas),
            "scram": {user: _credentials_to_json(by_mechanism) for user, by_mechanism in self.scram.items()},
            "features": {"levels": self.features, "epoch": self.features_epoch},
            "acls": {acl_id: acl.to_json() for acl_id, acl in self.acls.items()},
        }

    def write_snapshot(self) -> None:
        """Rewrite topics.json from memory (atomically) and empty the journal."""
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump(self._snapshot(), f, separators=(",", ":"), sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        _fsync_dir(self.dir)
        if self.journal_path.exists():
            os.truncate(self.journal_path, 0)
        self._journal_lines = 0

    def _record(self, kind: str, key: Any = None, value: Any = None) -> None:
        """Make one change durable (or part of the batch in progress) before it is answered."""
        record = {"kind": kind, "key": key, "value": value}
        if self._batch is not None:
            self._batch.append(record)
        else:
            self._append([record])

    def _append(self, records: list[dict[str, Any]]) -> None:
        if not records:
            return
        if self._journal_lines >= JOURNAL_MAX_LINES or not self.path.exists():
            self.write_snapshot()  # memory already holds these records
            return
        line = json.dumps(records, separators=(",", ":"), sort_keys=True).encode() + b"\n"
        fd = os.open(self.journal_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            view = memoryview(line)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        self._journal_lines += 1

    @contextmanager
    def batch(self) -> Iterator[None]:
        """The changes made inside become one journal line, written when the block ends."""
        if self._batch is not None:
            yield
            return
        self._batch = []
        try:
            yield
        finally:
            records, self._batch = self._batch, None
            self._append(records)

    # --- topics --------------------------------------------------------------------------------

    def _put_topic(self, info: TopicInfo) -> None:
        self.generation += 1
        self.topics[info.name] = info
        self.by_id[info.topic_id] = info
        self._collision_keys.setdefault(info.name.replace(".", "_"), info.name)

    def _drop_topic(self, info: TopicInfo) -> None:
        self.generation += 1
        self.topics.pop(info.name, None)
        self.by_id.pop(info.topic_id, None)
        key = info.name.replace(".", "_")
        if self._collision_keys.get(key) == info.name:
            del self._collision_keys[key]
            for other in self.topics:  # rare: another name with the same key takes its place
                if other.replace(".", "_") == key:
                    self._collision_keys[key] = other
                    break

    def _record_topic(self, info: TopicInfo | None, name: str) -> None:
        self._record("topic", name, None if info is None else self._topic_to_json(info))

    def _topic_to_json(self, info: TopicInfo) -> dict[str, Any]:
        """Registrations other than this node's alone at epoch 0 (all of a single node's), by partition."""
        local = self._local_registration()
        value: dict[str, Any] = {"id": str(info.topic_id), "partitions": info.partitions, "configs": info.configs}
        placed = {str(p): r.to_json() for p, r in enumerate(info.registrations) if r != local}
        if placed:
            value["registrations"] = placed
        return value

    def _topic_from_json(self, name: str, value: dict[str, Any]) -> TopicInfo:
        count = int(value["partitions"])
        regs = [self._local_registration() for _ in range(count)]
        for p, r in value.get("registrations", {}).items():
            if 0 <= int(p) < count:
                regs[int(p)] = PartitionRegistration.from_json(r)
        return TopicInfo(name, uuid.UUID(value["id"]), count, dict(value.get("configs", {})), regs)

    def _local_registration(self) -> PartitionRegistration:
        """One shared (frozen) registration for every partition of a single node."""
        if self._local is None or self._local.leader != self.local_node:
            node = (self.local_node,)
            self._local = PartitionRegistration(replicas=node, isr=node, leader=self.local_node)
        return self._local

    def partition(self, topic: str, partition: int) -> PartitionRegistration | None:
        """The registration of a partition, None when the cluster has no such partition."""
        info = self.topics.get(topic)
        if info is None or not 0 <= partition < info.partitions:
            return None
        return info.registrations[partition]

    def set_partition(self, topic: str, partition: int, registration: PartitionRegistration) -> None:
        """A partition change (Kafka's PartitionChangeRecord), durable before it is acted on."""
        self.topics[topic].registrations[partition] = registration
        self.generation += 1
        self._record("partition", [topic, partition], registration.to_json())

    def get(self, name: str) -> TopicInfo | None:
        return self.topics.get(name)

    def split_known_partitions(self, topics: Iterable[ApiMessage]
                               ) -> tuple[dict[tuple[str, int], ErrorCode], list[tuple[str, list[ApiMessage]]]]:
        """Split a request's topics (each with ``.name`` and ``.partitions`` entries that have a
        ``.partition_index``) into the entries of partitions this cluster has, per topic, and
        UNKNOWN_TOPIC_OR_PARTITION for the rest: the first step of every offset API."""
        errors: dict[tuple[str, int], ErrorCode] = {}
        known: list[tuple[str, list[ApiMessage]]] = []
        for t in topics:
            info = self.topics.get(t.name)
            parts = []
            for p in t.partitions:
                if info is None or not 0 <= p.partition_index < info.partitions:
                    errors[(t.name, p.partition_index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    parts.append(p)
            if parts:
                known.append((t.name, parts))
        return errors, known

    def name_of(self, topic_id: uuid.UUID | None) -> str | None:
        """The name of the topic with this id, None if there is none (deleted, or never was)."""
        info = self.by_id.get(topic_id) if topic_id is not None else None
        return info.name if info is not None else None

    def named_by_id(self, topics: Iterable[ApiMessage]
                    ) -> tuple[list[ApiMessage], dict[tuple[str, int], ErrorCode]]:
        """For APIs that name topics by id (OffsetCommit v10, TxnOffsetCommit v6): fill in the
        ``name`` of each topic whose ``topic_id`` is known and return those, with
        UNKNOWN_TOPIC_ID for every partition of the others. Their ``name`` becomes a key no topic
        name can equal (a tuple), so an unknown id's error never mixes with a real topic's. Kafka
        resolves ids the same way before any other check."""
        named: list[ApiMessage] = []
        unknown: dict[tuple[str, int], ErrorCode] = {}
        # (the topics are renamed in place, which protocol.messages.ApiMessage does not declare: no __setattr__)
        for t in topics:
            name = self.name_of(t.topic_id)
            if name is None:
                t.name = ("unknown topic id", t.topic_id)
                unknown.update({(t.name, p.partition_index): ErrorCode.UNKNOWN_TOPIC_ID for p in t.partitions})
            else:
                t.name = name
                named.append(t)
        return named, unknown

    def colliding(self, name: str) -> str | None:
        """Kafka rejects names that differ from an existing one only by '.' vs '_' (metrics clash)."""
        existing = self._collision_keys.get(name.replace(".", "_"))
        return existing if existing is not None and existing != name else None

    def add(self, name: str, partitions: int, configs: dict[str, str], topic_id: uuid.UUID | None = None,
            registrations: list[PartitionRegistration] | None = None) -> TopicInfo:
        """A new topic; its partitions on this node alone unless ``registrations`` place them."""
        regs = list(registrations) if registrations is not None else [
            self._local_registration() for _ in range(partitions)]
        info = TopicInfo(name, topic_id or new_topic_id(), partitions, dict(configs), regs)
        self._put_topic(info)
        self._record_topic(info, name)
        return info

    def remove(self, name: str) -> TopicInfo | None:
        info = self.topics.get(name)
        if info is not None:
            self._drop_topic(info)
            self._record_topic(None, name)
        return info

    def set_partitions(self, name: str, count: int,
                       registrations: list[PartitionRegistration] | None = None) -> None:
        """More partitions (``registrations`` for the new ones; this node alone if None)."""
        self.generation += 1
        info = self.topics[name]
        new = count - info.partitions
        info.registrations.extend(registrations if registrations is not None else
                                  [self._local_registration() for _ in range(new)])
        info.partitions = count
        self._record_topic(self.topics[name], name)

    def set_configs(self, name: str, configs: dict[str, str]) -> None:
        self.topics[name].configs = dict(configs)
        self._record_topic(self.topics[name], name)

    def set_broker_configs(self, resource_name: str, configs: dict[str, str]) -> None:
        if configs:
            self.broker_configs[resource_name] = dict(configs)
        else:
            self.broker_configs.pop(resource_name, None)
        self._record("broker_configs", resource_name, dict(configs) or None)

    def set_group_configs(self, group_id: str, configs: dict[str, str]) -> None:
        if configs:
            self.group_configs[group_id] = dict(configs)
        else:
            self.group_configs.pop(group_id, None)
        self._record("group_configs", group_id, dict(configs) or None)

    def set_client_quotas(self, quotas: dict[tuple[tuple[str, str | None], ...], dict[str, float]]) -> None:
        self.client_quotas = {entity: dict(values) for entity, values in quotas.items() if values}
        self._record("client_quotas", None, _quotas_to_json(self.client_quotas))

    def set_scram(self, credentials: Credentials) -> None:
        old, self.scram = self.scram, credentials
        with self.batch():
            for user in sorted(set(old) | set(credentials)):
                if old.get(user) != credentials.get(user):
                    value = credentials.get(user)
                    self._record("scram", user, _credentials_to_json(value) if value else None)

    def change_acls(self, added: dict[str, Acl], removed: Iterable[str]) -> None:
        """Add and remove ACLs as one durable change (CreateAcls, DeleteAcls)."""
        with self.batch():
            for acl_id in removed:
                if self.acls.pop(acl_id, None) is not None:
                    self._record("acl", acl_id, None)
            for acl_id, acl in added.items():
                self.acls[acl_id] = acl
                self._record("acl", acl_id, acl.to_json())
        self.acls_generation += 1

    def set_features(self, levels: dict[str, int], epoch: int) -> None:
        self.features = {name: level for name, level in levels.items() if level > 0}
        self.features_epoch = epoch
        self._record("features", None, {"levels": self.features, "epoch": epoch})


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _credentials_to_json(by_mechanism: dict[int, ScramCredential]) -> dict[str, dict[str, Any]]:
    return {str(m): {"salt": _b64(c.salt), "stored_key": _b64(c.stored_key), "server_key": _b64(c.server_key),
                     "iterations": c.iterations} for m, c in by_mechanism.items()}


def _credentials_from_json(data: dict[str, dict[str, Any]]) -> dict[int, ScramCredential]:
    b64 = base64.b64decode
    return {int(m): ScramCredential(b64(c["salt"]), b64(c["stored_key"]), b64(c["server_key"]), int(c["iterations"]))
            for m, c in data.items()}


def _quotas_to_json(quotas: dict[tuple[tuple[str, str | None], ...], dict[str, float]]) -> list[dict[str, Any]]:
    return [{"entity": [list(e) for e in entity], "values": values}
            for entity, values in sorted(quotas.items(), key=lambda i: repr(i[0]))]


def _quotas_from_json(data: list[dict[str, Any]]) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    return {tuple((str(t), n) for t, n in q["entity"]): {k: float(v) for k, v in q["values"].items()}
            for q in data}


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
