"""librdkafka's transactional calls as its C tests see them: the rd_kafka_error_t they return."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, KafkaException


def error_of(call: Callable[..., Any], *args: Any) -> KafkaError | None:
    """The rd_kafka_error_t a transactional call returns (None: success); confluent-kafka raises
    it in a KafkaException."""
    try:
        call(*args)
    except KafkaException as e:
        return e.args[0]
    return None
