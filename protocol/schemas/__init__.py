"""Apache Kafka's JSON message specs for versions newer than kafka-python ships (copied verbatim
from kafka-clients-4.4.0.jar common/message; Apache License 2.0), read by protocol.newer."""
