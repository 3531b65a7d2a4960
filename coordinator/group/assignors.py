"""KIP-848 server-side assignors: ``uniform`` (the default) and ``range``.

An assignor maps every member's subscription onto the subscribed topics' partitions. Both are
deterministic (members and partitions are walked in sorted order), so a reloaded coordinator
computes what the previous one would have, and both are sticky where they can be: a partition
stays with its current target owner while that keeps the group balanced, so a rebalance moves
as few partitions as possible and revocations stay rare.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping

Assignment = dict[uuid.UUID, frozenset[int]]
Subscriptions = Mapping[str, frozenset[uuid.UUID]]  # member id -> subscribed topic ids
Partitions = Mapping[uuid.UUID, int]  # topic id -> partition count
Assignor = Callable[[Subscriptions, Partitions, Mapping[str, Assignment]], dict[str, Assignment]]


def _freeze(owned: dict[str, dict[uuid.UUID, set[int]]]) -> dict[str, Assignment]:
    return {m: {t: frozenset(ps) for t, ps in topics.items() if ps} for m, topics in owned.items()}


def uniform(subscriptions: Subscriptions, partitions: Partitions, current: Mapping[str, Assignment]) -> dict[str, Assignment]:
    """Spread every subscribed partition so no partition could move to a member holding two fewer
    (loads differ by at most one when subscriptions are identical; Kafka's UniformAssignor),
    keeping current owners first: fed its own output it returns it unchanged."""
    members = sorted(subscriptions)
    eligible: dict[tuple[uuid.UUID, int], list[str]] = {}
    for t in sorted({t for ts in subscriptions.values() for t in ts if t in partitions}, key=str):
        subscribers = [m for m in members if t in subscriptions[m]]
        for p in range(partitions[t]):
            eligible[(t, p)] = subscribers
    owner: dict[tuple[uuid.UUID, int], str] = {}
    owned: dict[str, set[tuple[uuid.UUID, int]]] = {m: set() for m in members}
    # 1. Stickiness: current owners keep every partition they may still have.
    for m in members:
        for t, ps in current.get(m, {}).items():
            for p in ps:
                if (t, p) in eligible and (t, p) not in owner and m in eligible[(t, p)]:
                    owner[(t, p)] = m
                    owned[m].add((t, p))
    # 2. The rest, most constrained first, each to its least-loaded eligible member (ties: member id).
    for tp in sorted((tp for tp in eligible if tp not in owner), key=lambda tp: (len(eligible[tp]), str(tp[0]), tp[1])):
        m = min(eligible[tp], key=lambda m: (len(owned[m]), m))
        owner[tp] = m
        owned[m].add(tp)
    # 3. Balance: move a partition from a member to an eligible one holding at least two fewer.
    moved = True
    while moved:
        moved = False
        for m in sorted(members, key=lambda m: (-len(owned[m]), m)):
            for tp in sorted(owned[m], key=lambda tp: (str(tp[0]), tp[1]), reverse=True):
                n = min(eligible[tp], key=lambda n: (len(owned[n]), n))
                if len(owned[n]) + 1 < len(owned[m]):
                    owned[m].discard(tp)
                    owned[n].add(tp)
                    moved = True
                    break
            if moved:
                break
    out: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in members}
    for m, tps in owned.items():
        for t, p in tps:
            out[m].setdefault(t, set()).add(p)
    return _freeze(out)


def range_(subscriptions: Subscriptions, partitions: Partitions, current: Mapping[str, Assignment]) -> dict[str, Assignment]:
    """Per topic, consecutive ranges of partitions to the subscribers in member-id order, the
    first ``count % members`` getting one more (Kafka's RangeAssignor; co-partitioned topics
    land on the same member)."""
    members = sorted(subscriptions)
    out: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in members}
    for t in sorted({t for ts in subscriptions.values() for t in ts if t in partitions}, key=str):
        subscribers = [m for m in members if t in subscriptions[m]]
        size, extra = divmod(partitions[t], len(subscribers))
        start = 0
        for i, m in enumerate(subscribers):
            n = size + (1 if i < extra else 0)
            if n:
                out[m][t] = set(range(start, start + n))
            start += n
    return _freeze(out)


ASSIGNORS: dict[str, Assignor] = {"uniform": uniform, "range": range_}
