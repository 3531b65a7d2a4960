"""The codecs (protocol/compression.py) against independent implementations: what kafka-python
(python-snappy's xerial framing), python-lz4, zstandard and gzip write decodes to the same bytes,
what we write decodes with them; Kafka's refusals (dependent lz4 blocks, bad checksums);
the decompressed-size bound; and that the module needs only the runtime dependencies."""

from __future__ import annotations

import gzip
import subprocess
import sys
import tracemalloc

import lz4.frame
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka import codec as kafka_python_codec

from protocol import compression as c
from tests.support.broker_process import ROOT

CODECS = [c.GZIP, c.SNAPPY, c.LZ4, c.ZSTD]
payloads = st.one_of(
    st.binary(min_size=1, max_size=3000),
    st.builds(lambda b, n: b * n, st.binary(min_size=1, max_size=40), st.integers(1, 5000)),
)


@settings(max_examples=60, deadline=None)
@given(data=payloads, codec=st.sampled_from(CODECS))
def test_round_trip(data, codec):
    assert c.decompress(codec, c.compress(codec, data)) == data


@settings(max_examples=40, deadline=None)
@given(data=payloads)
def test_independent_encoders_decode(data):
    assert c.decompress(c.GZIP, gzip.compress(data)) == data
    assert c.decompress(c.SNAPPY, kafka_python_codec.snappy_encode(data)) == data  # xerial (Java's framing)
    assert c.decompress(c.SNAPPY, kafka_python_codec.snappy_encode(data, xerial_compatible=False)) == data
    assert c.decompress(c.LZ4, kafka_python_codec.lz4_encode(data)) == data
    assert c.decompress(c.ZSTD, zstandard.ZstdCompressor().compress(data)) == data
    assert c.decompress(c.ZSTD, zstandard.ZstdCompressor(write_content_size=False).compress(data)) == data


@settings(max_examples=40, deadline=None)
@given(data=payloads)
def test_independent_decoders_read_ours(data):
    assert kafka_python_codec.gzip_decode(c.compress(c.GZIP, data)) == data
    assert kafka_python_codec.snappy_decode(c.compress(c.SNAPPY, data)) == data
    assert lz4.frame.decompress(c.compress(c.LZ4, data)) == data
    assert kafka_python_codec.zstd_decode(c.compress(c.ZSTD, data)) == data


@pytest.mark.parametrize("block_size", [lz4.frame.BLOCKSIZE_MAX64KB, lz4.frame.BLOCKSIZE_MAX4MB])
@pytest.mark.parametrize("block_checksum", [False, True])
@pytest.mark.parametrize("content_checksum", [False, True])
def test_lz4_frame_options_kafka_reads(block_size, block_checksum, content_checksum):
    data = bytes(range(256)) * 2000 + b"tail"
    frame = lz4.frame.compress(data, block_size=block_size, block_linked=False, block_checksum=block_checksum,
                               content_checksum=content_checksum, store_size=content_checksum)
    assert c.decompress(c.LZ4, frame) == data


def test_lz4_refusals_are_kafkas():
    data = b"abc" * 100_000
    with pytest.raises(c.CompressionError, match="Dependent block stream is unsupported"):
        c.decompress(c.LZ4, lz4.frame.compress(data, block_linked=True))
    good = bytearray(lz4.frame.compress(data, block_linked=False, block_checksum=True))
    bad_hc = bytearray(good)
    bad_hc[6] ^= 0xFF
    with pytest.raises(c.CompressionError, match="descriptor corrupted"):
        c.decompress(c.LZ4, bad_hc)
    bad_block = bytearray(good)
    bad_block[-12] ^= 0x01  # inside the last block's checksum
    with pytest.raises(c.CompressionError):
        c.decompress(c.LZ4, bad_block)
    with pytest.raises(c.CompressionError, match="ended prematurely"):
        c.decompress(c.LZ4, good[:-8])
    with pytest.raises(c.CompressionError, match="invalid magic"):
        c.decompress(c.LZ4, b"\x00" * 20)


def test_gzip_members_and_trailing_bytes_as_gzip_input_stream():
    assert c.decompress(c.GZIP, gzip.compress(b"one") + gzip.compress(b"two")) == b"onetwo"
    assert c.decompress(c.GZIP, gzip.compress(b"one") + b"not a member") == b"one"
    with pytest.raises(c.CompressionError):
        c.decompress(c.GZIP, gzip.compress(b"x" * 1000)[:-10])
    with pytest.raises(c.CompressionError):
        c.decompress(c.GZIP, b"\x1f\x8b\x08garbage")


def test_xxh32_known_values():
    assert c.xxh32(b"") == 0x02CC5D05
    assert c.xxh32(b"a") == 0x550D7456
    assert c.xxh32(b"abc") == 0x32D153FF
    assert c.xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F


@pytest.mark.parametrize("codec", CODECS)
def test_a_bomb_stops_at_the_limit_in_bounded_memory(codec):
    bomb = c.compress(codec, bytes(200 * 1024 * 1024))
    assert len(bomb) < 10 * 1024 * 1024
    tracemalloc.start()
    try:
        with pytest.raises(c.DecompressedTooLarge):
            for _ in c.decompressed_chunks(codec, bomb, limit=16 * 1024 * 1024):
                pass
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 40 * 1024 * 1024, peak


def test_needs_only_the_runtime_dependencies():
    """python-snappy, lz4 and zstandard are test-only: the codecs must not touch them."""
    code = (
        "import sys\n"
        "for m in ('snappy', 'lz4', 'lz4.frame', 'lz4.block', 'zstandard', 'xxhash'):\n"
        "    sys.modules[m] = None\n"
        "from protocol import compression as c\n"
        "data = b'kafka ' * 10000\n"
        "for codec in (1, 2, 3, 4):\n"
        "    assert c.decompress(codec, c.compress(codec, data)) == data\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ok"
