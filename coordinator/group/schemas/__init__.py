"""Apache Kafka 4.3.1's JSON schemas of the KIP-848 consumer group records (kafka-group-coordinator-4.3.1.jar)."""
