"""Non-nullable fields sent as null: Kafka's generated parsers refuse such a request ("non-nullable
field ... was serialized as null") and the broker closes the connection. kafka-python's decoders
read a -1 length as None whatever the schema says, so the decoded message is checked against the
schema's nullableVersions here, before a handler sees it."""

from __future__ import annotations

from typing import Any

# Simple types whose wire form can say null (a -1 length); everything else always has a value.
_NULLABLE_KINDS = frozenset({"string", "bytes", "records"})


def null_violation(message: Any, fields: dict, version: int) -> str | None:
    """The dotted name of the first non-nullable field of ``message`` that is None, else None."""
    for name, field in fields.items():
        if not field.for_version_q(version) or field.tagged_field_q(version):
            continue
        value = getattr(message, name, None)
        if value is None:
            if (field.is_array() or field.is_struct() or field.type_str in _NULLABLE_KINDS) \
                    and not field.nullable_for_version_q(version):
                return name
            continue
        if field.is_struct_array():
            for item in value:
                inner = null_violation(item, field.fields, version)
                if inner is not None:
                    return f"{name}.{inner}"
        elif field.is_array():
            element = field.array_of
            if element.type_str in _NULLABLE_KINDS and not element.nullable_for_version_q(version) \
                    and any(v is None for v in value):
                return f"{name}[]"
        elif field.is_struct():
            inner = null_violation(value, field.fields, version)
            if inner is not None:
                return f"{name}.{inner}"
    return None
