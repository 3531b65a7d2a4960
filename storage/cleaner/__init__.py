"""Log compaction: Kafka's LogCleaner, LogCleanerManager, Cleaner and CleanedTransactionMetadata
(``storage/src/main/java/org/apache/kafka/storage/internals/log/`` in Kafka 4.x), on the event loop.

What a cleaning does (Kafka's algorithm, kept step for step):

1. Choose the filthiest compacted log (``grab_filthiest``): the dirty section runs from the
   ``cleaner-offset-checkpoint`` offset (Kafka's file and format, one per log dir) to the first
   uncleanable offset: the least of the active segment's base, the last stable offset and the
   first segment younger than ``min.compaction.lag.ms``, rounded down to a segment base. A log
   is cleaned when dirty/(clean + dirty) bytes exceeds ``min.cleanable.dirty.ratio`` or when a
   dirty segment is older than ``max.compaction.lag.ms``.
2. Build the key -> latest offset map over the dirty section (records of aborted transactions
   and control batches are not mapped); the map may fill up and stop early.
3. Rewrite every segment from the log start to the end of the map, in groups whose total size
   stays within ``segment.bytes`` (and the index limits), each group into one ``.cleaned``
   segment that keeps a record only if it is the latest for its key (or beyond the map), drops
   keyless records, drops tombstones and COMMIT/ABORT markers once their KIP-534 delete horizon
   (stamped in the batch header the first time they survive a cleaning) has passed, drops the
   data of aborted transactions and keeps their ABORT marker (and ``.txnindex`` entry) until no
   batch of the transaction is left. The last batch of every live producer is kept (emptied if
   need be) so idempotence and fencing survive; offsets are never reassigned.
4. ``PartitionLog.replace_segments`` swaps each group in with the crash-safe rename protocol,
   and the checkpoint moves to the end of the map.

Deliberate differences:

- The cleaning runs on the event loop in slices (a generator that yields after every batch
  and every few hundred records; ``LogCleaner.run`` gives the loop back whenever a slice has
  used ``slice_ms``), not in a thread: the work is pure Python, so a thread would hold the GIL
  just as long (and the loop would wait up to the 5 ms switch interval for it each time), and
  staying on the loop keeps the broker's rule of one owner for every log and segment. What
  blocks without being CPU work goes to the default executor as BlockingIO requests, on files
  nothing else writes: reads of the old segments (through a descriptor of the cleaner's own),
  appends to the ``.cleaned`` segment, its fsync, unlinking the replaced files, the directory
  fsync and the checkpoint write. The renames of the swap stay on the loop: they are the
  atomic steps. Between slices the log may change: appends and rolls do not matter (only
  non-active segments below the LSO are read), anything that removes segments (retention,
  DeleteRecords, truncation, deletion) bumps ``PartitionLog.segments_generation`` and the
  cleaning is abandoned and retried later.
- The old segments at the end of a group that a cleaning emptied entirely are not part of the
  swap; they are deleted one by one right after it. The swap then covers exactly
  [group base, end of the cleaned segment), which is what recovery reads from the ``.swap``
  file, so a crash at any point leaves the log before or after one atomic step (Kafka can be
  left with such an old segment beside the new one after a crash).
- A rewritten batch keeps its base timestamp unless a delete horizon is stamped into it (then
  the record timestamp deltas are re-encoded against the horizon, as Kafka does); Kafka re-bases
  every rewritten batch on its first remaining record. Record timestamps are the same either way.
- The offset map is a dict of exact keys (see ``storage.offset_map``), not MD5 digests.

The modules: ``config``, ``selection`` (which log, how far), ``batches`` (rewriting one batch,
the transactions of a pass), ``cleaner`` (one cleaning) and ``manager`` (the LogCleaner loop).
"""
