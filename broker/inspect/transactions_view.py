"""The transactional ids of a data directory and the latest state of each, read offline from the
``__transaction_state`` segments as the transaction coordinator loads them
(TransactionStateManager.loadTransactionsForTxnTopicPartition): every record in offset order,
the last one of an id wins, a tombstone removes the id.

Records that do not decode are listed with their offset instead of stopping the view.
"""

from __future__ import annotations

from typing import Any

from broker.inspect.data_dir import PartitionDir, partition_dirs
from coordinator.txn.records import TransactionLogValue, TxnRecordError, decode_key, decode_value
from coordinator.txn.state import TransactionState
from protocol.record_codec import CorruptRecords, decode_records
from protocol.records import CONTROL_FLAG, LOG_OVERHEAD, read_header

TRANSACTION_STATE_TOPIC = "__transaction_state"


def state_name(status: int) -> str:
    try:
        return TransactionState(status).state_name
    except ValueError:
        return f"Unknown({status})"


def transaction_view(txn_id: str, value: TransactionLogValue) -> dict[str, Any]:
    return {
        "transactionalId": txn_id,
        "producerId": value.producer_id,
        "producerEpoch": value.producer_epoch,
        "previousProducerId": value.previous_producer_id,
        "nextProducerId": value.next_producer_id,
        "nextProducerEpoch": value.next_producer_epoch,
        "state": state_name(value.transaction_status),
        "transactionTimeoutMs": value.transaction_timeout_ms,
        "topicPartitions": [{"topic": t, "partitions": list(ps)} for t, ps in value.partitions or ()],
        "transactionStartTimestampMs": value.start_timestamp_ms,
        "transactionLastUpdateTimestampMs": value.last_update_timestamp_ms,
        "clientTransactionVersion": value.client_transaction_version,
        "valueVersion": value.version,
    }


def _batches(path: str):
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    while len(data) - pos >= LOG_OVERHEAD + 49:
        info = read_header(data, pos)
        if info.size < LOG_OVERHEAD + 49 or pos + info.size > len(data):
            return
        yield info, data[pos : pos + info.size]
        pos += info.size


def _replay(p: PartitionDir, errors: list[dict[str, Any]]) -> tuple[dict[str, dict[str, Any]], int, int]:
    """The latest state of each id in one partition directory, its records and its end offset."""
    latest: dict[str, dict[str, Any]] = {}
    records = 0
    end = 0
    for _base, path in p.files("log"):
        for info, raw in _batches(path):
            end = info.last_offset + 1
            if info.attributes & CONTROL_FLAG:
                continue
            try:
                decoded = decode_records(raw)
            except CorruptRecords as e:
                errors.append({"partition": p.partition, "offset": info.base_offset, "error": str(e)})
                continue
            for rec in decoded:
                records += 1
                try:
                    txn_id = decode_key(rec.key)
                    value = decode_value(rec.value)
                except (TxnRecordError, UnicodeDecodeError) as e:
                    errors.append({"partition": p.partition, "offset": rec.offset, "error": str(e)})
                    continue
                if value is None:
                    latest.pop(txn_id, None)
                else:
                    latest[txn_id] = {**transaction_view(txn_id, value), "partition": p.partition,
                                      "broker": p.broker, "offset": rec.offset, "timestamp": rec.timestamp}
    return latest, records, end


def transactions(spec: str) -> dict[str, Any]:
    """``{"transactions": [...by id], "records", "errors"}`` of the data directory ``spec``. Of the
    replicas of one partition (a ``--brokers N`` directory) the one furthest ahead is read."""
    best: dict[int, tuple[int, dict[str, dict[str, Any]], int]] = {}
    errors: list[dict[str, Any]] = []
    for p in partition_dirs(spec, {TRANSACTION_STATE_TOPIC}):
        latest, records, end = _replay(p, errors)
        if p.partition not in best or end > best[p.partition][0]:
            best[p.partition] = (end, latest, records)
    merged = {k: v for _end, latest, _n in best.values() for k, v in latest.items()}
    return {"transactions": [merged[k] for k in sorted(merged)],
            "records": sum(n for _end, _latest, n in best.values()), "errors": errors}
