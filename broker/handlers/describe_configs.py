"""DescribeConfigs (key 32), v1-4, for topics (type 2) and this broker (type 4).

Topic values resolve as Kafka does: the topic override (TOPIC_CONFIG), else the broker
property it derives from when set (this broker's dynamic config, the cluster's dynamic default,
then the static property), else Kafka's default (DEFAULT_CONFIG); ``include_synonyms`` lists
that chain. Broker values list the same layers, and the cluster-default resource ("") lists the
dynamic defaults that are set. A group (type 32) lists every group config Kafka has: the group's
override (GROUP_CONFIG), else the broker's group.* value it derives from (broker.config.group_configs).

Authorization (ConfigHelper.handleDescribeConfigsRequest): DESCRIBE_CONFIGS on the cluster for broker,
broker-logger and client-metrics resources, on the topic (before its existence) or on the group for
the others; the refused resources come after the others' results, with CLUSTER_/TOPIC_/
GROUP_AUTHORIZATION_FAILED, the error's default message and no configs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from broker.cluster.metadata import validate_topic_name
from broker.config import dynamic_config, group_configs
from broker.config.broker_config import BROKER_CONFIGS, BrokerConfig
from broker.handlers.registry import api
from broker.net.context import RequestContext
from broker.security.checks import Operation, ResourceType, allowed, cluster_allowed
from protocol.error_messages import default_message
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import ApiMessage, lazy_response
from storage.log_config import INTERNAL_TOPIC_CONFIGS, TOPIC_CONFIGS, format_config_value

if TYPE_CHECKING:
    from broker.services import Services

Response = lazy_response(32)
Result = Response.DescribeConfigsResult
Entry = Result.DescribeConfigsResourceResult
Synonym = Entry.DescribeConfigsSynonym

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_BROKER_LOGGER = 8
RESOURCE_GROUP = 32
SOURCE_TOPIC = 1
SOURCE_DYNAMIC_BROKER = 2
SOURCE_DYNAMIC_DEFAULT = 3
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5
SOURCE_GROUP = 8
SOURCES = {"DYNAMIC_BROKER_CONFIG": SOURCE_DYNAMIC_BROKER, "DYNAMIC_DEFAULT_BROKER_CONFIG": SOURCE_DYNAMIC_DEFAULT,
           "STATIC_BROKER_CONFIG": SOURCE_STATIC_BROKER, "DEFAULT_CONFIG": SOURCE_DEFAULT}
# DynamicBrokerConfig.brokerConfigSynonyms: the names one value can be given by, most specific first
_FAMILIES = (("log.roll.ms", "log.roll.hours"), ("log.roll.jitter.ms", "log.roll.jitter.hours"),
             ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
             ("log.retention.ms", "log.retention.minutes", "log.retention.hours"))
BROKER_SYNONYMS = {name: family for family in _FAMILIES for name in family}
_LAYERS = ("DYNAMIC_BROKER_CONFIG", "DYNAMIC_DEFAULT_BROKER_CONFIG", "STATIC_BROKER_CONFIG", "DEFAULT_CONFIG")
CONFIG_TYPES = {"boolean": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6, "list": 7,
                "class": 8, "password": 9}


SynonymRow = tuple[str, str | None, int]  # (name, value, source)


@dataclass(slots=True)
class ConfigValue:
    name: str
    value: str | None
    source: int
    type: str
    read_only: bool = False
    sensitive: bool = False
    synonyms: list[SynonymRow] = field(default_factory=list)
    documentation: str | None = None


def _fmt(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def config_synonyms(config: BrokerConfig, name: str, family: tuple[str, ...],
                    sensitive: bool = False) -> list[SynonymRow]:
    """ConfigHelper.configSynonyms: the family's values layer by layer (this broker's dynamic
    configs, the cluster's dynamic defaults, the static properties, Kafka's defaults), then
    everything before the first entry for ``name`` dropped (log.retention.hours alone for itself,
    but under log.retention.ms when that is set)."""
    by_name = {n: {src: v for v, src in config.layers(n)} for n in family}
    out = [(n, None if sensitive else _fmt(by_name[n][src]), SOURCES[src])
           for src in _LAYERS for n in family if src in by_name[n]]
    while out and out[0][0] != name:
        out.pop(0)
    return out


def topic_config_entries(broker: Services, overrides: Mapping[str, str]) -> list[ConfigValue]:
    """Kafka's ConfigHelper.createTopicConfigEntry: the topic override, then the synonyms of the
    broker property the config derives from; the source is the first synonym's."""
    defaults = broker.config.topic_defaults()
    out = []
    for name, d in TOPIC_CONFIGS.items():
        broker_names = d.broker_synonyms or ((d.broker_synonym,) if d.broker_synonym else ())
        synonyms = config_synonyms(broker.config, broker_names[0], broker_names) if broker_names else []
        if name in overrides:
            synonyms.insert(0, (name, overrides[name], SOURCE_TOPIC))
            value = overrides[name]
        else:
            value = defaults.get(name, format_config_value(name, d.default))
        source = synonyms[0][2] if synonyms else SOURCE_DEFAULT
        out.append(ConfigValue(name, _fmt(value), source, d.type, False, False, synonyms))
    for name, d in INTERNAL_TOPIC_CONFIGS.items():  # listed only when set, as Kafka lists them
        if name in overrides:
            out.append(ConfigValue(name, _fmt(overrides[name]), SOURCE_TOPIC, d.type, False, False,
                                   [(name, overrides[name], SOURCE_TOPIC)]))
    return out


def broker_config_entries(broker: Services) -> list[ConfigValue]:
    """ConfigHelper.createBrokerConfigEntry: the value of the name itself, the source of the first
    synonym (its family's layers, highest first); read-only unless Kafka can change it dynamically."""
    config = broker.config
    out = []
    for name, value, _source in config.items():
        d = BROKER_CONFIGS.get(name)
        sensitive = d.sensitive if d is not None else dynamic_config.is_sensitive(name)
        family = BROKER_SYNONYMS.get(name, (name,))
        base = dynamic_config.LISTENER_CONFIG.fullmatch(name)
        if base:  # listener.name.<l>.<config>: the base config's values follow (brokerConfigSynonyms)
            family = (name, base.group(1))
        synonyms = config_synonyms(config, name, family, sensitive)
        source = synonyms[0][2] if synonyms else SOURCE_DEFAULT
        kind = d.type if d is not None else (dynamic_config.kind_of(name) or "unknown")
        out.append(ConfigValue(name, None if sensitive else _fmt(value), source, kind,
                               name not in dynamic_config.DYNAMIC, sensitive, synonyms))
    return out


def cluster_default_entries(broker: Services) -> list[ConfigValue]:
    """The cluster-default resource ("") lists only the dynamic defaults that are set."""
    out = []
    for name, value in sorted(broker.config.dynamic_default.items()):
        d = BROKER_CONFIGS.get(name)
        sensitive = d.sensitive if d is not None else dynamic_config.is_sensitive(name)
        kind = d.type if d is not None else (dynamic_config.kind_of(name) or "unknown")
        shown = None if sensitive else value
        out.append(ConfigValue(name, shown, SOURCE_DYNAMIC_DEFAULT, kind, name not in dynamic_config.DYNAMIC,
                               sensitive, [(name, shown, SOURCE_DYNAMIC_DEFAULT)]))
    return out


def group_config_entries(broker: Services, overrides: Mapping[str, str]) -> list[ConfigValue]:
    """ConfigHelper.createGroupConfigEntry: the group's override (GROUP_CONFIG), then the broker
    property it derives from (its layers), else the config itself at Kafka's default."""
    out = []
    for name in group_configs.DESCRIBE_ORDER:
        d = group_configs.GROUP_CONFIGS[name]
        synonyms = []
        if d.broker_synonym:
            synonyms = config_synonyms(broker.config, d.broker_synonym, (d.broker_synonym,))
            if not synonyms:  # a broker property this broker's BrokerConfig does not define
                synonyms = [(d.broker_synonym, str(group_configs.broker_value(broker.config, d.broker_synonym)),
                             SOURCE_DEFAULT)]
        else:
            synonyms = [(name, d.default, SOURCE_DEFAULT)]
        if name in overrides:
            synonyms.insert(0, (name, group_configs.to_string(name, overrides[name]), SOURCE_GROUP))
        out.append(ConfigValue(name, synonyms[0][1], synonyms[0][2], d.type, False, False, synonyms, d.doc))
    return out


def _entries(values: list[ConfigValue], keys: Iterable[str] | None, version: int, synonyms: bool,
             documentation: bool = False) -> list[ApiMessage]:
    wanted = set(keys) if keys else None  # Kafka: null or empty asks for every config
    return [
        Entry(
            name=v.name, value=v.value, read_only=v.read_only, config_source=v.source,
            is_default=v.source == SOURCE_DEFAULT, is_sensitive=v.sensitive,
            synonyms=[Synonym(name=n, value=val, source=s) for n, val, s in v.synonyms] if synonyms else [],
            config_type=CONFIG_TYPES.get(v.type, 0), documentation=v.documentation if documentation else None,
        )
        for v in values
        if wanted is None or v.name in wanted
    ]


def _broker_name_error(name: str, node_id: int) -> str | None:
    """ConfigHelper: "" is the cluster default; else an integer (Integer.parseInt) that is this node."""
    if name == "":
        return None
    if not dynamic_config.INTEGER.fullmatch(name):
        return f"Broker id must be an integer, but it is: {name}"
    if int(name) != node_id:
        return f"Unexpected broker id, expected {node_id} or empty string, but received {name}"
    return None


RESOURCE_CLIENT_METRICS = 16


def _refusal(ctx: RequestContext, resource_type: int, name: str) -> ErrorCode | None:
    """ConfigHelper: DESCRIBE_CONFIGS on the cluster, the topic or the group, else the error."""
    if resource_type in (RESOURCE_BROKER, RESOURCE_BROKER_LOGGER, RESOURCE_CLIENT_METRICS):
        return None if cluster_allowed(ctx, Operation.DESCRIBE_CONFIGS) else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    if resource_type == RESOURCE_TOPIC:
        return None if allowed(ctx, Operation.DESCRIBE_CONFIGS, ResourceType.TOPIC, name) \
            else ErrorCode.TOPIC_AUTHORIZATION_FAILED
    if resource_type == RESOURCE_GROUP:
        return None if allowed(ctx, Operation.DESCRIBE_CONFIGS, ResourceType.GROUP, name) \
            else ErrorCode.GROUP_AUTHORIZATION_FAILED
    return None  # not a config resource: answered below


@api(32, (1, 4))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage:
    broker = ctx.broker
    results = []
    refused = []
    for r in req.resources:
        base = {"resource_type": r.resource_type, "resource_name": r.resource_name}
        # ConfigHelper.handleDescribeConfigsRequest: DESCRIBE_CONFIGS first; the refused ones come last
        if (denied := _refusal(ctx, r.resource_type, r.resource_name)) is not None:
            refused.append(Result(error_code=denied, error_message=default_message(denied), configs=[], **base))
            continue
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
            error = _broker_name_error(r.resource_name, broker.node_id)
            if error is not None:
                results.append(Result(error_code=ErrorCode.INVALID_REQUEST, error_message=error, configs=[], **base))
                continue
            values = broker_config_entries(broker) if r.resource_name else cluster_default_entries(broker)
        elif r.resource_type == RESOURCE_BROKER_LOGGER:
            values = []
        elif r.resource_type == RESOURCE_GROUP:
            if not r.resource_name:
                results.append(Result(error_code=ErrorCode.INVALID_REQUEST, error_message="Group name must not be empty",
                                      configs=[], **base))
                continue
            values = group_config_entries(broker, broker.metadata.group_configs.get(r.resource_name, {}))
        else:
            results.append(Result(error_code=ErrorCode.INVALID_REQUEST,
                                  error_message=f"Unsupported resource type {r.resource_type}", configs=[], **base))
            continue
        results.append(Result(error_code=0, error_message="",
                              configs=_entries(values, r.configuration_keys, ctx.api_version,
                                               bool(getattr(req, "include_synonyms", False)),
                                               bool(getattr(req, "include_documentation", False))), **base))
    return Response(throttle_time_ms=0, results=results + refused)
