"""Produce (key 0), v3-12 (advertised from v0 as Kafka 4 does for old librdkafka builds).

Per partition: one magic-2 batch, validated (structure, CRC, size, producer state) before a
single write; errors are per partition and never stop the others. acks=0 gets no response;
acks 1 and -1 are answered after the local append (this node is the whole ISR). Any other acks
value is INVALID_REQUIRED_ACKS for every partition.
"""

from __future__ import annotations

from broker.context import NO_RESPONSE, RawResponse
from broker.handlers.registry import api
from broker.replica_manager import ProduceResult
from protocol.errors import ErrorCode
from protocol.produce_codec import (
    ProducePartitionResponse,
    ProduceTopicResponse,
    decode_produce_request,
    encode_produce_response,
)


def _partition(index: int, r: ProduceResult) -> ProducePartitionResponse:
    return ProducePartitionResponse(
        index, int(r.error), r.base_offset, r.log_append_time, r.log_start_offset, r.record_errors, r.error_message
    )


@api(0, (3, 12), advertised_min=0, decode=decode_produce_request)
def handle(ctx, req):
    broker = ctx.broker
    rm = broker.replica_manager
    version = ctx.api_version
    acks = req.acks
    responses = []
    for t in req.topics:
        name = t.name
        parts = []
        if acks not in (-1, 0, 1):
            parts = [_partition(p.index, ProduceResult(ErrorCode.INVALID_REQUIRED_ACKS)) for p in t.partitions]
        else:
            for p in t.partitions:
                result = rm.append_records(name, p.index, p.records, api_version=version,
                                           transactional_id=req.transactional_id)
                if result.error:
                    broker.metrics.error(0, result.error.name)
                parts.append(_partition(p.index, result))
        responses.append(ProduceTopicResponse(name, t.topic_id, parts))
    if acks == 0:
        return NO_RESPONSE
    body = encode_produce_response(version, responses)
    return RawResponse([body], len(body))
