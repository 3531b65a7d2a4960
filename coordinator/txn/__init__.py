"""The transaction coordinator: per-transactional-id state in ``__transaction_state``, the
state machine, timeouts and expiry, and the marker channel to the partition leaders.

Kafka's split, kept here: ``state`` is TransactionMetadata (pure state machine), ``records`` the
TransactionLogKey/Value codec, ``state_manager`` TransactionStateManager (the log, loading,
durability), ``coordinator`` TransactionCoordinator (request logic), ``marker_channel``
TransactionMarkerChannelManager (markers, then the Complete* write).
"""
