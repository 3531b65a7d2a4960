"""The KIP-848 consumer group records in ``__consumer_offsets``, byte-compatible with Kafka's.

Key: ``int16 recordType`` then the key body at version 0; value: ``int16 version`` (0) then the
flexible body. The layouts are built from Apache Kafka 4.3.1's own JSON schemas
(``coordinator/group/schemas``) with kafka-python's generated codecs, so they cannot drift:

  3 ConsumerGroupMetadata                {group} -> {epoch, metadata hash}
  5 ConsumerGroupMemberMetadata          {group, member} -> subscription, client, timeouts
  6 ConsumerGroupTargetAssignmentMetadata {group} -> {assignment epoch}
  7 ConsumerGroupTargetAssignmentMember  {group, member} -> target partitions
  8 ConsumerGroupCurrentMemberAssignment {group, member} -> epochs, state, owned/revoking partitions

A null value is a tombstone. Types 4 (partition metadata, no longer written by Kafka 4.1+) and
16 (resolved regular expressions, recomputed here on every heartbeat) are skipped when loading.
"""

from __future__ import annotations

import struct
import types
import uuid
from dataclasses import dataclass
from typing import Any

from kafka.protocol.api_data import ApiData

from coordinator.group.records import RecordFormatError

GROUP_METADATA = 3
MEMBER_METADATA = 5
TARGET_ASSIGNMENT_METADATA = 6
TARGET_ASSIGNMENT_MEMBER = 7
CURRENT_MEMBER_ASSIGNMENT = 8
RECORD_TYPES = {
    GROUP_METADATA: "ConsumerGroupMetadata",
    MEMBER_METADATA: "ConsumerGroupMemberMetadata",
    TARGET_ASSIGNMENT_METADATA: "ConsumerGroupTargetAssignmentMetadata",
    TARGET_ASSIGNMENT_MEMBER: "ConsumerGroupTargetAssignmentMember",
    CURRENT_MEMBER_ASSIGNMENT: "ConsumerGroupCurrentMemberAssignment",
}
MEMBER_KEYED = frozenset({MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT})
_I16 = struct.Struct(">h")
_classes: dict[str, Any] = {}

Assignment = dict[uuid.UUID, frozenset[int]]  # topic id -> partitions


def _as_data(metacls: type, schema: dict) -> dict:
    return {**schema, "type": "data"}


def _cls(name: str) -> Any:
    cls = _classes.get(name)
    if cls is None:
        cls = _classes[name] = types.new_class(
            name, (ApiData,), {"load_json": "coordinator.group.schemas"},
            lambda ns: ns.update(json_patch=classmethod(_as_data), __module__=__name__))
    return cls


def key(record_type: int, group_id: str, member_id: str | None = None) -> bytes:
    fields = {"group_id": group_id} if member_id is None else {"group_id": group_id, "member_id": member_id}
    body = _cls(RECORD_TYPES[record_type] + "Key")(**fields).encode(version=0, header=False)
    return _I16.pack(record_type) + body


def value(record_type: int, **fields: Any) -> bytes:
    return _I16.pack(0) + _cls(RECORD_TYPES[record_type] + "Value")(**fields).encode(version=0, header=False)


@dataclass(frozen=True, slots=True)
class ConsumerRecordKey:
    record_type: int
    group_id: str
    member_id: str | None  # None for the group-level types 3 and 6

    @property
    def member(self) -> str:
        """The member id of a member-keyed record (types 5, 7, 8), which decode_key guarantees."""
        if self.member_id is None:
            raise RecordFormatError(f"consumer group record key type {self.record_type} has no member id")
        return self.member_id


def decode_key(record_type: int, body: bytes | memoryview) -> ConsumerRecordKey:
    try:
        k = _cls(RECORD_TYPES[record_type] + "Key").decode(bytes(body), version=0, header=False)
    except Exception as e:
        raise RecordFormatError(f"consumer group record key type {record_type}: {e}") from None
    member_id = getattr(k, "member_id", None)
    if member_id is None and record_type in MEMBER_KEYED:
        # the codec reads a -1 length as None; the schema's MemberId is a non-nullable string
        raise RecordFormatError(f"consumer group record key type {record_type}: null member id")
    return ConsumerRecordKey(record_type, k.group_id, member_id)


def decode_value(record_type: int, data: bytes | memoryview) -> Any:
    try:
        return _cls(RECORD_TYPES[record_type] + "Value").decode(bytes(data)[2:], version=0, header=False)
    except Exception as e:
        raise RecordFormatError(f"consumer group record value type {record_type}: {e}") from None


def topic_partitions(assignment: Assignment) -> list[dict]:
    """An assignment as the records' (and the heartbeat's) TopicPartitions list, in a stable order."""
    return [{"topic_id": t, "partitions": sorted(ps)} for t, ps in sorted(assignment.items(), key=lambda i: str(i[0]))
            if ps]


def from_topic_partitions(items: Any) -> Assignment:
    return {tp.topic_id: frozenset(tp.partitions) for tp in items or () if tp.partitions}
