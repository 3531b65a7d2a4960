"""CreateTopics (key 19), v2-7.

Each topic is validated and created independently (name, partitions, replication factor,
configs); ``validate_only`` runs every check and creates nothing. v5+ answers with the
resulting partition count, replication factor and the topic's full config list; v7 adds the
topic id. RF > 1 is accepted on this single node with a warning in the log (see controller).

The request's topics go into the cluster metadata with one durable write (Kafka's controller
writes one record batch); their logs are then made in slices that give the event loop back, so
a request for thousands of topics does not stall the other clients.

Authorization (ControllerApis.createTopics): CREATE on the cluster, else CREATE on each topic; the
refused topics are not created and are answered after everything else, TOPIC_AUTHORIZATION_FAILED
"Authorization failed.". A topic created (or validated) without DESCRIBE_CONFIGS on it answers
topic_config_error_code TOPIC_AUTHORIZATION_FAILED, no configs, and -1 partitions and replication
factor (ReplicationControlManager).
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from broker.cluster.controller import CLUSTER_METADATA_TOPIC, MAX_RECORDS_PER_BATCH, deadline_passed
from broker.cluster.metadata import TopicInfo
from broker.handlers.describe_configs import topic_config_entries
from broker.handlers.registry import api
from broker.net.context import RequestContext
from broker.security.checks import Operation, ResourceType, cluster_allowed, filter_allowed
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import ApiMessage, lazy_response

if TYPE_CHECKING:
    from broker.services import Services

Response = lazy_response(19)
Result = Response.CreatableTopicResult
ConfigEntry = Result.CreatableTopicConfigs
# the answer's config list, built once per distinct set of overrides (sorted (name, value) pairs)
ConfigLists = dict[tuple[tuple[str, str], ...], list[ApiMessage]]


def _too_large(broker: Services, topics: Sequence[ApiMessage]) -> str | None:
    """Kafka's message when the request's partitions, or its records (a topic record, one per partition,
    one per config), are more than one controller batch; checked for the whole request at once (a
    request for 100,000 once made this broker create directories until it ran out of descriptors)."""
    default = broker.config.get("num.partitions")
    partitions = [len(t.assignments) if t.assignments else t.num_partitions if t.num_partitions > 0 else default
                  for t in topics]
    if sum(partitions) > MAX_RECORDS_PER_BATCH:
        return "Excessively large number of partitions per request."
    if sum(1 + p + len(t.configs) for p, t in zip(partitions, topics, strict=True)) > MAX_RECORDS_PER_BATCH:
        return "Unable to perform excessively large batch operation."
    return None


def _failed(name: str, code: int, message: str | None) -> ApiMessage:
    return Result(name=name, error_code=code, error_message=message, topic_id=uuid.UUID(int=0),
                  num_partitions=-1, replication_factor=-1, configs=[])


@api(19, (2, 7))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage | Awaitable[ApiMessage]:
    broker = ctx.broker
    if deadline_passed(req.timeout_ms):  # the error answer covers every entry as sent, repeats included
        return Response(throttle_time_ms=0, topics=[_failed(t.name, ErrorCode.REQUEST_TIMED_OUT, None)
                                                    for t in req.topics])
    counts = Counter(t.name for t in req.topics)
    duplicated = [n for n, c in counts.items() if c > 1]
    # ControllerApis.createTopics: CREATE on the cluster, else on each topic (the refused ones are left
    # out and answered last); DESCRIBE_CONFIGS on each topic for the configs in its answer
    names = [n for n, c in counts.items() if c == 1 and n != CLUSTER_METADATA_TOPIC]
    refused: list[str] = []
    if not cluster_allowed(ctx, Operation.CREATE):
        creatable = filter_allowed(ctx, Operation.CREATE, ResourceType.TOPIC, names)
        refused = [n for n in names if n not in creatable]
    answer = Answer(duplicated, refused, filter_allowed(ctx, Operation.DESCRIBE_CONFIGS, ResourceType.TOPIC, names))
    too_large = _too_large(broker, [t for t in req.topics if t.name not in answer.left_out])
    results: list[ApiMessage] = []
    created: list[TopicInfo] = []
    configs_of: ConfigLists = {}
    if len(req.topics) <= TOPICS_PER_SLICE:
        with broker.metadata.batch():
            _create(broker, req, req.topics, answer, too_large, results, created, configs_of)
        if not created:
            return answer.response(results)
    return _create_in_slices(broker, req, answer, too_large, results, created, configs_of)


@dataclass(slots=True)
class Answer:
    """What the answer needs besides the creations: the repeated names, those refused CREATE (both
    left out of the creation), and those whose configs the client may see."""

    duplicated: list[str]
    refused: list[str]
    describable: set[str]
    left_out: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.left_out = set(self.duplicated) | set(self.refused)

    def response(self, results: list[ApiMessage]) -> ApiMessage:
        # as Kafka's ControllerApis: repeated names are left out of the creation and answered after it,
        # once; then the names refused CREATE
        results += [_failed(n, ErrorCode.INVALID_REQUEST, "Duplicate topic name.") for n in self.duplicated]
        results += [_failed(n, ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.") for n in self.refused]
        return Response(throttle_time_ms=0, topics=results)


TOPICS_PER_SLICE = 100  # topics made durable with one metadata write, between two returns to the loop


async def _create_in_slices(broker: Services, req: ApiMessage, answer: Answer, too_large: str | None,
                            results: list[ApiMessage], created: list[TopicInfo], configs_of: ConfigLists
                            ) -> ApiMessage:
    """Topics a slice at a time, each slice durable before its logs are made; then the logs."""
    done = len(results) + len(created)  # a small request came through the synchronous path already
    topics = req.topics
    for i in range(0 if not done else len(topics), len(topics), TOPICS_PER_SLICE):
        with broker.metadata.batch():
            _create(broker, req, topics[i:i + TOPICS_PER_SLICE], answer, too_large, results, created,
                    configs_of)
        await asyncio.sleep(0)
    await broker.controller.create_logs_in_slices(created)
    return answer.response(results)


def _create(broker: Services, req: ApiMessage, topics: Sequence[ApiMessage], answer: Answer,
            too_large: str | None, results: list[ApiMessage], created: list[TopicInfo],
            configs_of: ConfigLists) -> None:
    def _configs(broker: Services, overrides: dict[str, str]) -> list[ApiMessage]:
        key = tuple(sorted(overrides.items()))
        entries = configs_of.get(key)
        if entries is None:
            entries = configs_of[key] = _config_entries(broker, overrides)
        return entries

    for t in topics:
        if t.name in answer.left_out:
            continue
        if too_large:
            results.append(_failed(t.name, ErrorCode.POLICY_VIOLATION, too_large))
            continue
        configs = {c.name: c.value for c in t.configs}
        try:
            info = broker.controller.create_topic(
                t.name, t.num_partitions, t.replication_factor, configs,
                validate_only=req.validate_only, assignments=[a.broker_ids for a in t.assignments] or None,
                create_logs=False,
            )
        except KafkaError as e:
            results.append(_failed(t.name, e.code, e.message))
            continue
        if info is None:  # validate_only
            partitions = t.num_partitions if t.num_partitions > 0 else broker.config.get("num.partitions")
            rf = t.replication_factor if t.replication_factor > 0 else broker.config.get("default.replication.factor")
            results.append(_hidden(t.name, uuid.UUID(int=0)) if t.name not in answer.describable else
                           Result(name=t.name, error_code=0, error_message=None, topic_id=uuid.UUID(int=0),
                                  num_partitions=partitions, replication_factor=rf,
                                  configs=_configs(broker, configs)))
            continue
        created.append(info)
        results.append(_hidden(t.name, info.topic_id) if t.name not in answer.describable else Result(
            name=t.name, error_code=0, error_message=None, topic_id=info.topic_id,
            num_partitions=info.partitions,
            replication_factor=max(t.replication_factor, 1) if t.replication_factor != -1
            else broker.config.get("default.replication.factor"),
            configs=_configs(broker, info.configs),
        ))


def _hidden(name: str, topic_id: uuid.UUID) -> ApiMessage:
    """A topic made without DESCRIBE_CONFIGS on it: no configs, counts -1 (ReplicationControlManager)."""
    return Result(name=name, error_code=0, error_message=None, topic_id=topic_id, num_partitions=-1,
                  replication_factor=-1, configs=[], topic_config_error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)


def _config_entries(broker: Services, overrides: dict[str, str]) -> list[ApiMessage]:
    return [
        ConfigEntry(name=e.name, value=e.value, read_only=e.read_only, config_source=e.source,
                    is_sensitive=e.sensitive)
        for e in topic_config_entries(broker, overrides)
    ]
