"""The ground floor, sans-IO: Kafka's wire format (framing, headers, messages, record batches,
the fast Produce/Fetch codecs), record parsing and compression codecs, and the error codes
(``errors``: the one ``KafkaError`` base and ``error_code_of``)."""
