"""Apache Kafka 4.3.1's JSON message specs of the coordinator records, as its jars ship them:
``__transaction_state`` (kafka-transaction-coordinator-4.3.1.jar: TransactionLog*),
``__consumer_offsets`` (kafka-group-coordinator-4.3.1.jar: offsets, classic, consumer, share and
streams group records) and the consumer protocol's subscription and assignment
(kafka-clients-4.3.1.jar: ConsumerProtocol*). ``broker.inspect.message_spec`` reads them, so the
decoded views follow Kafka's own field names, versions and order."""
