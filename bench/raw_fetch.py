"""A broker's own read path, without a consumer in the way: Fetch requests one at a time on one
connection, as fast as answers come back.

ConsumerPerformance's figure is mostly the Java consumer's CPU (deserialising and CRC-checking
every batch on a 2-CPU machine it shares with the broker), so its run-to-run spread hides the
broker's part. This loop asks for 1 MiB of one partition (the Java consumer's
max.partition.fetch.bytes), read_committed, Fetch v12 without a session, walks only the batch
headers to find the next offset, and reports MB/s of record batches received and the median
round trip. Same bytes to both brokers: requests are kafka-python's generated Fetch class.
"""

from __future__ import annotations

import socket
import statistics
import struct
import time

from kafka.protocol.consumer.fetch import FetchRequest

PARTITION_MAX_BYTES = 1 << 20
_BATCH_HEAD = struct.Struct(">qi")  # baseOffset, batchLength
_LAST_OFFSET_DELTA = struct.Struct(">i")  # at byte 23 of a v2 batch


def _uvarint(b: bytes | bytearray, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        x = b[i]
        i += 1
        value |= (x & 0x7F) << shift
        shift += 7
        if not x & 0x80:
            return value, i


def _records_span(frame: bytearray) -> tuple[int, int]:
    """Start and end of the one partition's records in a Fetch v12 response frame (size prefix
    included), skipping the fields before them."""
    i = 4 + 4 + 1 + 4 + 2 + 4  # size, correlation id, header tags, throttle, error, session id
    _, i = _uvarint(frame, i)  # topics (1)
    n, i = _uvarint(frame, i)  # topic name
    i += n - 1
    _, i = _uvarint(frame, i)  # partitions (1)
    (error,) = struct.unpack_from(">h", frame, i + 4)
    if error:
        raise RuntimeError(f"Fetch answered error {error}")
    i += 4 + 2 + 8 + 8 + 8  # index, error, high watermark, last stable offset, log start offset
    n, i = _uvarint(frame, i)  # aborted transactions
    for _ in range(max(n - 1, 0)):
        i += 16
        _, i = _uvarint(frame, i)
    i += 4  # preferred read replica
    n, i = _uvarint(frame, i)
    return i, i + max(n - 1, 0)


def _next_offset(frame: bytearray, start: int, end: int, offset: int) -> tuple[int, int]:
    """(offset after the last whole batch, bytes of whole batches)."""
    p = start
    while p + 61 <= end:
        base, length = _BATCH_HEAD.unpack_from(frame, p)
        if p + 12 + length > end:
            break  # Kafka's answer may end in a partial batch
        offset = base + _LAST_OFFSET_DELTA.unpack_from(frame, p + 23)[0] + 1
        p += 12 + length
    return offset, p - start


def fetch_loop(bootstrap: str, topic: str, end_offset: int, receive_buffer: int | None = None) -> dict:
    """Read ``topic`` partition 0 from offset 0 to ``end_offset`` once; ``receive_buffer`` sets
    SO_RCVBUF as a Java client does (its receive.buffer.bytes: 65536 for a consumer)."""
    host, _, port = bootstrap.rpartition(":")
    frame = bytearray(64 << 20)
    view = memoryview(frame)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        if receive_buffer:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.connect((host, int(port)))
        offset = total = correlation = 0
        rtts = []
        t0 = time.perf_counter()
        while offset < end_offset:
            correlation += 1
            req = FetchRequest[12](
                replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=50 << 20, isolation_level=1,
                session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=[],
                topics=[FetchRequest[12].FetchTopic(topic=topic, partitions=[FetchRequest[12].FetchTopic.FetchPartition(
                    partition=0, fetch_offset=offset, partition_max_bytes=PARTITION_MAX_BYTES)])])
            req.with_header(correlation_id=correlation, client_id="raw-fetch")
            sent = time.perf_counter()
            sock.sendall(bytes(req.encode(version=12, header=True, framed=True)))
            got = 0
            size = 4
            while got < size:
                n = sock.recv_into(view[got:size])
                if not n:
                    raise ConnectionError("broker closed the connection")
                got += n
                if size == 4 and got >= 4:
                    size = struct.unpack_from(">i", frame)[0] + 4
                    if size > len(frame):
                        raise RuntimeError(f"answer of {size} bytes")
            rtts.append(time.perf_counter() - sent)
            start, end = _records_span(frame)
            new_offset, size = _next_offset(frame, start, end, offset)
            if new_offset == offset:
                raise RuntimeError(f"no progress at offset {offset} (LSO below {end_offset}?)")
            offset, total = new_offset, total + size
        elapsed = time.perf_counter() - t0
    return {"mb_per_s": total / elapsed / 1e6, "fetches": len(rtts), "rtt_p50_ms": statistics.median(rtts) * 1e3}


def fetch_mb_per_s(bootstrap: str, topic: str, end_offset: int, loops: int = 3,
                   receive_buffer: int | None = None) -> dict:
    """The best of ``loops`` passes (the first warms the client and the broker's caches)."""
    runs = [fetch_loop(bootstrap, topic, end_offset, receive_buffer) for _ in range(loops)]
    return max(runs, key=lambda r: r["mb_per_s"])
