"""The inspector's HTML: each page is the JSON view of ``views`` written as tables, rendered on the
broker (no front-end build, no external resources: one stylesheet and one small script served
from ``static/``). ``<main id="view">`` is what the script refreshes in place.

Elements carry ``data-*`` attributes naming what they show (a transactional id, a state, a
partition), for people reading the source and for the browser tests.
"""

from __future__ import annotations

import html
import time
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote, urlencode

NAV = [("overview", "/inspect", "Overview"), ("transactions", "/inspect/transactions", "Transactions"),
       ("partitions", "/inspect/partitions", "Partitions"), ("groups", "/inspect/groups", "Groups"),
       ("files", "/inspect/files", "Files")]
LEADERS_SHOWN = 64  # partitions a topic shows on the overview (the Partitions page has them all)
STATES = ["Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort",
          "PrepareEpochFence", "Dead"]


def h(value: Any) -> str:
    if value is None:
        return '<span class="muted">–</span>'
    return html.escape(str(value))


def attr(value: Any) -> str:
    """A value inside an attribute ("" for None)."""
    return "" if value is None else html.escape(str(value), quote=True)


def ts(ms: int | None) -> str:
    """A broker timestamp as UTC time of day (the date and local time on hover)."""
    if ms is None or ms < 0:
        return h(None)
    t = time.gmtime(ms / 1000)
    return f'<span class="mono" data-ms="{ms}">{time.strftime("%H:%M:%S", t)}.{ms % 1000:03d}Z</span>'


def age(ms: int | None) -> str:
    if ms is None:
        return h(None)
    s = ms / 1000
    if s < 60:
        text = f"{s:.1f} s"
    elif s < 3600:
        text = f"{int(s // 60)} min {int(s % 60)} s"
    elif s < 86400:
        text = f"{int(s // 3600)} h {int(s % 3600 // 60)} min"
    else:
        text = f"{int(s // 86400)} d {int(s % 86400 // 3600)} h"
    return f'<span class="nw">{text}</span>'


def state(name: str | None, extra: str = "") -> str:
    if name is None:
        return h(None)
    return f'<span class="state {h(name)}{extra}">{h(name)}</span>'


def txn_link(txn_id: str | None) -> str:
    if txn_id is None:
        return h(None)
    return f'<a href="/inspect/transactions/{quote(txn_id, safe="")}">{h(txn_id)}</a>'


def tp_chips(groups: Iterable[Mapping[str, Any]]) -> str:
    return "".join(f'<span class="chip">{h(g["topic"])}-{p}</span>' for g in groups for p in g["partitions"]) or h(None)


def tp_list(parts: Iterable[Mapping[str, Any]], extra: str = "") -> str:
    out = []
    for p in parts:
        label = f'{h(p["topic"])}-{p["partition"]}'
        if extra and p.get(extra) is not None:
            label += f' <span class="muted">@{h(p[extra])}</span>'
        out.append(f'<span class="chip">{label}</span>')
    return "".join(out) or h(None)


def _qs(query: Mapping[str, str], **changes: Any) -> str:
    merged = {k: v for k, v in query.items() if v not in ("", None)}
    for k, v in changes.items():
        if v is None:
            merged.pop(k, None)
        else:
            merged[k] = str(v)
    return "?" + urlencode(merged) if merged else ""


def pager(view: Mapping[str, Any], path: str, query: Mapping[str, str]) -> str:
    n, pages, total = view["page"], view["pages"], view["total"]
    links = []
    if n > 1:
        links.append(f'<a href="{path}{h(_qs(query, page=1))}">« first</a>')
        links.append(f'<a href="{path}{h(_qs(query, page=n - 1))}" rel="prev">‹ prev</a>')
    if n < pages:
        links.append(f'<a href="{path}{h(_qs(query, page=n + 1))}" rel="next">next ›</a>')
        links.append(f'<a href="{path}{h(_qs(query, page=pages))}">last »</a>')
    return (f'<div class="pager" data-total="{total}">page {n} of {pages} ({total} in all, {view["size"]} a page) '
            + " ".join(links) + "</div>")


def layout(title: str, here: str, main: str, refresh: bool = True) -> str:
    nav = "".join(f'<a href="{href}"{" class=here" if key == here else ""}>{label}</a>' for key, href, label in NAV)
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{h(title)} · Kafka inspector</title>"
        '<link rel="stylesheet" href="/inspect/static/inspector.css">'
        '<script src="/inspect/static/inspector.js" defer></script></head><body>'
        f'<header><span class="brand">Kafka transaction inspector</span><nav>{nav}</nav>'
        '<span class="live"><label><input type="checkbox" id="live" checked> live</label> every '
        '<select id="every"><option value="1">1 s</option><option value="2" selected>2 s</option>'
        '<option value="5">5 s</option><option value="10">10 s</option></select><span id="updated"></span></span>'
        "</header>"
        f'<main id="view" data-refresh="{1 if refresh else 0}">{main}</main></body></html>'
    )


# --- overview ------------------------------------------------------------------------------------

def overview_html(v: Mapping[str, Any]) -> str:
    t = v["transactions"]
    hanging = v["hanging"]
    cards = [
        ("Transactional ids", t["total"], "/inspect/transactions", False),
        ("Open transactions", t["open"], "/inspect/transactions?state=open", False),
        ("Hanging", len(hanging), "/inspect/transactions#hanging", bool(hanging)),
        ("Partition replicas", v["partitions"]["replicas"], "/inspect/partitions", False),
        ("Open transactions on partitions", v["partitions"]["openTransactionCount"],
         "/inspect/partitions?open=1", False),
        ("Groups", v["groups"], "/inspect/groups", False),
    ]
    out = [f'<h1>Overview <span class="muted">cluster {h(v["clusterId"])}, page served by broker '
           f'{v["thisBroker"]} at {ts(v["now"])}</span></h1><div class="cards">']
    for label, n, href, bad in cards:
        out.append(f'<a class="card{" bad" if bad else ""}" href="{href}" data-card="{attr(label)}">'
                   f'<div class="n">{n}</div><div class="muted">{h(label)}</div></a>')
    out.append("</div>")
    if hanging:
        out.append(f'<div class="alert">{len(hanging)} hanging transaction(s) hold back the last stable offset of '
                   + ", ".join(f'{h(r["topic"])}-{r["partition"]} (producer {r["producerId"]}, from offset '
                               f'{r["startOffset"]})' for r in hanging[:10])
                   + '. <a href="/inspect/transactions#hanging">See them</a>.</div>')
    states = " ".join(f'<a href="/inspect/transactions?state={s}">{state(s)} {n}</a>' for s, n in t["byState"].items())
    out.append(f"<h2>Transactions by state</h2><p>{states or h(None)}"
               + (f' · oldest open: {age(t["oldestOpenMs"])}' if t["oldestOpenMs"] is not None else "")
               + "</p>")
    if t["loading"]:
        out.append(f'<div class="note">Loading __transaction_state partitions: '
                   f'{", ".join(str(x["partition"]) + " on broker " + str(x["broker"]) for x in t["loading"])}</div>')
    out.append("<h2>Brokers</h2><table id=brokers><tr><th>broker</th><th>up</th><th>listeners</th>"
               "<th>inspector</th><th class=num>partitions led</th><th class=num>transaction coordinator "
               "partitions</th><th class=num>group coordinator partitions</th></tr>")
    for b in v["brokers"]:
        port = b["metricsPort"]
        page = f'<a href="http://127.0.0.1:{port}/inspect">:{port}</a>' if port and not b["thisPage"] else (
            "this page" if b["thisPage"] else h(None))
        listeners = " ".join(f'<span class="chip">{h(k)} :{p}</span>' for k, p in b["listeners"].items())
        out.append(f'<tr data-broker="{b["id"]}"><td>{b["id"]}</td><td>{"yes" if b["alive"] else "<b class=err>down</b>"}'
                   f'</td><td>{listeners or h(None)}</td><td>{page}</td><td class=num>{b["partitionsLed"]}</td>'
                   f'<td class=num>{b["transactionCoordinatorPartitions"]}</td>'
                   f'<td class=num>{b["groupCoordinatorPartitions"]}</td></tr>')
    out.append("</table>")
    open_txns = v["partitions"]["openTransactions"]
    if open_txns:
        out.append("<h2>Open transactions on partitions</h2><table><tr><th>partition</th><th>leader</th>"
                   "<th class=num>first offset</th><th>transactional id</th><th>status</th></tr>")
        for r in open_txns[:100]:
            out.append(f'<tr><td>{h(r["topic"])}-{r["partition"]}</td><td>{r["broker"]}</td>'
                       f'<td class=num>{r["startOffset"]}</td><td>{txn_link(r["transactionalId"])}</td>'
                       f'<td>{state(r["status"])}</td></tr>')
        out.append("</table>")
    out.append("<h2>Leaders</h2><p class=muted>Which broker leads each partition (ISR on hover).</p>"
               "<table id=leaders><tr><th>topic</th><th>leader of partition 0, 1, 2, …</th></tr>")
    for topic in v["leaders"]:
        cells = " ".join(f'<span class="chip" title="ISR {attr(topic["isr"][i])}">{i}→{leader}</span>'
                         for i, leader in enumerate(topic["leaders"][:LEADERS_SHOWN]))
        if len(topic["leaders"]) > LEADERS_SHOWN:
            cells += f' <span class="muted">… {len(topic["leaders"]) - LEADERS_SHOWN} more</span>'
        out.append(f'<tr><td><a href="/inspect/partitions?topic={quote(topic["topic"])}">{h(topic["topic"])}</a></td>'
                   f"<td>{cells}</td></tr>")
    out.append("</table>")
    if v["topics"] > len(v["leaders"]):
        out.append(f'<p class="muted">{v["topics"] - len(v["leaders"])} more topics: see Partitions.</p>')
    rec = v["recorder"]
    out.append('<h2>Timeline recorder</h2><p class="muted">'
               + (f'{rec["transactionalIds"]} transactional ids, {rec["events"]} events kept (at most {rec["eventsPerId"]} '
                  f'per id, {rec["maxEvents"]} in all; {rec["forgottenIds"]} ids forgotten)' if rec else "off")
               + f' · abort action: {"enabled" if v["actionsEnabled"] else "off (page not on loopback)"}</p>')
    return "".join(out)


# --- transactions ---------------------------------------------------------------------------------

def hanging_html(hv: Mapping[str, Any], actions: bool) -> str:
    out = [f'<h2 id="hanging">Hanging transactions <span class="muted">(find-hanging: open on a partition, no '
           f'coordinator holds it, producer idle more than {age(hv["maxTransactionTimeoutMs"])})</span></h2>']
    out.append('<form class="filters" method="get"><label>hanging after <input type="number" '
               f'name="max_transaction_timeout_ms" value="{hv["maxTransactionTimeoutMs"]}" min="0" step="1000"> ms'
               '</label><button>apply</button></form>')
    if hv["coordinatorsLoading"]:
        out.append('<div class="note">A coordinator is still loading: nothing is judged hanging yet.</div>')
    rows = [r for r in hv["open"] if r["status"] != "ongoing"]
    if not rows:
        out.append('<p class="muted" id="no-hanging">None: every open transaction is held by its coordinator.</p>')
        return "".join(out)
    out.append('<table id="hanging-table"><tr><th>partition</th><th>leader</th><th>producer id</th><th>epoch</th>'
               "<th>coordinator epoch</th><th class=num>start offset</th><th>last write</th><th>idle</th>"
               "<th>transactional id</th><th>status</th><th>why</th><th></th></tr>")
    for r in rows:
        act = ""
        if actions and r["status"] == "hanging":
            q = urlencode({"topic": r["topic"], "partition": r["partition"], "producer_id": r["producerId"],
                           "producer_epoch": r["producerEpoch"], "coordinator_epoch": r["coordinatorEpoch"],
                           "start_offset": r["startOffset"]})
            act = f'<a class="button danger abort" href="/inspect/abort?{h(q)}">Abort…</a>'
        out.append(
            f'<tr class="{attr(r["status"])}" data-topic="{attr(r["topic"])}" data-partition="{r["partition"]}" '
            f'data-producer-id="{r["producerId"]}" data-status="{attr(r["status"])}"><td>{h(r["topic"])}-{r["partition"]}</td>'
            f'<td>{r["broker"]}</td><td>{r["producerId"]}</td><td>{r["producerEpoch"]}</td>'
            f'<td>{r["coordinatorEpoch"]}</td><td class=num>{r["startOffset"]}</td><td>{ts(r["lastTimestamp"])}</td>'
            f'<td>{age(r["durationMs"])}</td><td>{txn_link(r["transactionalId"])}</td><td>{state(r["status"])}</td>'
            f'<td class="muted">{h(r["reason"])}</td><td>{act}</td></tr>')
    out.append("</table>")
    if not actions:
        out.append('<p class="muted">The abort action is off: this page is not served on loopback only '
                   "(set inspector.actions.enable=true to allow it).</p>")
    return "".join(out)


def transactions_html(v: Mapping[str, Any], hv: Mapping[str, Any], query: Mapping[str, str], actions: bool) -> str:
    out = ['<h1>Transactions</h1>']
    out.append(hanging_html(hv, actions))
    out.append("<h2>Transactional ids</h2>")
    chips = [f'<a class="chip" href="/inspect/transactions{h(_qs(query, state=None, page=None))}">all '
             f'{sum(v["states"].values())}</a>',
             f'<a class="chip" href="/inspect/transactions{h(_qs(query, state="open", page=None))}">open</a>']
    chips += [f'<a class="chip" href="/inspect/transactions{h(_qs(query, state=s, page=None))}">{state(s)} {n}</a>'
              for s, n in v["states"].items()]
    options = "".join(f'<option value="{s}"{" selected" if query.get("state") == s else ""}>{s}</option>'
                      for s in ["", "open", *STATES])
    out.append(f'<div class="filters">{"".join(chips)}</div><form class="filters" method="get">'
               f'<label>id contains <input type="text" name="q" value="{attr(query.get("q", ""))}"></label>'
               f'<label>state <select name="state">{options}</select></label>'
               f'<label>page size <input type="number" name="size" value="{v["size"]}" min="1" max="1000"></label>'
               "<button>filter</button></form>")
    if v["loading"]:
        out.append('<div class="note">Still loading: ' + ", ".join(
            f'__transaction_state-{x["partition"]} on broker {x["broker"]}' for x in v["loading"]) + "</div>")
    out.append(pager(v, "/inspect/transactions", query))
    out.append('<table id="transactions"><tr><th>transactional id</th><th>state</th><th class=num>producer id</th>'
               "<th class=num>epoch</th><th>timeout</th><th>age</th><th>partitions in the transaction</th>"
               "<th>pending markers</th><th>coordinator</th><th>__transaction_state</th><th>last update</th></tr>")
    for t in v["transactions"]:
        pending = "".join(
            f'<span class="chip">{h(m["topic"])}-{m["partition"]}'
            + (f' <span class="err">{h(m["lastError"])} ×{m["attempts"]}</span>' if m["lastError"] else "")
            + "</span>" for m in t["pendingMarkers"]) or h(None)
        st = state(t["state"]) + (f' → {state(t["pendingState"])}' if t["pendingState"] else "")
        if t["timedOut"]:
            st += ' <span class="err" title="past its timeout: the coordinator aborts it">timed out</span>'
        out.append(
            f'<tr data-txn="{attr(t["transactionalId"])}" data-state="{attr(t["state"])}"><td>{txn_link(t["transactionalId"])}'
            f'</td><td>{st}</td><td class=num>{t["producerId"]}</td><td class=num>{t["producerEpoch"]}</td>'
            f'<td>{age(t["transactionTimeoutMs"])}</td><td>{age(t["ageMs"])}</td>'
            f'<td>{tp_chips(t["topicPartitions"])}</td><td>{pending}</td><td>broker {t["broker"]}</td>'
            f'<td>partition {t["partition"]} <span class="muted">epoch {t["coordinatorEpoch"]}</span></td>'
            f'<td>{ts(t["transactionLastUpdateTimestampMs"])}</td></tr>')
    out.append("</table>")
    out.append(pager(v, "/inspect/transactions", query))
    return "".join(out)


def _event_cells(e: Mapping[str, Any]) -> tuple[str, str, str]:
    """(client request, coordinator, partitions/markers) cells of one timeline event."""
    kind = e["kind"]
    if kind == "request":
        api = e["api"]
        err = e.get("error")
        answer = ("" if err is None else (' <span class="err">' + h(err) + "</span>" if err != "NONE" else " ✓"))
        if e.get("fault"):
            answer += f' <span class="muted">(fault: {h(e["fault"])})</span>'
        if e.get("durationMs") is not None:
            answer += f' <span class="muted">{e["durationMs"]} ms</span>'
        pid = (f' <span class="muted">pid {e["producerId"]} epoch {e["producerEpoch"]}</span>'
               if e.get("producerId") is not None else "")
        detail = ""
        if api == "Produce":
            detail = " " + "".join(
                f'<span class="chip">{h(p["topic"])}-{p["partition"]}'
                + (f' ×{p["records"]}' if p.get("records") is not None else "")
                + (f' @{p["offset"]}' if p.get("offset") is not None and p.get("offset", -1) >= 0 else "")
                + (f' <span class="err">{h(p["error"])}</span>' if p.get("error") else "") + "</span>"
                for p in e.get("partitions", ()))
        elif api == "EndTxn":
            detail = f' <b>{h(e.get("result"))}</b>'
            if e.get("nextProducerEpoch") is not None:
                detail += f' <span class="muted">→ pid {e["nextProducerId"]} epoch {e["nextProducerEpoch"]}</span>'
        elif api == "FindCoordinator":
            detail = f' <span class="muted">→ broker {h(", ".join(map(str, e.get("coordinator", []))) or None)}</span>'
        elif api in ("AddOffsetsToTxn", "TxnOffsetCommit"):
            detail = f' group <b>{h(e.get("groupId"))}</b> ' + tp_list(e.get("partitions", ()), "committedOffset")
        elif api == "InitProducerId":
            detail = f' <span class="muted">timeout {age(e.get("transactionTimeoutMs"))}</span>'
        elif e.get("partitions"):
            detail = " " + tp_list(e["partitions"])
        cell = f'<span class="lane-client">→ <b>{h(api)}</b> v{e["version"]}</span>{pid}{detail}{answer}'
        return cell, "", ""
    if kind == "state":
        cell = (f'<span class="lane-coordinator">{state(e["from"])} → {state(e["to"])}</span> '
                f'<span class="muted">pid {e["producerId"]} epoch {e["producerEpoch"]}</span> '
                + (tp_list(e["partitions"]) if e["partitions"] else "")
                + f' <span class="muted">written to __transaction_state-{e["statePartition"]} @{e["offset"]}, '
                  f'coordinator epoch {e["coordinatorEpoch"]}</span>')
        return "", cell, ""
    if kind == "marker":
        ok = e["error"] == "NONE"
        cell = (f'<span class="lane-partition">{h(e["result"])} marker</span> {h(e["topic"])}-{e["partition"]} '
                + (f'@{e["offset"]}' if ok else f'<span class="err">{h(e["error"])}</span>')
                + f' <span class="muted">pid {e["producerId"]} epoch {e["producerEpoch"]}, coordinator epoch '
                  f'{e["coordinatorEpoch"]}, via {h(e["via"])}</span>')
        return "", "", cell
    if kind == "markerError":
        return "", "", (f'<span class="err">{h(e["result"])} marker refused by {h(e["topic"])}-{e["partition"]}: '
                        f'{h(e["error"])}</span> <span class="muted">attempt {e["attempt"]}, retried</span>')
    return h(kind), "", ""


def transaction_html(v: Mapping[str, Any], actions: bool) -> str:
    txn_id = v["transactionalId"]
    t = v["transaction"]
    out = [f'<h1>Transactional id <span class="mono" id="txn-id">{h(txn_id)}</span></h1>']
    if t is None:
        out.append(f'<div class="note">No coordinator of this process holds it now (its __transaction_state '
                   f'partition is {v["statePartition"]}, led by broker {h(v["coordinator"])}).</div>')
    else:
        out.append(f'<table id="txn-state"><tr><th>state</th><td data-state="{attr(t["state"])}">{state(t["state"])}'
                   + (f' → {state(t["pendingState"])}' if t["pendingState"] else "")
                   + f'</td><th>producer id / epoch</th><td>{t["producerId"]} / {t["producerEpoch"]}</td>'
                   f'<th>coordinator</th><td>broker {t["broker"]}, __transaction_state-{t["partition"]} '
                   f'(epoch {t["coordinatorEpoch"]})</td></tr><tr><th>partitions</th><td>'
                   f'{tp_chips(t["topicPartitions"])}</td><th>timeout</th><td>{age(t["transactionTimeoutMs"])}</td>'
                   f'<th>started</th><td>{ts(t["transactionStartTimestampMs"])} (age {age(t["ageMs"])})</td></tr>'
                   f'<tr><th>pending markers</th><td colspan=5>'
                   + ("".join(f'<span class="chip">{h(m["topic"])}-{m["partition"]}'
                              + (f' <span class="err">{h(m["lastError"])} ×{m["attempts"]}</span>' if m["lastError"] else "")
                              + "</span>" for m in t["pendingMarkers"]) or h(None))
                   + f'</td></tr><tr><th>transaction version</th><td>{t["clientTransactionVersion"]}</td>'
                   f'<th>previous / next producer id</th><td>{t["previousProducerId"]} / {t["nextProducerId"]}</td>'
                   f'<th>last update</th><td>{ts(t["transactionLastUpdateTimestampMs"])}</td></tr></table>')
    if v["openTransactions"]:
        out.append("<h2>Open on partitions</h2><table><tr><th>partition</th><th>producer</th>"
                   "<th class=num>first offset</th><th>status</th><th>why</th></tr>")
        for r in v["openTransactions"]:
            out.append(f'<tr><td>{h(r["topic"])}-{r["partition"]}</td><td>{r["producerId"]} / {r["producerEpoch"]}</td>'
                       f'<td class=num>{r["startOffset"]}</td><td>{state(r["status"])}</td>'
                       f'<td class="muted">{h(r["reason"])}</td></tr>')
        out.append("</table>")
    out.append("<h2>Timeline</h2>")
    if not v["recording"]:
        out.append('<p class="muted">Not recorded: the inspector is off.</p>')
    elif not v["timeline"]:
        out.append('<p class="muted">Nothing recorded for this id since the broker started (or it was forgotten '
                   "to stay within inspector.timeline.max.events).</p>")
    for g in reversed(v["timeline"]):
        start = g["startMs"]
        produced = tp_list(g["producedTo"]) if g["producedTo"] else ""
        out.append(f'<div class="timeline" data-index="{g["index"]}" data-outcome="{attr(g["outcome"])}">'
                   f'<div class="head"><b>#{g["index"]}</b> {state(g["outcome"])} '
                   f'<span class="muted">{ts(start)}, {age(g["endMs"] - start)}; states '
                   f'{h(" → ".join(g["states"]) or None)}; {g["markers"]} marker(s)</span> {produced}</div>'
                   '<table><tr><th>+ms</th><th>broker</th><th>client request → answer</th><th>coordinator</th>'
                   "<th>partitions: markers</th></tr>")
        for e in g["events"]:
            client, coordinator, partition = _event_cells(e)
            out.append(f'<tr data-kind="{attr(e["kind"])}" data-api="{attr(e.get("api"))}" data-to="{attr(e.get("to"))}">'
                       f'<td class="num mono">+{e["atMs"] - start}</td><td>{e["broker"]}</td><td>{client}</td>'
                       f"<td>{coordinator}</td><td>{partition}</td></tr>")
        out.append("</table></div>")
    return "".join(out)


# --- partitions -----------------------------------------------------------------------------------

def partitions_html(v: Mapping[str, Any], query: Mapping[str, str]) -> str:
    out = ["<h1>Partitions</h1>"]
    checked = ' checked' if query.get("open") in ("1", "true") else ""
    hide = ' checked' if query.get("internal") in ("0", "false") else ""
    leaders = ' checked' if query.get("role") == "leader" else ""
    out.append('<form class="filters" method="get">'
               f'<label>topic contains <input type="text" name="q" value="{attr(query.get("q", ""))}"></label>'
               f'<label><input type="checkbox" name="open" value="1"{checked}> with open transactions '
               f'({v["withOpenTransactions"]})</label>'
               f'<label><input type="checkbox" name="internal" value="0"{hide}> hide internal topics</label>'
               f'<label><input type="checkbox" name="role" value="leader"{leaders}> leaders only</label>'
               f'<label>page size <input type="number" name="size" value="{v["size"]}" min="1" max="1000"></label>'
               "<button>filter</button></form>")
    out.append(pager(v, "/inspect/partitions", query))
    out.append('<table id="partitions"><tr><th>partition</th><th>broker</th><th>leader / ISR</th>'
               "<th class=num>log start</th><th class=num>log end</th><th class=num>high watermark</th>"
               "<th class=num>LSO</th><th class=num>LSO lag</th><th>open transactions holding the LSO</th>"
               "<th class=num>producers</th><th class=num>segments</th><th class=num>aborted</th></tr>")
    for p in v["partitions"]:
        opens = "".join(
            f'<span class="chip{" err" if o["holdsLso"] else ""}">pid {o["producerId"]} from {o["firstOffset"]}, '
            f'{age(o["ageMs"])}' + (f' ({txn_link(o["transactionalId"])})' if o["transactionalId"] else "") + "</span>"
            for o in p["openTransactions"]) or h(None)
        role = "leader" if p["leader"] == p["broker"] else "follower"
        files = (f'/inspect/files?{h(urlencode({"broker": p["broker"], "dir": p["topic"] + "-" + str(p["partition"])}))}')
        out.append(
            f'<tr data-tp="{attr(p["topic"])}-{p["partition"]}" data-broker="{p["broker"]}" data-lso="{p["lastStableOffset"]}" '
            f'data-hw="{p["highWatermark"]}"><td><a href="{files}">{h(p["topic"])}-{p["partition"]}</a></td>'
            f'<td>{p["broker"]} <span class="muted">{role}</span></td><td>{p["leader"]} / {h(p["isr"])}</td>'
            f'<td class=num>{p["logStartOffset"]}</td><td class=num>{p["logEndOffset"]}</td>'
            f'<td class=num>{p["highWatermark"]}</td><td class=num>{p["lastStableOffset"]}</td>'
            f'<td class=num{" err" if p["lsoLag"] else ""}>{p["lsoLag"]}</td><td>{opens}</td>'
            f'<td class=num>{len(p["producerSnapshot"]["producers"])}</td><td class=num>{len(p["segments"])}</td>'
            f'<td class=num>{p["abortedTransactionCount"]}</td></tr>')
        details = []
        if p["producerSnapshot"]["producers"]:
            details.append("<h3>Producers</h3><table><tr><th>producer id</th><th>epoch</th><th>coordinator epoch</th>"
                           "<th>open transaction from</th><th>last sequence</th><th>last offset</th><th>last write</th></tr>"
                           + "".join(f'<tr><td>{e["producerId"]}</td><td>{e["producerEpoch"]}</td>'
                                     f'<td>{e["coordinatorEpoch"]}</td><td>{h(e["currentTxnFirstOffset"])}</td>'
                                     f'<td>{h(e.get("lastSequence"))}</td><td>{h(e.get("lastOffset"))}</td>'
                                     f'<td>{ts(e["lastTimestamp"])}</td></tr>'
                                     for e in p["producerSnapshot"]["producers"][:50]) + "</table>")
        details.append("<h3>Segments</h3><table><tr><th>base offset</th><th>next offset</th><th>bytes</th>"
                       "<th>index entries</th><th>time index entries</th><th>aborted (txnindex)</th></tr>"
                       + "".join(f'<tr><td>{s["baseOffset"]}</td><td>{s["nextOffset"]}</td><td>{s["sizeBytes"]}</td>'
                                 f'<td>{s["indexEntries"]}</td><td>{s["timeIndexEntries"]}</td>'
                                 f'<td>{s["txnIndexEntries"]}</td></tr>' for s in p["segments"]) + "</table>")
        if p["abortedTransactions"]:
            details.append("<h3>Aborted transactions (newest)</h3><table><tr><th>producer id</th><th>first offset</th>"
                           "<th>last offset (marker)</th><th>LSO then</th></tr>"
                           + "".join(f'<tr><td>{a["producerId"]}</td><td>{a["firstOffset"]}</td><td>{a["lastOffset"]}'
                                     f'</td><td>{a["lastStableOffset"]}</td></tr>' for a in p["abortedTransactions"])
                           + "</table>")
        out.append(f'<tr class="details"><td colspan=12><details><summary class="muted">producers, segments, '
                   f'aborted ranges</summary>{"".join(details)}</details></td></tr>')
    out.append("</table>")
    out.append(pager(v, "/inspect/partitions", query))
    return "".join(out)


# --- groups ---------------------------------------------------------------------------------------

def groups_html(v: Mapping[str, Any], query: Mapping[str, str]) -> str:
    pending = ' checked' if query.get("pending") in ("1", "true") else ""
    out = ["<h1>Groups</h1>",
           '<form class="filters" method="get">'
           f'<label>group id contains <input type="text" name="q" value="{attr(query.get("q", ""))}"></label>'
           f'<label><input type="checkbox" name="pending" value="1"{pending}> with pending transactional offsets</label>'
           "<button>filter</button></form>", pager(v, "/inspect/groups", query)]
    for g in v["groups"]:
        out.append(f'<section class="group" data-group="{attr(g["groupId"])}"><h2>{h(g["groupId"])} {state(g["state"])} '
                   f'<span class="muted">{h(g["type"])} group, protocol {h(g["protocol"])}, generation '
                   f'{h(g["generation"])}; coordinator broker {g["coordinator"]} (__consumer_offsets-'
                   f'{g["offsetsPartition"]})</span></h2>')
        if g["unstable"]:
            out.append('<div class="alert">Transactional offsets are pending: OffsetFetch with require_stable answers '
                       "UNSTABLE_OFFSET_COMMIT for these partitions until their transaction ends.</div>")
        if g["members"]:
            out.append("<table><tr><th>member</th><th>client</th><th>host</th><th>assignment</th></tr>")
            for m in g["members"]:
                leader = " <b>(leader)</b>" if g["leader"] == m["memberId"] else ""
                out.append(f'<tr><td class="mono">{h(m["memberId"])}{leader}</td><td>{h(m["clientId"])}</td>'
                           f'<td>{h(m["clientHost"])}</td><td>{tp_chips(m["assignment"])}</td></tr>')
            out.append("</table>")
        else:
            out.append('<p class="muted">No members.</p>')
        if g["offsets"]:
            out.append('<table class="offsets"><tr><th>partition</th><th class=num>committed</th>'
                       "<th class=num>high watermark</th><th class=num>LSO</th><th class=num>lag</th>"
                       "<th>metadata</th><th>committed at</th></tr>")
            for o in g["offsets"]:
                out.append(f'<tr data-tp="{attr(o["topic"])}-{o["partition"]}"><td>{h(o["topic"])}-{o["partition"]}</td>'
                           f'<td class=num>{o["offset"]}</td><td class=num>{h(o.get("highWatermark"))}</td>'
                           f'<td class=num>{h(o.get("lastStableOffset"))}</td><td class=num>{h(o.get("lag"))}</td>'
                           f'<td>{h(o["metadata"]) if o["metadata"] else ""}</td><td>{ts(o["commitTimestampMs"])}</td></tr>')
            out.append("</table>")
        if g["pendingTransactionalOffsets"]:
            out.append('<h3>Pending transactional offsets</h3><table class="pending"><tr><th>partition</th>'
                       "<th class=num>offset</th><th>producer id</th><th>transactional id</th></tr>")
            for o in g["pendingTransactionalOffsets"]:
                out.append(f'<tr data-tp="{attr(o["topic"])}-{o["partition"]}"><td>{h(o["topic"])}-{o["partition"]}</td>'
                           f'<td class=num>{o["offset"]}</td><td>{o["producerId"]}</td>'
                           f'<td>{txn_link(o["transactionalId"])}</td></tr>')
            out.append("</table>")
        out.append("</section>")
    if not v["groups"]:
        out.append('<p class="muted">No groups.</p>')
    out.append(pager(v, "/inspect/groups", query))
    return "".join(out)


# --- files ----------------------------------------------------------------------------------------

def dirs_html(v: Mapping[str, Any], query: Mapping[str, str]) -> str:
    out = ["<h1>Files</h1>", '<p class="muted">Pick a partition directory, then a file: it is decoded as '
           "kafka-dump-log.sh prints it.</p>",
           f'<form class="filters" method="get"><label>directory contains <input type="text" name="q" '
           f'value="{attr(query.get("q", ""))}"></label><button>filter</button></form>', pager(v, "/inspect/files", query),
           '<table id="dirs"><tr><th>broker</th><th>log dir</th><th>partition directory</th></tr>']
    for d in v["dirs"]:
        q = urlencode({"broker": d["broker"], "dir": d["dir"], "logdir": d["logDir"]})
        out.append(f'<tr><td>{d["broker"]}</td><td class="mono">{h(d["logDirPath"])}</td>'
                   f'<td><a href="/inspect/files?{h(q)}">{h(d["dir"])}</a></td></tr>')
    out.append("</table>")
    return "".join(out)


def files_html(node: int, name: str, log_dir: int | None, path: str, files: list[dict[str, Any]]) -> str:
    out = [f'<h1>Files of {h(name)} <span class="muted">broker {node}, {h(path)}</span></h1>',
           '<p><a href="/inspect/files">« all directories</a></p>',
           '<table id="files"><tr><th>file</th><th>kind</th><th class=num>bytes</th><th>decode</th></tr>']
    for f in files:
        base = {"broker": node, "dir": name, "file": f["file"]}
        if log_dir is not None:
            base["logdir"] = log_dir
        links = [f'<a href="/inspect/files?{h(urlencode(base))}">as kafka-dump-log.sh</a>']
        if f["kind"] == "log":
            links.append(f'<a href="/inspect/files?{h(urlencode({**base, "deep": 1}))}">--deep-iteration</a>')
            links.append(f'<a href="/inspect/files?{h(urlencode({**base, "data": 1}))}">--print-data-log</a>')
        out.append(f'<tr data-file="{attr(f["file"])}"><td class="mono">{h(f["file"])}</td><td>{h(f["kind"])}</td>'
                   f'<td class=num>{f["sizeBytes"]}</td><td>{" · ".join(links)}</td></tr>')
    out.append("</table>")
    return "".join(out)


def dump_html(node: int, name: str, file: str, options: Mapping[str, Any], command: str, lines: list[str],
              errors: list[str], truncated: bool) -> str:
    back = urlencode({"broker": node, "dir": name})
    out = [f'<h1>{h(name)}/{h(file)} <span class="muted">broker {node}</span></h1>',
           f'<p><a href="/inspect/files?{h(back)}">« files of {h(name)}</a></p>',
           f'<p class="muted mono">{h(command)}</p>']
    if errors:
        out.append('<pre class="stderr err">' + h("\n".join(errors)) + "</pre>")
    out.append('<pre id="dump">' + h("\n".join(lines)) + "</pre>")
    if truncated:
        out.append(f'<p class="muted">Only the first {len(lines)} lines are shown (--max-bytes {options["max_bytes"]}).'
                   "</p>")
    return "".join(out)


# --- the abort action -----------------------------------------------------------------------------

def abort_confirm_html(details: Mapping[str, Any], token: str, error: str | None = None) -> str:
    fields = "".join(f'<input type="hidden" name="{k}" value="{attr(v)}">' for k, v in details.items() if v is not None)
    out = ["<h1>Abort a hanging transaction</h1>"]
    if error:
        out.append(f'<div class="alert" id="abort-error">{h(error)}</div>')
    out.append(
        '<div class="note">This writes an <b>ABORT</b> marker for producer '
        f'<b>{h(details.get("producer_id"))}</b> (epoch {h(details.get("producer_epoch"))}) on '
        f'<b>{h(details.get("topic"))}-{h(details.get("partition"))}</b>, as <code>kafka-transactions.sh abort</code> '
        "does. Its records from offset "
        f'{h(details.get("start_offset"))} on become aborted: read_committed consumers skip them and move on. '
        "A producer that is in fact still writing this transaction will fail.</div>"
        f'<form method="post" action="/inspect/abort" id="abort-form">{fields}'
        f'<input type="hidden" name="token" value="{attr(token)}">'
        '<p><label><input type="checkbox" name="confirm" value="yes" id="confirm" required> '
        "I understand: abort this transaction</label></p>"
        '<button class="danger" id="do-abort">Abort transaction</button> '
        '<a class="button" href="/inspect/transactions#hanging">Cancel</a></form>')
    return "".join(out)


def abort_result_html(result: Mapping[str, Any]) -> str:
    ok = result["ok"]
    box = "okbox" if ok else "alert"
    return (f"<h1>Abort {'done' if ok else 'refused'}</h1>"
            f'<div class="{box}" id="abort-result" data-error="{attr(result["error"])}">'
            f'ABORT marker for producer {result["producerId"]} (epoch {result["producerEpoch"]}, coordinator epoch '
            f'{result["coordinatorEpoch"]}) on {h(result["topic"])}-{result["partition"]} (leader broker '
            f'{result["broker"]}): <b>{h(result["error"])}</b>. Last stable offset {result["lastStableOffsetBefore"]} → '
            f'<b id="lso-after">{result["lastStableOffsetAfter"]}</b> (high watermark {result["highWatermark"]}).</div>'
            '<p><a href="/inspect/transactions#hanging">« back to the transactions</a> · '
            f'<a href="/inspect/partitions?{h(urlencode({"topic": result["topic"]}))}">the partition</a></p>')


def error_html(status: int, message: str) -> str:
    return f'<h1>{status}</h1><div class="alert">{h(message)}</div><p><a href="/inspect">« overview</a></p>'
