"""OffsetFetch v10 / OffsetCommit v10 topic-id handling, driven straight through the handlers with a
stand-in broker (the wire tests and tests/differential/test_group_offsets.py cover the normal
paths against Apache Kafka): group-level errors and ids that name no topic."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

from kafka.protocol.consumer.group import OffsetFetchRequest

from broker.cluster.metadata import MetadataStore
from broker.handlers import offset_fetch
from protocol.errors import ErrorCode
from protocol.messages import response_class
from tests.differential.wire import build

KNOWN, UNKNOWN = uuid.UUID(int=1), uuid.UUID(int=2)


def _ctx(version: int, group_coordinator=SimpleNamespace(  # noqa: B008 - not mutated
        active=False, check=lambda group_id: ErrorCode.COORDINATOR_NOT_AVAILABLE)):
    info = SimpleNamespace(name="t", topic_id=KNOWN, partitions=2)
    metadata = SimpleNamespace(by_id={KNOWN: info}, topics={"t": info},
                               name_of=lambda topic_id: info.name if topic_id == KNOWN else None)
    return SimpleNamespace(api_version=version, broker=SimpleNamespace(metadata=metadata, authorizer=None,
                                                                       group_coordinator=group_coordinator))


def _request(topics):
    return build(OffsetFetchRequest, 10, require_stable=True, groups=[dict(group_id="g", topics=topics)])


def test_v10_group_error_is_answered_not_a_closed_connection() -> None:
    """No active coordinator: COORDINATOR_NOT_AVAILABLE for the group, with explicit topics (known
    and unknown ids) and for an all-topics fetch alike."""
    for topics in ([dict(topic_id=KNOWN, partition_indexes=[0]), dict(topic_id=UNKNOWN, partition_indexes=[0])],
                   [dict(topic_id=UNKNOWN, partition_indexes=[0])], None):
        resp = offset_fetch.handle(_ctx(10), _request(topics))
        (g,) = resp.groups
        assert (g.error_code, g.topics) == (ErrorCode.COORDINATOR_NOT_AVAILABLE, [])
        response_class(9).decode(resp.encode(version=10), version=10)  # it serialises


def test_v10_known_ids_first_then_unknown_ones() -> None:
    class Manager:
        def fetch_offsets(self, group_id, requested, require_stable, member_id=None, member_epoch=-1):
            self.requested = requested
            return ErrorCode.NONE, [(name, [offset_fetch.FetchedPartition(p, 5) for p in parts])
                                    for name, parts in requested]

    manager = Manager()
    ctx = _ctx(10, SimpleNamespace(active=True, manager=manager, check=lambda group_id: ErrorCode.NONE))
    resp = offset_fetch.handle(ctx, _request([dict(topic_id=UNKNOWN, partition_indexes=[3]),
                                              dict(topic_id=KNOWN, partition_indexes=[0, 1])]))
    (g,) = resp.groups
    assert manager.requested == [("t", [0, 1])]
    assert [(t.topic_id, [(p.partition_index, p.committed_offset, p.error_code) for p in t.partitions])
            for t in g.topics] == [(KNOWN, [(0, 5, 0), (1, 5, 0)]), (UNKNOWN, [(3, -1, ErrorCode.UNKNOWN_TOPIC_ID)])]


def test_unknown_id_errors_never_mix_with_a_topic_named_like_the_id() -> None:
    """A topic may be named "None" or like a UUID string; an unknown id's error key is not a string."""
    fake = SimpleNamespace(name_of={KNOWN: str(UNKNOWN)}.get)
    topics = [SimpleNamespace(topic_id=UNKNOWN, name="", partitions=[SimpleNamespace(partition_index=0)]),
              SimpleNamespace(topic_id=KNOWN, name="", partitions=[SimpleNamespace(partition_index=0)])]
    named, unknown = MetadataStore.named_by_id(fake, topics)
    assert [t.name for t in named] == [str(UNKNOWN)]
    assert list(unknown.values()) == [ErrorCode.UNKNOWN_TOPIC_ID]
    assert (str(UNKNOWN), 0) not in unknown
