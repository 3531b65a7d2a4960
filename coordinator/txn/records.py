"""``__transaction_state`` records: TransactionLogKey and TransactionLogValue v0/v1.

Layout (Kafka's TransactionLog{Key,Value}.json, written by TransactionLog.keyToBytes /
valueToBytes, all big-endian):

- key: ``int16 record type = 0`` then ``TransactionalId`` as an int16-length string;
- value: ``int16 version`` then the body; a tombstone has a null value.
  v0 (non-flexible): ProducerId int64 | ProducerEpoch int16 | TransactionTimeoutMs int32 |
  TransactionStatus int8 | TransactionPartitions nullable [int32 count]{Topic string,
  PartitionIds [int32 count]int32} | TransactionLastUpdateTimestampMs int64 |
  TransactionStartTimestampMs int64.
  v1 (flexible): the same fields with compact strings/arrays (uvarint length + 1, 0 = null),
  an empty tag section after each partition entry, then the tagged fields PreviousProducerId
  (tag 0, default -1), NextProducerId (1, -1), ClientTransactionVersion (2, 0) and
  NextProducerEpoch (3, -1), each written only when it differs from its default.

TransactionPartitions is null exactly when the state is Empty. The value version follows the
server's transaction.version: TV0 writes v0, TV1+ writes v1 (TransactionVersion.transactionLogValueVersion).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from coordinator.txn.state import TV_0, TopicPartition, TransactionState, TxnTransitMetadata
from protocol.primitives import MalformedRequest, read_uvarint

KEY_RECORD_TYPE = 0  # CoordinatorRecordType.TRANSACTION_LOG

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_V0_HEAD = struct.Struct(">hqhib")  # version, producerId, epoch, timeout, status
_TAIL = struct.Struct(">qq")  # lastUpdate, start


class TxnRecordError(ValueError):
    """A __transaction_state record that cannot be decoded."""


@dataclass(frozen=True, slots=True)
class TransactionLogValue:
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_status: int
    partitions: list[tuple[str, list[int]]] | None
    last_update_timestamp_ms: int
    start_timestamp_ms: int
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0
    next_producer_epoch: int = -1
    version: int = 0

    def topic_partitions(self) -> set[TopicPartition]:
        return {(topic, p) for topic, parts in self.partitions or () for p in parts}


def value_version(transaction_version: int) -> int:
    return 0 if transaction_version <= TV_0 else 1


# --- key -----------------------------------------------------------------------------------


def encode_key(transactional_id: str) -> bytes:
    raw = transactional_id.encode()
    return _I16.pack(KEY_RECORD_TYPE) + _I16.pack(len(raw)) + raw


def decode_key(data: bytes | None) -> str:
    if data is None or len(data) < 4:
        raise TxnRecordError("transaction log key shorter than 4 bytes")
    (record_type,) = _I16.unpack_from(data, 0)
    if record_type != KEY_RECORD_TYPE:
        raise TxnRecordError(f"unknown transaction log key version {record_type}")
    (n,) = _I16.unpack_from(data, 2)
    if n < 0 or 4 + n > len(data):
        raise TxnRecordError("bad transactional id length in transaction log key")
    return data[4 : 4 + n].decode()


# --- value ---------------------------------------------------------------------------------


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while True:
        b = value & 0x7F
        value >>= 7
        if value:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _group(partitions: frozenset[TopicPartition] | set[TopicPartition]) -> list[tuple[str, list[int]]]:
    by_topic: dict[str, list[int]] = {}
    for topic, p in sorted(partitions):
        by_topic.setdefault(topic, []).append(p)
    return list(by_topic.items())


def encode_value(transit: TxnTransitMetadata, transaction_version: int = TV_0) -> bytes:
    """TransactionLog.valueToBytes for a prepared transition."""
    if transit.txn_state == TransactionState.EMPTY and transit.topic_partitions:
        raise ValueError(f"Transaction is not expected to have any partitions since its state is EMPTY: {transit}")
    partitions = None if transit.txn_state == TransactionState.EMPTY else _group(transit.topic_partitions)
    version = value_version(transaction_version)
    value = TransactionLogValue(
        transit.producer_id, transit.producer_epoch, transit.txn_timeout_ms, int(transit.txn_state), partitions,
        transit.txn_last_update_timestamp, transit.txn_start_timestamp,
        transit.prev_producer_id if version >= 1 else -1,
        transit.next_producer_id if version >= 1 else -1,
        transit.client_transaction_version, -1, version,
    )
    return encode_log_value(value)


def encode_log_value(v: TransactionLogValue) -> bytes:
    out = bytearray(_I16.pack(v.version))
    out += _I64.pack(v.producer_id)
    out += _I16.pack(v.producer_epoch)
    out += _I32.pack(v.transaction_timeout_ms)
    out += bytes([v.transaction_status & 0xFF])
    if v.version == 0:
        if v.partitions is None:
            out += _I32.pack(-1)
        else:
            out += _I32.pack(len(v.partitions))
            for topic, parts in v.partitions:
                raw = topic.encode()
                out += _I16.pack(len(raw)) + raw + _I32.pack(len(parts))
                out += b"".join(_I32.pack(p) for p in parts)
        out += _TAIL.pack(v.last_update_timestamp_ms, v.start_timestamp_ms)
        return bytes(out)
    if v.version != 1:
        raise ValueError(f"unsupported transaction log value version {v.version}")
    if v.partitions is None:
        out += _uvarint(0)
    else:
        out += _uvarint(len(v.partitions) + 1)
        for topic, parts in v.partitions:
            raw = topic.encode()
            out += _uvarint(len(raw) + 1) + raw + _uvarint(len(parts) + 1)
            out += b"".join(_I32.pack(p) for p in parts)
            out += _uvarint(0)  # no tagged fields in the entry
    out += _TAIL.pack(v.last_update_timestamp_ms, v.start_timestamp_ms)
    tags: list[tuple[int, bytes]] = []
    if v.previous_producer_id != -1:
        tags.append((0, _I64.pack(v.previous_producer_id)))
    if v.next_producer_id != -1:
        tags.append((1, _I64.pack(v.next_producer_id)))
    if v.client_transaction_version != 0:
        tags.append((2, _I16.pack(v.client_transaction_version)))
    if v.next_producer_epoch != -1:
        tags.append((3, _I16.pack(v.next_producer_epoch)))
    out += _uvarint(len(tags))
    for tag, body in tags:
        out += _uvarint(tag) + _uvarint(len(body)) + body
    return bytes(out)


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, s: struct.Struct) -> int:
        if self.pos + s.size > len(self.data):
            raise TxnRecordError("transaction log value is truncated")
        (v,) = s.unpack_from(self.data, self.pos)
        self.pos += s.size
        return v

    def raw(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise TxnRecordError("transaction log value is truncated")
        b = self.data[self.pos : self.pos + n]
        self.pos += n
        return b

    def uvarint(self) -> int:
        try:
            value, self.pos = read_uvarint(self.data, self.pos)
        except IndexError:
            raise TxnRecordError("transaction log value is truncated") from None
        except MalformedRequest:
            raise TxnRecordError("malformed unsigned varint") from None
        return value


def decode_value(data: bytes | None) -> TransactionLogValue | None:
    """None for a tombstone; raises TxnRecordError for an unknown version or bad bytes."""
    if data is None:
        return None
    r = _Reader(bytes(data))
    version = r.take(_I16)
    if version not in (0, 1):
        raise TxnRecordError(f"unknown transaction log value version {version}")
    producer_id = r.take(_I64)
    epoch = r.take(_I16)
    timeout = r.take(_I32)
    status = r.raw(1)[0]
    partitions: list[tuple[str, list[int]]] | None
    if version == 0:
        n = r.take(_I32)
        if n < 0:
            partitions = None
        else:
            partitions = []
            for _ in range(n):
                topic = r.raw(r.take(_I16)).decode()
                count = r.take(_I32)
                partitions.append((topic, [r.take(_I32) for _ in range(count)]))
        last_update, start = r.take(_I64), r.take(_I64)
        return TransactionLogValue(producer_id, epoch, timeout, status, partitions, last_update, start, version=0)
    n = r.uvarint()
    if n == 0:
        partitions = None
    else:
        partitions = []
        for _ in range(n - 1):
            topic = r.raw(r.uvarint() - 1).decode()
            count = r.uvarint() - 1
            parts = [r.take(_I32) for _ in range(count)]
            for _ in range(r.uvarint()):  # unknown tagged fields of the entry
                r.uvarint()
                r.raw(r.uvarint())
            partitions.append((topic, parts))
    last_update, start = r.take(_I64), r.take(_I64)
    prev_pid = next_pid = next_epoch = -1
    client_tv = 0
    for _ in range(r.uvarint()):
        tag = r.uvarint()
        body = _Reader(r.raw(r.uvarint()))
        if tag == 0:
            prev_pid = body.take(_I64)
        elif tag == 1:
            next_pid = body.take(_I64)
        elif tag == 2:
            client_tv = body.take(_I16)
        elif tag == 3:
            next_epoch = body.take(_I16)
    return TransactionLogValue(
        producer_id, epoch, timeout, status, partitions, last_update, start, prev_pid, next_pid, client_tv,
        next_epoch, 1,
    )
