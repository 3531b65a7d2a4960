"""JSON text the way Jackson's ``JsonNode.toString`` writes it, which is how DumpLogSegments prints
coordinator records: compact (no spaces), non-ASCII characters as they are, control characters
as ``\\uXXXX`` with upper-case hex (Python's ``json`` writes lower case), and ``bytes`` as a
BinaryNode writes them (standard base64 with padding).

Kept apart from the decoding so ``--json`` output and the text view share one tree of plain
values (dicts keep Kafka's field order)."""

from __future__ import annotations

import base64
from typing import Any

_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def quote(text: str) -> str:
    """A JSON string literal as Jackson's generator escapes it."""
    out = ['"']
    for ch in text:
        esc = _SHORT_ESCAPES.get(ch)
        if esc is not None:
            out.append(esc)
        elif ch < " ":
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def dumps(value: Any) -> str:
    """Compact JSON of dicts, lists, str, int, float, bool, None and bytes (as base64)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return quote(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return quote(base64.b64encode(bytes(value)).decode("ascii"))
    if isinstance(value, dict):
        return "{" + ",".join(f"{quote(str(k))}:{dumps(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(dumps(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def plain(value: Any) -> Any:
    """The same tree with ``bytes`` replaced by their base64 text, for ``json.dumps``."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value
