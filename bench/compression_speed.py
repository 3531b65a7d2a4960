"""Decode throughput per codec: kafka-python's ``kafka.codec`` (what the broker used before, with
python-snappy, lz4 and zstandard from the test extras) against ``protocol.compression`` (zlib and
cramjam, the runtime dependencies), and the produce-validation path that reads every record of a
compressed batch (``check_compressed_records``). Prints MB/s of decompressed bytes; run from the
test venv:

    .venv/bin/python bench/compression_speed.py [--size 1048576] [--seconds 1.0]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafka import codec as kafka_python_codec  # noqa: E402

from protocol import compression  # noqa: E402
from protocol.record_codec import zigzag as _zz  # noqa: E402
from protocol.record_validation import check_compressed_records, read_records  # noqa: E402

OLD_DECODE = {
    compression.GZIP: kafka_python_codec.gzip_decode,
    compression.SNAPPY: kafka_python_codec.snappy_decode,
    compression.LZ4: kafka_python_codec.lz4_decode,
    compression.ZSTD: kafka_python_codec.zstd_decode,
}
OLD_ENCODE = {
    compression.GZIP: kafka_python_codec.gzip_encode,
    compression.SNAPPY: kafka_python_codec.snappy_encode,
    compression.LZ4: kafka_python_codec.lz4_encode,
    compression.ZSTD: kafka_python_codec.zstd_encode,
}


def records(size: int) -> tuple[bytes, int]:
    """JSON-ish events as v2 records until ``size`` bytes: (records section, count)."""
    rnd = random.Random(1)
    out, i = bytearray(), 0
    while len(out) < size:
        key = b"user-%d" % rnd.randrange(10_000)
        value = (b'{"id":%d,"user":"%s","amount":%d.%02d,"currency":"EUR","ts":%d}'
                 % (i, key, rnd.randrange(1000), rnd.randrange(100), 1_700_000_000_000 + i))
        body = b"\x00" + _zz(i) + _zz(i) + _zz(len(key)) + key + _zz(len(value)) + value + _zz(0)
        out += _zz(len(body)) + body
        i += 1
    return bytes(out), i


def rate(fn, nbytes: int, seconds: float) -> float:
    fn()
    n, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        fn()
        n += 1
    return n * nbytes / (time.perf_counter() - started) / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=1 << 20, help="decompressed bytes per batch")
    ap.add_argument("--seconds", type=float, default=1.0, help="per measurement")
    args = ap.parse_args()
    data, count = records(args.size)
    print(f"{len(data)} bytes, {count} records per batch; MB/s of decompressed bytes")
    print(f"{'codec':8} {'ratio':>6} {'kafka.codec':>12} {'ours':>10} {'ours/old':>9} "
          f"{'validate old':>13} {'validate new':>13}")
    for codec in (compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD):
        payload = OLD_ENCODE[codec](data)  # what the clients send (kafka-python's encoders)
        assert compression.decompress(codec, payload) == data == OLD_DECODE[codec](payload)
        old = rate(lambda p=payload, c=codec: OLD_DECODE[c](p), len(data), args.seconds)
        new = rate(lambda p=payload, c=codec: compression.decompress(c, p), len(data), args.seconds)
        def old_check(p=payload, c=codec) -> None:  # the produce path before: decode all, then read
            d = OLD_DECODE[c](p)
            read_records(d, 0, len(d), 0, count, compressed=True)

        check_old = rate(old_check, len(data), args.seconds)
        check = rate(lambda p=payload, c=codec: check_compressed_records(c, p, count, 1 << 30), len(data),
                     args.seconds)
        print(f"{compression.NAMES[codec]:8} {len(data) / len(payload):6.1f} {old:12.0f} {new:10.0f} "
              f"{new / old:9.2f} {check_old:13.0f} {check:13.0f}")


if __name__ == "__main__":
    main()
