"""Apache Kafka's JSON message specs for versions newer than kafka-python ships (copied verbatim
from the kafka-clients jar named in protocol/newer_messages.py; Apache License 2.0)."""
