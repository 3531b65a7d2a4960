"""Micro-benchmark: the hand-written Produce/Fetch codecs vs kafka-python's generated ones.

Run: ``python bench/codec_bench.py [--number N]``. Prints the best of several runs in µs per
operation (the minimum is the least noisy estimate on a shared machine).
"""

from __future__ import annotations

import argparse
import os
import sys
import timeit
import uuid
from collections.abc import Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kafka.protocol.consumer import FetchRequest, FetchResponse  # noqa: E402
from kafka.protocol.producer import ProduceRequest, ProduceResponse  # noqa: E402

from protocol.fetch_codec import (  # noqa: E402
    FetchPartitionResponse,
    FetchTopicResponse,
    decode_fetch_request,
    encode_fetch_response,
)
from protocol.produce_codec import (  # noqa: E402
    ProducePartitionResponse,
    ProduceTopicResponse,
    decode_produce_request,
    encode_produce_response,
)


def best_us(fn: Callable[[], object], number: int, repeat: int = 7) -> float:
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6


def row(label: str, ours: float, lib: float) -> None:
    print(f"{label:<58} {ours:9.2f} {lib:9.2f} {lib / ours:7.1f}x")


def produce_request_body(version: int) -> bytes:
    topic = ProduceRequest.TopicProduceData
    part = topic.PartitionProduceData
    req = ProduceRequest[version](
        transactional_id=None,
        acks=-1,
        timeout_ms=30000,
        topic_data=[topic(name="bench-topic", topic_id=uuid.uuid4(),
                          partition_data=[part(index=0, records=os.urandom(16384))])],
    )
    return bytes(req.encode())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--number", type=int, default=20000)
    n = parser.parse_args().number
    print(f"{'operation (µs/op)':<58} {'ours':>9} {'library':>9} {'speedup':>8}")

    # Produce request decode: one partition, one 16 KiB batch.
    for version in (3, 9, 13):
        body = bytearray(produce_request_body(version))
        mv = memoryview(body)
        ours = best_us(lambda mv=mv, v=version: decode_produce_request(mv, v), n)
        lib = best_us(lambda mv=mv, v=version: ProduceRequest.decode(mv, version=v), n)
        row(f"Produce v{version} request decode, 1 x 16 KiB batch", ours, lib)

    # Produce response encode: one topic, one partition. The library figure includes
    # building its objects, which a handler has to do too.
    pr = ProduceResponse
    tr = pr.TopicProduceResponse
    ppr = tr.PartitionProduceResponse
    for version in (3, 9, 13):
        tid = uuid.uuid4()

        def ours_fn(v=version, tid=tid):
            return encode_produce_response(
                v, [ProduceTopicResponse("bench-topic", tid, [ProducePartitionResponse(0, 0, 12345, -1, 0)])]
            )

        def lib_fn(v=version, tid=tid):
            return pr[v](
                responses=[tr(name="bench-topic", topic_id=tid, partition_responses=[
                    ppr(index=0, error_code=0, base_offset=12345, log_append_time_ms=-1, log_start_offset=0)
                ])],
                throttle_time_ms=0,
            ).encode()

        assert ours_fn() == bytes(lib_fn())
        row(f"Produce v{version} response build+encode, 1 partition", best_us(ours_fn, n), best_us(lib_fn, n))

    # Fetch response encode: one partition with a 1 MiB records slice (e.g. from a segment).
    records = memoryview(bytearray(os.urandom(1 << 20)))
    fr = FetchResponse
    ftr = fr.FetchableTopicResponse
    fpd = ftr.PartitionData
    for version in (4, 12, 13):
        tid = uuid.uuid4()

        def ours_fn(v=version, tid=tid):
            return encode_fetch_response(v, topics=[FetchTopicResponse("bench-topic", tid, [
                FetchPartitionResponse(0, 0, 1000, 1000, 0, None, -1, records)
            ])])

        def lib_fn(v=version, tid=tid):
            return fr[v](throttle_time_ms=0, error_code=0, session_id=0, responses=[
                ftr(topic="bench-topic", topic_id=tid, partitions=[fpd(
                    partition_index=0, error_code=0, high_watermark=1000, last_stable_offset=1000,
                    log_start_offset=0, aborted_transactions=None, preferred_read_replica=-1,
                    records=records,
                )])
            ]).encode()

        assert b"".join(ours_fn().buffers) == bytes(lib_fn())
        row(
            f"Fetch v{version} response encode, 1 partition, 1 MiB records",
            best_us(ours_fn, n),
            best_us(lib_fn, max(1, n // 20)),
        )

    # Fetch request decode: a consumer's one-topic, one-partition poll.
    ft = FetchRequest.FetchTopic
    fp = ft.FetchPartition
    for version in (4, 12, 13, 17):
        body = bytes(FetchRequest[version](
            replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=52428800, isolation_level=1,
            session_id=0, session_epoch=-1, rack_id="",
            topics=[ft(topic="bench-topic", topic_id=uuid.uuid4(), partitions=[fp(
                partition=0, current_leader_epoch=0, fetch_offset=12345, last_fetched_epoch=0,
                log_start_offset=-1, partition_max_bytes=1048576)])],
        ).encode())
        mv = memoryview(body)
        row(
            f"Fetch v{version} request decode, 1 partition",
            best_us(lambda mv=mv, v=version: decode_fetch_request(mv, v), n),
            best_us(lambda mv=mv, v=version: FetchRequest.decode(mv, version=v), n),
        )


if __name__ == "__main__":
    main()
