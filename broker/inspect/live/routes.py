"""The inspector's routes, served by the ``/metrics`` server (``broker.ops.metrics_http``) on the
broker's event loop:

    GET  /inspect                         overview (brokers, coordinators, leaders, counts)
    GET  /inspect/transactions            hanging transactions, then every transactional id
    GET  /inspect/transactions/<id>       one id: its state and its timeline
    GET  /inspect/partitions              offsets, LSO and what holds it, producers, segments
    GET  /inspect/groups                  members, assignments, offsets and lag, pending offsets
    GET  /inspect/files[?broker&dir&file] partition directories, their files, a file decoded
    GET  /inspect/abort?...               the confirmation page of an abort
    POST /inspect/abort                   the abort (form: the fields, ``confirm=yes``, the page's token)
    GET  /inspect/api/<view>              the same views as JSON: overview, transactions,
                                          transactions/<id>, partitions, groups, hanging, files
    POST /inspect/api/abort               the abort (JSON body with ``"confirm": true``)

Pages take the views' query parameters (``page``, ``size``, filters). A request with the header
``X-Inspector-Fragment`` gets only the page's ``<main>``, which the page's script swaps in.

The abort changes state, so it is guarded: off unless ``broker.inspect.live.settings.actions_enabled``;
a form post must carry the token of a page this server rendered and ``confirm=yes``; an API post
must be ``application/json`` (which a page of another site cannot send without the CORS preflight
this server never answers) with ``"confirm": true``; a request whose ``Origin`` is not this host
is refused.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
from collections.abc import Mapping
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote, urlsplit

import structlog

from broker.inspect import jackson
from broker.inspect.dump_text import dump_lines, final_errors, immediate_errors
from broker.inspect.files import DECODERS, FileOptions, dump_file
from broker.inspect.live import views, web
from broker.inspect.live.hanging import AbortError, abort, open_transactions
from broker.inspect.live.settings import actions_enabled
from broker.inspect.log_dump import LogDumpError
from broker.inspect.record_decoders import MissingKeyError

if TYPE_CHECKING:
    from broker.services import Services

log = structlog.get_logger(__name__)

MAX_DUMP_LINES = 20_000
DEFAULT_MAX_BYTES = 1024 * 1024  # a segment read for the page stops here (kafka-dump-log.sh --max-bytes)
STATIC = {"inspector.css": "text/css; charset=utf-8", "inspector.js": "text/javascript; charset=utf-8"}
HTML = {"Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-store"}
JSON = {"Content-Type": "application/json", "Cache-Control": "no-store"}

Answer = tuple[str, dict[str, str], bytes]


def _status(code: int) -> str:
    return {200: "200 OK", 303: "303 See Other", 400: "400 Bad Request", 403: "403 Forbidden",
            404: "404 Not Found", 405: "405 Method Not Allowed", 409: "409 Conflict",
            413: "413 Payload Too Large", 500: "500 Internal Server Error"}[code]


def _query(raw: str) -> dict[str, str]:
    return {k: v[-1] for k, v in parse_qs(raw, keep_blank_values=True).items()}


class Inspector:
    """One broker's inspector: it shows every broker of the process, from this one's page."""

    def __init__(self, broker: Services) -> None:
        self.broker = broker
        self.token = secrets.token_urlsafe(18)  # in every confirmation form this server renders
        self._static: dict[str, bytes] = {}

    # --- entry --------------------------------------------------------------------------------

    async def handle(self, method: str, target: str, headers: Mapping[str, str], body: bytes) -> Answer:
        path, _, raw_query = target.partition("?")
        query = _query(raw_query)
        parts = [unquote(p) for p in path.split("/")[2:] if p != ""]  # after /inspect
        try:
            if method == "POST":
                return await self._post(parts, headers, body)
            if method not in ("GET", "HEAD"):
                return self._text(405, "GET, HEAD or POST\n")
            if parts[:1] == ["static"]:
                return self._static_file(parts[1] if len(parts) == 2 else "")
            if parts[:1] == ["api"]:
                return await self._api(parts[1:], query)
            return await self._page(parts, query, "x-inspector-fragment" in headers)
        except views.BadRequest as e:
            if parts[:1] == ["api"]:
                return self._json(e.status, {"error": str(e)})
            return self._html(e.status, "Error", "", web.error_html(e.status, str(e)), False)
        except Exception as e:  # noqa: BLE001 - a failing view must never hurt the broker
            log.exception("inspector request failed", target=target)
            if parts[:1] == ["api"]:
                return self._json(500, {"error": f"{type(e).__name__}: {e}"})
            return self._html(500, "Error", "", web.error_html(500, f"{type(e).__name__}: {e}"), False)

    # --- answers --------------------------------------------------------------------------------

    @staticmethod
    def _text(status: int, text: str) -> Answer:
        return _status(status), {"Content-Type": "text/plain; charset=utf-8"}, text.encode()

    @staticmethod
    def _json(status: int, doc: Any) -> Answer:
        return _status(status), dict(JSON), json.dumps(jackson.plain(doc), default=str).encode()

    @staticmethod
    def _html(status: int, title: str, here: str, main: str, refresh: bool = True, fragment: bool = False) -> Answer:
        text = main if fragment else web.layout(title, here, main, refresh)
        return _status(status), dict(HTML), text.encode()

    def _static_file(self, name: str) -> Answer:
        if name not in STATIC:
            return self._text(404, "no such file\n")
        if name not in self._static:
            self._static[name] = resources.files("broker.inspect.live").joinpath("static", name).read_bytes()
        return _status(200), {"Content-Type": STATIC[name], "Cache-Control": "max-age=300"}, self._static[name]

    # --- pages ---------------------------------------------------------------------------------

    async def _page(self, parts: list[str], query: dict[str, str], fragment: bool) -> Answer:
        b = self.broker
        actions = actions_enabled(b.config)
        if not parts:
            return self._html(200, "Overview", "overview", web.overview_html(views.overview(b, query)), fragment=fragment)
        head = parts[0]
        if head == "transactions" and len(parts) == 1:
            main = web.transactions_html(views.transactions(b, query), views.hanging(b, query), query, actions)
            return self._html(200, "Transactions", "transactions", main, fragment=fragment)
        if head == "transactions" and len(parts) == 2:
            main = web.transaction_html(views.transaction(b, parts[1]), actions)
            return self._html(200, parts[1], "transactions", main, fragment=fragment)
        if head == "partitions" and len(parts) == 1:
            return self._html(200, "Partitions", "partitions", web.partitions_html(views.partitions(b, query), query),
                              fragment=fragment)
        if head == "groups" and len(parts) == 1:
            return self._html(200, "Groups", "groups", web.groups_html(views.groups(b, query), query), fragment=fragment)
        if head == "files" and len(parts) == 1:
            return await self._files_page(query, fragment)
        if head == "abort" and len(parts) == 1:
            return self._abort_page(query)
        return self._html(404, "Not found", "", web.error_html(404, "No such page: try /inspect"), False)

    async def _files_page(self, query: dict[str, str], fragment: bool) -> Answer:
        b = self.broker
        name = query.get("dir")
        if not name:
            return self._html(200, "Files", "files", web.dirs_html(views.file_dirs(b, query), query), fragment=fragment)
        node = views.int_param(query, "broker")
        log_dir = views.int_param(query, "logdir")
        directory = views.partition_dir(b, node, name, log_dir)
        node = node if node is not None else b.node_id
        file = query.get("file")
        if not file:
            main = web.files_html(node, name, log_dir, directory, views.files_in(directory))
            return self._html(200, name, "files", main, fragment=fragment)
        path = views.file_path(b, node, name, file, log_dir)
        options = self._dump_options(query, name)
        dumped = await self._dump(path, options)
        lines: list[str] = []
        truncated = False
        for line in dump_lines(dumped, options):
            if len(lines) >= MAX_DUMP_LINES:
                truncated = True
                break
            lines.append(line)
        errors = list(immediate_errors(dumped)) + list(final_errors([dumped]))
        main = web.dump_html(node, name, file, {"max_bytes": options.max_bytes}, _command(path, options), lines,
                             errors, truncated)
        return self._html(200, f"{name}/{file}", "files", main, refresh=False, fragment=fragment)

    @staticmethod
    def _dump_options(query: dict[str, str], dir_name: str) -> FileOptions:
        """kafka-dump-log.sh's options from the query: ``deep``, ``data``, ``decoder`` (``auto``: the
        coordinator records' decoder for __transaction_state and __consumer_offsets once data is
        printed), ``max_bytes`` (1 MiB unless given) and the index checks."""
        on = ("1", "true", "yes")
        data = query.get("data") in on
        decoder = query.get("decoder") or "auto"
        if decoder == "auto":
            decoder = views.default_decoder(dir_name) if data else "string"
        if decoder not in DECODERS:
            raise views.BadRequest(f"decoder must be one of auto, {', '.join(DECODERS)}")
        return FileOptions(
            deep_iteration=query.get("deep") in on, print_data_log=data, decoder=decoder,
            skip_record_metadata=query.get("skip_record_metadata") in on,
            verify_index_only=query.get("verify_index_only") in on,
            index_sanity_check=query.get("index_sanity_check") in on,
            max_bytes=views.int_param(query, "max_bytes", DEFAULT_MAX_BYTES, 1) or DEFAULT_MAX_BYTES)

    @staticmethod
    async def _dump(path: str, options: FileOptions) -> dict[str, Any]:
        """Decoded off the event loop: it reads files only, never the broker's state."""
        try:
            return await asyncio.to_thread(dump_file, path, options)
        except (OSError, LogDumpError, MissingKeyError) as e:
            raise views.BadRequest(str(e), 409) from None

    def _abort_page(self, query: dict[str, str]) -> Answer:
        if not actions_enabled(self.broker.config):
            return self._html(403, "Abort", "transactions", web.error_html(
                403, "The abort action is off: the inspector is not served on loopback only "
                     "(inspector.actions.enable=true allows it)."), False)
        details = {k: query.get(k) for k in ("topic", "partition", "producer_id", "producer_epoch",
                                             "coordinator_epoch", "start_offset")}
        error = None
        topic, partition = details["topic"], views.int_param(query, "partition")
        start = views.int_param(query, "start_offset")
        if topic and partition is not None and start is not None and not any(
                t.start_offset == start for t in open_transactions(self.broker, topic, partition)):
            error = f"There is no open transaction from offset {start} on {topic}-{partition} any more."
        return self._html(200, "Abort", "transactions", web.abort_confirm_html(details, self.token, error), False)

    # --- the JSON API ----------------------------------------------------------------------------

    async def _api(self, parts: list[str], query: dict[str, str]) -> Answer:
        b = self.broker
        name = parts[0] if parts else ""
        if name == "overview" and len(parts) == 1:
            return self._json(200, views.overview(b, query))
        if name == "transactions" and len(parts) == 1:
            return self._json(200, views.transactions(b, query))
        if name == "transactions" and len(parts) == 2:
            return self._json(200, views.transaction(b, parts[1]))
        if name == "partitions" and len(parts) == 1:
            return self._json(200, views.partitions(b, query))
        if name == "groups" and len(parts) == 1:
            return self._json(200, views.groups(b, query))
        if name == "hanging" and len(parts) == 1:
            return self._json(200, views.hanging(b, query))
        if name == "files" and len(parts) == 1:
            return await self._files_api(query)
        return self._json(404, {"error": "no such view", "views": ["overview", "transactions", "transactions/<id>",
                                                                   "partitions", "groups", "hanging", "files"]})

    async def _files_api(self, query: dict[str, str]) -> Answer:
        b = self.broker
        name = query.get("dir")
        if not name:
            return self._json(200, views.file_dirs(b, query))
        node = views.int_param(query, "broker")
        log_dir = views.int_param(query, "logdir")
        directory = views.partition_dir(b, node, name, log_dir)
        file = query.get("file")
        if not file:
            return self._json(200, {"broker": node if node is not None else b.node_id, "dir": name,
                                    "path": directory, "files": views.files_in(directory)})
        path = views.file_path(b, node, name, file, log_dir)
        options = self._dump_options(query, name)
        dumped = await self._dump(path, options)
        return self._json(200, {"files": [dumped], "errors": list(final_errors([dumped])),
                                "options": {"deepIteration": options.deep_iteration,
                                            "printDataLog": options.print_data_log, "decoder": options.decoder,
                                            "maxBytes": options.max_bytes}})

    # --- the abort action -----------------------------------------------------------------------

    async def _post(self, parts: list[str], headers: Mapping[str, str], body: bytes) -> Answer:
        api = parts[:1] == ["api"]
        if parts not in (["abort"], ["api", "abort"]):
            return self._text(405, "only the abort action is posted\n")
        refused = self._refused(headers)
        if refused is not None:
            return self._json(403, {"error": refused}) if api else self._html(
                403, "Abort", "transactions", web.error_html(403, refused), False)
        if api:
            if not headers.get("content-type", "").startswith("application/json"):
                return self._json(400, {"error": "post the abort as application/json"})
            try:
                doc = json.loads(body or b"{}")
            except ValueError as e:
                return self._json(400, {"error": f"not JSON: {e}"})
            if not isinstance(doc, dict) or doc.get("confirm") is not True:
                return self._json(400, {"error": 'an abort needs "confirm": true'})
            try:
                result = await self._abort({k: doc.get(k) for k in (
                    "topic", "partition", "startOffset", "producerId", "producerEpoch", "coordinatorEpoch")})
            except (AbortError, ValueError, TypeError) as e:
                return self._json(409, {"error": str(e)})
            return self._json(200 if result["ok"] else 409, result)
        form = _query(body.decode("utf-8", "replace"))
        details = {k: form.get(k) for k in ("topic", "partition", "producer_id", "producer_epoch",
                                            "coordinator_epoch", "start_offset")}
        if not secrets.compare_digest(form.get("token", ""), self.token):
            return self._html(403, "Abort", "transactions", web.abort_confirm_html(
                details, self.token, "This form is stale (the broker restarted?): confirm again."), False)
        if form.get("confirm") != "yes":
            return self._html(400, "Abort", "transactions", web.abort_confirm_html(
                details, self.token, "Tick the confirmation to abort."), False)
        try:
            result = await self._abort({"topic": form.get("topic"), "partition": form.get("partition"),
                                        "startOffset": form.get("start_offset") or None,
                                        "producerId": form.get("producer_id") or None,
                                        "producerEpoch": form.get("producer_epoch") or None,
                                        "coordinatorEpoch": form.get("coordinator_epoch") or None})
        except (AbortError, ValueError, TypeError) as e:
            return self._html(409, "Abort", "transactions", web.abort_confirm_html(details, self.token, str(e)), False)
        log.warning("transaction aborted from the inspector", topic=result["topic"], partition=result["partition"],
                    producer_id=result["producerId"], producer_epoch=result["producerEpoch"], error=result["error"])
        return self._html(200 if result["ok"] else 409, "Abort", "transactions", web.abort_result_html(result), False)

    def _refused(self, headers: Mapping[str, str]) -> str | None:
        if not actions_enabled(self.broker.config):
            return ("The abort action is off: the inspector is not served on loopback only "
                    "(inspector.actions.enable=true allows it).")
        origin = headers.get("origin")
        if origin and origin != "null" and urlsplit(origin).netloc != headers.get("host", ""):
            return f"refused: a request from {origin} to {headers.get('host')}"
        return None

    async def _abort(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        def number(name: str) -> int | None:
            value = fields.get(name)
            return None if value is None or value == "" else int(value)

        topic = fields.get("topic")
        partition = number("partition")
        if not topic or partition is None:
            raise AbortError("topic and partition are required")
        start = number("startOffset")
        if start is not None:
            return await abort(self.broker, str(topic), partition, start_offset=start)
        return await abort(self.broker, str(topic), partition, producer_id=number("producerId"),
                           producer_epoch=number("producerEpoch"), coordinator_epoch=number("coordinatorEpoch"))


def _command(path: str, options: FileOptions) -> str:
    """The kafka-dump-log.sh command that prints the same."""
    args = ["kafka-dump-log.sh", "--files", os.path.basename(os.path.dirname(path)) + "/" + os.path.basename(path)]
    if options.deep_iteration:
        args.append("--deep-iteration")
    if options.print_data_log:
        args.append("--print-data-log")
    if options.decoder == "transaction-log":
        args.append("--transaction-log-decoder")
    elif options.decoder == "offsets":
        args.append("--offsets-decoder")
    if options.max_bytes != 2**31 - 1:
        args += ["--max-bytes", str(options.max_bytes)]
    return " ".join(args)
