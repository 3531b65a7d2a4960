"""The configuration room: the broker's properties as Kafka names them (``broker_config``), Kafka's
own catalogue of broker configs (``kafka_defaults``), dynamic broker configs (``dynamic_config``),
group configs (``group_configs``) and finalized feature levels (``features``)."""
