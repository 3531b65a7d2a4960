"""kafka-python's generated message classes, looked up by API key, loaded one module at a time.

They are generated from Apache Kafka's JSON message specs, so layouts are exact; the broker
uses them for every control-plane API and keeps hand-written fast paths for the hot ones.

Building every class (parsing ~100 JSON specs) costs ~40 ms, a fifth of the broker's start-up,
and most brokers never see half of the APIs. So :data:`API_MODULES` says statically which
kafka-python module holds each API (a test checks it against a full scan), and a module is
imported the first time one of its APIs is used. Handler modules bind their classes with
:func:`lazy_response`, which resolves on first use.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from typing import Any, Protocol

#: API key -> (kafka-python module under ``kafka.protocol``, message name without Request/Response)
API_MODULES: dict[int, tuple[str, str]] = {
    0: ("producer.produce", "Produce"),
    1: ("consumer.fetch", "Fetch"),
    2: ("consumer.offsets", "ListOffsets"),
    3: ("metadata.metadata", "Metadata"),
    8: ("consumer.group", "OffsetCommit"),
    9: ("consumer.group", "OffsetFetch"),
    10: ("metadata.find_coordinator", "FindCoordinator"),
    11: ("consumer.group", "JoinGroup"),
    12: ("consumer.group", "Heartbeat"),
    13: ("consumer.group", "LeaveGroup"),
    14: ("consumer.group", "SyncGroup"),
    15: ("admin.groups", "DescribeGroups"),
    16: ("admin.groups", "ListGroups"),
    18: ("metadata.api_versions", "ApiVersions"),
    19: ("admin.topics", "CreateTopics"),
    20: ("admin.topics", "DeleteTopics"),
    21: ("admin.topics", "DeleteRecords"),
    22: ("producer.transaction", "InitProducerId"),
    23: ("consumer.offsets", "OffsetForLeaderEpoch"),
    24: ("producer.transaction", "AddPartitionsToTxn"),
    25: ("producer.transaction", "AddOffsetsToTxn"),
    26: ("producer.transaction", "EndTxn"),
    27: ("producer.transaction", "WriteTxnMarkers"),
    28: ("producer.transaction", "TxnOffsetCommit"),
    29: ("admin.acl", "DescribeAcls"),
    30: ("admin.acl", "CreateAcls"),
    31: ("admin.acl", "DeleteAcls"),
    32: ("admin.configs", "DescribeConfigs"),
    33: ("admin.configs", "AlterConfigs"),
    34: ("admin.cluster", "AlterReplicaLogDirs"),
    35: ("admin.cluster", "DescribeLogDirs"),
    37: ("admin.topics", "CreatePartitions"),
    42: ("admin.groups", "DeleteGroups"),
    43: ("admin.topics", "ElectLeaders"),
    44: ("admin.configs", "IncrementalAlterConfigs"),
    45: ("admin.topics", "AlterPartitionReassignments"),
    46: ("admin.topics", "ListPartitionReassignments"),
    47: ("consumer.group", "OffsetDelete"),
    48: ("admin.client_quotas", "DescribeClientQuotas"),
    49: ("admin.client_quotas", "AlterClientQuotas"),
    50: ("admin.users", "DescribeUserScramCredentials"),
    51: ("admin.users", "AlterUserScramCredentials"),
    55: ("admin.cluster", "DescribeQuorum"),
    57: ("admin.cluster", "UpdateFeatures"),
    60: ("admin.cluster", "DescribeCluster"),
    61: ("admin.transactions", "DescribeProducers"),
    65: ("admin.transactions", "DescribeTransactions"),
    66: ("admin.transactions", "ListTransactions"),
    74: ("admin.configs", "ListConfigResources"),
    75: ("admin.topics", "DescribeTopicPartitions"),
}


#: APIs whose classes come from Apache Kafka's newer JSON specs (``protocol.newer``), because a
#: stock client sends a version kafka-python's specs do not have yet. API_MODULES still names
#: kafka-python's module for them (a test checks that table against kafka-python).
NEWER: dict[int, str] = {18: "protocol.newer.api_versions", 28: "protocol.newer.txn_offset_commit",
                         42: "protocol.newer.delete_groups", 68: "protocol.newer.consumer_group_heartbeat",
                         69: "protocol.newer.consumer_group_describe", 17: "protocol.newer.sasl_handshake",
                         36: "protocol.newer.sasl_authenticate"}
#: APIs with no kafka-python classes among the areas API_MODULES covers: their names.
NEWER_ONLY: dict[int, str] = {68: "ConsumerGroupHeartbeat", 69: "ConsumerGroupDescribe", 17: "SaslHandshake",
                              36: "SaslAuthenticate"}


def _register_unexecuted(package: str) -> None:
    """Put ``package`` in ``sys.modules`` without running its ``__init__.py``.

    ``kafka/__init__.py`` imports kafka-python's whole client stack (~110 ms) and the
    ``kafka.protocol.<area>/__init__.py`` files build every class of their area; the broker needs
    one submodule at a time. The module finishes loading itself on first attribute access (PEP
    562), so ``from kafka import KafkaProducer`` in the same process still works.
    """
    if package in sys.modules:
        return
    spec = importlib.util.find_spec(package)
    if spec is None or spec.loader is None:
        return
    loader = spec.loader  # bound here so the closure keeps the narrowed (not-None) type
    module = importlib.util.module_from_spec(spec)

    def complete(name: str) -> Any:
        del module.__getattr__
        loader.exec_module(module)
        return getattr(module, name)

    # through the namespace: PEP 562 looks ``__getattr__`` up there, and ModuleType declares it a method
    vars(module)["__getattr__"] = complete
    sys.modules[package] = module


_register_unexecuted("kafka")
for _area in ("admin", "consumer", "metadata", "producer"):
    _register_unexecuted(f"kafka.protocol.{_area}")

_loaded: dict[tuple[int, str], Any] = {}


def _message_class(api_key: int, kind: str) -> Any:
    cls = _loaded.get((api_key, kind))
    if cls is None:
        entry = API_MODULES.get(api_key)
        if entry is None:
            if api_key not in NEWER_ONLY:
                return None
            entry = ("", NEWER_ONLY[api_key])
        module_name, name = entry
        module = importlib.import_module(NEWER.get(api_key) or f"kafka.protocol.{module_name}")
        cls = _loaded[(api_key, kind)] = getattr(module, name + kind)
    return cls


def request_class(api_key: int) -> Any:
    return _message_class(api_key, "Request")


def response_class(api_key: int) -> Any:
    return _message_class(api_key, "Response")


def api_name(api_key: int) -> str:
    """Kafka's name of an API ("Produce"), without loading its classes."""
    entry = API_MODULES.get(api_key)
    return entry[1] if entry is not None else NEWER_ONLY.get(api_key, str(api_key))


def is_flexible(api_key: int, version: int) -> bool:
    """Whether this request/response version uses flexible encoding (header v2 / v1)."""
    cls = request_class(api_key)
    return bool(cls is not None and cls.flexible_version_q(version))


class ApiMessage(Protocol):
    """A request or response body: an instance of kafka-python's classes generated from Kafka's
    JSON specs at run time (or a hand-written fast path), so its fields are only known then; a
    handler reads them by the names of the protocol doc (``req.transactional_id``)."""

    def __getattr__(self, name: str) -> Any: ...

    def __setattr__(self, name: str, value: Any) -> None: ...


class LazyClass:
    """A message class (or a class nested in one) bound at import, built on first use.

    Calling it constructs an instance, indexing it picks a version, and an attribute is another
    lazy class: ``Topic = lazy_response(3).MetadataResponseTopic`` costs nothing at import.
    """

    __slots__ = ("_resolve", "_target")

    def __init__(self, resolve: Callable[[], Any]) -> None:
        self._resolve = resolve
        self._target: Any = None

    def resolve(self) -> Any:
        target = self._target
        if target is None:
            target = self._target = self._resolve()
        return target

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        target = self._target
        if target is None:
            target = self.resolve()
        return target(*args, **kwargs)

    def __getattr__(self, name: str) -> LazyClass:
        if name.startswith("_"):  # no lazy dunders: copy, inspect and pickle probe for them
            raise AttributeError(name)
        return LazyClass(lambda: getattr(self.resolve(), name))

    def __getitem__(self, version: int) -> Any:
        return self.resolve()[version]


def lazy_response(api_key: int) -> LazyClass:
    if api_key not in API_MODULES and api_key not in NEWER_ONLY:
        raise KeyError(f"no kafka-python message for API key {api_key}")
    return LazyClass(lambda: response_class(api_key))
