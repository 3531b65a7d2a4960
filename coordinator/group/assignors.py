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
    """Spread every subscribed partition so member loads differ by at most one where the
    subscriptions allow it (Kafka's UniformAssignor), keeping current owners first."""
    members = sorted(subscriptions)
    out: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in members}
    load = dict.fromkeys(members, 0)
    eligible: dict[tuple[uuid.UUID, int], list[str]] = {}
    for t in sorted({t for ts in subscriptions.values() for t in ts if t in partitions}, key=str):
        subscribers = [m for m in members if t in subscriptions[m]]
        for p in range(partitions[t]):
            eligible[(t, p)] = subscribers
    if not eligible:
        return _freeze(out)
    total = len(eligible)
    homogeneous = len({subscriptions[m] for m in members}) == 1
    quota_floor, extra = divmod(total, len(members)) if homogeneous else (0, 0)

    def quota(m: str) -> int:
        """How many partitions ``m`` may keep from its current assignment."""
        if homogeneous:
            return quota_floor + (1 if extra else 0)
        return -(-sum(1 for subs in eligible.values() if m in subs) // max(1, len(members)))

    # 1. Stickiness: keep current partitions the member is still subscribed to, up to its quota.
    unassigned = set(eligible)
    extras_used = 0
    for m in members:
        keep = sorted(((t, p) for t, ps in current.get(m, {}).items() for p in ps
                       if (t, p) in unassigned and m in eligible[(t, p)]), key=lambda tp: (str(tp[0]), tp[1]))
        limit = quota(m)
        if homogeneous and extra:
            # Only ``extra`` members may hold floor+1.
            if len(keep) > quota_floor and extras_used < extra:
                extras_used += 1
            else:
                limit = quota_floor
        for t, p in keep[:limit]:
            out[m].setdefault(t, set()).add(p)
            load[m] += 1
            unassigned.discard((t, p))
    # 2. Every other partition goes to its least-loaded eligible member (ties: member id).
    for t, p in sorted(unassigned, key=lambda tp: (str(tp[0]), tp[1])):
        m = min(eligible[(t, p)], key=lambda m: (load[m], m))
        out[m].setdefault(t, set()).add(p)
        load[m] += 1
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
