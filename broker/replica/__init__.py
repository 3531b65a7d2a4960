"""The replica room: the partitions this node leads (``replica_manager``, the broker's
``PartitionWriter``), Produce's record validation (``produce_validation``), KIP-227 fetch sessions
(``fetch_sessions``), the partition leader's side of transactions: markers written by the
in-process marker channel (``txn_markers``) and KIP-890 verification (``txn_verification``)."""
