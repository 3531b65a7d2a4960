"""DescribeConfigs (key 32), v1-4, for topics (type 2) and this broker (type 4).

Topic values resolve as Kafka does: the topic override (TOPIC_CONFIG), else the broker
property it derives from when set (STATIC_BROKER_CONFIG), else Kafka's default
(DEFAULT_CONFIG); ``include_synonyms`` lists that chain.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.config import BROKER_CONFIGS
from broker.handlers.registry import api
from broker.metadata import validate_topic_name
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import lazy_response
from storage.log_config import TOPIC_CONFIGS, format_config_value

Response = lazy_response(32)
Result = Response.DescribeConfigsResult
Entry = Result.DescribeConfigsResourceResult
Synonym = Entry.DescribeConfigsSynonym

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_BROKER_LOGGER = 8
SOURCE_TOPIC = 1
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5
CONFIG_TYPES = {"boolean": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6, "list": 7,
                "class": 8, "password": 9}


@dataclass(slots=True)
class ConfigValue:
    name: str
    value: str | None
    source: int
    type: str
    read_only: bool = False
    sensitive: bool = False
    synonyms: list[tuple[str, str | None, int]] = field(default_factory=list)


def _fmt(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def topic_config_entries(broker, overrides: dict[str, str]) -> list[ConfigValue]:
    """Kafka's ConfigHelper.createTopicConfigEntry: synonyms list the topic override, each broker
    property it derives from that is set, then the primary broker property's default if it has
    one (log.roll.ms, log.retention.ms ... default to null and are not listed)."""
    defaults = broker.config.topic_defaults()
    out = []
    for name, d in TOPIC_CONFIGS.items():
        synonyms: list[tuple[str, str | None, int]] = []
        if name in overrides:
            synonyms.append((name, overrides[name], SOURCE_TOPIC))
        broker_names = d.broker_synonyms or ((d.broker_synonym,) if d.broker_synonym else ())
        set_names = [n for n in broker_names if broker.config.is_set(n)]
        synonyms += [(n, _fmt(broker.config.get(n)), SOURCE_STATIC_BROKER) for n in set_names]
        primary = BROKER_CONFIGS.get(broker_names[0]) if broker_names else None
        if primary is not None and primary.default is not None:  # as Kafka: null defaults are not listed
            synonyms.append((primary.name, _fmt(primary.default), SOURCE_DEFAULT))
        default = format_config_value(name, d.default)
        if name in overrides:
            value, source = overrides[name], SOURCE_TOPIC
        elif set_names:
            value, source = defaults.get(name, default), SOURCE_STATIC_BROKER
        else:
            value, source = defaults.get(name, default), SOURCE_DEFAULT
        out.append(ConfigValue(name, _fmt(value), source, d.type, False, False, synonyms))
    return out


def broker_config_entries(broker) -> list[ConfigValue]:
    out = []
    for name, value, source in broker.config.items():
        d = BROKER_CONFIGS[name]
        src = SOURCE_STATIC_BROKER if source != "DEFAULT_CONFIG" else SOURCE_DEFAULT
        out.append(ConfigValue(name, _fmt(value), src, d.type, d.read_only, d.sensitive,
                               [(name, _fmt(value), src)]))
    return out


def _entries(values: list[ConfigValue], keys, version: int, synonyms: bool) -> list:
    wanted = None if keys is None else set(keys)
    return [
        Entry(
            name=v.name, value=v.value, read_only=v.read_only, config_source=v.source,
            is_default=v.source == SOURCE_DEFAULT, is_sensitive=v.sensitive,
            synonyms=[Synonym(name=n, value=val, source=s) for n, val, s in v.synonyms] if synonyms else [],
            config_type=CONFIG_TYPES.get(v.type, 0), documentation=None,
        )
        for v in values
        if wanted is None or v.name in wanted
    ]


@api(32, (1, 4))
def handle(ctx, req):
    broker = ctx.broker
    results = []
    for r in req.resources:
        base = {"resource_type": r.resource_type, "resource_name": r.resource_name}
        if r.resource_type == RESOURCE_TOPIC:
            try:
                validate_topic_name(r.resource_name)  # Kafka: Topic.validate first, INVALID_TOPIC_EXCEPTION
            except KafkaError as e:
                results.append(Result(error_code=e.code, error_message=e.message, configs=[], **base))
                continue
            info = broker.metadata.get(r.resource_name)
            if info is None:
                results.append(Result(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                      error_message=f"Topic {r.resource_name} does not exist", configs=[], **base))
                continue
            values = topic_config_entries(broker, info.configs)
        elif r.resource_type == RESOURCE_BROKER:
            if r.resource_name not in ("", str(broker.node_id)):
                results.append(Result(error_code=ErrorCode.INVALID_REQUEST,
                                      error_message=f"Unexpected broker id, expected {broker.node_id} but received "
                                                    f"{r.resource_name}", configs=[], **base))
                continue
            # The empty name is the cluster-wide default resource: Kafka lists only the dynamically set
            # cluster defaults there, and this broker has no dynamic broker configs.
            values = broker_config_entries(broker) if r.resource_name else []
        elif r.resource_type == RESOURCE_BROKER_LOGGER:
            values = []
        else:
            results.append(Result(error_code=ErrorCode.INVALID_REQUEST,
                                  error_message=f"Unsupported resource type {r.resource_type}", configs=[], **base))
            continue
        results.append(Result(error_code=0, error_message=None,
                              configs=_entries(values, r.configuration_keys, ctx.api_version,
                                               bool(getattr(req, "include_synonyms", False))), **base))
    return Response(throttle_time_ms=0, results=results)
