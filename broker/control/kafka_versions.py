"""Version emulation: advertise the API version ranges of a given Apache Kafka release, so a client
author tests against an older broker (``control.kafka.version`` or ``POST /versions``).

``kafka_api_versions.json`` holds, for each release from 3.0 to 4.4, what a KRaft broker of that
release lists in ApiVersions by default (the broker listener's APIs and versions from Kafka's
JSON message specs at the release's tag, unstable versions withheld) and the features it
supports. Emulating a release advertises, for every API both it and this broker serve, the
intersection of the two ranges; a request of an API or version outside them is refused as that
release refuses it (the connection is closed). Features the release does not know are not
listed, and finalized levels are capped at what it supports: emulating 3.9 hides
``transaction.version``, so a Kafka 4 Java producer stays on Transactions V1.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources

Range = tuple[int, int]


@dataclass(frozen=True, slots=True)
class KafkaRelease:
    name: str
    apis: dict[int, Range]
    features: dict[str, Range]

    def advertised(self, ours: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
        """(key, min, max) for what both serve; ``ours`` as this broker advertises it."""
        out = []
        for key, lo, hi in ours:
            theirs = self.apis.get(key)
            if theirs is None:
                continue
            low, high = max(lo, theirs[0]), min(hi, theirs[1])
            if low <= high:
                out.append((key, low, high))
        return out

    def accepts(self, api_key: int, version: int) -> bool:
        theirs = self.apis.get(api_key)
        return theirs is not None and theirs[0] <= version <= theirs[1]

    def supported_features(self, ours: list[tuple[str, int, int]]) -> list[tuple[str, int, int]]:
        out = []
        for name, lo, hi in ours:
            theirs = self.features.get(name)
            if theirs is not None and max(lo, theirs[0]) <= min(hi, theirs[1]):
                out.append((name, max(lo, theirs[0]), min(hi, theirs[1])))
        return out

    def finalized_features(self, ours: list[tuple[str, int]]) -> list[tuple[str, int]]:
        out = []
        for name, level in ours:
            theirs = self.features.get(name)
            if theirs is not None and min(level, theirs[1]) > 0:
                out.append((name, min(level, theirs[1])))
        return out

    def to_json(self) -> dict[str, object]:
        return {"kafka": self.name, "apis": {str(k): list(v) for k, v in sorted(self.apis.items())},
                "features": {k: list(v) for k, v in sorted(self.features.items())}}


@cache
def _table() -> dict[str, dict[str, dict[str, list[int]]]]:
    text = resources.files("broker.control").joinpath("kafka_api_versions.json").read_text()
    data: dict[str, dict[str, dict[str, list[int]]]] = json.loads(text)
    return data


def releases() -> list[str]:
    return sorted(_table(), key=lambda v: tuple(int(p) for p in v.split(".")))


def release(name: str) -> KafkaRelease:
    """``"3.9"`` (or ``"3.9.1"``: the minor release's table)."""
    parts = str(name).strip().split(".")
    key = ".".join(parts[:2])
    entry = _table().get(key)
    if entry is None:
        raise ValueError(f"no API versions of Apache Kafka {name!r}: one of {', '.join(releases())}")
    apis = {int(k): (v[0], v[1]) for k, v in entry["apis"].items()}
    features = {k: (v[0], v[1]) for k, v in entry.get("features", {}).items()}
    return KafkaRelease(key, apis, features)
