"""Exactly-once output to a Kafka topic from Structured Streaming's ``foreachBatch``.

Spark guarantees that ``foreachBatch`` sees each micro-batch's output at least once, with the same batch
id and (for a deterministic query) the same rows when a batch is replayed after a failure: the offsets of
batch N are in the checkpoint's offset log before it runs, and batch N is marked done in the commit log
only after the function returns. So a crash after the function wrote its output but before Spark's commit
log entry replays batch N. This sink makes the replay harmless:

* one transactional producer in the driver (``transactional.id`` stable across restarts);
* each micro-batch is one Kafka transaction holding the batch's records **and** a progress record
  in a compacted progress topic: key ``<sink id>``, value ``{"batch_id": N, ...}``. The sink id is
  ``<app name>:<streaming query id>``; the query id is stored in the checkpoint, so it is the same across
  restarts and new for a new checkpoint;
* on start, ``init_transactions()`` fences any earlier incarnation and completes or aborts its open
  transaction; the sink then reads the progress topic (read_committed) up to its end and learns the
  last batch id whose transaction committed;
* a batch whose id is at or below that is a replay: it is skipped, nothing is written twice. Spark runs
  batch N+1 only after batch N is in its commit log, so "last committed batch id" is all it needs, and
  with the sink id as the key, compaction keeps exactly one progress record per sink.

Consumers of the output topic read it with ``isolation.level=read_committed``. The progress topic must
have only this sink's transactional producer writing to it (by default its name is derived from the app
name): the end of a read_committed read is the last stable offset, which another writer's open
transaction would hold back.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

log = logging.getLogger("pipelines.kafka_sink")


def ensure_topic(bootstrap: str, topic: str, *, partitions: int = -1, config: Mapping[str, str] | None = None,
                 client_config: Mapping[str, Any] | None = None, timeout: float = 30.0) -> None:
    """Create ``topic`` unless it exists (partitions/replication -1 = the cluster's defaults)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **(client_config or {})})
    md = admin.list_topics(timeout=timeout)
    if topic in md.topics and md.topics[topic].error is None:
        return
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=-1, config=dict(config or {}))],
        operation_timeout=timeout, request_timeout=timeout)
    try:
        futures[topic].result(timeout)
    except KafkaException as e:
        if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise


class TransactionalBatchSink:
    """A ``foreachBatch`` function: ``query = df.writeStream.foreachBatch(sink).start(); sink.bind(query)``.

    ``rows_of(df)`` turns the micro-batch DataFrame into ``(key: bytes, value: bytes)`` pairs; it runs in
    the driver (``collect``), so it suits small outputs such as aggregates."""

    def __init__(
        self,
        bootstrap: str,
        output_topic: str,
        progress_topic: str,
        app_name: str,
        rows_of: Callable[[Any], list[tuple[bytes, bytes]]],
        *,
        transactional_id: str | None = None,
        client_config: Mapping[str, Any] | None = None,
        transaction_timeout_ms: int = 60_000,
        on_committed: Callable[[int], None] | None = None,
        timeout: float = 60.0,
    ) -> None:
        self.bootstrap = bootstrap
        self.output_topic = output_topic
        self.progress_topic = progress_topic
        self.app_name = app_name
        self.rows_of = rows_of
        self.transactional_id = transactional_id or f"{app_name}.{output_topic}.sink"
        self.client_config = dict(client_config or {})
        self.transaction_timeout_ms = transaction_timeout_ms
        self.on_committed = on_committed
        self.timeout = timeout
        self.sink_id: str | None = None
        self.last_committed: int | None = None
        self.skipped: list[int] = []
        self.committed: list[int] = []
        self._producer: Producer | None = None
        self._bound = threading.Event()

    # -- lifecycle -------------------------------------------------------------------------------------

    def bind(self, query) -> None:
        """Tell the sink which streaming query it serves (its id is stable across restarts)."""
        self.sink_id = f"{self.app_name}:{query.id}"
        self._bound.set()

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(self.timeout)
            self._producer = None

    def _start(self) -> None:
        if not self._bound.wait(self.timeout):
            raise RuntimeError("TransactionalBatchSink.bind(query) was not called")
        producer = Producer({
            "bootstrap.servers": self.bootstrap,
            "transactional.id": self.transactional_id,
            "transaction.timeout.ms": self.transaction_timeout_ms,
            "linger.ms": 5,
            **self.client_config,
        })
        # Fences older incarnations and resolves their open transaction before we read the progress.
        producer.init_transactions(self.timeout)
        self.last_committed = self._read_progress()
        self._producer = producer
        log.info("sink %s (transactional.id %s): last committed batch %s", self.sink_id,
                 self.transactional_id, self.last_committed)

    def _read_progress(self) -> int | None:
        """The highest batch id in a committed progress record for this sink, or None."""
        consumer = Consumer({
            "bootstrap.servers": self.bootstrap,
            "group.id": f"{self.transactional_id}.progress-reader",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            **self.client_config,
        })
        try:
            md = consumer.list_topics(self.progress_topic, timeout=self.timeout)
            tmd = md.topics.get(self.progress_topic)
            if tmd is None or tmd.error is not None:
                raise RuntimeError(f"progress topic {self.progress_topic}: {tmd.error if tmd else 'missing'}")
            parts = sorted(tmd.partitions)
            pending = set()
            for p in parts:
                low, high = consumer.get_watermark_offsets(TopicPartition(self.progress_topic, p),
                                                           timeout=self.timeout, cached=False)
                if high > low:
                    pending.add(p)
            consumer.assign([TopicPartition(self.progress_topic, p, OFFSET_BEGINNING) for p in sorted(pending)])
            last: int | None = None
            key = self.sink_id.encode()
            deadline = time.monotonic() + self.timeout
            while pending:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"timed out reading progress topic {self.progress_topic}; "
                                       f"partitions not at end: {sorted(pending)}")
                msg = consumer.poll(0.5)
                if msg is None:
                    continue
                if msg.error():
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        pending.discard(msg.partition())
                        continue
                    raise KafkaException(msg.error())
                if msg.key() == key:
                    batch_id = int(json.loads(msg.value())["batch_id"])
                    last = batch_id if last is None else max(last, batch_id)
            return last
        finally:
            consumer.close()

    # -- foreachBatch ----------------------------------------------------------------------------------

    def __call__(self, df, batch_id: int) -> None:
        # Always run the batch: for a stateful query, running it is what commits the state store version
        # the next batch starts from (on a replay it rewrites the same state).
        rows = self.rows_of(df)
        if not rows:
            return  # nothing to write, so nothing to deduplicate either
        if self._producer is None:
            self._start()
        if self.last_committed is not None and batch_id <= self.last_committed:
            log.warning("sink %s: batch %d already committed (last %d): replay skipped", self.sink_id,
                        batch_id, self.last_committed)
            self.skipped.append(batch_id)
            return
        self._write_transaction(batch_id, rows)
        self.last_committed = batch_id
        self.committed.append(batch_id)
        if self.on_committed is not None:
            self.on_committed(batch_id)

    def _write_transaction(self, batch_id: int, rows: list[tuple[bytes, bytes]]) -> None:
        producer = self._producer
        assert producer is not None and self.sink_id is not None
        headers = [("pipeline.batch_id", str(batch_id).encode())]
        progress = json.dumps({
            "batch_id": batch_id,
            "sink_id": self.sink_id,
            "output_topic": self.output_topic,
            "records": len(rows),
            "committed_at_ms": int(time.time() * 1000),
        }).encode()
        producer.begin_transaction()
        try:
            for key, value in rows:
                self._produce(self.output_topic, key, value, headers)
            self._produce(self.progress_topic, self.sink_id.encode(), progress, headers)
            self._commit()
        except BaseException:
            self._abort()
            raise
        log.info("sink %s: batch %d committed, %d records", self.sink_id, batch_id, len(rows))

    def _produce(self, topic: str, key: bytes, value: bytes, headers) -> None:
        producer = self._producer
        assert producer is not None
        while True:
            try:
                producer.produce(topic, value=value, key=key, headers=headers)
                return
            except BufferError:
                producer.poll(0.1)

    def _commit(self) -> None:
        producer = self._producer
        assert producer is not None
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                producer.commit_transaction(self.timeout)
                return
            except KafkaException as e:
                err = e.args[0]
                if err.retriable() and time.monotonic() < deadline:
                    continue
                raise

    def _abort(self) -> None:
        producer = self._producer
        if producer is None:
            return
        try:
            producer.abort_transaction(self.timeout)
        except KafkaException as e:
            # A fatal error (e.g. fenced by a newer incarnation) leaves the producer unusable.
            log.error("abort_transaction failed: %s", e)
            self._producer = None
