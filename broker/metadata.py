"""Cluster metadata of this single-node cluster: topics, their ids, partition counts, configs.

Kafka keeps this in the KRaft ``__cluster_metadata`` log; a single node needs far less, so it
lives in ``<first log dir>/__cluster_metadata/topics.json``, rewritten atomically on every
change. Each partition directory also carries Kafka's ``partition.metadata`` with the topic id,
so the data directories stay self-describing.
"""

from __future__ import annotations

import base64
import json
import os
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from broker.scram_credentials import Credentials, ScramCredential
from protocol.errors import ErrorCode, KafkaError

LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")  # fullmatch: "$" would let a final newline in
MAX_TOPIC_LENGTH = 249
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


@dataclass(slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)

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
    def __init__(self, directory: str | os.PathLike) -> None:
        self.dir = Path(directory) / "__cluster_metadata"
        self.path = self.dir / "topics.json"
        self.topics: dict[str, TopicInfo] = {}
        self.by_id: dict[uuid.UUID, TopicInfo] = {}
        self.scram: Credentials = {}  # AlterUserScramCredentials (Kafka's UserScramCredentialRecords)
        # Dynamic broker configs (Kafka's BROKER ConfigRecords): "" = cluster default, "<id>" = a broker
        self.broker_configs: dict[str, dict[str, str]] = {}
        # Dynamic group configs (Kafka's GROUP ConfigRecords): group id -> {name: value}
        self.group_configs: dict[str, dict[str, str]] = {}
        # Client quotas (Kafka's ClientQuotaRecords): entity ((type, name or None for the default), ...)
        # sorted by type -> {quota key: value}
        self.client_quotas: dict[tuple[tuple[str, str | None], ...], dict[str, float]] = {}
        # Finalized feature levels above 0 (Kafka's FeatureLevelRecords) and their epoch; empty until
        # broker.features.ensure_formatted records the initial ones.
        self.features: dict[str, int] = {}
        self.features_epoch = 0

    def load(self) -> None:
        if not self.path.exists():
            return
        data = json.loads(self.path.read_text())
        for t in data.get("topics", []):
            info = TopicInfo(t["name"], uuid.UUID(t["id"]), int(t["partitions"]), dict(t.get("configs", {})))
            self.topics[info.name] = info
            self.by_id[info.topic_id] = info
        self.broker_configs = {name: dict(configs) for name, configs in data.get("broker_configs", {}).items()}
        self.group_configs = {name: dict(configs) for name, configs in data.get("group_configs", {}).items()}
        self.client_quotas = {
            tuple((str(t), n) for t, n in q["entity"]): {k: float(v) for k, v in q["values"].items()}
            for q in data.get("client_quotas", [])
        }
        features = data.get("features", {})
        self.features = {str(n): int(v) for n, v in features.get("levels", {}).items()}
        self.features_epoch = int(features.get("epoch", 0))
        b64 = base64.b64decode
        self.scram = {
            user: {int(m): ScramCredential(b64(c["salt"]), b64(c["stored_key"]), b64(c["server_key"]),
                                           int(c["iterations"])) for m, c in by_mechanism.items()}
            for user, by_mechanism in data.get("scram", {}).items()
        }

    def _save(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        data = {
            "version": 1,
            "topics": [
                {"name": t.name, "id": str(t.topic_id), "partitions": t.partitions, "configs": t.configs}
                for t in self.topics.values()
            ],
            "broker_configs": self.broker_configs,
            "group_configs": self.group_configs,
            "client_quotas": [{"entity": [list(e) for e in entity], "values": values}
                              for entity, values in sorted(self.client_quotas.items(), key=lambda i: repr(i[0]))],
            "scram": {
                user: {str(m): {"salt": _b64(c.salt), "stored_key": _b64(c.stored_key),
                                "server_key": _b64(c.server_key), "iterations": c.iterations}
                       for m, c in by_mechanism.items()}
                for user, by_mechanism in self.scram.items()
            },
            "features": {"levels": self.features, "epoch": self.features_epoch},
        }
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        fd = os.open(self.dir, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def get(self, name: str) -> TopicInfo | None:
        return self.topics.get(name)

    def split_known_partitions(self, topics) -> tuple[dict[tuple[str, int], ErrorCode], list[tuple[str, list]]]:
        """Split a request's topics (each with ``.name`` and ``.partitions`` entries that have a
        ``.partition_index``) into the entries of partitions this cluster has, per topic, and
        UNKNOWN_TOPIC_OR_PARTITION for the rest: the first step of every offset API."""
        errors: dict[tuple[str, int], ErrorCode] = {}
        known: list[tuple[str, list]] = []
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

    def name_of(self, topic_id) -> str | None:
        """The name of the topic with this id, None if there is none (deleted, or never was)."""
        info = self.by_id.get(topic_id)
        return info.name if info is not None else None

    def named_by_id(self, topics) -> tuple[list, dict[tuple[str, int], ErrorCode]]:
        """For APIs that name topics by id (OffsetCommit v10, TxnOffsetCommit v6): fill in the
        ``name`` of each topic whose ``topic_id`` is known and return those, with
        UNKNOWN_TOPIC_ID for every partition of the others. Their ``name`` becomes a key no topic
        name can equal (a tuple), so an unknown id's error never mixes with a real topic's. Kafka
        resolves ids the same way before any other check."""
        named, unknown = [], {}
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
        key = name.replace(".", "_")
        for existing in self.topics:
            if existing != name and existing.replace(".", "_") == key:
                return existing
        return None

    def add(self, name: str, partitions: int, configs: dict[str, str], topic_id: uuid.UUID | None = None) -> TopicInfo:
        info = TopicInfo(name, topic_id or new_topic_id(), partitions, dict(configs))
        self.topics[name] = info
        self.by_id[info.topic_id] = info
        self._save()
        return info

    def remove(self, name: str) -> TopicInfo | None:
        info = self.topics.pop(name, None)
        if info is not None:
            self.by_id.pop(info.topic_id, None)
            self._save()
        return info

    def set_partitions(self, name: str, count: int) -> None:
        self.topics[name].partitions = count
        self._save()

    def set_configs(self, name: str, configs: dict[str, str]) -> None:
        self.topics[name].configs = dict(configs)
        self._save()

    def set_broker_configs(self, resource_name: str, configs: dict[str, str]) -> None:
        if configs:
            self.broker_configs[resource_name] = dict(configs)
        else:
            self.broker_configs.pop(resource_name, None)
        self._save()

    def set_group_configs(self, group_id: str, configs: dict[str, str]) -> None:
        if configs:
            self.group_configs[group_id] = dict(configs)
        else:
            self.group_configs.pop(group_id, None)
        self._save()

    def set_client_quotas(self, quotas: dict[tuple[tuple[str, str | None], ...], dict[str, float]]) -> None:
        self.client_quotas = {entity: dict(values) for entity, values in quotas.items() if values}
        self._save()

    def set_scram(self, credentials: Credentials) -> None:
        self.scram = credentials
        self._save()

    def set_features(self, levels: dict[str, int], epoch: int) -> None:
        self.features = {name: level for name, level in levels.items() if level > 0}
        self.features_epoch = epoch
        self._save()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
