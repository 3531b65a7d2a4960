"""Produce (key 0), v3-12 (advertised from v0 as Kafka 4 does for old librdkafka builds).

Per partition: one magic-2 batch, validated (structure, CRC, size, producer state) before a
single write; errors are per partition and never stop the others. acks=0 gets no response;
acks 1 and -1 are answered after the local append (this node is the whole ISR). Any other acks
value is INVALID_REQUIRED_ACKS for every partition.
"""

from __future__ import annotations

from broker.context import NO_RESPONSE
from broker.handlers.registry import api
from broker.replica_manager import ProduceResult
from protocol.errors import ErrorCode
from protocol.messages import response_class

Response = response_class(0)
TopicResp = Response.TopicProduceResponse
PartResp = TopicResp.PartitionProduceResponse
BatchError = PartResp.BatchIndexAndErrorMessage


def _partition(index: int, r: ProduceResult) -> PartResp:
    return PartResp(
        index=index, error_code=r.error, base_offset=r.base_offset, log_append_time_ms=r.log_append_time,
        log_start_offset=r.log_start_offset,
        record_errors=[BatchError(batch_index=i, batch_index_error_message=m) for i, m in r.record_errors],
        error_message=r.error_message,
    )


@api(0, (3, 12), advertised_min=0)
def handle(ctx, req):
    broker = ctx.broker
    rm = broker.replica_manager
    version = ctx.api_version
    acks = req.acks
    responses = []
    for t in req.topic_data:
        name = t.name
        parts = []
        if acks not in (-1, 0, 1):
            parts = [_partition(p.index, ProduceResult(ErrorCode.INVALID_REQUIRED_ACKS)) for p in t.partition_data]
        else:
            for p in t.partition_data:
                result = rm.append_records(name, p.index, p.records, api_version=version,
                                           transactional_id=req.transactional_id)
                if result.error:
                    broker.metrics.error(0, result.error.name)
                parts.append(_partition(p.index, result))
        responses.append(TopicResp(name=name, partition_responses=parts))
    if acks == 0:
        return NO_RESPONSE
    return Response(responses=responses, throttle_time_ms=0)
