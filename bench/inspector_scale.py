"""How long the inspector takes to answer a page of 10,000 transactional ids (a real broker's
coordinator, through its HTTP endpoint) and of 10,000 partitions (stand-in logs, the view and its
HTML): the median of a few runs per page, after one warm-up. The issue's bound is a second.

    python bench/inspector_scale.py [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from broker.inspect.live import views, web  # noqa: E402
from tests.unit.inspect.test_live_scale import (  # noqa: E402
    PARTITION_QUERIES,
    TXN_PAGES,
    N,
    broker_with_ten_thousand_ids,
    get,
    partitions_broker,
)


def _median_ms(fn, runs: int) -> float:
    fn()  # warm
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args(argv)
    rows: list[tuple[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="inspector-scale-") as tmp, broker_with_ten_thousand_ids(Path(tmp)) as base:
        for path in TXN_PAGES:
            rows.append((f"{N:,} ids  {path}", _median_ms(lambda p=path: get(base + p), a.runs)))
    fake = partitions_broker()
    for query in PARTITION_QUERIES:
        def render(q=query) -> None:
            web.partitions_html(views.partitions(fake, q), q)
        shown = "&".join(f"{k}={v}" for k, v in query.items()) or "(first page)"
        rows.append((f"{N:,} partitions  {shown}", _median_ms(render, a.runs)))
    width = max(len(n) for n, _ in rows)
    print(f"{'page':<{width}}  median ms (of {a.runs})")
    for name, ms in rows:
        print(f"{name:<{width}}  {ms:8.1f}")


if __name__ == "__main__":
    main()
