"""Request header v1/v2 parsing and response header v0/v1 encoding.

Parsed by hand: kafka-python's header decode copies the whole frame, and the header is four
fields. ClientId stays a non-compact nullable string even in header v2 (RequestHeader.json).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .primitives import MalformedRequest, skip_tagged_fields

_FIXED = struct.Struct(">hhih")
_CORR = struct.Struct(">i")
_KEY_VERSION = struct.Struct(">hh")


class MalformedHeader(Exception):
    pass


@dataclass(slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int  # where the request body starts in the frame


def peek_api(frame: bytes | bytearray) -> tuple[int, int]:
    """api_key and api_version: enough to decide how to parse the rest of the header."""
    if len(frame) < 4:
        raise MalformedHeader("request frame shorter than a header")
    return _KEY_VERSION.unpack_from(frame, 0)


def parse_request_header(frame: bytes | bytearray, flexible: bool) -> RequestHeader:
    if len(frame) < 10:
        raise MalformedHeader("request frame shorter than a header")
    api_key, api_version, correlation_id, client_len = _FIXED.unpack_from(frame, 0)
    pos = 10
    client_id = None
    if client_len >= 0:
        end = pos + client_len
        if end > len(frame):
            raise MalformedHeader("client id runs past the frame")
        try:
            client_id = frame[pos:end].decode("utf-8")
        except UnicodeDecodeError as e:
            raise MalformedHeader("client id is not UTF-8") from e
        pos = end
    elif client_len != -1:
        raise MalformedHeader(f"bad client id length {client_len}")
    if flexible:
        try:
            pos = skip_tagged_fields(frame, pos)
        except (IndexError, MalformedRequest) as e:
            raise MalformedHeader("truncated tagged fields") from e
    return RequestHeader(api_key, api_version, correlation_id, client_id, pos)


def response_header(correlation_id: int, flexible: bool) -> bytes:
    """Header v1 (correlation id + empty tagged fields) for flexible responses, else v0."""
    if flexible:
        return _CORR.pack(correlation_id) + b"\x00"
    return _CORR.pack(correlation_id)
