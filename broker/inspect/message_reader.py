"""Read a message from its bytes at a version, by its spec, into the tree Kafka's generated
``<Message>JsonConverter.write(message, version)`` makes of it.

The rules are the generator's: fields outside the version are left out; in flexible versions,
strings, bytes and arrays are compact (unsigned varint length + 1) and every struct ends with a
tagged-field section; a tagged field is written only when it differs from its default; a null
nullable field is ``None``; a uuid is Kafka's ``Uuid.toString`` (url-safe base64, no padding);
``bytes`` stay bytes (the JSON writer shows them as base64, and DumpLogSegments decodes a
classic group member's subscription and assignment out of them).
"""

from __future__ import annotations

import base64
import struct
from typing import Any

from broker.inspect.message_spec import FieldSpec, MessageSpec
from protocol.primitives import MalformedRequest, read_uvarint

ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"
_FIXED = {
    "int8": struct.Struct(">b"),
    "int16": struct.Struct(">h"),
    "int32": struct.Struct(">i"),
    "int64": struct.Struct(">q"),
    "uint16": struct.Struct(">H"),
    "uint32": struct.Struct(">I"),
    "float64": struct.Struct(">d"),
}


class MessageReadError(ValueError):
    """Bytes that do not read as the message (Java would throw BufferUnderflowException or the like)."""


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data = data
        self.pos = pos

    def raw(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise MessageReadError("buffer underflow")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def fixed(self, s: struct.Struct) -> Any:
        return s.unpack(self.raw(s.size))[0]

    def uvarint(self) -> int:
        try:
            value, self.pos = read_uvarint(self.data, self.pos)
        except IndexError:
            raise MessageReadError("buffer underflow") from None
        except MalformedRequest:
            raise MessageReadError("varint is too long") from None
        return value


def _default(f: FieldSpec) -> Any:
    """The field's default as the JSON tree holds it (to leave out a tagged field equal to it)."""
    d = f.default
    if d == "null" or (d is None and f.is_struct and f.element_type is None):
        return None  # a struct field: its default is null (the only tagged structs are nullable)
    if f.element_type is not None:
        return []
    if f.type in _FIXED:
        if f.type == "float64":
            return float(d) if d is not None else 0.0
        return int(d, 0) if isinstance(d, str) and d else int(d or 0)
    if f.type == "bool":
        return d in (True, "true")
    if f.type == "string":
        return d if isinstance(d, str) else ""
    if f.type == "uuid":
        return ZERO_UUID
    if f.type in ("bytes", "records"):
        return b""
    return _NO_DEFAULT


_NO_DEFAULT = object()


class MessageReader:
    """Reads one message of ``spec`` at ``version`` (clamped as the generated code behaves)."""

    def __init__(self, spec: MessageSpec, version: int) -> None:
        self.spec = spec
        self.version = spec.clamp(version)
        self.flexible = self.version in spec.flexible

    def read(self, data: bytes) -> dict[str, Any]:
        return self._struct(_Reader(bytes(data)), self.spec.fields)

    # --- structs and fields ----------------------------------------------------------------

    def _struct(self, r: _Reader, fields: tuple[FieldSpec, ...]) -> dict[str, Any]:
        v = self.version
        values: dict[str, Any] = {}
        for f in fields:
            if self.flexible and v in f.tagged:
                continue
            if v in f.versions:
                values[f.name] = self._value(r, f)
        if self.flexible:
            by_tag = {f.tag: f for f in fields if v in f.tagged}
            for _ in range(r.uvarint()):
                tag = r.uvarint()
                body = r.raw(r.uvarint())
                tf = by_tag.get(tag)
                if tf is not None:
                    values[tf.name] = self._value(_Reader(body), tf, tagged=True)
        out: dict[str, Any] = {}
        for f in fields:
            if f.name not in values:
                continue
            value = values[f.name]
            if self.flexible and v in f.tagged and value == _default(f):
                continue
            out[f.name] = value
        return out

    def _length(self, r: _Reader, wide: bool) -> int:
        if self.flexible:
            return r.uvarint() - 1
        return int(r.fixed(_FIXED["int32"] if wide else _FIXED["int16"]))

    def _value(self, r: _Reader, f: FieldSpec, tagged: bool = False) -> Any:
        nullable = self.version in f.nullable
        elem = f.element_type
        if elem is not None:
            n = self._length(r, True)
            if n < 0:
                if not nullable:
                    raise MessageReadError(f"non-nullable field {f.name} was serialized as null")
                return None
            if f.fields:
                return [self._struct(r, f.fields) for _ in range(n)]
            return [self._scalar(r, elem, nullable=False, name=f.name) for _ in range(n)]
        if f.fields or f.is_struct:
            if nullable:
                marker = r.uvarint() if tagged else r.fixed(_FIXED["int8"])
                if (tagged and marker <= 0) or (not tagged and marker < 0):
                    return None
            return self._struct(r, f.fields)
        return self._scalar(r, f.type, nullable=nullable, name=f.name)

    def _scalar(self, r: _Reader, ftype: str, *, nullable: bool, name: str) -> Any:
        s = _FIXED.get(ftype)
        if s is not None:
            return r.fixed(s)
        if ftype == "bool":
            return r.raw(1)[0] != 0
        if ftype == "uuid":
            return base64.urlsafe_b64encode(r.raw(16)).decode("ascii").rstrip("=")
        if ftype == "string":
            n = self._length(r, False)
            if n < 0:
                if not nullable:
                    raise MessageReadError(f"non-nullable field {name} was serialized as null")
                return None
            return r.raw(n).decode("utf-8", "replace")
        if ftype in ("bytes", "records"):
            n = self._length(r, True)
            if n < 0:
                if not nullable:
                    raise MessageReadError(f"non-nullable field {name} was serialized as null")
                return None
            return r.raw(n)
        raise MessageReadError(f"unsupported field type {ftype}")


def read_message(spec: MessageSpec, version: int, data: bytes) -> dict[str, Any]:
    return MessageReader(spec, version).read(data)
