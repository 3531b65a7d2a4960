"""One partition's log: ``partition_log`` (append, read, roll, truncate, retention, the LSO),
``loader`` (open and recovery), ``leader_epoch``, and the files of a segment (``segment``, its
offset, time and transaction indexes over ``index_file``, and ``file_region`` for sendfile)."""
