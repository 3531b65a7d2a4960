"""Kafka's error answer to any request: what ``AbstractRequest.getErrorResponse(throttle, e)`` of
each request class builds, so a fault rule's error reaches the client exactly where a real error
would. The error goes where Kafka's puts it: on every partition the request names (Produce,
ListOffsets, OffsetCommit, TxnOffsetCommit, AddPartitionsToTxn v0-3 ...), on every group or key
it names (DescribeGroups, FindCoordinator v4+, OffsetFetch v8+ ...), or at the top
(InitProducerId, EndTxn, JoinGroup ...), with the other fields at Kafka's "unknown" values. The
code is first mapped to what the request's version knows (``protocol.error_versions``).

``ERROR_ANSWERS`` lists the APIs that can be answered so; a rule naming another API may only
delay, drop or close.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker.control.request_keys import TopicNamer
from broker.net.context import NO_RESPONSE, RawResponse
from protocol.error_messages import default_message
from protocol.error_versions import for_version
from protocol.errors import ErrorCode
from protocol.fetch_codec import (
    FetchPartitionResponse,
    FetchRequestView,
    FetchTopicResponse,
    encode_fetch_response,
)
from protocol.messages import response_class
from protocol.produce_codec import (
    ProducePartitionResponse,
    ProduceRequestView,
    ProduceTopicResponse,
    encode_produce_response,
)

Builder = Callable[[Any, int, int, TopicNamer], Any]


def _item(cls: Any, *path: str) -> Any:
    """The class of the elements of the (nested) array field ``path`` of message class ``cls``."""
    for name in path:
        cls = cls.fields[name].array_of
    return cls


def _named(t: Any) -> dict[str, Any]:
    """A topic entry's name and id, as the request gave them."""
    out: dict[str, Any] = {}
    if getattr(t, "name", None) is not None:
        out["name"] = t.name
    if getattr(t, "topic_id", None) is not None:
        out["topic_id"] = t.topic_id
    return out


def _partition_list(t: Any, *names: str) -> list[int]:
    for name in names:
        items = getattr(t, name, None)
        if isinstance(items, list):
            return [p if isinstance(p, int) else next(getattr(p, f) for f in ("partition_index", "partition", "index")
                                                       if getattr(p, f, None) is not None) for p in items]
    return []


# --- the hot APIs, through their own codecs -----------------------------------------------------

def _produce(req: ProduceRequestView, version: int, code: int, namer: TopicNamer) -> Any:
    """ProduceRequest.getErrorResponse: every partition, base offset -1. acks=0 gets no answer:
    Kafka closes the connection of an acks=0 producer whose request failed."""
    if req.acks == 0:
        return NO_RESPONSE
    topics = [ProduceTopicResponse(t.name, t.topic_id, [ProducePartitionResponse(p.index, code, -1, -1, -1)
                                                         for p in t.partitions]) for t in req.topics]
    body = encode_produce_response(version, topics)
    return RawResponse([body], len(body))


def _fetch(req: FetchRequestView, version: int, code: int, namer: TopicNamer) -> Any:
    """FetchRequest.getErrorResponse: the top-level error, and below v13 also every partition
    (high watermark, LSO and log start -1, no records)."""
    topics = []
    if version < 13:
        topics = [FetchTopicResponse(t.name, t.topic_id, [
            FetchPartitionResponse(p.partition, code, -1, -1, -1, None, -1, b"") for p in t.partitions])
            for t in req.topics]
    encoded = encode_fetch_response(version, topics=topics, error_code=code, session_id=req.session_id)
    return RawResponse(list(encoded.buffers), encoded.size)


# --- everything else, with kafka-python's classes --------------------------------------------

def _top(**extra: Any) -> Builder:
    """The error at the top level (and Kafka's unknown values for ``extra`` fields)."""
    def build(req: Any, version: int, code: int, namer: TopicNamer, key: int = 0) -> Any:
        return response_class(key)(error_code=code, **extra)
    return build


def _topics_partitions(key: int, topics: str, partitions: str, part_key: str, topic_key: str = "name",
                       req_parts: tuple[str, ...] = ("partitions", "partition_indexes"),
                       **fields: Any) -> Builder:
    def build(req: Any, version: int, code: int, namer: TopicNamer) -> Any:
        cls = response_class(key)
        topic_cls, part_cls = _item(cls, topics), _item(cls, topics, partitions)
        out = []
        for t in getattr(req, topics) or []:
            ident = _named(t) if topic_key == "name" else {topic_key: getattr(t, topic_key)}
            parts = [part_cls(**{part_key: p, "error_code": code, **fields}) for p in _partition_list(t, *req_parts)]
            out.append(topic_cls(**ident, **{partitions: parts}))
        return cls(**{topics: out})
    return build


def _metadata(req: Any, version: int, code: int, namer: TopicNamer) -> Any:
    """MetadataRequest.getErrorResponse: each requested topic with the error, no brokers; the top
    level too from v13 (so a request for every topic answers no error at all before v13)."""
    cls = response_class(3)
    topic_cls = _item(cls, "topics")
    topics = [topic_cls(error_code=code, name=t.name or "", **({"topic_id": t.topic_id} if t.topic_id else {}),
                        is_internal=False, partitions=[]) for t in (req.topics or [])]
    return cls(topics=topics, brokers=[], **({"error_code": code} if version >= 13 else {}))


def _offset_fetch(req: Any, version: int, code: int, namer: TopicNamer) -> Any:
    """OffsetFetchRequest.getErrorResponse: v8+ each group; v2-7 the top-level error; v0-1 every
    requested partition (offset -1)."""
    cls = response_class(9)
    if version >= 8:
        group_cls = _item(cls, "groups")
        return cls(groups=[group_cls(group_id=g.group_id, error_code=code, topics=[]) for g in req.groups])
    if version >= 2:
        return cls(error_code=code, topics=[])
    topic_cls, part_cls = _item(cls, "topics"), _item(cls, "topics", "partitions")
    return cls(topics=[topic_cls(name=t.name, partitions=[
        part_cls(partition_index=p, committed_offset=-1, metadata="", error_code=code)
        for p in t.partition_indexes]) for t in (req.topics or [])])


def _find_coordinator(req: Any, version: int, code: int, namer: TopicNamer) -> Any:
    """FindCoordinatorRequest.getErrorResponse: v4+ each key; below, the top level; node -1, and
    the error's default text as the message."""
    cls = response_class(10)
    message = default_message(code)
    if version >= 4:
        item = _item(cls, "coordinators")
        return cls(coordinators=[item(key=k, node_id=-1, host="", port=-1, error_code=code, error_message=message)
                                 for k in req.coordinator_keys])
    return cls(error_code=code, error_message=message, node_id=-1, host="", port=-1)


def _groups(key: int, array: str, request_array: str, **fields: Any) -> Builder:
    def build(req: Any, version: int, code: int, namer: TopicNamer) -> Any:
        cls = response_class(key)
        item = _item(cls, array)
        return cls(**{array: [item(group_id=g, error_code=code, **fields) for g in getattr(req, request_array)]})
    return build


def _add_partitions(req: Any, version: int, code: int, namer: TopicNamer) -> Any:
    """AddPartitionsToTxnRequest.getErrorResponse: v4+ the top-level error; v0-3 every partition."""
    cls = response_class(24)
    if version >= 4:
        return cls(error_code=code, results_by_transaction=[])
    topic_cls = _item(cls, "results_by_topic_v3_and_below")
    part_cls = _item(cls, "results_by_topic_v3_and_below", "results_by_partition")
    return cls(results_by_topic_v3_and_below=[
        topic_cls(name=t.name, results_by_partition=[part_cls(partition_index=p, partition_error_code=code)
                                                     for p in t.partitions])
        for t in req.v3_and_below_topics])


def _write_txn_markers(req: Any, version: int, code: int, namer: TopicNamer) -> Any:
    cls = response_class(27)
    marker_cls = _item(cls, "markers")
    topic_cls, part_cls = _item(cls, "markers", "topics"), _item(cls, "markers", "topics", "partitions")
    return cls(markers=[marker_cls(producer_id=m.producer_id, topics=[
        topic_cls(name=t.name, partitions=[part_cls(partition_index=p, error_code=code) for p in t.partition_indexes])
        for t in m.topics]) for m in req.markers])


def _describe_transactions(req: Any, version: int, code: int, namer: TopicNamer) -> Any:
    """Each transactional id with the error; its other fields at the schema's zeros."""
    cls = response_class(65)
    item = _item(cls, "transaction_states")
    return cls(transaction_states=[item(error_code=code, transactional_id=t, transaction_state="",
                                        transaction_timeout_ms=0, transaction_start_time_ms=0, producer_id=0,
                                        producer_epoch=0, topics=[]) for t in req.transactional_ids])


def _topics_with_error(key: int, array: str, request_array: str, name_field: str = "name",
                       **fields: Any) -> Builder:
    """An entry per topic named in ``request_array``, carrying the error (CreateTopics,
    DeleteTopics, CreatePartitions)."""
    def build(req: Any, version: int, code: int, namer: TopicNamer) -> Any:
        cls = response_class(key)
        item = _item(cls, array)
        out = []
        for t in getattr(req, request_array) or []:
            name = t if isinstance(t, str) else getattr(t, name_field, None)
            entry = {"name": name, "error_code": code, **fields}
            if not isinstance(t, str) and getattr(t, "topic_id", None) is not None:
                entry["topic_id"] = t.topic_id
            out.append(item(**entry))
        return cls(**{array: out})
    return build


def _describe_configs(req: Any, version: int, code: int, namer: TopicNamer) -> Any:
    """Each resource with the error and its default text."""
    cls = response_class(32)
    item = _item(cls, "results")
    return cls(results=[item(error_code=code, error_message=default_message(code), resource_type=r.resource_type,
                             resource_name=r.resource_name, configs=[]) for r in req.resources])


def _alter_configs(key: int) -> Builder:
    """AlterConfigs / IncrementalAlterConfigs: each resource with the error."""
    def build(req: Any, version: int, code: int, namer: TopicNamer) -> Any:
        cls = response_class(key)
        item = _item(cls, "responses")
        return cls(responses=[item(error_code=code, error_message=None, resource_type=r.resource_type,
                                   resource_name=r.resource_name) for r in req.resources])
    return build


def _elect_leaders(req: Any, version: int, code: int, namer: TopicNamer) -> Any:
    """Each named partition with the error, and from v1 the top level too."""
    cls = response_class(43)
    topic_cls, part_cls = _item(cls, "replica_election_results"), _item(cls, "replica_election_results",
                                                                         "partition_result")
    results = [topic_cls(topic=t.topic, partition_result=[part_cls(partition_id=p, error_code=code,
                                                                    error_message=None) for p in t.partitions])
               for t in (req.topic_partitions or [])]
    return cls(replica_election_results=results, **({"error_code": code} if version >= 1 else {}))


def _delete_topics(req: Any, version: int, code: int, namer: TopicNamer) -> Any:
    """Each topic: by name up to v5, by name and id from v6."""
    cls = response_class(20)
    item = _item(cls, "responses")
    if version >= 6:
        return cls(responses=[item(name=t.name, topic_id=t.topic_id, error_code=code, error_message=None)
                              for t in req.topics])
    return cls(responses=[item(name=name, error_code=code) for name in req.topic_names])


def _describe_topic_partitions(req: Any, version: int, code: int, namer: TopicNamer) -> Any:
    cls = response_class(75)
    item = _item(cls, "topics")
    return cls(topics=[item(error_code=code, name=t.name, is_internal=False, partitions=[]) for t in req.topics],
               next_cursor=None)


def _join_group(req: Any, version: int, code: int, namer: TopicNamer) -> Any:
    """The top level; the protocol name "" before v7 and null from v7."""
    return response_class(11)(error_code=code, generation_id=-1, protocol_name=None if version >= 7 else "",
                              leader="", member_id="", members=[])


def _with_key(key: int, builder: Callable[..., Any]) -> Builder:
    return lambda req, version, code, namer: builder(req, version, code, namer, key)


#: API key -> how Kafka answers a request of it with an error
ERROR_ANSWERS: dict[int, Builder] = {
    0: _produce,
    1: _fetch,
    2: _topics_partitions(2, "topics", "partitions", "partition_index", timestamp=-1, offset=-1, leader_epoch=-1),
    3: _metadata,
    8: _topics_partitions(8, "topics", "partitions", "partition_index"),
    9: _offset_fetch,
    10: _find_coordinator,
    11: _join_group,
    12: _with_key(12, _top()),
    13: _with_key(13, _top()),
    14: _with_key(14, _top(assignment=b"")),
    15: _groups(15, "groups", "groups", group_state="", protocol_type="", protocol_data="", members=[]),
    16: _with_key(16, _top(groups=[])),
    19: _topics_with_error(19, "topics", "topics", error_message=None),
    17: _with_key(17, _top(mechanisms=[])),
    20: _delete_topics,
    21: _topics_partitions(21, "topics", "partitions", "partition_index", low_watermark=-1),
    22: _with_key(22, _top(producer_id=-1, producer_epoch=-1)),
    23: _topics_partitions(23, "topics", "partitions", "partition", topic_key="topic", leader_epoch=-1, end_offset=-1),
    24: _add_partitions,
    25: _with_key(25, _top()),
    26: _with_key(26, _top(producer_id=-1, producer_epoch=-1)),
    27: _write_txn_markers,
    28: _topics_partitions(28, "topics", "partitions", "partition_index"),
    29: _with_key(29, _top(error_message=None, resources=[])),
    32: _describe_configs,
    33: _alter_configs(33),
    35: _with_key(35, _top(results=[])),
    36: _with_key(36, _top(error_message=None, auth_bytes=b"", session_lifetime_ms=0)),
    37: _topics_with_error(37, "results", "topics", error_message=None),
    42: _groups(42, "results", "groups_names"),
    43: _elect_leaders,
    44: _alter_configs(44),
    47: _with_key(47, _top(topics=[])),
    48: _with_key(48, _top(error_message=None, entries=None)),
    60: _with_key(60, _top(error_message=None, brokers=[], cluster_id="", controller_id=-1)),
    61: _topics_partitions(61, "topics", "partitions", "partition_index", error_message=None, active_producers=[]),
    65: _describe_transactions,
    66: _with_key(66, _top(unknown_state_filters=[], transaction_states=[])),
    68: _with_key(68, _top(error_message=None, member_id=None, member_epoch=0, heartbeat_interval_ms=0)),
    69: _groups(69, "groups", "group_ids", error_message=None, group_state="", group_epoch=0, assignment_epoch=0,
                assignor_name="", members=[]),
    75: _describe_topic_partitions,
}


# --- a fault on one topic of a request -----------------------------------------------------------

#: APIs whose fault on one topic touches only that topic's part of the answer; the first ones are
#: carried out first and their answer then changed
CARRIED_OUT_SCOPED = {3, 9}
SCOPED = {*CARRIED_OUT_SCOPED, 24}


def scoped_error_answer(api_key: int, version: int, request: Any, answer: Any, code: ErrorCode, topic: str,
                        partition: int | None, namer: TopicNamer | None = None) -> Any:
    """A fault rule naming a topic, on an API where an error can hit one topic alone:

    - Metadata (carried out first: ``answer``): the topic's entry gets the error and no partitions,
      as Kafka answers for a topic it cannot describe (librdkafka's ``rd_kafka_mock_topic_set_error``);
    - OffsetFetch (carried out first): the topic's partitions (or the one named) get the error, as
      Kafka reports the partition-level errors (UNSTABLE_OFFSET_COMMIT) that a group-level error
      answer cannot carry;
    - AddPartitionsToTxn v0-3 (not carried out): the topic's partitions (or the one named) get the
      error and every other partition OPERATION_NOT_ATTEMPTED, as Kafka answers a request of which
      some partitions fail."""
    code = for_version(api_key, version, code)
    if api_key == 9:
        cls = response_class(9)
        if isinstance(answer, RawResponse):
            decoded = cls.decode(b"".join(bytes(b) for b in answer.buffers), version=version)
            answer = cls(**{name: getattr(decoded, name) for name in cls.fields})
        topic_lists = [g.topics for g in answer.groups] if version >= 8 else [answer.topics]
        for topics in topic_lists:
            for t in topics:
                topic_id = getattr(t, "topic_id", None)
                if t.name == topic or (topic_id is not None and namer is not None and namer(topic_id) == topic):
                    for p in t.partitions:
                        if partition is None or p.partition_index == partition:
                            p.error_code = int(code)
        return answer
    if api_key == 3:
        cls = response_class(3)
        if isinstance(answer, RawResponse):  # the all-topics answer is cached encoded: decoded to change it
            decoded = cls.decode(b"".join(bytes(b) for b in answer.buffers), version=version)
            answer = cls(**{name: getattr(decoded, name) for name in cls.fields})
        for entry in answer.topics:
            if entry.name == topic:
                entry.error_code = int(code)
                entry.partitions = []
        return answer
    cls = response_class(24)
    if version >= 4:
        return cls(error_code=int(code), results_by_transaction=[])
    topic_cls = _item(cls, "results_by_topic_v3_and_below")
    part_cls = _item(cls, "results_by_topic_v3_and_below", "results_by_partition")

    def error_of(name: str, p: int) -> int:
        hit = name == topic and (partition is None or p == partition)
        return int(code) if hit else int(ErrorCode.OPERATION_NOT_ATTEMPTED)

    return cls(results_by_topic_v3_and_below=[
        topic_cls(name=t.name, results_by_partition=[part_cls(partition_index=p, partition_error_code=error_of(t.name, p))
                                                     for p in t.partitions])
        for t in request.v3_and_below_topics])


def error_answer(api_key: int, version: int, request: Any, code: ErrorCode, namer: TopicNamer) -> Any:
    """The answer Kafka gives to ``request`` failing with ``code`` (mapped for ``version``)."""
    builder = ERROR_ANSWERS[api_key]
    return builder(request, version, int(for_version(api_key, version, code)), namer)
