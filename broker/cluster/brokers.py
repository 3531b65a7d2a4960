"""The brokers of the cluster and whether each is up: Kafka's ClusterControlManager (registered,
fenced) for brokers that all live in this process.

A broker registers when it starts and is fenced when it stops (taken down, or the process ends);
fenced brokers stay registered, as in Kafka, so their replicas show as offline. Every broker of
the process shares one registry; a single node has a registry of one.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from typing import Protocol

from protocol.primitives import NodeEndpoint


class BrokerNode(Protocol):
    """What the registry needs of a broker: its id, rack and the endpoint clients use."""

    node_id: int

    @property
    def rack(self) -> str | None: ...

    def advertised_endpoint(self, listener: str, local_host: str) -> tuple[str, int]: ...


class BrokerRegistry:
    def __init__(self) -> None:
        self._nodes: dict[int, BrokerNode] = {}
        self._fenced: set[int] = set()
        self.epochs: dict[int, int] = {}  # broker epoch: grows with every registration (Kafka's)
        self._next_epoch = 1
        self.version = 0  # grows with every change: answers built from liveness are good while it stays


    def register(self, node: BrokerNode) -> int:
        """A broker that starts (again): unfenced, with a new broker epoch."""
        self._nodes[node.node_id] = node
        self._fenced.discard(node.node_id)
        epoch = self.epochs[node.node_id] = self._next_epoch
        self._next_epoch += 1
        self.version += 1
        return epoch

    def fence(self, node_id: int) -> None:
        if node_id in self._nodes:
            self._fenced.add(node_id)
            self.version += 1

    def alive(self, node_id: int) -> bool:
        return node_id in self._nodes and node_id not in self._fenced

    def registered(self, node_id: int) -> bool:
        return node_id in self._nodes

    def node(self, node_id: int) -> BrokerNode | None:
        return self._nodes.get(node_id)

    def live(self) -> Iterator[BrokerNode]:
        """The unfenced brokers, by id."""
        for node_id in sorted(self._nodes):
            if node_id not in self._fenced:
                yield self._nodes[node_id]

    def all_ids(self) -> list[int]:
        return sorted(self._nodes)

    def random_alive_id(self, default: int) -> int:
        """Kafka's KRaft brokers name a random live broker as the controller (KRaftMetadataCache):
        clients send admin requests there and the broker forwards them."""
        ids = [n.node_id for n in self.live()]
        return random.choice(ids) if len(ids) > 1 else (ids[0] if ids else default)


def offline_replicas(replicas: tuple[int, ...], registry: BrokerRegistry) -> list[int]:
    """KRaftMetadataCache.getOfflineReplicas: replicas on a broker that is fenced or unknown."""
    return [r for r in replicas if not registry.alive(r)]


def leader_endpoints(leaders: Iterable[int], registry: BrokerRegistry, listener: str,
                     local_host: str) -> list[NodeEndpoint]:
    """KIP-951's NodeEndpoints: where the leaders an answer names can be reached, on the
    listener the request came in on (live brokers only)."""
    out = []
    for node_id in sorted(set(leaders)):
        node = registry.node(node_id)
        if node is not None and registry.alive(node_id):
            host, port = node.advertised_endpoint(listener, local_host)
            out.append(NodeEndpoint(node_id, host, port, node.rack))
    return out
