"""The group coordinator (``group``), the transaction coordinator (``txn``) and producer ids,
given what they need through the ports of ``runtime`` (Kafka's PartitionWriter, an environment
with config, clock and metrics); they never import the broker."""
