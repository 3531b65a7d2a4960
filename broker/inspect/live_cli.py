"""``python -m broker.inspect live``: the inspector's views of a running broker, read from its JSON
API (``/inspect/api/...`` beside ``/metrics``) and printed with the offline views' renderers, or
as the API's JSON with ``--json``.

    python -m broker.inspect live [--url URL] overview
    python -m broker.inspect live [--url URL] transactions [--state S] [--contains Q]
    python -m broker.inspect live [--url URL] timeline TRANSACTIONAL_ID
    python -m broker.inspect live [--url URL] partitions [--topic T] [--open]
    python -m broker.inspect live [--url URL] groups [--contains Q] [--pending]
    python -m broker.inspect live [--url URL] hanging [--max-transaction-timeout-ms N] [--topic T [--partition P]] [--all]
    python -m broker.inspect live [--url URL] abort --topic T --partition P (--start-offset N |
                                  --producer-id ID --producer-epoch E --coordinator-epoch C)
    python -m broker.inspect live [--url URL] files [DIR [FILE]] [--broker N] [kafka-dump-log.sh's options]

The URL is the broker's metrics endpoint (``http://127.0.0.1:9404`` unless ``--url`` or
``KAFKA_INSPECT_URL`` says otherwise). Paged views are read page by page to the end unless
``--page`` is given. ``hanging`` prints ``kafka-transactions.sh find-hanging``'s table; ``abort``
does what ``kafka-transactions.sh abort`` does (through the broker's marker path) and exits 1
when the broker refuses it.

Only the standard library is used: this module needs no broker code to run.
"""

from __future__ import annotations

import argparse
import json
import os
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from typing import Any, TextIO
from urllib.parse import quote, urlencode

from broker.inspect.dump_text import dump_lines, final_errors, immediate_errors
from broker.inspect.files import FileOptions
from broker.inspect.log_dump import INT32_MAX
from broker.inspect.views_text import (
    groups_lines,
    hanging_lines,
    open_transactions_lines,
    overview_lines,
    partitions_lines,
    timeline_lines,
    transactions_lines,
)

DEFAULT_URL = "http://127.0.0.1:9404"
PAGE_SIZE = 1000


class LiveError(Exception):
    """The broker could not be reached or refused the request (the message says which)."""


def add_parser(sub: Any) -> None:
    live = sub.add_parser("live", help="views of a running broker, through its inspector API",
                          description="Views of a running broker, read from the inspector's JSON API "
                                      "(served beside /metrics when metrics.port > 0).")
    live.add_argument("--url", default=os.environ.get("KAFKA_INSPECT_URL", DEFAULT_URL),
                      help=f"the broker's metrics endpoint (default {DEFAULT_URL}, or $KAFKA_INSPECT_URL)")
    live.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for an answer")
    views = live.add_subparsers(dest="view", required=True)

    def view(name: str, help_text: str, paged: bool = False) -> argparse.ArgumentParser:
        p = views.add_parser(name, help=help_text)
        p.add_argument("--json", action="store_true", help="the API's JSON")
        if paged:
            p.add_argument("--page", type=int, help="only this page (from 1)")
            p.add_argument("--size", type=int, default=None, help="rows a page")
        return p

    view("overview", "brokers, coordinators, leaders and counts")
    t = view("transactions", "every transactional id with its state", paged=True)
    t.add_argument("--state", help="only these states (comma-separated names, or 'open')")
    t.add_argument("--contains", help="only ids containing this")
    t.add_argument("--producer-id", type=int)
    tl = view("timeline", "one transactional id: its state and what it did")
    tl.add_argument("transactional_id")
    p = view("partitions", "offsets, LSO and the open transactions holding it, producers, segments", paged=True)
    p.add_argument("--topic")
    p.add_argument("--contains", help="only topics containing this")
    p.add_argument("--open", action="store_true", help="only partitions with open transactions")
    p.add_argument("--leaders", action="store_true", help="leaders only (not followers' replicas)")
    g = view("groups", "members, assignments, committed offsets and lag, pending transactional offsets", paged=True)
    g.add_argument("--contains", help="only group ids containing this")
    g.add_argument("--pending", action="store_true", help="only groups with pending transactional offsets")
    h = view("hanging", "hanging transactions, as kafka-transactions.sh find-hanging finds them")
    h.add_argument("--max-transaction-timeout-ms", type=int,
                   help="idle this long before hanging (default: the broker's transaction.max.timeout.ms)")
    h.add_argument("--topic")
    h.add_argument("--partition", type=int)
    h.add_argument("--all", action="store_true", help="every open transaction with its status, not the table")
    a = view("abort", "abort a hanging transaction, as kafka-transactions.sh abort does")
    a.add_argument("--topic", required=True)
    a.add_argument("--partition", type=int, required=True)
    a.add_argument("--start-offset", type=int, help="the first offset of the transaction to abort")
    a.add_argument("--producer-id", type=int)
    a.add_argument("--producer-epoch", type=int)
    a.add_argument("--coordinator-epoch", type=int)
    f = view("files", "partition directories, their files, or a file decoded as kafka-dump-log.sh prints it")
    f.add_argument("dir", nargs="?", help="a partition directory (topic-partition)")
    f.add_argument("file", nargs="?", help="one of its files")
    f.add_argument("--broker", type=int, help="the broker whose log dirs to read (default: the one asked)")
    f.add_argument("--contains", help="directories whose name contains this")
    f.add_argument("--deep-iteration", action="store_true")
    f.add_argument("--print-data-log", action="store_true")
    decoder = f.add_mutually_exclusive_group()
    decoder.add_argument("--transaction-log-decoder", action="store_const", dest="decoder", const="transaction-log")
    decoder.add_argument("--offsets-decoder", action="store_const", dest="decoder", const="offsets")
    f.add_argument("--max-bytes", type=int, default=INT32_MAX)


class Client:
    def __init__(self, url: str, timeout: float) -> None:
        self.base = url.rstrip("/")
        if not self.base.startswith(("http://", "https://")):
            self.base = "http://" + self.base
        self.timeout = timeout

    def _call(self, request: urllib.request.Request) -> Any:
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            body = e.read()
            try:
                doc = json.loads(body)
            except ValueError:
                raise LiveError(f"{request.full_url}: HTTP {e.code} {body.decode(errors='replace').strip()}") from None
            if isinstance(doc, dict) and "error" in doc and e.code != 409:
                raise LiveError(f"{request.full_url}: HTTP {e.code}: {doc['error']}") from None
            return doc  # 409: the broker's answer (a refused abort) is the result
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise LiveError(f"cannot reach the inspector at {self.base}: {reason} (is metrics.port set?)") from None

    def get(self, path: str, query: dict[str, Any] | None = None) -> Any:
        q = {k: v for k, v in (query or {}).items() if v is not None and v is not False}
        url = f"{self.base}/inspect/api/{path}" + ("?" + urlencode(q) if q else "")
        return self._call(urllib.request.Request(url, headers={"Accept": "application/json"}))

    def post(self, path: str, doc: dict[str, Any]) -> Any:
        url = f"{self.base}/inspect/api/{path}"
        return self._call(urllib.request.Request(url, data=json.dumps(doc).encode(), method="POST",
                                                 headers={"Content-Type": "application/json"}))

    def pages(self, path: str, key: str, query: dict[str, Any], page: int | None, size: int | None) -> dict[str, Any]:
        """One page, or every page merged under ``key``."""
        if page is not None:
            return dict(self.get(path, {**query, "page": page, "size": size}))
        first = dict(self.get(path, {**query, "page": 1, "size": size or PAGE_SIZE}))
        rows = list(first[key])
        for n in range(2, first["pages"] + 1):
            rows += self.get(path, {**query, "page": n, "size": size or PAGE_SIZE})[key]
        first[key] = rows
        first["page"], first["pages"] = 1, 1
        return first


def _print(out: TextIO, lines: Iterable[str]) -> None:
    for line in lines:
        out.write(line + "\n")


def _fetch(c: Client, args: argparse.Namespace) -> tuple[Any, Callable[[Any], Iterable[str]]]:
    v = args.view
    if v == "overview":
        return c.get("overview"), overview_lines
    if v == "transactions":
        return c.pages("transactions", "transactions", {"state": args.state, "q": args.contains,
                                                        "producer_id": args.producer_id}, args.page,
                       args.size), transactions_lines
    if v == "timeline":
        return c.get("transactions/" + quote(args.transactional_id, safe="")), timeline_lines
    if v == "partitions":
        view = c.pages("partitions", "partitions", {"topic": args.topic, "q": args.contains,
                                                    "open": "1" if args.open else None,
                                                    "role": "leader" if args.leaders else None}, args.page, args.size)
        return view, lambda d: partitions_lines(d["partitions"])
    if v == "groups":
        return c.pages("groups", "groups", {"q": args.contains, "pending": "1" if args.pending else None},
                       args.page, args.size), groups_lines
    if v == "hanging":
        view = c.get("hanging", {"max_transaction_timeout_ms": args.max_transaction_timeout_ms, "topic": args.topic,
                                 "partition": args.partition})
        return view, open_transactions_lines if args.all else hanging_lines
    raise AssertionError(v)


def _abort(c: Client, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    doc: dict[str, Any] = {"topic": args.topic, "partition": args.partition, "confirm": True}
    if args.start_offset is not None:
        doc["startOffset"] = args.start_offset
    elif None in (args.producer_id, args.producer_epoch, args.coordinator_epoch):
        err.write("The transaction to abort must be identified either with --start-offset or with --producer-id, "
                  "--producer-epoch and --coordinator-epoch\n")
        return 1
    else:
        doc.update(producerId=args.producer_id, producerEpoch=args.producer_epoch,
                   coordinatorEpoch=args.coordinator_epoch)
    result = c.post("abort", doc)
    if args.json:
        json.dump(result, out, indent=2)
        out.write("\n")
    if "producerId" not in result:  # refused before any marker: the reason
        err.write(f"Failed to abort transaction on {args.topic}-{args.partition}: {result.get('error')}\n")
        return 1
    if not args.json:
        out.write(f"abort {result['topic']}-{result['partition']} producerId: {result['producerId']} "
                  f"producerEpoch: {result['producerEpoch']} coordinatorEpoch: {result['coordinatorEpoch']} "
                  f"error: {result['error']} lastStableOffset: {result['lastStableOffsetBefore']} -> "
                  f"{result['lastStableOffsetAfter']}\n")
    return 0 if result.get("ok") else 1


def _files(c: Client, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if not args.dir:
        view = c.pages("files", "dirs", {"q": args.contains}, None, None)
        if args.json:
            json.dump(view, out, indent=2)
            out.write("\n")
        else:
            _print(out, (f"broker: {d['broker']} {os.path.join(d['logDirPath'], d['dir'])}" for d in view["dirs"]))
        return 0
    query: dict[str, Any] = {"broker": args.broker, "dir": args.dir}
    if not args.file:
        listing = c.get("files", query)
        if args.json:
            json.dump(listing, out, indent=2)
            out.write("\n")
        else:
            _print(out, (f"{f['file']} kind: {f['kind']} sizeBytes: {f['sizeBytes']}" for f in listing["files"]))
        return 0
    decoder = args.decoder or "string"
    query.update(file=args.file, deep="1" if args.deep_iteration else None,
                 data="1" if args.print_data_log else None, decoder=decoder, max_bytes=args.max_bytes)
    doc = c.get("files", query)
    if args.json:
        json.dump({"files": doc["files"], "errors": doc["errors"]}, out, indent=2)
        out.write("\n")
        return 0
    options = FileOptions(deep_iteration=args.deep_iteration, print_data_log=args.print_data_log, decoder=decoder,
                          max_bytes=args.max_bytes)
    for d in doc["files"]:
        _print(out, dump_lines(d, options))
        _print(err, immediate_errors(d))
    _print(err, final_errors(doc["files"]))
    return 0


def run_live(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    c = Client(args.url, args.timeout)
    try:
        if args.view == "abort":
            return _abort(c, args, out, err)
        if args.view == "files":
            return _files(c, args, out, err)
        view, render = _fetch(c, args)
    except LiveError as e:
        err.write(f"{e}\n")
        return 1
    if args.json:
        json.dump(view, out, indent=2)
        out.write("\n")
    else:
        _print(out, render(view))
    return 0
