"""Per-partition producer state: idempotence, transactions, LSO bookkeeping and ``.snapshot`` files.

A port of Kafka 4.x ``ProducerStateManager``, ``ProducerAppendInfo``, ``ProducerStateEntry``,
``BatchMetadata``, ``TxnMetadata``, ``CompletedTxn`` and ``VerificationStateEntry``
(``storage/src/main/java/org/apache/kafka/storage/internals/log/``), kept close to the Java so
that behaviour can be checked line by line against it.

It is sans-IO except for the snapshot files: no sockets, no asyncio, no clocks (callers pass
``now_ms``). The partition log drives it in Kafka's order:

1. validate: ``prepare_update`` + ``ProducerAppendInfo.append*`` (or ``validate_append``) on the
   batches to be written, after offsets are assigned and before anything is written; a
   ``ProducerStateError`` rejects the whole append, a duplicate answers with the old offsets;
2. write the batches to the segment;
3. commit: ``update`` each append info, then for each completed transaction compute
   ``last_stable_offset`` (for the ``.txnindex`` entry of an ABORT) and ``complete_txn``, then
   ``update_map_end_offset(next offset)`` (``apply_append`` does all of step 3).

``log_state.LogProducerState`` is the log's side of it: ``storage.log.partition_log.PartitionLog`` owns one and calls it
at these points (plus snapshots on roll/close, rebuild on truncation and at open), as Kafka's
UnifiedLog owns its ProducerStateManager.

Deliberate differences from Kafka:
- completed transactions are dropped at once instead of waiting in ``unreplicatedTxns`` for the
  high watermark to pass their marker: with one replica the high watermark is the log end
  right after the append, so ``first_unstable_offset`` is the first *undecided* offset;
- the retained batch metadata is packed into one ``bytes`` per producer (see ProducerStateEntry);
- snapshot files are written to a temporary name, fsynced and renamed, so a crash never
  leaves a torn ``.snapshot`` (Kafka writes in place and relies on the CRC).

The modules: ``types`` (vocabulary and errors), ``entry``, ``append_info``, ``manager``,
``log_state`` and ``snapshot`` (the ``.snapshot`` file format and its I/O).
"""
