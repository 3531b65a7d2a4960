"""OffsetCommit / OffsetFetch naming topics by name (v9) and by topic id (v10, which the Java 4.x
consumer uses as soon as a broker advertises it): the same errors and the same offsets from both."""

from __future__ import annotations

import time
import uuid

from kafka.protocol.consumer.group import OffsetCommitRequest, OffsetFetchRequest
from kafka.protocol.metadata import FindCoordinatorRequest

from tests.differential.harness import RETRIABLE_COORDINATOR_ERRORS, build, unique

STRANGER = uuid.UUID("00000000-0000-0000-0000-00000000beef")


def _coordinator_ready(c, group: str) -> None:
    """FindCoordinator, then a probe commit until the group's coordinator has loaded (Kafka answers
    NOT_COORDINATOR for a moment after creating ``__consumer_offsets``)."""
    deadline = time.monotonic() + 60
    while True:
        r = c.send(build(FindCoordinatorRequest, 4, key_type=0, coordinator_keys=[group]), 4)
        (co,) = r.coordinators
        if co.error_code == 0:
            probe = build(OffsetCommitRequest, 9, group_id=group + "-probe", generation_id_or_member_epoch=-1,
                          member_id="", group_instance_id=None, topics=[])
            if c.send(probe, 9).topics == [] and _fetch(c, 9, group + "-probe", None)[0] == 0:
                return
        assert co.error_code in (0, *RETRIABLE_COORDINATOR_ERRORS) and time.monotonic() < deadline, co
        time.sleep(0.1)


def _commit(c, version: int, group: str, topics: list[tuple]) -> list:
    """``topics``: [(name or id, [(partition, offset)])]; the answer as sorted
    [(name or id, [(partition, error)])]."""
    key = "topic_id" if version >= 10 else "name"
    req = build(OffsetCommitRequest, version, group_id=group, generation_id_or_member_epoch=-1, member_id="",
                group_instance_id=None, topics=[
                    {key: t, "partitions": [dict(partition_index=p, committed_offset=o, committed_leader_epoch=-1,
                                                 committed_metadata="m") for p, o in parts]}
                    for t, parts in topics])
    r = c.send(req, version)
    return [(t.topic_id if version >= 10 else t.name, sorted((p.partition_index, p.error_code) for p in t.partitions))
            for t in r.topics]


def _fetch(c, version: int, group: str, topics: list[tuple] | None) -> tuple:
    """``topics``: [(name or id, [partitions])] or None (all); (group error, sorted topics)."""
    key = "topic_id" if version >= 10 else "name"
    req = build(OffsetFetchRequest, version, require_stable=True, groups=[dict(
        group_id=group, topics=None if topics is None else [{key: t, "partition_indexes": parts}
                                                             for t, parts in topics])])
    (g,) = c.send(req, version).groups
    return g.error_code, [
        (t.topic_id if version >= 10 else t.name,
         sorted((p.partition_index, p.committed_offset, p.committed_leader_epoch, p.metadata, p.error_code)
                for p in t.partitions))
        for t in g.topics]


def test_offsets_by_name_and_by_topic_id(pair):
    """Commit by id (a known id, an unknown one, a partition the topic lacks), then by name; fetch
    by id, by name and all topics at v10 (each topic with its id)."""
    name = pair.create_topic(unique("offsets"), 2)

    def scenario(t):
        (md,) = t.metadata([name]).topics
        tid = md.topic_id
        group = unique("g")
        label = {tid: "id", STRANGER: "stranger", name: "name"}

        def named(rows):  # Kafka answers in its maps' order: compared sorted
            return sorted((label.get(k, str(k)), v) for k, v in rows)

        with t.client() as c:
            _coordinator_ready(c, group)
            out = [named(_commit(c, 10, group, [(tid, [(0, 5), (1, 7), (9, 1)]), (STRANGER, [(0, 1)])]))]
            out.append(named(_commit(c, 9, group, [(name, [(1, 8)])])))
            for version, topics in ((10, [(tid, [0, 1, 2]), (STRANGER, [0, 3])]), (9, [(name, [0, 1])]),
                                    (10, None), (10, [(STRANGER, [1])])):
                err, rows = _fetch(c, version, group, topics)
                out.append((err, named(rows)))
        return out

    k, o = pair.run(scenario)
    assert k[0] == [("id", [(0, 0), (1, 0), (9, 3)]), ("stranger", [(0, 100)])], k
    assert k[3] == (0, [("name", [(0, 5, -1, "m", 0), (1, 8, -1, "m", 0)])]), k
    assert o == k
