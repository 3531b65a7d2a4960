"""The transaction inspector: decoded views of a broker's files and transactions.

- ``files``: any segment file as Kafka's ``kafka-dump-log.sh`` prints it (``log_dump``,
  ``index_dump``, ``snapshot_dump``, with the coordinator records of ``__transaction_state`` and
  ``__consumer_offsets`` decoded by Kafka's own message specs: ``message_spec``,
  ``message_reader``, ``record_decoders``), as text (``dump_text``) or JSON;
- ``offline``: views of a data directory read from its files (``data_dir``, ``partitions_view``,
  ``transactions_view``, written as text by ``views_text``).

- ``live``: the same views and more read from a running broker, served beside ``/metrics``
  (``broker.inspect.live``: the page, its JSON API, the timeline recorder, hanging transactions).

``python -m broker.inspect`` (``cli``) is the command line. ``files`` and ``offline`` read files
only and never need the broker running; ``live`` (``live_cli``) reads the JSON API over HTTP. The
command line imports protocol, storage and coordinator, never the broker's runtime (the
``live`` package is the broker's side).
"""
