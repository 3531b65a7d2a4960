"""The events the pipeline reads, how they are validated, and what it computes from them.

An event is one Kafka record whose value is a JSON object

    {"id": "e-17", "key": "sensor-3", "ts": 1704067205000, "amount": 12.5}

``id``: non-empty string; ``key``: non-empty string of at most 256 characters (the aggregation key);
``ts``: event time, integer epoch milliseconds, > 0; ``amount``: a finite JSON number.

Anything else (not JSON, not an object, a missing or mistyped field, a null value) is a bad record: it
goes to the dead-letter output with the reason and its Kafka coordinates, and never stops the job.
Everything here is Spark SQL expressions (no Python UDFs), so it runs in the JVM on the executors.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

CORRUPT = "_corrupt_record"
MAX_KEY_LENGTH = 256

EVENT_SCHEMA = StructType([
    StructField("id", StringType()),
    StructField("key", StringType()),
    StructField("ts", LongType()),
    StructField("amount", DoubleType()),
    StructField(CORRUPT, StringType()),
])

# The columns of the aggregate table (Parquet) and of the output topic's JSON values.
AGGREGATE_COLUMNS = ("key", "window_start", "window_end", "events", "total", "min_amount", "max_amount")


def _error(raw: Column, e: Column) -> Column:
    """The reason a record is rejected, or NULL for a valid one. First matching rule wins."""
    fields = ("id", "key", "ts", "amount")
    all_null = F.lit(True)
    for f in fields:
        all_null = all_null & e[f].isNull()
    return (
        F.when(raw.isNull(), F.lit("null_value"))
        .when(e.isNull() | (e[CORRUPT].isNotNull() & all_null), F.lit("malformed_json"))
        .when(e[CORRUPT].isNotNull(), F.lit("type_mismatch"))
        .when(e["id"].isNull() | (F.length(e["id"]) == 0), F.lit("missing_id"))
        .when(e["key"].isNull() | (F.length(e["key"]) == 0), F.lit("missing_key"))
        .when(F.length(e["key"]) > MAX_KEY_LENGTH, F.lit("key_too_long"))
        .when(e["ts"].isNull(), F.lit("missing_ts"))
        .when(e["ts"] <= 0, F.lit("bad_ts"))
        .when(e["amount"].isNull(), F.lit("missing_amount"))
        .when(F.isnan(e["amount"]) | (F.abs(e["amount"]) == F.lit(float("inf"))), F.lit("bad_amount"))
    )


def parse(kafka_rows: DataFrame) -> DataFrame:
    """Kafka source rows -> one row per record with the parsed event, or the reason it is bad.

    Columns: topic, partition, offset, kafka_timestamp, kafka_key, raw, id, key, event_time, amount, error."""
    raw = F.col("value").cast("string")
    parsed = F.from_json(raw, EVENT_SCHEMA, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT})
    df = kafka_rows.select(
        "topic", "partition", "offset",
        F.col("timestamp").alias("kafka_timestamp"),
        F.col("key").cast("string").alias("kafka_key"),
        raw.alias("raw"),
        parsed.alias("e"),
    )
    return df.select(
        "topic", "partition", "offset", "kafka_timestamp", "kafka_key", "raw",
        F.col("e.id").alias("id"),
        F.col("e.key").alias("key"),
        F.timestamp_millis(F.col("e.ts")).alias("event_time"),
        F.col("e.amount").alias("amount"),
        _error(F.col("raw"), F.col("e")).alias("error"),
    )


def valid_events(parsed: DataFrame) -> DataFrame:
    return parsed.where(F.col("error").isNull()).select("id", "key", "event_time", "amount")


def dead_letters(parsed: DataFrame) -> DataFrame:
    return parsed.where(F.col("error").isNotNull()).select(
        "topic", "partition", "offset", "kafka_timestamp", "kafka_key", "raw", "error")


def windowed_aggregates(events: DataFrame, window: str, watermark: str) -> DataFrame:
    """Per key and tumbling event-time window: count, sum, min, max of ``amount``.

    With the watermark, append mode emits each (key, window) once, when the watermark (max event time
    seen minus ``watermark``) passes the window's end; records older than the watermark are dropped."""
    return (
        events.withWatermark("event_time", watermark)
        .groupBy(F.window("event_time", window).alias("w"), F.col("key"))
        .agg(
            F.count(F.lit(1)).alias("events"),
            F.sum("amount").alias("total"),
            F.min("amount").alias("min_amount"),
            F.max("amount").alias("max_amount"),
        )
        .select(
            "key",
            F.col("w.start").alias("window_start"),
            F.col("w.end").alias("window_end"),
            "events", "total", "min_amount", "max_amount",
        )
    )
