"""Incremental fetch sessions (KIP-227) compared with Apache Kafka.

One connection plays a consumer: a full fetch at epoch 0 opens a session; incremental fetches then
name only moved partitions and are answered with only the partitions that changed (records, a new
high watermark or log start offset, errors). Session errors (unknown id, wrong epoch, topic ids
switched on or off between versions) and closing a session (epoch -1, forgetting every partition)
are checked too. Session ids are random per broker: only "zero or not" is compared.
"""

from __future__ import annotations

import time

import pytest
from kafka.protocol.consumer import FetchRequest

from tests.differential.harness import build, normalise, record_batch, unique

T0 = 1_700_000_000_000


def _fetch(c, version, session_id, epoch, parts, forgotten=(), topic=None, topic_id=None):
    """``parts``: [(partition, fetch_offset)] of one topic; ``forgotten``: partitions of it."""
    key = dict(topic_id=topic_id) if version >= 13 else dict(topic=topic)
    topics = [dict(**key, partitions=[dict(partition=p, current_leader_epoch=-1, fetch_offset=o, last_fetched_epoch=-1,
                                           log_start_offset=-1, partition_max_bytes=1 << 20) for p, o in parts])]
    forgotten_data = [dict(**key, partitions=list(forgotten))] if forgotten else []
    r = c.send(build(FetchRequest, version, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                     isolation_level=0, session_id=session_id, session_epoch=epoch,
                     topics=topics if parts else [], forgotten_topics_data=forgotten_data, rack_id=""), version)
    return r


def _summary(r) -> dict:
    """Error, whether a session id came back, and per partition (index, error, hw, record bytes)."""
    d = normalise(r)
    return {
        "error_code": d["error_code"],
        "session": d["session_id"] != 0,
        "partitions": [(p["partition_index"], p["error_code"], p["high_watermark"], len(p["records"] or b""))
                       for t in d["responses"] for p in t["partitions"]],
    }


def _topic_id(t, name):
    (md,) = t.metadata([name]).topics
    return md.topic_id


def _wait_fetchable(c, version, parts, **kw):
    """Kafka answers NOT_LEADER_OR_FOLLOWER for a moment after Metadata shows a new partition's leader."""
    deadline = time.monotonic() + 30
    while any(p[1] for p in _summary(_fetch(c, version, 0, -1, parts, **kw))["partitions"]):
        assert time.monotonic() < deadline, "partitions never became fetchable"
        time.sleep(0.05)


def _scenario(name, version):
    def run(t):
        tid = _topic_id(t, name) if version >= 13 else None
        kw = dict(topic=name, topic_id=tid)
        out = []
        with t.client() as c:
            _wait_fetchable(c, version, [(0, 0), (1, 0), (2, 0)], **kw)
            full = _fetch(c, version, 0, 0, [(0, 0), (1, 0), (2, 0)], **kw)
            out.append(_summary(full))
            sid = full.session_id
            out.append(_summary(_fetch(c, version, sid, 1, [], **kw)))  # nothing changed: no partitions
            t.produce(name, 1, record_batch([b"a", b"b"], timestamps=[T0, T0]))
            out.append(_summary(_fetch(c, version, sid, 2, [], **kw)))  # p1 has records and a new HW
            out.append(_summary(_fetch(c, version, sid, 3, [(1, 2)], **kw)))  # moved past them: nothing new
            out.append(_summary(_fetch(c, version, sid, 3, [], **kw)))  # epoch 3 again: INVALID_FETCH_SESSION_EPOCH
            out.append(_summary(_fetch(c, version, sid, 4, [(0, 5)], **kw)))  # p0 out of range: errors always sent
            out.append(_summary(_fetch(c, version, sid, 5, [], forgotten=[0, 2], **kw)))  # forget; p1 unchanged
            out.append(_summary(_fetch(c, version, sid, 6, [], forgotten=[1], **kw)))  # empty: session closes
            out.append(_summary(_fetch(c, version, sid, 7, [], **kw)))  # FETCH_SESSION_ID_NOT_FOUND
            again = _fetch(c, version, 0, 0, [(1, 0)], **kw)
            out.append(_summary(again))
            out.append(_summary(_fetch(c, version, again.session_id, -1, [(1, 0)], **kw)))  # final: sessionless
            out.append(_summary(_fetch(c, version, again.session_id, 1, [], **kw)))  # closed by the final fetch
        return out
    return run


def test_incremental_session_v12_by_name(pair):
    name = pair.create_topic(unique("fs"), 3)
    k, o = pair.run(_scenario(name, 12))
    assert k[0]["session"] and len(k[0]["partitions"]) == 3
    assert k[1]["partitions"] == [] and k[4]["error_code"] == 71 and k[8]["error_code"] == 70
    assert o == k


@pytest.mark.parametrize("version", [16, 18])
def test_incremental_session_by_topic_id(pair, version):
    name = pair.create_topic(unique("fs"), 3)
    k, o = pair.run(_scenario(name, version))
    assert k[0]["session"] and k[2]["partitions"] == [(1, 0, 2, k[2]["partitions"][0][3])]
    assert o == k


def test_session_created_by_ids_rejects_names(pair):
    name = pair.create_topic(unique("fs"), 1)

    def scenario(t):
        tid = _topic_id(t, name)
        with t.client() as c:
            _wait_fetchable(c, 13, [(0, 0)], topic_id=tid)
            full = _fetch(c, 13, 0, 0, [(0, 0)], topic_id=tid)
            by_name = _fetch(c, 12, full.session_id, 1, [], topic=name)
            by_id = _fetch(c, 13, full.session_id, 1, [], topic_id=tid)  # the failed request moved nothing
        return _summary(full), _summary(by_name), _summary(by_id)

    k, o = pair.run(scenario)
    assert k[1]["error_code"] == 106 and k[2]["error_code"] == 0
    assert o == k

