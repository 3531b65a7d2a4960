"""What a request is about: its topic-partitions, transactional ids, group ids and producer, read
from any decoded request. Fault rules match on these and the request log records them.

kafka-python's messages carry Apache Kafka's JSON specs, whose fields are tagged with an
``entityType`` (``transactionalId``, ``groupId``, ``topicName``, ``producerId``): the walk below
reads those tags, so every API is covered without a table per API. Produce and Fetch, which have
their own fast decoders, and FindCoordinator, whose key is typed by ``key_type``, are read
directly. Topics named by id (Produce v13, Fetch v13+, TxnOffsetCommit v6) are named through the
resolver the broker passes in.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from protocol.fetch_codec import FetchRequestView
from protocol.produce_codec import ProduceRequestView

TopicNamer = Callable[[uuid.UUID], str | None]

PRODUCE, FETCH, METADATA, FIND_COORDINATOR = 0, 1, 3, 10
# RecordBatch v2: producerId int64 at 43, producerEpoch int16 at 51, baseSequence int32 at 53
_BATCH_PRODUCER = struct.Struct(">qhi")
_PARTITION_FIELDS = ("partition_index", "partition", "index")
_PARTITION_LISTS = ("partitions", "partition_indexes")


@dataclass(slots=True)
class RequestKeys:
    topics: dict[str, list[int]] = field(default_factory=dict)  # topic -> partitions named (may be empty)
    transactional_ids: list[str] = field(default_factory=list)
    group_ids: list[str] = field(default_factory=list)
    producer_id: int | None = None
    producer_epoch: int | None = None
    all_topics: bool = False  # a Metadata request for every topic

    def names_partition(self, topic: str, partition: int | None) -> bool:
        if self.all_topics:
            return True
        parts = self.topics.get(topic)
        if parts is None:
            return False
        return partition is None or partition in parts

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.topics:
            out["topics"] = {t: sorted(set(p)) for t, p in self.topics.items()}
        if self.transactional_ids:
            out["transactional_ids"] = self.transactional_ids
        if self.group_ids:
            out["group_ids"] = self.group_ids
        if self.all_topics:
            out["all_topics"] = True
        if self.producer_id is not None:
            out["producer_id"] = self.producer_id
            out["producer_epoch"] = self.producer_epoch
        return out


def request_keys(api_key: int, request: Any, namer: TopicNamer) -> RequestKeys:
    keys = RequestKeys()
    if api_key == PRODUCE and isinstance(request, ProduceRequestView):
        _produce(request, keys, namer)
    elif api_key == FETCH and isinstance(request, FetchRequestView):
        for t in request.topics:
            name = t.name if t.name is not None else (namer(t.topic_id) if t.topic_id else None)
            keys.topics.setdefault(name or str(t.topic_id), []).extend(p.partition for p in t.partitions)
    elif api_key == FIND_COORDINATOR:
        names = list(getattr(request, "coordinator_keys", None) or []) or \
            ([request.key] if getattr(request, "key", None) is not None else [])
        (keys.transactional_ids if getattr(request, "key_type", 0) == 1 else keys.group_ids).extend(names)
    else:
        if api_key == METADATA and getattr(request, "topics", None) is None:
            keys.all_topics = True
        fields = getattr(type(request), "fields", None)
        if isinstance(fields, dict):
            version = getattr(request, "version", None)
            _walk(request, [f for f in fields.values() if _in_version(f, version)], keys, namer)
    return keys


def _produce(request: ProduceRequestView, keys: RequestKeys, namer: TopicNamer) -> None:
    if request.transactional_id:
        keys.transactional_ids.append(request.transactional_id)
    for t in request.topics:
        name = t.name if t.name is not None else (namer(t.topic_id) if t.topic_id else None)
        keys.topics.setdefault(name or str(t.topic_id), []).extend(p.index for p in t.partitions)
        for p in t.partitions:
            if keys.producer_id is None and p.records is not None and len(p.records) >= 61:
                pid, epoch, _ = _BATCH_PRODUCER.unpack_from(p.records, 43)
                if pid >= 0:
                    keys.producer_id, keys.producer_epoch = pid, epoch


def _in_version(f: Any, version: int | None) -> bool:
    versions = getattr(f, "_versions", None)
    return version is None or not versions or versions[0] <= version <= versions[1]


def _walk(obj: Any, fields: Any, keys: RequestKeys, namer: TopicNamer) -> None:
    for f in fields:
        value = getattr(obj, f.name, None)
        if value is None:
            continue
        entity = getattr(f, "_entity_type", None)
        if entity == "transactionalId":
            keys.transactional_ids.extend(value if isinstance(value, list) else [value])
        elif entity == "groupId":
            keys.group_ids.extend(value if isinstance(value, list) else [value])
        elif entity == "topicName" and isinstance(value, list):
            for name in value:
                keys.topics.setdefault(name, [])
        elif entity == "producerId" and keys.producer_id is None and isinstance(value, int):
            keys.producer_id = value
            keys.producer_epoch = getattr(obj, f.name.replace("_id", "_epoch"), None)
        elif isinstance(value, list) and getattr(f, "_fields", None):
            for element in value:
                if not _topic_entry(element, f._fields, keys, namer):
                    _walk(element, f._fields, keys, namer)
        elif getattr(f, "_fields", None) and not isinstance(value, (str, bytes, int)):
            _walk(value, f._fields, keys, namer)


def _topic_entry(element: Any, fields: Any, keys: RequestKeys, namer: TopicNamer) -> bool:
    """A struct naming a topic (by name or id): record it with its partitions."""
    name = None
    for f in fields:
        if getattr(f, "_entity_type", None) == "topicName" and isinstance(getattr(element, f.name, None), str):
            name = getattr(element, f.name)
            break
    if name is None:
        topic_id = getattr(element, "topic_id", None)
        if not isinstance(topic_id, uuid.UUID) or topic_id.int == 0:
            return False
        name = namer(topic_id) or str(topic_id)
    partitions = keys.topics.setdefault(name, [])
    for list_name in _PARTITION_LISTS:
        items = getattr(element, list_name, None)
        if isinstance(items, list):
            for item in items:
                if isinstance(item, int):
                    partitions.append(item)
                else:
                    index = next((getattr(item, n) for n in _PARTITION_FIELDS
                                  if isinstance(getattr(item, n, None), int)), None)
                    if index is not None:
                        partitions.append(index)
    # what else the entry carries (a producer id in WriteTxnMarkers' topics is one level up)
    for f in fields:
        if getattr(f, "_entity_type", None) in ("transactionalId", "groupId", "producerId"):
            _walk(element, [f], keys, namer)
    return True
