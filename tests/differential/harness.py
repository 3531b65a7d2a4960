"""Targets for differential tests: Apache Kafka and our broker behind the same small API.

A test writes one scenario as a function of a ``Target`` and runs it on both; each scenario returns a
plain, normalised structure (dicts/lists/tuples of error codes, offsets, flags), and the test asserts
that ours equals Kafka's. What legitimately differs between two clusters (node ids and ports, cluster
ids, topic ids, producer ids, wall-clock timestamps, throttle times, free-text error messages) is
normalised away here or in the scenario, with a comment saying why.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from kafka.protocol.admin import CreateTopicsRequest, DescribeConfigsRequest
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.metadata import ApiVersionsRequest, FindCoordinatorRequest, MetadataRequest
from kafka.protocol.producer import ProduceRequest
from kafka.protocol.producer.transaction import (
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
)
from kafka.record.default_records import DefaultRecordBatch

from tests.differential.wire import WireClient, build, record_batch

API_NAMES = {
    0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 8: "OffsetCommit", 9: "OffsetFetch",
    10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat", 13: "LeaveGroup", 14: "SyncGroup",
    15: "DescribeGroups", 16: "ListGroups", 17: "SaslHandshake", 18: "ApiVersions", 19: "CreateTopics",
    20: "DeleteTopics", 21: "DeleteRecords", 22: "InitProducerId", 23: "OffsetForLeaderEpoch",
    24: "AddPartitionsToTxn", 25: "AddOffsetsToTxn", 26: "EndTxn", 27: "WriteTxnMarkers",
    28: "TxnOffsetCommit", 29: "DescribeAcls", 30: "CreateAcls", 31: "DeleteAcls", 32: "DescribeConfigs",
    33: "AlterConfigs", 34: "AlterReplicaLogDirs", 35: "DescribeLogDirs", 36: "SaslAuthenticate",
    37: "CreatePartitions", 38: "CreateDelegationToken", 39: "RenewDelegationToken",
    40: "ExpireDelegationToken", 41: "DescribeDelegationToken", 42: "DeleteGroups", 43: "ElectLeaders",
    44: "IncrementalAlterConfigs", 45: "AlterPartitionReassignments", 46: "ListPartitionReassignments",
    47: "OffsetDelete", 48: "DescribeClientQuotas", 49: "AlterClientQuotas",
    50: "DescribeUserScramCredentials", 51: "AlterUserScramCredentials", 55: "DescribeQuorum",
    57: "UpdateFeatures", 60: "DescribeCluster", 61: "DescribeProducers", 64: "UnregisterBroker",
    65: "DescribeTransactions", 66: "ListTransactions", 68: "ConsumerGroupHeartbeat",
    69: "ConsumerGroupDescribe", 74: "ListConfigResources", 75: "DescribeTopicPartitions",
    76: "ShareGroupHeartbeat", 77: "ShareGroupDescribe", 78: "ShareFetch", 79: "ShareAcknowledge",
    80: "AddRaftVoter", 81: "RemoveRaftVoter", 83: "InitializeShareGroupState",
    84: "ReadShareGroupState", 85: "WriteShareGroupState", 86: "DeleteShareGroupState",
    87: "ReadShareGroupStateSummary", 88: "StreamsGroupHeartbeat", 89: "StreamsGroupDescribe",
    90: "DescribeShareGroupOffsets", 91: "AlterShareGroupOffsets", 92: "DeleteShareGroupOffsets",
}

# Errors a coordinator answers while it is still starting up (Kafka creates __transaction_state on
# the first FindCoordinator and loads it asynchronously); both brokers are polled through them.
RETRIABLE_COORDINATOR_ERRORS = {14, 15, 16}  # COORDINATOR_LOAD_IN_PROGRESS, _NOT_AVAILABLE, NOT_COORDINATOR
CONCURRENT_TRANSACTIONS = 51


def api_name(key: int) -> str:
    return API_NAMES.get(key, f"api-{key}")


def unique(prefix: str = "d") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def to_plain(obj: Any) -> Any:
    """kafka-python message objects to dicts/lists, recursively."""
    if hasattr(obj, "to_dict"):
        obj = obj.to_dict()
    if isinstance(obj, dict):
        return {k: to_plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [to_plain(v) for v in obj]
    return obj


# Fields whose values are specific to one cluster or free text, never part of the contract.
ALWAYS_DROP = frozenset({"throttle_time_ms", "error_message"})


def normalise(obj: Any, drop: Iterable[str] = (), replace: dict[str, Any] | None = None) -> Any:
    """Drop ``ALWAYS_DROP`` and ``drop`` keys at any depth; set keys in ``replace`` to a fixed value
    (e.g. topic ids: both must be present or absent, but their values are per-cluster)."""
    drop = ALWAYS_DROP | set(drop)
    replace = replace or {}

    def walk(x: Any) -> Any:
        if isinstance(x, dict):
            out = {}
            for k, v in x.items():
                if k in drop:
                    continue
                if k in replace:
                    out[k] = replace[k] if v is not None else None
                else:
                    out[k] = walk(v)
            return out
        if isinstance(x, list):
            return [walk(v) for v in x]
        return x

    return walk(to_plain(obj))


@dataclass
class Target:
    """One broker under comparison (``name`` is "kafka" or "ours")."""

    name: str
    bootstrap: str
    api_versions: dict[int, tuple[int, int]] = field(default_factory=dict)
    node_id: int = 1

    def __repr__(self) -> str:
        return f"<{self.name} {self.bootstrap}>"

    @contextlib.contextmanager
    def client(self, timeout: float = 15.0) -> Iterator[WireClient]:
        c = WireClient(self.bootstrap, timeout=timeout, client_id=f"differential-{self.name}")
        try:
            yield c
        finally:
            c.close()

    def supports(self, key: int, version: int | None = None) -> bool:
        rng = self.api_versions.get(key)
        return rng is not None and (version is None or rng[0] <= version <= rng[1])

    def refresh_api_versions(self) -> dict[int, tuple[int, int]]:
        with self.client() as c:
            r = c.send(ApiVersionsRequest[3](client_software_name="differential", client_software_version="1.0"), 3)
        assert r.error_code == 0, r
        self.api_versions = {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}
        return self.api_versions

    # -- admin ---------------------------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int = 1, configs: dict[str, str] | None = None,
                     replication_factor: int = 1) -> None:
        with self.client() as c:
            r = c.send(build(CreateTopicsRequest, 7, topics=[dict(
                name=name, num_partitions=partitions, replication_factor=replication_factor, assignments=[],
                configs=[dict(name=k, value=v) for k, v in (configs or {}).items()])],
                timeout_ms=30000, validate_only=False), 7)
        assert r.topics[0].error_code == 0, (self.name, r)
        self.wait_topic(name, partitions)

    def metadata(self, topics: list[str] | None, allow_auto_create: bool = False, version: int = 12):
        with self.client() as c:
            return c.send(build(MetadataRequest, version,
                                topics=None if topics is None else [dict(name=t) for t in topics],
                                allow_auto_topic_creation=allow_auto_create,
                                include_topic_authorized_operations=False), version)

    def wait_topic(self, name: str, partitions: int, timeout: float = 90.0) -> None:
        """Until Metadata shows every partition with a leader and the leader serves every partition
        (Kafka propagates creation asynchronously: its metadata cache can name the leader before the
        replica manager has made the partition, which then answers NOT_LEADER_OR_FOLLOWER)."""
        deadline = time.monotonic() + timeout
        while True:
            t = self.metadata([name]).topics[0]
            if t.error_code == 0 and len(t.partitions) == partitions and all(
                    p.error_code == 0 and p.leader_id >= 0 for p in t.partitions) and self._serves(name, partitions):
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: topic {name} not ready: {t}")
            time.sleep(0.05)

    def _serves(self, name: str, partitions: int) -> bool:
        """Whether the leader answers ListOffsets (latest) for every partition without an error."""
        with self.client() as c:
            r = c.send(build(ListOffsetsRequest, 9, replica_id=-1, isolation_level=0, timeout_ms=10000,
                             topics=[dict(name=name, partitions=[dict(
                                 partition_index=i, current_leader_epoch=-1, timestamp=-1, max_num_offsets=1)
                                 for i in range(partitions)])]), 9)
        return all(p.error_code == 0 for t in r.topics for p in t.partitions)

    def describe_configs(self, resource_type: int, name: str, keys: list[str] | None = None,
                         synonyms: bool = False, version: int = 4):
        with self.client() as c:
            return c.send(build(DescribeConfigsRequest, version, resources=[dict(
                resource_type=resource_type, resource_name=name, configuration_keys=keys)],
                include_synonyms=synonyms, include_documentation=False), version)

    # -- data ----------------------------------------------------------------------------------------
    def produce(self, topic: str, partition: int, records: bytes | None, *, version: int = 9, acks: int = -1,
                transactional_id: str | None = None, client: WireClient | None = None):
        req = build(ProduceRequest, version, transactional_id=transactional_id, acks=acks, timeout_ms=10000,
                    topic_data=[dict(name=topic, partition_data=[dict(index=partition, records=records)])])
        if client is not None:
            return client.send(req, version)
        with self.client() as c:
            return c.send(req, version)

    def produce_one(self, topic: str, partition: int, records: bytes | None, **kw) -> dict:
        """The single partition response of a one-partition Produce, as a normalised dict."""
        r = self.produce(topic, partition, records, **kw)
        (t,) = r.responses
        (p,) = t.partition_responses
        return normalise(p)

    def fetch(self, topic: str, partition: int, offset: int, *, version: int = 12, isolation_level: int = 0,
              max_bytes: int = 1 << 20, current_leader_epoch: int = -1, max_wait_ms: int = 0):
        with self.client() as c:
            return c.send(build(
                FetchRequest, version, replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=0, max_bytes=max_bytes,
                isolation_level=isolation_level, session_id=0, session_epoch=-1,
                topics=[dict(topic=topic, partitions=[dict(
                    partition=partition, current_leader_epoch=current_leader_epoch, fetch_offset=offset,
                    last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=max_bytes)])],
                forgotten_topics_data=[], rack_id=""), version)

    def list_offsets(self, topic: str, partition: int, timestamp: int, *, isolation_level: int = 0,
                     version: int = 9, current_leader_epoch: int = -1) -> dict:
        with self.client() as c:
            r = c.send(build(ListOffsetsRequest, version, replica_id=-1, isolation_level=isolation_level,
                             topics=[dict(name=topic, partitions=[dict(
                                 partition_index=partition, current_leader_epoch=current_leader_epoch,
                                 timestamp=timestamp, max_num_offsets=1)])],
                             timeout_ms=10000), version)
        (t,) = r.topics
        (p,) = t.partitions
        return normalise(p)

    # -- producer ids and transactions -------------------------------------------------------------
    def find_transaction_coordinator(self, transactional_id: str, timeout: float = 60.0):
        return self.find_coordinator(transactional_id, key_type=1, timeout=timeout)

    def find_coordinator(self, key: str, key_type: int, timeout: float = 60.0):
        """FindCoordinator (0: group, 1: transaction) until the coordinator has loaded; creating its
        internal topic on the way."""
        deadline = time.monotonic() + timeout
        with self.client() as c:
            while True:
                r = c.send(build(FindCoordinatorRequest, 4, key_type=key_type, coordinator_keys=[key]), 4)
                (co,) = r.coordinators
                if co.error_code not in RETRIABLE_COORDINATOR_ERRORS or time.monotonic() > deadline:
                    return co
                time.sleep(0.1)

    def init_producer_id(self, transactional_id: str | None = None, timeout_ms: int = 60000,
                         producer_id: int = -1, producer_epoch: int = -1, version: int = 4,
                         retry: bool = True, deadline_s: float = 60.0) -> tuple[int, int, int]:
        """(error_code, producer_id, producer_epoch); polls through coordinator start-up errors (and
        CONCURRENT_TRANSACTIONS) when ``retry``."""
        deadline = time.monotonic() + deadline_s
        with self.client() as c:
            while True:
                r = c.send(build(InitProducerIdRequest, version, transactional_id=transactional_id,
                                 transaction_timeout_ms=timeout_ms, producer_id=producer_id,
                                 producer_epoch=producer_epoch), version)
                retriable = r.error_code in RETRIABLE_COORDINATOR_ERRORS | {CONCURRENT_TRANSACTIONS}
                if not (retry and retriable) or time.monotonic() > deadline:
                    return r.error_code, r.producer_id, r.producer_epoch
                time.sleep(0.1)

    def add_partitions_to_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                              topic: str, partitions: list[int], version: int = 3,
                              retry_concurrent: bool = True) -> dict[int, int]:
        """{partition: error_code} (client versions v0-3)."""
        deadline = time.monotonic() + 30
        with self.client() as c:
            while True:
                r = c.send(build(AddPartitionsToTxnRequest, version,
                                 v3_and_below_transactional_id=transactional_id,
                                 v3_and_below_producer_id=producer_id,
                                 v3_and_below_producer_epoch=producer_epoch,
                                 v3_and_below_topics=[dict(name=topic, partitions=partitions)]), version)
                out = {p.partition_index: p.partition_error_code
                       for t in r.results_by_topic_v3_and_below for p in t.results_by_partition}
                # The previous transaction's markers may still be in flight: Kafka answers
                # CONCURRENT_TRANSACTIONS and clients retry.
                if not (retry_concurrent and CONCURRENT_TRANSACTIONS in out.values()) or time.monotonic() > deadline:
                    return out
                time.sleep(0.05)

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                version: int = 3, retry_concurrent: bool = True) -> int:
        """EndTxn's error code. CONCURRENT_TRANSACTIONS (the previous EndTxn's markers or its Complete*
        record are still being written) is retried, as clients do, unless ``retry_concurrent`` is off."""
        deadline = time.monotonic() + 30
        with self.client() as c:
            while True:
                r = c.send(build(EndTxnRequest, version, transactional_id=transactional_id,
                                 producer_id=producer_id, producer_epoch=producer_epoch, committed=commit), version)
                if not (retry_concurrent and r.error_code == CONCURRENT_TRANSACTIONS) or time.monotonic() > deadline:
                    return r.error_code
                time.sleep(0.05)

    def wait_stable(self, topic: str, partition: int, timeout: float = 30.0) -> int:
        """Until the last stable offset reaches the high watermark (all markers written); returns it."""
        deadline = time.monotonic() + timeout
        while True:
            lso = self.list_offsets(topic, partition, -1, isolation_level=1)["offset"]
            hw = self.list_offsets(topic, partition, -1, isolation_level=0)["offset"]
            if lso == hw:
                return hw
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: {topic}-{partition} LSO {lso} never reached HW {hw}")
            time.sleep(0.05)


@dataclass
class Pair:
    kafka: Target
    ours: Target

    def __iter__(self):
        return iter((self.kafka, self.ours))

    def run(self, scenario: Callable[[Target], Any]) -> tuple[Any, Any]:
        """Run ``scenario`` on Kafka, then on ours; return both results."""
        return scenario(self.kafka), scenario(self.ours)

    def create_topic(self, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> str:
        for t in self:
            t.create_topic(name, partitions, configs)
        return name

    def require(self, request: pytest.FixtureRequest, *apis: int | tuple[int, int]) -> None:
        """Mark the running test xfail (not strict) when OUR broker does not advertise one of ``apis``
        (an API key, or (key, version) for a version of it): the test still runs every assertion, and
        turns into a normal test once the API lands."""
        missing = []
        for a in apis:
            key, version = a if isinstance(a, tuple) else (a, None)
            if not self.ours.supports(key, version):
                missing.append(api_name(key) + ("" if version is None else f" v{version}"))
        if missing:
            request.applymarker(pytest.mark.xfail(strict=False, reason=f"{', '.join(missing)} not implemented yet"))


def batches_summary(records: bytes | None, pid_names: dict[int, str] | None = None) -> list[tuple]:
    """The record batches of a Fetch answer as comparable tuples: (base offset, last offset delta, count,
    transactional, control, producer (normalised), epoch, base sequence, record values or control type).
    Marker batches carry the coordinator's wall-clock time, so whole-batch bytes are not compared."""
    out = []
    if not records:
        return out
    data = bytes(records)
    pos = 0
    while pos + 12 <= len(data):
        length = int.from_bytes(data[pos + 8:pos + 12], "big", signed=True)
        end = pos + 12 + length
        if end > len(data):
            break  # a partial batch at the end of a size-limited fetch
        b = DefaultRecordBatch(data[pos:end])
        pid = b.producer_id
        pid_label = (pid_names or {}).get(pid, "other") if pid >= 0 else -1
        recs = list(b)
        if b.is_control_batch:
            content = ("control", int.from_bytes(recs[0].key[2:4], "big") if recs and recs[0].key else None)
        else:
            content = tuple(r.value for r in recs)
        out.append((b.base_offset, b.last_offset_delta, len(recs), b.is_transactional, b.is_control_batch,
                    pid_label, b.producer_epoch if pid >= 0 else -1, b.base_sequence, content))
        pos = end
    return out


__all__ = [
    "Pair", "Target", "WireClient", "api_name", "batches_summary", "build", "normalise", "record_batch",
    "to_plain", "unique",
]
