"""Data pipelines that run on the broker with stock clients (PySpark Structured Streaming).

pipelines.job        the exactly-once windowed-aggregates job (``python -m pipelines --help``)
pipelines.events     event schema, validation and the aggregation (Spark SQL)
pipelines.kafka_sink transactional foreachBatch sink with progress records
pipelines.jars       Maven fetch + cache of Spark's Kafka connector jars
"""
