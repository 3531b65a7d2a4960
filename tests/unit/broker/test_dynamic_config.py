"""broker.config.dynamic_config: which names may change dynamically and how values are checked."""

from __future__ import annotations

import pytest

from broker.config import dynamic_config
from protocol.errors import KafkaError


def test_validation_rules() -> None:
    dynamic_config.validate({"log.retention.ms": "1000", "num.io.threads": "4", "unknown.to.kafka": "x"}, True)
    for configs, per_broker, message in [
        ({"log.dirs": "/x"}, True, "Cannot update these configs dynamically: [log.dirs]"),
        ({"log.retention.ms": "soon"}, True, "Not a number of type LONG"),
        ({"ssl.keystore.location": "/k"}, True, "only per-listener"),
        ({"listener.name.plaintext.ssl.keystore.location": "/k"}, False, "broker id must be specified"),
        ({"sasl.kerberos.min.time.before.relogin": "58000"}, False, "broker id must be specified"),
    ]:
        with pytest.raises(KafkaError, match=message.replace("[", r"\[").replace("]", r"\]")):
            dynamic_config.validate(configs, per_broker)
    assert dynamic_config.resource_is_this_broker("", 1) is False
    with pytest.raises(KafkaError, match="Unexpected broker id, expected 1, but received 2"):
        dynamic_config.resource_is_this_broker("2", 1)
