"""Partition logs in Kafka's own file formats: ``log`` (one partition: segments, indexes, loading
and recovery, the leader-epoch cache), ``producer`` (idempotence, transactions, the LSO,
snapshots), ``cleaner`` (compaction), ``log_manager`` (every log of the broker), checkpoints,
configs and the one ``clock``. Imports protocol only."""
