"""``python -m broker.inspect``: the transaction inspector's command line.

    python -m broker.inspect files PATH... [--deep-iteration] [--print-data-log]
                             [--transaction-log-decoder | --offsets-decoder] [--json]
    python -m broker.inspect offline LOG_DIRS partitions [--topic T]... [--skip-empty] [--json]
    python -m broker.inspect offline LOG_DIRS transactions [--json]

    python -m broker.inspect live [--url URL] overview|transactions|timeline ID|partitions|groups|hanging|abort|files

``files`` prints what ``kafka-dump-log.sh --files PATH,...`` prints (same options, same text; a
directory stands for its segment files); ``offline`` reads a data directory (``log.dirs``) with
the broker stopped; ``live`` asks a running broker's inspector (``broker.inspect.live_cli``) for
the same views and more, and prints them with the same renderers. Every command takes ``--json``
for the same data as one JSON document.

The data-directory views are named in ``VIEWS`` (view -> how to read it offline, how to write it
as text).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TextIO

from broker.inspect import jackson
from broker.inspect.dump_text import dump_lines, final_errors, immediate_errors
from broker.inspect.files import FileOptions, dump_file, expand
from broker.inspect.live_cli import add_parser as add_live_parser
from broker.inspect.live_cli import run_live
from broker.inspect.log_dump import INT32_MAX, LogDumpError
from broker.inspect.partitions_view import partitions
from broker.inspect.record_decoders import MissingKeyError
from broker.inspect.transactions_view import transactions
from broker.inspect.views_text import partitions_lines, transactions_lines

PROG = "python -m broker.inspect"


def _partitions(log_dirs: str, args: argparse.Namespace) -> dict[str, Any]:
    found = partitions(log_dirs, set(args.topic) if args.topic else None)
    if args.skip_empty:
        found = [p for p in found if p["logEndOffset"] > p["logStartOffset"] or p["producerSnapshot"]["producers"]]
    return {"partitions": found}


def _partitions_text(view: dict[str, Any]) -> Iterable[str]:
    return partitions_lines(view["partitions"])


# view -> (read it from a data directory, write it as text)
VIEWS: dict[str, tuple[Callable[[str, argparse.Namespace], dict[str, Any]], Callable[[dict[str, Any]], Iterable[str]]]] = {
    "partitions": (_partitions, _partitions_text),
    "transactions": (lambda log_dirs, _args: transactions(log_dirs), transactions_lines),
}


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog=PROG, description="Inspect segment files, partitions and transactions.")
    sub = ap.add_subparsers(dest="command", required=True)

    files = sub.add_parser("files", help="decode segment files as kafka-dump-log.sh does",
                           description="Decode .log, .index, .timeindex, .txnindex and .snapshot files as "
                                       "kafka-dump-log.sh (DumpLogSegments) prints them.")
    files.add_argument("paths", nargs="+", metavar="PATH",
                       help="files (or comma-separated lists of files, as --files takes them); a "
                            "directory stands for its segment files")
    files.add_argument("--deep-iteration", action="store_true", help="every record, not only batches")
    files.add_argument("--print-data-log", action="store_true", help="keys and values (implies --deep-iteration)")
    decoder = files.add_mutually_exclusive_group()
    decoder.add_argument("--transaction-log-decoder", action="store_const", dest="decoder",
                         const="transaction-log", help="decode __transaction_state records")
    decoder.add_argument("--offsets-decoder", action="store_const", dest="decoder", const="offsets",
                         help="decode __consumer_offsets records")
    files.add_argument("--skip-record-metadata", action="store_true", help="only keys and values of records")
    files.add_argument("--verify-index-only", action="store_true", help="check indexes without listing them")
    files.add_argument("--index-sanity-check", action="store_true",
                       help="only the start-up sanity check of indexes")
    files.add_argument("--max-bytes", type=int, default=INT32_MAX, help="read only this many bytes of a .log")
    files.add_argument("--json", action="store_true", help="one JSON document instead of text")
    files.set_defaults(decoder="string")

    offline = sub.add_parser("offline", help="views of a data directory, read from its files",
                             description="Views of a data directory (log.dirs, comma-separated; a "
                                         "--brokers N directory stands for its brokers' log dirs).")
    offline.add_argument("log_dirs", metavar="LOG_DIRS")
    views = offline.add_subparsers(dest="view", required=True)
    parts = views.add_parser("partitions", help="offsets, segments, producer states, aborted transactions")
    parts.add_argument("--topic", action="append", help="only this topic (repeatable)")
    parts.add_argument("--skip-empty", action="store_true", help="leave out partitions with no records and no producers")
    parts.add_argument("--json", action="store_true")
    txns = views.add_parser("transactions", help="transactional ids and their latest state")
    txns.add_argument("--json", action="store_true")
    add_live_parser(sub)
    return ap


def _print_json(doc: Any, out: TextIO) -> None:
    json.dump(jackson.plain(doc), out, indent=2)
    out.write("\n")


def run_files(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    options = FileOptions(
        deep_iteration=args.deep_iteration, print_data_log=args.print_data_log, decoder=args.decoder,
        skip_record_metadata=args.skip_record_metadata, verify_index_only=args.verify_index_only,
        index_sanity_check=args.index_sanity_check, max_bytes=args.max_bytes,
    )
    dumps = []
    for path in expand(args.paths):
        try:
            d = dump_file(path, options)
        except (OSError, LogDumpError, MissingKeyError) as e:
            out.flush()
            err.write(f"{e}\n")
            return 1
        dumps.append(d)
        if not args.json:
            for line in dump_lines(d, options):
                out.write(line + "\n")
            out.flush()
            for line in immediate_errors(d):
                err.write(line + "\n")
    if args.json:
        _print_json({"files": dumps, "errors": list(final_errors(dumps))}, out)
    else:
        for line in final_errors(dumps):
            err.write(line + "\n")
    return 0


def run_view(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    load, render = VIEWS[args.view]
    try:
        view = load(args.log_dirs, args)
    except OSError as e:
        err.write(f"{e}\n")
        return 1
    if args.json:
        _print_json(view, out)
    else:
        for line in render(view):
            out.write(line + "\n")
    return 0


def main(argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    args = build_parser().parse_args(argv)
    out = out or sys.stdout
    err = err or sys.stderr
    if args.command == "files":
        return run_files(args, out, err)
    if args.command == "live":
        return run_live(args, out, err)
    return run_view(args, out, err)
