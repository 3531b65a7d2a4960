"""Varints, strings and tagged sections against kafka-python's codecs."""

from __future__ import annotations

import io

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.protocol.schemas.fields.codecs.types import String, UnsignedVarInt32

from protocol.primitives import (
    MalformedRequest,
    encode_compact_nullable_string,
    encode_compact_string,
    encode_nullable_string,
    encode_string,
    read_compact_nullable_string,
    read_compact_string,
    read_nullable_string,
    read_string,
    read_uvarint,
    skip_tagged_fields,
    tagged_section,
    uvarint,
)
from tests.unit.protocol.strategies import any_names, nullable_names

uint32 = st.integers(0, 2**32 - 1)
_STRING = String()


@given(value=uint32)
def test_uvarint_matches_library(value):
    encoded = uvarint(value)
    assert encoded == UnsignedVarInt32.encode(value)
    assert read_uvarint(memoryview(b"\xaa" + encoded + b"\xbb"), 1) == (value, 1 + len(encoded))


def test_uvarint_limits():
    with pytest.raises(ValueError):
        uvarint(-1)
    with pytest.raises(ValueError):
        uvarint(2**32)
    with pytest.raises(MalformedRequest):
        read_uvarint(b"\x80\x80\x80\x80\x80\x01", 0)
    with pytest.raises(IndexError):  # truncation: the message decoders map it to MalformedRequest
        read_uvarint(b"\x80\x80", 0)


@given(s=nullable_names | any_names)
def test_strings_match_library(s):
    if s is not None:
        assert encode_string(s) == _STRING.encode(s)
        assert encode_compact_string(s) == _STRING.encode(s, compact=True)
        assert read_string(encode_string(s), 0) == (s, len(encode_string(s)))
        assert read_compact_string(encode_compact_string(s), 0) == (s, len(encode_compact_string(s)))
    assert encode_nullable_string(s) == _STRING.encode(s)
    assert encode_compact_nullable_string(s) == _STRING.encode(s, compact=True)
    assert _STRING.decode(io.BytesIO(encode_compact_nullable_string(s)), compact=True) == s
    assert read_nullable_string(encode_nullable_string(s), 0)[0] == s
    assert read_compact_nullable_string(encode_compact_nullable_string(s), 0)[0] == s


def test_string_errors():
    for reader, body in (
        (read_string, b"\xff\xff"),
        (read_string, b"\x00\x05abc"),
        (read_nullable_string, b"\xff\xfe"),
        (read_compact_string, b"\x00"),
        (read_compact_string, b"\x05ab"),
    ):
        with pytest.raises(MalformedRequest):
            reader(body, 0)
    with pytest.raises(UnicodeDecodeError):  # mapped to MalformedRequest by the decoders
        read_string(b"\x00\x01\xff", 0)


@given(fields=st.dictionaries(st.integers(0, 2**20), st.binary(max_size=200), max_size=4))
def test_tagged_section_round_trip(fields):
    section = tagged_section(sorted(fields.items()))
    assert skip_tagged_fields(section + b"rest", 0) == len(section)
    with pytest.raises((MalformedRequest, IndexError)):
        skip_tagged_fields(section[:-1], 0) if fields else skip_tagged_fields(b"", 0)
