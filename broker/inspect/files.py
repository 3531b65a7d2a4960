"""Any file of a partition directory, decoded as ``kafka-dump-log.sh`` (DumpLogSegments) decodes
it, picked by its suffix as the tool picks: ``.log``, ``.index``, ``.timeindex``, ``.txnindex``,
``.snapshot``; anything else is ignored with a message.

Each file becomes one dict (``{"file": ..., "kind": ..., ...}``) with the fields the tool prints
under the names it prints them with; ``broker.inspect.dump_text`` writes that dict as the tool's
text, and ``--json`` writes it as it is.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from broker.inspect.index_dump import dump_offset_index, dump_time_index, dump_txn_index, offset_index_entries
from broker.inspect.log_dump import INT32_MAX, LogDumpOptions, dump_log
from broker.inspect.record_decoders import Parser, offsets_parser, string_parser, transaction_log_parser
from broker.inspect.snapshot_dump import dump_snapshot

DECODERS: dict[str, Parser] = {
    "string": string_parser,
    "transaction-log": transaction_log_parser,
    "offsets": offsets_parser,
}
KINDS = {".log": "log", ".index": "index", ".timeindex": "timeindex", ".txnindex": "txnindex",
         ".snapshot": "snapshot"}
_SLASHES = re.compile(r"/{2,}")


@dataclass(frozen=True, slots=True)
class FileOptions:
    """DumpLogSegments' options: a decoder implies --print-data-log, which implies --deep-iteration."""

    deep_iteration: bool = False
    print_data_log: bool = False
    decoder: str = "string"
    skip_record_metadata: bool = False
    verify_index_only: bool = False
    index_sanity_check: bool = False
    max_bytes: int = INT32_MAX

    @property
    def prints_data(self) -> bool:
        return self.print_data_log or self.decoder != "string"

    @property
    def deep(self) -> bool:
        return self.deep_iteration or self.prints_data


def java_path(path: str) -> str:
    """How java.io.File prints a path it was given: repeated and trailing slashes dropped."""
    p = _SLASHES.sub("/", path)
    return p[:-1] if len(p) > 1 and p.endswith("/") else p


def expand(paths: list[str]) -> list[str]:
    """Comma-separated lists split (as ``--files``); a directory stands for its files, sorted."""
    out: list[str] = []
    for arg in paths:
        for path in filter(None, arg.split(",")):
            if os.path.isdir(path):
                out += [os.path.join(path, n) for n in sorted(os.listdir(path))
                        if os.path.splitext(n)[1] in KINDS]
            else:
                out.append(path)
    return out


def dump_file(path: str, options: FileOptions) -> dict[str, Any]:
    shown = java_path(path)
    kind = KINDS.get(os.path.splitext(path)[1], "unknown")
    head: dict[str, Any] = {"file": shown, "path": os.path.abspath(path), "kind": kind}
    if kind == "log":
        return head | dump_log(path, LogDumpOptions(options.deep, options.prints_data, DECODERS[options.decoder],
                                                    options.max_bytes))
    if kind == "index":
        if options.index_sanity_check:
            entries = offset_index_entries(path)
            return head | {"entries": [], "empty": not entries, "sanity": _offset_index_sane(path, entries)}
        return head | dump_offset_index(path)
    if kind == "timeindex":
        if options.index_sanity_check:
            return head | {"entries": [], "sanity": _time_index_sane(path)}
        return head | dump_time_index(path)
    if kind == "txnindex":
        return head | dump_txn_index(path)
    if kind == "snapshot":
        return head | dump_snapshot(path)
    return head


def _offset_index_sane(path: str, entries: list[tuple[int, int]]) -> bool:
    """OffsetIndex.sanityCheck: whole entries, and the last offset not below the base offset."""
    base = int(os.path.basename(path).split(".")[0])
    return os.path.getsize(path) % 8 == 0 and (not entries or entries[-1][0] >= base)


def _time_index_sane(path: str) -> bool:
    """TimeIndex.sanityCheck: whole entries, the last entry's offset not below the base offset and
    its timestamp not below the first's."""
    size = os.path.getsize(path)
    if size % 12:
        return False
    entries = dump_time_index(path)["entries"] if size else []
    base = int(os.path.basename(path).split(".")[0])
    return not entries or (entries[-1]["offset"] >= base and entries[-1]["timestamp"] >= entries[0]["timestamp"])
