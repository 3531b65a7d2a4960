"""CreateTopics (key 19), v2-7.

Each topic is validated and created independently (name, partitions, replication factor,
configs); ``validate_only`` runs every check and creates nothing. v5+ answers with the
resulting partition count, replication factor and the topic's full config list; v7 adds the
topic id. RF > 1 is accepted on this single node with a warning in the log (see controller).

The request's topics go into the cluster metadata with one durable write (Kafka's controller
writes one record batch); their logs are then made in slices that give the event loop back, so
a request for thousands of topics does not stall the other clients.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING

from broker.cluster.controller import MAX_RECORDS_PER_BATCH, deadline_passed
from broker.cluster.metadata import TopicInfo
from broker.handlers.describe_configs import topic_config_entries
from broker.handlers.registry import api
from broker.net.context import RequestContext
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
    too_large = _too_large(broker, [t for t in req.topics if t.name not in duplicated])
    results: list[ApiMessage] = []
    created: list[TopicInfo] = []
    configs_of: ConfigLists = {}
    if len(req.topics) <= TOPICS_PER_SLICE:
        with broker.metadata.batch():
            _create(broker, req, req.topics, duplicated, too_large, results, created, configs_of)
        if not created:
            return _answer(results, duplicated)
    return _create_in_slices(broker, req, duplicated, too_large, results, created, configs_of)


def _answer(results: list[ApiMessage], duplicated: list[str]) -> ApiMessage:
    # as Kafka's ControllerApis: repeated names are left out of the creation and answered after it, once
    results += [_failed(n, ErrorCode.INVALID_REQUEST, "Duplicate topic name.") for n in duplicated]
    return Response(throttle_time_ms=0, topics=results)


TOPICS_PER_SLICE = 100  # topics made durable with one metadata write, between two returns to the loop


async def _create_in_slices(broker: Services, req: ApiMessage, duplicated: list[str], too_large: str | None,
                            results: list[ApiMessage], created: list[TopicInfo], configs_of: ConfigLists
                            ) -> ApiMessage:
    """Topics a slice at a time, each slice durable before its logs are made; then the logs."""
    done = len(results) + len(created)  # a small request came through the synchronous path already
    topics = req.topics
    for i in range(0 if not done else len(topics), len(topics), TOPICS_PER_SLICE):
        with broker.metadata.batch():
            _create(broker, req, topics[i:i + TOPICS_PER_SLICE], duplicated, too_large, results, created,
                    configs_of)
        await asyncio.sleep(0)
    await broker.controller.create_logs_in_slices(created)
    return _answer(results, duplicated)


def _create(broker: Services, req: ApiMessage, topics: Sequence[ApiMessage], duplicated: list[str],
            too_large: str | None, results: list[ApiMessage], created: list[TopicInfo],
            configs_of: ConfigLists) -> None:
    def _configs(broker: Services, overrides: dict[str, str]) -> list[ApiMessage]:
        key = tuple(sorted(overrides.items()))
        entries = configs_of.get(key)
        if entries is None:
            entries = configs_of[key] = _config_entries(broker, overrides)
        return entries

    for t in topics:
        if t.name in duplicated:
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
            results.append(Result(name=t.name, error_code=0, error_message=None, topic_id=uuid.UUID(int=0),
                                  num_partitions=partitions, replication_factor=rf,
                                  configs=_configs(broker, configs)))
            continue
        created.append(info)
        results.append(Result(
            name=t.name, error_code=0, error_message=None, topic_id=info.topic_id,
            num_partitions=info.partitions,
            replication_factor=max(t.replication_factor, 1) if t.replication_factor != -1
            else broker.config.get("default.replication.factor"),
            configs=_configs(broker, info.configs),
        ))


def _config_entries(broker: Services, overrides: dict[str, str]) -> list[ApiMessage]:
    return [
        ConfigEntry(name=e.name, value=e.value, read_only=e.read_only, config_source=e.source,
                    is_sensitive=e.sensitive)
        for e in topic_config_entries(broker, overrides)
    ]
