"""Encoding a response whose last field is a long array of repeated elements (DescribeGroups with a
million ids, most of them the same): each distinct element is encoded once, through the response
class, and the array is joined from those bytes, instead of encoding every element again."""

from __future__ import annotations

import struct
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from protocol.primitives import uvarint

_I32 = struct.Struct(">i")


def encode_last_array(response_cls: Any, version: int, head: dict[str, Any], array_field: str,
                      elements: Sequence[Any], key: Callable[[Any], Hashable] = id) -> bytes:
    """``response_cls(**head, array_field=elements).encode(version)``, for an array that is the
    response's last field (then only the empty tagged fields follow, in flexible versions)."""
    flexible = response_cls.flexible_version_q(version)
    suffix = 1 if flexible else 0  # the empty top-level tagged fields
    count_size = 1 if flexible else 4  # a compact array of 0 or 1 element, or an int32 count
    empty = bytes(response_cls(**head, **{array_field: []}).encode(version=version))
    prefix = empty[:len(empty) - suffix - count_size]
    encoded: dict[Hashable, bytes] = {}
    parts = []
    for element in elements:
        k = key(element)
        part = encoded.get(k)
        if part is None:
            single = bytes(response_cls(**head, **{array_field: [element]}).encode(version=version))
            part = encoded[k] = single[len(prefix) + count_size:len(single) - suffix]
        parts.append(part)
    count = uvarint(len(parts) + 1) if flexible else _I32.pack(len(parts))
    return b"".join((prefix, count, *parts, empty[len(empty) - suffix:]))
