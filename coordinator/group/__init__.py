"""The classic consumer-group coordinator (Kafka's GroupCoordinator / GroupMetadataManager).

Pure parts (no asyncio): ``state`` (the state table), ``group`` (ClassicGroup and its members),
``offsets`` (committed and pending transactional offsets), ``records`` (``__consumer_offsets``
key/value layouts), ``manager`` (the request logic, driven by an injected timer and writer).
``coordinator`` is the asyncio shell: timers, the log writer, loading at start-up, expiry.
"""
