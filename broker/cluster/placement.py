"""Where a new partition's replicas go: Kafka's StripedReplicaPlacer (metadata/.../placement).

Brokers are grouped by rack; each partition's first replica is an unfenced broker taken from the
racks in turn, the others from the following racks (fenced brokers only when no unfenced one is
left there), and the starting points move on with every partition, so leaders and replicas spread
evenly. Lists are reshuffled after as many partitions as there are unfenced brokers, as Kafka does.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass

from protocol.errors import ErrorCode, KafkaError


@dataclass(frozen=True, slots=True)
class UsableBroker:
    id: int
    rack: str | None = None
    fenced: bool = False


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR, message)


class _BrokerList:
    def __init__(self) -> None:
        self.brokers: list[int] = []
        self.index = self.offset = self.epoch = 0

    def initialize(self, rng: random.Random) -> None:
        if self.brokers:
            self.brokers.sort()
            self.offset = rng.randrange(len(self.brokers))

    def next(self, epoch: int) -> int:
        if not self.brokers:
            return -1
        if self.epoch != epoch:
            self.epoch, self.index = epoch, 0
            self.offset = (self.offset + 1) % len(self.brokers)
        if self.index >= len(self.brokers):
            return -1
        broker = self.brokers[(self.index + self.offset) % len(self.brokers)]
        self.index += 1
        return broker


class _Rack:
    def __init__(self) -> None:
        self.fenced, self.unfenced = _BrokerList(), _BrokerList()

    def next(self, epoch: int) -> int:
        result = self.unfenced.next(epoch)
        return result if result >= 0 else self.fenced.next(epoch)


class _RackList:
    def __init__(self, rng: random.Random, brokers: Iterable[UsableBroker]) -> None:
        self.rng = rng
        self.racks: dict[str | None, _Rack] = {}
        self.total = self.unfenced = 0
        for b in brokers:
            rack = self.racks.setdefault(b.rack, _Rack())
            (rack.fenced if b.fenced else rack.unfenced).brokers.append(b.id)
            self.total += 1
            self.unfenced += not b.fenced
        for rack in self.racks.values():
            rack.fenced.initialize(rng)
            rack.unfenced.initialize(rng)
        self.names = sorted(self.racks, key=lambda n: (n is not None, n or ""))  # no rack first
        self.epoch = 0
        self.offset = rng.randrange(len(self.names)) if self.names else 0

    def place(self, replication_factor: int) -> list[int]:
        check_replication_factor(replication_factor, self.total, self.unfenced)
        if self.epoch == self.unfenced and self.unfenced > 1:
            self.rng.shuffle(self.names)
            for rack in self.racks.values():
                self.rng.shuffle(rack.fenced.brokers)
                self.rng.shuffle(rack.unfenced.brokers)
            self.epoch = 0
        if self.offset == len(self.names):
            self.offset = 0
        brokers: list[int] = []
        first = self.offset
        while True:
            result = self.racks[self.names[first]].unfenced.next(self.epoch)
            if result >= 0:
                brokers.append(result)
                break
            first = (first + 1) % len(self.names)
        index = self.offset
        for _ in range(1, replication_factor):
            result = -1
            while result < 0:
                if index == first:
                    first = -1
                else:
                    result = self.racks[self.names[index]].next(self.epoch)
                index = (index + 1) % len(self.names)
            brokers.append(result)
        self.epoch += 1
        self.offset += 1
        return brokers


def check_replication_factor(replication_factor: int, total: int, unfenced: int) -> None:
    if replication_factor <= 0:
        raise _invalid(f"Invalid replication factor {replication_factor}: the replication factor must be positive.")
    if unfenced == 0:
        raise _invalid("All brokers are currently fenced.")
    if replication_factor > total:
        raise _invalid(f"The target replication factor of {replication_factor} cannot be reached because only "
                       f"{total} broker(s) are registered.")


def place(brokers: Iterable[UsableBroker], partitions: int, replication_factor: int,
          rng: random.Random | None = None) -> list[list[int]]:
    """The replicas of ``partitions`` new partitions, the preferred leader first in each."""
    racks = _RackList(rng or random.Random(), brokers)
    check_replication_factor(replication_factor, racks.total, racks.unfenced)
    return [racks.place(replication_factor) for _ in range(partitions)]
