"""Kafka's JSON message specs (``clients/src/main/resources/common/message/*.json`` and the
coordinators' record specs), read into field trees: the same files Kafka generates its message
classes and ``*JsonConverter`` classes from.

Reading records from the specs rather than from hand-written layouts is what lets the decoded
views keep Kafka's field names, field order, version gates and tagged-field defaults for every
record type, including the share and streams group records this broker never writes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

SCHEMA_PACKAGE = "broker.inspect.schemas"
_COMMENT = re.compile(r"^\s*//.*$", re.MULTILINE)
_MAX = 0x7FFF


class SpecError(ValueError):
    """A spec this reader does not understand."""


@dataclass(frozen=True, slots=True)
class Versions:
    """An inclusive version range ("0+", "1-3", "2", "none")."""

    low: int
    high: int

    @classmethod
    def parse(cls, text: str | None) -> Versions:
        if text is None or text == "none":
            return NONE
        text = text.strip()
        if text.endswith("+"):
            return cls(int(text[:-1]), _MAX)
        if "-" in text:
            low, high = text.split("-", 1)
            return cls(int(low), int(high))
        return cls(int(text), int(text))

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.low <= version <= self.high


NONE = Versions(1, 0)


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """One field: ``name`` is the JSON name (the spec's name with its first letter in lower case,
    as Kafka's generator names the accessors and JSON properties)."""

    name: str
    type: str  # "int32", "string", "[]int32", "[]Struct", "Struct"
    versions: Versions
    nullable: Versions
    tagged: Versions
    tag: int | None
    default: Any  # as the spec states it (None when absent)
    fields: tuple[FieldSpec, ...]  # of a struct or an array of structs

    @property
    def element_type(self) -> str | None:
        """The element type of an array field, else None."""
        return self.type[2:] if self.type.startswith("[]") else None

    @property
    def is_struct(self) -> bool:
        base = self.element_type or self.type
        return bool(self.fields) or base[:1].isupper()


@dataclass(frozen=True, slots=True)
class MessageSpec:
    name: str
    kind: str  # "coordinator-key", "coordinator-value", "data", ...
    api_key: int | None
    valid: Versions
    flexible: Versions
    fields: tuple[FieldSpec, ...]

    def clamp(self, version: int) -> int:
        """The version the generated reader behaves as: its version checks only distinguish the
        valid versions, so a version past the newest reads as the newest (a key read at its record
        type, a consumer protocol subscription from a newer client)."""
        return max(self.valid.low, min(version, self.valid.high))


def _camel(name: str) -> str:
    return name[:1].lower() + name[1:]


def _field(raw: dict[str, Any], common: dict[str, dict[str, Any]]) -> FieldSpec:
    ftype = raw["type"]
    base = ftype[2:] if ftype.startswith("[]") else ftype
    sub = raw.get("fields")
    if sub is None and base in common:
        sub = common[base]["fields"]
    tagged = Versions.parse(raw.get("taggedVersions"))
    versions_text = raw.get("versions") or raw.get("taggedVersions")
    return FieldSpec(
        name=_camel(raw["name"]),
        type=ftype,
        versions=Versions.parse(versions_text),
        nullable=Versions.parse(raw.get("nullableVersions")),
        tagged=tagged,
        tag=raw.get("tag"),
        default=raw.get("default"),
        fields=tuple(_field(f, common) for f in sub or ()),
    )


def parse_spec(text: str) -> MessageSpec:
    """A spec from its JSON text (with Kafka's ``//`` comment lines)."""
    raw = json.loads(_COMMENT.sub("", text))
    common = {s["name"]: s for s in raw.get("commonStructs", ())}
    try:
        return MessageSpec(
            name=raw["name"],
            kind=raw.get("type", "data"),
            api_key=raw.get("apiKey"),
            valid=Versions.parse(raw["validVersions"]),
            flexible=Versions.parse(raw.get("flexibleVersions")),
            fields=tuple(_field(f, common) for f in raw["fields"]),
        )
    except (KeyError, ValueError) as e:
        raise SpecError(f"spec {raw.get('name')}: {e}") from None


@cache
def load_spec(name: str) -> MessageSpec:
    """The spec ``<name>.json`` of ``broker/inspect/schemas``."""
    return parse_spec(resources.files(SCHEMA_PACKAGE).joinpath(f"{name}.json").read_text())


@cache
def coordinator_specs(prefixes: tuple[str, ...]) -> dict[int, tuple[MessageSpec, MessageSpec]]:
    """record type -> (key spec, value spec) of the coordinator records whose names start with one
    of ``prefixes``: what Kafka's CoordinatorRecordType enum of that coordinator lists."""
    keys: dict[int, MessageSpec] = {}
    values: dict[int, MessageSpec] = {}
    for entry in resources.files(SCHEMA_PACKAGE).iterdir():
        name = entry.name
        if not name.endswith(".json") or not name.startswith(prefixes):
            continue
        spec = load_spec(name[:-5])
        if spec.api_key is None:
            continue
        if spec.kind == "coordinator-key":
            keys[spec.api_key] = spec
        elif spec.kind == "coordinator-value":
            values[spec.api_key] = spec
    return {t: (keys[t], values[t]) for t in sorted(keys) if t in values}


TRANSACTION_RECORDS = ("TransactionLog",)
GROUP_RECORDS = ("OffsetCommit", "LegacyOffsetCommit", "GroupMetadata", "ConsumerGroup", "ShareGroup",
                 "StreamsGroup")
