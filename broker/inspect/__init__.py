"""The transaction inspector: decoded views of a broker's files and transactions.

- ``files``: any segment file as Kafka's ``kafka-dump-log.sh`` prints it (``log_dump``,
  ``index_dump``, ``snapshot_dump``, with the coordinator records of ``__transaction_state`` and
  ``__consumer_offsets`` decoded by Kafka's own message specs: ``message_spec``,
  ``message_reader``, ``record_decoders``), as text (``dump_text``) or JSON;
- ``offline``: views of a data directory read from its files (``data_dir``, ``partitions_view``,
  ``transactions_view``, written as text by ``views_text``).

``python -m broker.inspect`` (``cli``) is the command line. It reads files only and never needs
the broker running; it imports protocol, storage and coordinator, never the broker's runtime.
"""
