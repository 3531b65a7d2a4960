"""DumpLogSegments' message parsers: what ``--print-data-log`` shows as a record's ``key:`` and
``payload:``.

- ``StringDecoder`` (the default): key and value as UTF-8 text, each left out when null.
- ``--transaction-log-decoder`` and ``--offsets-decoder``: Kafka's CoordinatorRecordSerde reads
  the record (key: int16 record type + the key message; value: int16 version + the value
  message, null for a tombstone) and the parser writes both as JSON:
  ``{"type":"<record type>","data":{...}}`` and ``{"version":"<v>","data":{...}}``, a tombstone's
  payload ``<DELETE>``. For a classic group's metadata of protocol type ``consumer`` the members'
  subscription and assignment bytes are decoded too (ConsumerProtocolSubscription/Assignment),
  or left as bytes when they do not read.

A parsed key or payload is a ``str`` or a JSON tree (dicts in Kafka's field order), so ``--json``
nests it and the text view prints it as Jackson does.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from broker.inspect.message_reader import MessageReadError, read_message
from broker.inspect.message_spec import (
    GROUP_RECORDS,
    TRANSACTION_RECORDS,
    MessageSpec,
    coordinator_specs,
    load_spec,
)

GROUP_METADATA_TYPE = 2
CONSUMER_PROTOCOL_TYPE = "consumer"
DELETE = "<DELETE>"
_I16 = struct.Struct(">h")

Parsed = tuple[Any, Any]  # (key or None, payload or None)
Parser = Callable[[int, "bytes | None", "bytes | None"], Parsed]


class MissingKeyError(ValueError):
    """A coordinator record without a key: DumpLogSegments stops with this message."""


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", "replace")


def string_parser(offset: int, key: bytes | None, value: bytes | None) -> Parsed:
    """Kafka's DecoderMessageParser with StringDecoder for both key and value."""
    return _text(key), _text(value)


def _version(buf: bytes, name: str) -> int:
    if len(buf) < 2:
        raise MessageReadError(f"Could not read version from {name}'s buffer.")
    return int(_I16.unpack_from(buf, 0)[0])


def _read(spec: MessageSpec, buf: bytes, version: int, name: str) -> dict[str, Any]:
    try:
        return read_message(spec, version, buf[2:])
    except MessageReadError as e:
        # Java's BufferUnderflowException has no message: "due to: null."
        reason = "null" if str(e) == "buffer underflow" else str(e)
        raise MessageReadError(
            f"Could not read record with version {version} from {name}'s buffer due to: {reason}.") from None


class CoordinatorParser:
    """Kafka's CoordinatorRecordMessageParser over one coordinator's record types."""

    def __init__(self, prefixes: tuple[str, ...], expand_group_metadata: bool = False) -> None:
        self.prefixes = prefixes
        self.expand_group_metadata = expand_group_metadata

    def __call__(self, offset: int, key: bytes | None, value: bytes | None) -> Parsed:
        if key is None:
            raise MissingKeyError(f"Failed to decode message at offset {offset} using the specified decoder "
                                  "(message had a missing key)")
        try:
            record_type = _version(key, "key")
            specs = coordinator_specs(self.prefixes).get(record_type)
            if specs is None:
                return f"Unknown record type {record_type} at offset {offset}, skipping.", None
            key_spec, value_spec = specs
            key_json = {"type": str(record_type), "data": _read(key_spec, key, record_type, "key")}
            if value is None:
                return key_json, DELETE
            version = _version(value, "value")
            if version not in value_spec.valid:
                raise MessageReadError(f"Found an unknown record version {version} for {record_type} type")
            data = _read(value_spec, value, version, "value")
            if self.expand_group_metadata and record_type == GROUP_METADATA_TYPE:
                _expand_consumer_protocol(data)
            return key_json, {"version": str(version), "data": data}
        except MessageReadError as e:
            return f"Error at offset {offset}, skipping. {e}", None


def _expand_consumer_protocol(group: dict[str, Any]) -> None:
    """DumpLogSegments' prepareGroupMetadataValue: a consumer group's member subscription and
    assignment, each an int16 version + the message, replaced by their decoded form."""
    if group.get("protocolType") != CONSUMER_PROTOCOL_TYPE:
        return
    for member in group.get("members") or ():
        for field, spec_name in (("subscription", "ConsumerProtocolSubscription"),
                                 ("assignment", "ConsumerProtocolAssignment")):
            raw = member.get(field)
            if not isinstance(raw, bytes):
                continue
            try:
                version = _version(raw, field)
                member[field] = read_message(load_spec(spec_name), version, raw[2:])
            except MessageReadError:
                pass  # Kafka keeps the original bytes


transaction_log_parser = CoordinatorParser(TRANSACTION_RECORDS)
offsets_parser = CoordinatorParser(GROUP_RECORDS, expand_group_metadata=True)
