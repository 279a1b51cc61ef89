#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""One self-contained page for a scripts/lab run: RESULTS_DIR/index.html.

Usage: html_report.py RESULTS_DIR [--out FILE]

Reads whatever the run left in RESULTS_DIR (every part is optional; a missing one is shown as "not run"):
  run.json                  written by scripts/lab: kind (quick|full), the commands, start, lab time, machine
  xcall/results.json        xthread-bench xcall   (schema xthread-bench/xcall/2 or /1), its table.txt and PNG charts
  advise/results.json       xthread-bench advise  (schema xthread-bench/advise/1, a --sweep or one point), the same
  napi/results.json         xthread-bench napi    (schema xthread-bench/napi/2 or /1), the same
  pool/results.json         xthread-bench pool    (schema xthread-bench/pool/1), the same
  micro/micro.json          xthread-micro's Google Benchmark JSON, its table.txt
and writes one HTML file (default RESULTS_DIR/index.html, written to a temporary name and renamed) with
every table of both studies (the published figures beside ours), the charts inlined as data: URIs, the
machine, loads and floors, and the caveats. No network, no scripts: standard library only.

Element ids the test (tests/lab/report) relies on: tables  machine, run-commands, xcall-load,
xcall-payload, xcall-phases, xcall-loads, xcall-floors, xcall-contenders and xcall-case-ratios (when the run
measured them), napi-load, napi-payload, napi-loads, napi-floors, napi-case-ratios,
pool-eterfree-runs, pool-eterfree, pool-summary, pool-goals, pool-calibration, advise-sweep (a sweep) or
advise-points (one point), micro; paragraphs advise-recommendation and advise-crossover (a sweep); sections
xcall, advise, napi, pool, micro (class "not-run" when the part did not run); charts img.chart with id
chart-PART-NAME.
"""

import base64
import datetime
import html
import json
import math
import os
import sys

LOAD_ORDER = ["idle", "medium", "heavy"]
CASE_NAMES = {1: "case 1: caller → main loop", 2: "case 2: caller → worker loop",
              3: "case 3: caller → worker → main (nested)"}
PARTS = ["xcall", "advise", "napi", "pool", "micro"]
PART_TITLES = {
    "xcall": "Study 000 — a call into another thread, with the answer back",
    "advise": "Advise — where should a callee run: the main thread or a worker?",
    "napi": "Study 000 on real Node.js (Node-API) beside xthread",
    "pool": "Study 004 — thread pools (Eterfree) and what separates pools",
    "micro": "Micro-benchmarks (Google Benchmark)",
}
QUICK_LINE = "quick run — for publication use scripts/lab --full"
# Google Benchmark prints "***WARNING*** Library was built as DEBUG" when its own library (Debian's
# libbenchmark) was compiled without NDEBUG; micro.json says so in context.library_build_type.
MICRO_DEBUG_CAVEAT = ("micro: Google Benchmark warns \"Library was built as DEBUG. Timings may be affected\": "
                      "that is Debian's libbenchmark itself (built without NDEBUG), not xthread, which is "
                      "compiled Release. The timed loop (for (auto _ : state)) is inline in the benchmark's "
                      "header and compiled with the Release flags; the library's unoptimized code runs "
                      "around it (starting and stopping timers, repetitions, reporting), so it adds to "
                      "every benchmark alike and the ratios within this run are unaffected.")

CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d1d1f;background:#fafafa}
main{max-width:1180px;margin:0 auto;padding:1.2em 1.6em 4em}
h1{font-size:1.7em;margin:.4em 0 .2em}h2{margin-top:2.2em;border-bottom:2px solid #ddd;padding-bottom:.2em}
h3{margin-top:1.6em;font-size:1.1em}
nav a{margin-right:1.1em}
table{border-collapse:collapse;margin:.6em 0 1em;background:#fff;font-variant-numeric:tabular-nums}
th,td{border:1px solid #d8d8d8;padding:.25em .6em;text-align:right;vertical-align:top}
th{background:#f0f0f3}td.l,th.l{text-align:left}
td.pub{color:#6b5a00;background:#fffbe6}td.ratio{color:#555}td.best{font-weight:700}
.verdict-met{color:#11702b;font-weight:600}.verdict-not{color:#a11;font-weight:600}.verdict-none{color:#777}
.banner{padding:.7em 1em;border-radius:6px;margin:1em 0;font-weight:600}
.banner.quick{background:#fff4ce;border:1px solid #e6c200}.banner.full{background:#e7f6ea;border:1px solid #7cc48a}
.banner.unknown{background:#eee;border:1px solid #bbb}
.not-run p.not-run{color:#777;font-style:italic;padding:.6em 1em;background:#f1f1f1;border-radius:6px}
img.chart{max-width:100%;border:1px solid #ddd;background:#fff;margin:.5em 0;display:block}
pre{background:#f4f4f6;padding:.8em;overflow-x:auto;font-size:12px;line-height:1.3}
.cite{color:#555;font-size:.9em}.note{color:#444}
ul.caveats li{margin:.3em 0}
p.run-note{font-size:.9em;color:#444}p.run-note.quick{color:#8a5a00;font-weight:600}
"""


# ------------------------------------------------------------------------------------------- helpers


def esc(value):
    return html.escape(str(value), quote=True)


def num(value):
    """Three significant digits, never scientific: 18.1, 381, 2324, 0.412."""
    if value is None:
        return "–"
    if value == 0:
        return "0"
    decimals = max(0, 2 - math.floor(math.log10(abs(value))))
    return f"{value:.{decimals}f}"


def ratio(a, b):
    if a is None or b is None or b == 0:
        return "–"
    return num(a / b) + "×"


def load_json(path):
    """The parsed document, or (None, reason) when it is missing or unreadable."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f), None
    except FileNotFoundError:
        return None, "not run"
    except (OSError, ValueError) as exc:
        return None, f"unreadable {os.path.basename(path)}: {exc}"


def read_text(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


class Table:
    """A <table> built row by row; cells are (text, css class) or plain text."""

    def __init__(self, table_id, caption=None):
        self.table_id = table_id
        self.caption = caption
        self.head = []
        self.rows = []

    def header(self, *rows):
        self.head.extend(rows)
        return self

    def row(self, cells):
        self.rows.append(cells)

    @staticmethod
    def _cell(tag, cell):
        text, cls, span = cell if isinstance(cell, tuple) and len(cell) == 3 else (
            (cell[0], cell[1], 1) if isinstance(cell, tuple) else (cell, None, 1))
        attrs = (f' class="{cls}"' if cls else "") + (f' colspan="{span}"' if span > 1 else "")
        return f"<{tag}{attrs}>{esc(text)}</{tag}>"

    def render(self):
        out = [f'<table id="{esc(self.table_id)}">']
        if self.caption:
            out.append(f"<caption class=\"l\">{esc(self.caption)}</caption>")
        if self.head:
            out.append("<thead>")
            for r in self.head:
                out.append("<tr>" + "".join(self._cell("th", c) for c in r) + "</tr>")
            out.append("</thead>")
        out.append("<tbody>")
        for r in self.rows:
            out.append("<tr>" + "".join(self._cell("td", c) for c in r) + "</tr>")
        out.append("</tbody></table>")
        return "\n".join(out)


def key_value_table(table_id, pairs):
    t = Table(table_id)
    for k, v in pairs:
        t.row([(k, "l"), (v, "l")])
    return t.render()


def chart(part, directory, name, alt):
    """An <img> with the PNG inlined, or "" when the chart was not made (or is empty)."""
    path = os.path.join(directory, name)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return ""
    if not data:
        return ""
    stem = os.path.splitext(name)[0]
    src = "data:image/png;base64," + base64.b64encode(data).decode("ascii")
    return f'<img class="chart" id="chart-{esc(part)}-{esc(stem)}" alt="{esc(alt)}" src="{src}">'


def text_output(directory, title="the command's text output (table.txt)"):
    text = read_text(os.path.join(directory, "table.txt"))
    if text is None:
        return ""
    return f"<details><summary>{esc(title)}</summary><pre>{esc(text)}</pre></details>"


def method_lines(directory):
    """Lines of table.txt that state the method or a caveat (what the command itself prints about them)."""
    text = read_text(os.path.join(directory, "table.txt")) or ""
    keep = ("method", "note", "caveat", "load:", "loads:", "machine:", "oh source", "study:")
    return [line.strip() for line in text.splitlines() if line.strip().lower().startswith(keep)]


def machine_text(m):
    if not m:
        return "–"
    parts = [f"{m.get('cpus', '?')} CPUs", m.get("cpu_model", "?"), m.get("kernel", "?"),
             f"{m.get('compiler', '?')} {m.get('build_type', '')}".strip()]
    return "; ".join(str(p) for p in parts)


def not_run(part, reason):
    return (f'<section id="{part}" class="not-run"><h2>{esc(PART_TITLES[part])}</h2>'
            f'<p class="not-run">not run — {esc(reason)}</p></section>')


# ------------------------------------------------------------------------------------ xcall and napi


IMPL_LABELS = {"node-api-raw": "TSFN raw", "node-api": "Node-API", "xthread": "xthread",
               "plain": "plain (mutex + condition variable)"}


def variant(points):
    variants = [(p["work_ns"], p["hot"]) for p in points]
    return (0, False) if (0, False) in variants else variants[0]


def condition_text(p):
    """", 4 callers, 2 busy" for a point measured with several callers or busy threads (xcall --callers,
    --oversubscribe), "" for the study's own condition (and for points written before those keys existed)."""
    callers, busy = p.get("callers", 1), p.get("busy_threads", 0)
    return (f", {callers} callers" if callers != 1 else "") + (f", {busy} busy" if busy else "")


def series_name(p):
    """A point's series: its implementation, with the main loop's host when it was not direct (xcall --host)
    and its condition when it was not the study's (xcall --callers, --oversubscribe)."""
    host = p.get("host", "direct")  # files written before --host existed: direct
    name = p["implementation"] if host == "direct" else f"{p['implementation']} ({host})"
    return name + condition_text(p)


def find_point(points, impl, case, load, payload, work, hot):
    """`impl` is a series_name: the implementation, and the host when it is not direct."""
    for p in points:
        if (series_name(p), p["case"], p["load"], p["payload"], p["work_ns"], p["hot"]) == (
                impl, case, load, payload, work, hot):
            return p
    return None


def mean_of(p):
    return p["total_us"]["mean"] if p else None


def sweep_tables(prefix, doc, impls):
    """Tables (a) load x case and (b) payload x case: OH (published) | each implementation | ratio."""
    points = doc.get("points") or []
    if not points:
        return "<p class=\"note\">no points</p>"
    work, hot = variant(points)
    ref = doc.get("reference") or {}
    cases = sorted({p["case"] for p in points})
    payloads = sorted({p["payload"] for p in points})
    sweep = 10 if 10 in payloads else payloads[0]
    loads = [l for l in LOAD_ORDER if any(p["load"] == l for p in points)]
    study = (work, hot) == (0, False)
    # One implementation: published / xthread. Several: the bridge (Node-API) / xthread, as the text table;
    # xthread under several hosts (xcall --host): hosted by libuv / direct.
    ratio_name = "OH/xt" if len(impls) == 1 else "napi/xt"
    top_index, bottom_index = (impls.index("node-api") if "node-api" in impls else 0), len(impls) - 1
    hosted = [i for i in impls if i.startswith("xthread (")]
    if "node-api" not in impls and "xthread" in impls and hosted:
        top = "xthread (uv)" if "xthread (uv)" in hosted else hosted[0]
        top_index, bottom_index = impls.index(top), impls.index("xthread")
        ratio_name = top[len("xthread ("):-1] + "/direct"

    def build(table_id, title, rows, row_label, published, point_of):
        t = Table(table_id, title)
        t.header([("", "l")] + [(CASE_NAMES.get(c, f"case {c}"), None, 2 + len(impls)) for c in cases],
                 [(row_label, "l")] + [h for _ in cases
                                       for h in ["OH (published)"] + [IMPL_LABELS.get(i, i) for i in impls] + [ratio_name]])
        for r in rows:
            cells = [(str(r), "l")]
            for c in cases:
                pub = published(c, r) if study else None
                values = [mean_of(point_of(impl, c, r)) for impl in impls]
                cells.append((num(pub), "pub"))
                cells.extend(num(v) for v in values)
                top = pub if len(impls) == 1 else values[top_index]
                cells.append((ratio(top, values[bottom_index]), "ratio"))
            t.row(cells)
        return t.render()

    load_ref = ref.get("load_mean_us") or {}
    payload_ref = ref.get("payload_mean_us") or {}
    out = []
    out.append(build(f"{prefix}-load", f"(a) main-thread load × case, payload {sweep}; mean µs per call", loads,
                     "load", lambda c, l: load_ref.get(str(c), {}).get(l),
                     lambda impl, c, l: find_point(points, impl, c, l, sweep, work, hot)))
    idle_payloads = sorted({p["payload"] for p in points if p["load"] == "idle"})
    out.append(build(f"{prefix}-payload", "(b) payload (characters) × case, idle; mean µs per call", idle_payloads,
                     "payload", lambda c, pl: payload_ref.get(str(c), {}).get(str(pl)),
                     lambda impl, c, pl: find_point(points, impl, c, "idle", pl, work, hot)))
    if not study:
        out.append('<p class="note">The run used extra work or back-to-back calls, not the study\'s conditions: '
                   "the published column is left empty.</p>")
    return "\n".join(out)


def citation_text(ref):
    c = (ref or {}).get("citation") or {}
    if not c:
        return (ref or {}).get("source", "")
    parts = [c.get("study", ""), f"repository {c['repository']}" if c.get("repository") else ""]
    tables = [c.get(k) for k in ("load_table", "payload_table", "table") if c.get(k)]
    return "; ".join(p for p in parts + tables if p)


def repo_link(ref):
    repo = ((ref or {}).get("citation") or {}).get("repository")
    if not repo:
        return ""
    url = repo if repo.startswith("http") else f"https://github.com/{repo}"
    return f' (<a href="{esc(url)}">{esc(url)}</a>)'


def floors_table(table_id, floors):
    t = Table(table_id, "Floors: two plain threads ping-pong, round trip A → B → A, µs")
    t.header([("floor", "l"), "p50", "p90", "p99", "mean", "count"])
    names = {"spin_roundtrip_ns": "spin (both busy-wait)",
             "futex_roundtrip_ns": "futex floor (std::atomic wait/notify, back to back)",
             "sleep_roundtrip_ns": "sleeping thread woken (raw futex, no spin)"}
    for key, label in names.items():
        s = (floors or {}).get(key)
        if not s:
            continue
        t.row([(label, "l"), num(s["p50"] / 1e3), num(s["p90"] / 1e3), num(s["p99"] / 1e3), num(s["mean"] / 1e3),
               str(s.get("count", ""))])
    return t.render()


def loads_table(table_id, loads_by_impl):
    t = Table(table_id, "Main-thread load per level (measured in this run; the study's targets ~2 ms and ~7 ms "
                        "per 8 ms tick)")
    t.header([("implementation", "l"), ("load", "l"), "fib n", "target ms", "measured ms per run", "duty",
              "runs"])
    for impl, loads in loads_by_impl:
        for info in loads:
            if info.get("load") == "idle":
                continue
            duty = info.get("duty")
            t.row([(impl, "l"), (info.get("load", "?"), "l"), str(info.get("fib_n", "–")),
                   num(info.get("target_ms")), num(info.get("load_ms")),
                   f"{duty * 100:.0f} %" if duty is not None else "–", str(info.get("runs", "–"))])
    return t.render()


def phases_table(table_id, doc):
    points = [p for p in doc.get("points") or [] if p["load"] == "idle"]
    if not points:
        return ""
    work, hot = variant(points)
    payloads = sorted({p["payload"] for p in points})
    sweep = 10 if 10 in payloads else payloads[0]
    t = Table(table_id, f"Where the time goes: phases at idle, payload {sweep}, p50 µs")
    t.header([("implementation", "l"), ("case", "l"), "schedule", "execute", "notify", "total p50", "total p99",
              "CPU µs/call", "calls"])
    for p in points:
        if p["payload"] != sweep or (p["work_ns"], p["hot"]) != (work, hot):
            continue
        t.row([(series_name(p), "l"), (CASE_NAMES.get(p["case"], str(p["case"])), "l"),
               num(p["schedule_us"]["p50"]), num(p["execute_us"]["p50"]), num(p["notify_us"]["p50"]),
               num(p["total_us"]["p50"]), num(p["total_us"]["p99"]),
               num(p.get("cpu_us_per_call")), str(p["calls"])])
    return t.render()


def median(values):
    values = sorted(v for v in values if v is not None)
    if not values:
        return None
    n = len(values)
    return values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2


def repetition_median(p, key):
    """The median over the point's repetitions of total_us[key] (key "cpu": cpu_us_per_call), or None."""
    reps = p.get("repetitions") or []
    if key == "cpu":
        return median([r.get("cpu_us_per_call") for r in reps])
    return median([(r.get("total_us") or {}).get(key) for r in reps])


def has_contender_detail(points):
    return any(p.get("implementation") == "plain" or condition_text(p) or len(p.get("repetitions") or []) > 1
               for p in points)


def twin(points, p, **changes):
    """The point with p's coordinates and condition, but `changes` (e.g. implementation="xthread", case=1)."""
    keys = ("implementation", "host", "case", "load", "payload", "work_ns", "hot", "callers", "busy_threads")
    defaults = {"host": "direct", "callers": 1, "busy_threads": 0}
    want = {k: changes.get(k, p.get(k, defaults.get(k))) for k in keys}
    for q in points:
        if all(q.get(k, defaults.get(k)) == v for k, v in want.items()):
            return q
    return None


def contenders_table(table_id, doc):
    """xcall --impl, --callers, --oversubscribe, --repetitions: every point with its percentiles, CPU per call,
    the medians over its repetitions and the ratio to xthread's point of the same condition."""
    points = doc.get("points") or []
    if not has_contender_detail(points):
        return ""
    t = Table(table_id, "Contenders and conditions: latency µs over every repetition's calls; CPU = process CPU µs "
                        "per call (busy threads left out); med = median over the repetitions (A B, B A); "
                        "/ xthread = this row against xthread's row of the same condition")
    t.header([("case", "l"), ("load", "l"), "payload", "callers", "busy threads", ("implementation", "l"),
              "repetitions", "calls", "p50", "p90", "p99", "CPU µs/call", "p50 med", "p99 med", "CPU med",
              "p50 / xthread", "p99 / xthread", "CPU / xthread", "busy threads got"])
    for p in points:
        xt = twin(points, p, implementation="xthread") if p["implementation"] != "xthread" else None
        s = p["total_us"]
        share = p.get("busy_cpu_share")
        t.row([(CASE_NAMES.get(p["case"], str(p["case"])), "l"), (p["load"], "l"), str(p["payload"]),
               str(p.get("callers", 1)), str(p.get("busy_threads", 0)),
               (IMPL_LABELS.get(p["implementation"], p["implementation"]), "l"),
               str(len(p.get("repetitions") or [])), str(p["calls"]), num(s["p50"]), num(s["p90"]), num(s["p99"]),
               num(p.get("cpu_us_per_call")), num(repetition_median(p, "p50")), num(repetition_median(p, "p99")),
               num(repetition_median(p, "cpu")),
               (ratio(s["p50"], xt["total_us"]["p50"]) if xt else "–", "ratio"),
               (ratio(s["p99"], xt["total_us"]["p99"]) if xt else "–", "ratio"),
               (ratio(p.get("cpu_us_per_call"), xt.get("cpu_us_per_call")) if xt else "–", "ratio"),
               f"{share * 100:.0f} %" if share is not None else "–"])
    return t.render()


def case_ratios_table(table_id, doc):
    """Case 3 against case 1 of each implementation and condition, same run: p50, p99 and CPU per call."""
    points = doc.get("points") or []
    t = Table(table_id, "Case 3 (caller → worker → main) against case 1 (caller → main), same run and condition")
    t.header([("implementation", "l"), ("load", "l"), "payload", "callers", "busy threads", "case 1 p50",
              "case 3 p50", "3 / 1", "case 1 p99", "case 3 p99", "3 / 1", "case 1 CPU µs/call", "case 3 CPU µs/call",
              "3 / 1"])
    rows = 0
    for p in points:
        if p["case"] != 3:
            continue
        c1 = twin(points, p, case=1)
        if c1 is None:
            continue
        rows += 1
        a, b = c1["total_us"], p["total_us"]
        t.row([(series_name({**p, "callers": 1, "busy_threads": 0}), "l"), (p["load"], "l"), str(p["payload"]),
               str(p.get("callers", 1)), str(p.get("busy_threads", 0)),
               num(a["p50"]), num(b["p50"]), (ratio(b["p50"], a["p50"]), "ratio"),
               num(a["p99"]), num(b["p99"]), (ratio(b["p99"], a["p99"]), "ratio"),
               num(c1.get("cpu_us_per_call")), num(p.get("cpu_us_per_call")),
               (ratio(p.get("cpu_us_per_call"), c1.get("cpu_us_per_call")), "ratio")])
    return t.render() if rows else ""


def background_text(doc):
    b = doc.get("background")
    if not isinstance(b, dict):
        return ""
    auto = b.get("autogroup")
    return (f'<p class="note">Beside {esc(b.get("processes", "?"))} busy background processes at nice '
            f'{esc(b.get("nice", "?"))} (--background-burn) for {esc(num(b.get("wall_s")))} s; they got '
            f'{esc(num(b.get("cpu_s")))} CPU-s' +
            (f"; sched_autogroup {'on' if auto else 'off'}" if auto is not None else "") + ".</p>")


def xcall_like_section(part, directory, doc):
    if part == "xcall":
        # "xthread", then xthread under each other host the run measured (xcall --host), in their order; the
        # study's tables leave the plain contender and the other conditions to the contenders table.
        impls = list(dict.fromkeys(["xthread"] + [series_name(p) for p in doc.get("points") or []
                                                  if p.get("implementation") == "xthread" and not condition_text(p)]))
    else:
        has_raw = any(p.get("implementation") == "node-api-raw" for p in doc.get("points") or [])
        impls = (["node-api-raw"] if has_raw else []) + ["node-api", "xthread"]
    cfg = doc.get("config") or {}
    ref = doc.get("reference") or {}
    run = doc.get("run") or {}
    out = [f'<section id="{part}"><h2>{esc(PART_TITLES[part])}</h2>']
    out.append(f'<p class="cite">Published figures (OH): {esc(citation_text(ref))}{repo_link(ref)}; '
               f'{esc(ref.get("calls_per_cell", "?"))} calls per cell on the study\'s OpenHarmony device.</p>')
    calls = f"{cfg.get('calls_idle', '?')} calls per idle point, {cfg.get('calls_loaded', '?')} per loaded point"
    gaps = ", ".join(f"{k.replace('gap_', '').replace('_ns', '')} gap {num(v[0] / 1e3)}–{num(v[1] / 1e3)} µs"
                     for k, v in cfg.items() if k.startswith("gap_") and isinstance(v, list) and len(v) == 2)
    wall = run.get("wall_s")
    out.append(f'<p class="note">This run: {esc(calls)}; {esc(gaps)}; seed {esc(cfg.get("seed", "?"))}; '
               f'{esc(num(wall)) + " s wall" if wall is not None else ""}. Machine: {esc(machine_text(doc.get("machine")))}.</p>')
    if part == "napi" and doc.get("node_machine"):
        nm = doc["node_machine"]
        out.append(f'<p class="note">Node: {esc(nm.get("node", "?"))}, V8 {esc(nm.get("v8", "?"))}, '
                   f'Node-API {esc(nm.get("napi_version", "?"))}.</p>')
    out.append(background_text(doc))
    out.append(sweep_tables(part, doc, impls))
    for name, alt in (("xcall_load.png", "mean latency, load × case, published beside measured"),
                      ("xcall_payload.png", "mean latency vs payload, log-log"),
                      ("xcall_cdf.png", "latency CDF per case and load"),
                      ("xcall_contenders.png", "p50, p99 and CPU per call of each contender and condition")):
        out.append(chart(part, directory, name, alt))
    out.append(contenders_table(f"{part}-contenders", doc))
    out.append(case_ratios_table(f"{part}-case-ratios", doc))
    # For napi this is where the bridge's own cost shows: its phases beside the raw TSFN's and xthread's.
    out.append(phases_table(f"{part}-phases", doc))
    loads = doc.get("loads")
    if isinstance(loads, dict):
        pairs = [(impl, loads.get(impl) or []) for impl in impls if impl in loads]
    else:
        pairs = [(series_name({"implementation": "xthread", "host": host}),
                  [info for info in loads or [] if info.get("host", "direct") == host])
                 for host in dict.fromkeys(info.get("host", "direct") for info in loads or [])]
    out.append(loads_table(f"{part}-loads", pairs))
    out.append(floors_table(f"{part}-floors", doc.get("floors")))
    out.append(text_output(directory))
    out.append("</section>")
    return "\n".join(x for x in out if x)


# ------------------------------------------------------------------------------------------- advise


ADVISE_PLACEMENTS = {1: "case 1: main thread", 2: "case 2: worker", 3: "case 3: worker → main"}


def advise_p50(p):
    lo, hi = (p.get("p50_range_us") or [None, None])[:2]
    return f"{num(p.get('p50_us'))} [{num(lo)}–{num(hi)}]"


def percent(share):
    return "–" if share is None else f"{100 * share:.0f} %"


def advise_section(directory, doc):
    cfg = doc.get("config") or {}
    out = ['<section id="advise"><h2>' + esc(PART_TITLES["advise"]) + "</h2>"]
    out.append(f'<p class="note">Callee {esc(num(cfg.get("callee_us")))} µs of busy work, payload '
               f'{esc(cfg.get("payload", "?"))} characters, main-thread load every {esc(num(cfg.get("period_ms")))} ms; '
               f'{esc(cfg.get("calls", "?"))} calls per placement in each of {esc(cfg.get("repetitions", "?"))} '
               f'repetitions; seed {esc(cfg.get("seed", "?"))}; {esc(num(doc.get("wall_s")))} s wall. Machine: '
               f'{esc(machine_text(doc.get("machine")))}.</p>')
    out.append(f'<p id="advise-recommendation"><strong>Recommendation:</strong> '
               f'{esc(doc.get("recommendation", "–"))}</p>')
    sweep = doc.get("sweep")
    if isinstance(sweep, list) and sweep:
        crossover = doc.get("crossover") or {}
        out.append(f'<p id="advise-crossover">{esc(crossover.get("text", "crossover: –"))}</p>')
        t = Table("advise-sweep", "p50 [min–max over the repetitions], p99 and the load model per placement "
                  "(µs per call), by measured main-thread duty")
        head = [("load ms", "l"), "duty"]
        for case in (1, 2, 3):
            head += [f"{ADVISE_PLACEMENTS[case]} p50", "p99", "CPU", "model"]
        t.header(head + [("wins", "l")])
        for row in sweep:
            cells = [(num(row.get("target_ms")), "l"), percent(row.get("duty"))]
            by_case = {p.get("case"): p for p in row.get("placements") or []}
            for case in (1, 2, 3):
                p = by_case.get(case)
                cells += ([advise_p50(p), num(p.get("p99_us")), num(p.get("cpu_us_per_call")), num(p.get("model_us"))]
                          if p else ["–"] * 4)
            cells.append((ADVISE_PLACEMENTS.get(row.get("winner"), "–"), "l"))
            t.row(cells)
        out.append(t.render())
        out.append(chart("advise", directory, "advise_sweep.png", "p50 and p99 of each placement vs measured duty"))
    else:
        points = doc.get("points") or []
        t = Table("advise-points", "The placements ranked by p50 (µs per call)")
        t.header([("rank", "l"), ("placement", "l"), "p50 [range]", "p99", "mean", "CPU per call", "model", "duty",
                  "load ms"])
        for p in points:
            t.row([(str(p.get("rank", "")), "l"), (ADVISE_PLACEMENTS.get(p.get("case"), "?"), "l"), advise_p50(p),
                   num(p.get("p99_us")), num(p.get("mean_us")), num(p.get("cpu_us_per_call")),
                   num(p.get("model_us")), percent(p.get("duty")), num(p.get("load_ms"))])
        out.append(t.render())
        out.append(chart("advise", directory, "advise_point.png", "p50 and p99 per placement"))
    out.append(f'<p class="note">{esc(doc.get("method", ""))}</p>')
    out.append(text_output(directory))
    out.append("</section>")
    return "\n".join(x for x in out if x)


# --------------------------------------------------------------------------------------------- pool


def range_text(r, factor=1.0):
    if not r:
        return "–"
    return f"{num(r['median'] * factor)} [{num(r['min'] * factor)}–{num(r['max'] * factor)}]"


def pool_section(directory, doc):
    cfg = doc.get("config") or {}
    pools = cfg.get("pools") or sorted({r["pool"] for r in doc.get("results", [])})
    results = doc.get("results") or []
    by = {(r["workload"], r["pool"]): r for r in results}
    workloads = [w for w in cfg.get("workloads") or [] if any(r["workload"] == w for r in results)]
    pub = (doc.get("published") or {}).get("eterfree") or {}
    cal = doc.get("calibration") or {}
    out = ['<section id="pool"><h2>' + esc(PART_TITLES["pool"]) + "</h2>"]
    cite = pub.get("citation") or {}
    if cite:
        link = cite.get("pool_repository", "")
        out.append(f'<p class="cite">Published figures: {esc(cite.get("study", ""))}, {esc(cite.get("table", ""))}; '
                   f'the pool: <a href="{esc(link)}">{esc(link)}</a>.</p>')
    wall = doc.get("wall_s")
    out.append(f'<p class="note">This run: {esc(cfg.get("runs", "?"))} runs per workload and pool, interleaved '
               f'({esc(", ".join(pools))}); eterfree {esc(cfg.get("tasks", "?"))} tasks on {esc(cfg.get("threads", "?"))} '
               f'threads, window {num((cfg.get("window_ns") or 0) / 1e6)} ms; {esc(cfg.get("workers", "?"))} workers '
               f'for the overhead workloads; {num(wall)} s wall. Machine: {esc(machine_text(doc.get("machine")))}. '
               "Ranges: median [min–max] over the runs.</p>")

    if "eterfree" in workloads:
        ours = [(p, by.get(("eterfree", p))) for p in pools if by.get(("eterfree", p))]
        t = Table("pool-eterfree-runs", "Eterfree, run by run: the study's published table beside each pool "
                                        "(window = the study's count at the end of the window; done = all tasks / "
                                        "completion time), tasks/ms")
        t.header([("run", "l"), ("published", None, 3)] + [(p, None, 2) for p, _ in ours],
                 [("", "l"), "tasks", "ms", "tasks/ms"] + [h for _ in ours for h in ("window", "done")])
        published_runs = pub.get("runs") or []
        rows = max([len(published_runs)] + [len(r.get("runs", [])) for _, r in ours])
        for i in range(rows):
            cells = [str(i + 1)]
            if i < len(published_runs):
                p = published_runs[i]
                cells += [(str(p["tasks"]), "pub"), (str(p["ms"]), "pub"), (f"{p['tasks_per_ms']:.3f}", "pub")]
            else:
                cells += [("", "pub")] * 3
            for _, r in ours:
                runs = r.get("runs", [])
                if i < len(runs) and runs[i].get("ok"):
                    w = runs[i].get("window") or {}
                    c = runs[i].get("completion") or {}
                    cells += [f"{w.get('tasks_per_ms', 0):.3f}", f"{c.get('tasks_per_ms', 0):.3f}"]
                elif i < len(runs):
                    cells += [("FAILED", "l"), ""]
                else:
                    cells += ["", ""]
            t.row(cells)
        avg = pub.get("average") or {}
        cells = [("average", "l"), (num(avg.get("tasks")), "pub"), (num(avg.get("ms")), "pub"),
                 (f"{avg.get('tasks_per_ms', 0):.3f}", "pub")]
        for _, r in ours:
            e = r.get("eterfree") or {}
            cells += [f"{(e.get('window') or {}).get('avg_tasks_per_ms', 0):.3f}",
                      f"{(e.get('completion') or {}).get('avg_tasks_per_ms', 0):.3f}"]
        t.row(cells)
        out.append(t.render())

        t = Table("pool-eterfree", "Eterfree summary (ceiling = threads / one task body run alone)")
        t.header([("pool", "l"), "window avg tasks/ms", "completion tasks/ms", "of ceiling", "CPU µs/task",
                  "runs ok"])
        for p, r in ours:
            e = r.get("eterfree") or {}
            eff = (r.get("efficiency") or {}).get("median")
            t.row([(p, "l"), f"{(e.get('window') or {}).get('avg_tasks_per_ms', 0):.3f}",
                   range_text((e.get("completion") or {}).get("tasks_per_ms")),
                   f"{eff * 100:.1f} %" if eff is not None else "–",
                   num((r.get("cpu_ns_per_task") or {}).get("median", 0) / 1e3),
                   f"{r.get('runs_ok', 0)}/{r.get('runs_ok', 0) + r.get('runs_failed', 0)}"])
        t.row([("published (study 004)", "l"), (f"{avg.get('tasks_per_ms', 0):.3f}", "pub"), ("–", "pub"),
               ("–", "pub"), ("–", "pub"), (str(len(published_runs)) + "/" + str(len(published_runs)), "pub")])
        out.append(t.render())

    t = Table("pool-summary", "Every workload: each pool's headline number, median [min–max] over the runs "
                              "(bold: the best median)")
    t.header([("workload", "l"), ("headline", "l")] + pools + ["runs ok"])
    for w in workloads:
        rs = [by.get((w, p)) for p in pools]
        first = next((r for r in rs if r), None)
        if not first:
            continue
        head = first.get("headline") or {}
        medians = [r["headline"]["median"] for r in rs if r and r.get("headline") and not r.get("cannot")]
        best = (max if head.get("higher_is_better", True) else min)(medians) if medians else None
        cells = [(w, "l"), (f"{head.get('name', '?')} ({head.get('unit', '')})", "l")]
        for r in rs:
            if r and r.get("cannot"):  # fib, skynet on a pool without a nested wait that helps
                cells.append(("cannot", "l"))
                continue
            if not r or not r.get("headline"):
                cells.append("–")
                continue
            h = r["headline"]
            cells.append((range_text(h), "best" if h["median"] == best and len(medians) > 1 else None))
        cells.append(" ".join(f"{r.get('runs_ok', 0)}" for r in rs if r) + f" of {cfg.get('runs', '?')}")
        t.row(cells)
    out.append(t.render())

    goals = doc.get("goals") or []
    if goals:
        t = Table("pool-goals", f"Goals (a verdict needs {cfg.get('goal_min_runs', '?')} ok runs per series; "
                                "the best peer = the best other pool, measured the same way)")
        t.header([("goal", "l"), ("measured", "l"), ("verdict", "l")])
        for g in goals:
            v = g.get("verdict", "")
            cls = "verdict-met" if v == "met" else ("verdict-not" if v == "not met" else "verdict-none")
            t.row([(g.get("name", ""), "l"), (g.get("measured", ""), "l"), (v, "l " + cls)])
        out.append(t.render())

    for name, alt in (("pool_throughput.png", "each pool's headline number per workload"),
                      ("pool_efficiency.png", "throughput as a share of the ceiling")):
        out.append(chart("pool", directory, name, alt))

    pairs = []
    if cal.get("eterfree_body_ns"):
        b = cal["eterfree_body_ns"]
        pairs.append(("eterfree task body alone", f"mean {num(b['mean'] / 1e3)} µs, median {num(b['median'] / 1e3)} µs "
                                                  f"({b.get('samples', '?')} samples)"))
        pairs.append(("eterfree ceiling", f"{num(cal.get('eterfree_ceiling_tasks_per_ms'))} tasks/ms"))
    if cal.get("fine_body_ns") is not None:
        pairs.append(("fine task body", f"{num(cal['fine_body_ns'])} ns ({cal.get('fine_iterations', '?')} iterations); "
                                        f"ceiling {num((cal.get('fine_ceiling_tasks_per_s') or 0) / 1e6)} M tasks/s"))
    if cal.get("burst_ideal_ms") is not None:
        pairs.append(("burst ideal", f"{num(cal['burst_ideal_ms'])} ms (with the measured short task: "
                                     f"{num(cal.get('burst_ideal_body_ms'))} ms)"))
    floors = cal.get("floors") or {}
    for key, label in (("spin_roundtrip_ns", "spin floor"), ("futex_roundtrip_ns", "futex floor"),
                       ("sleep_roundtrip_ns", "sleeping-thread floor")):
        if floors.get(key):
            s = floors[key]
            pairs.append((label, f"p50 {num(s['p50'] / 1e3)} µs, p99 {num(s['p99'] / 1e3)} µs"))
    if cfg.get("completion_method"):
        pairs.append(("completion counted", cfg["completion_method"]))
    if pairs:
        out.append("<h3>Calibration and floors</h3>")
        out.append(key_value_table("pool-calibration", pairs))
    out.append(text_output(directory))
    out.append("</section>")
    return "\n".join(x for x in out if x)


# -------------------------------------------------------------------------------------------- micro


def micro_section(directory, doc):
    benchmarks = doc.get("benchmarks") or []
    ctx = doc.get("context") or {}
    rows = {}
    order = []
    for b in benchmarks:
        name = b.get("run_name") or b.get("name", "?")
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") not in ("median",):
            continue
        if name not in rows:
            order.append(name)
        rows.setdefault(name, []).append(b)
    reps = {b.get("repetitions") for b in benchmarks if b.get("repetitions")}
    out = ['<section id="micro"><h2>' + esc(PART_TITLES["micro"]) + "</h2>"]
    out.append(f'<p class="note">{esc(", ".join(str(r) for r in sorted(reps)) or "?")} randomly interleaved '
               f"repetitions per benchmark, medians; {esc(ctx.get('num_cpus', '?'))} CPUs, "
               f"{esc(ctx.get('date', ''))}. Per-call percentiles are the benchmark's own counters.</p>")
    t = Table("micro", "Micro-benchmarks: median over the repetitions")
    t.header([("benchmark", "l"), "p50 µs", "p90 µs", "p99 µs", "time per iteration", "CPU per iteration",
              "iterations"])
    for name in order:
        b = rows[name][0]
        unit = b.get("time_unit", "ns")
        t.row([(name, "l")] + [num(b[k] / 1e3) if isinstance(b.get(k), (int, float)) else "–"
                               for k in ("p50_ns", "p90_ns", "p99_ns")] +
              [f"{num(b.get('real_time'))} {unit}", f"{num(b.get('cpu_time'))} {unit}", str(b.get("iterations", ""))])
    out.append(t.render())
    out.append(text_output(directory))
    out.append("</section>")
    return "\n".join(out)


# --------------------------------------------------------------------------------------------- page


def part_entry(run, part):
    """The run.json command entry of `part` (this invocation's or an earlier one's), or None."""
    for c in (run or {}).get("commands", []):
        if isinstance(c, dict) and c.get("part") == part:
            return c
    return None


def part_note(entry):
    """(ok, note): a line under the section's heading saying which run its figures come from."""
    if entry is None:
        return True, "Not written by scripts/lab (no entry in run.json): its size is unknown."
    if entry.get("skipped"):
        return False, entry["skipped"]
    kind = entry.get("kind", "?")
    text = "Full (publication) run." if kind == "full" else (QUICK_LINE[0].upper() + QUICK_LINE[1:] + ".")
    if entry.get("earlier"):
        text = (f"From an earlier scripts/lab invocation (started {entry.get('start_utc', '?')}, {kind} run), "
                "not this one.")
    if entry.get("status") not in (0, None):
        return False, f"{text} The command failed (exit status {entry['status']}): its results may be incomplete."
    return True, text + f" Command: {entry.get('command', '?')}"


def build_page(results_dir):
    run, run_error = load_json(os.path.join(results_dir, "run.json"))
    kinds = {c.get("kind") for c in (run or {}).get("commands", []) if isinstance(c, dict) and not c.get("skipped")}
    kind = "quick" if "quick" in kinds else ("full" if kinds == {"full"} else "unknown")
    sections = []
    caveats = []
    machine = None
    for part in PARTS:
        directory = os.path.join(results_dir, part)
        name = "micro.json" if part == "micro" else "results.json"
        doc, why = load_json(os.path.join(directory, name))
        entry = part_entry(run, part)
        ok, note = part_note(entry)
        if doc is None or not isinstance(doc, dict):
            sections.append(not_run(part, note if entry and entry.get("skipped") else why or "no results"))
            continue
        if not ok:
            caveats.append(f"{part}: {note}")
        if part == "micro":
            body = micro_section(directory, doc)
        elif part == "pool":
            body = pool_section(directory, doc)
        elif part == "advise":
            body = advise_section(directory, doc)
        else:
            body = xcall_like_section(part, directory, doc)
        machine = machine or doc.get("machine")
        heading_end = body.index("</h2>") + len("</h2>")
        cls = "run-note quick" if (entry or {}).get("kind") == "quick" else "run-note"
        sections.append(body[:heading_end] + f'<p class="{cls}">{esc(note)}</p>' + body[heading_end:])
        caveats.extend(f"{part}: {line}" for line in method_lines(directory))
        if part == "micro" and (doc.get("context") or {}).get("library_build_type") == "debug":
            caveats.append(MICRO_DEBUG_CAVEAT)

    title = "xthread lab results"
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width,initial-scale=1">',
           f"<title>{esc(title)}</title><style>{CSS}</style></head><body><main>", f"<h1>{esc(title)}</h1>"]
    if kind == "quick":
        out.append(f'<div class="banner quick" id="run-kind">This is a {esc(QUICK_LINE)}. It ran fewer calls, runs '
                   "and tasks than the publication run (the exact commands are below); its figures are noisier and "
                   "pool goals may carry no verdict (too few runs).</div>")
    elif kind == "full":
        out.append('<div class="banner full" id="run-kind">Full (publication) run: every command with its '
                   "default sizes.</div>")
    else:
        out.append('<div class="banner unknown" id="run-kind">Run kind unknown: no run.json '
                   f"({esc(run_error or 'missing')}); these results were not written by scripts/lab.</div>")
    out.append("<nav>" + "".join(f'<a href="#{p}">{esc(p)}</a>' for p in PARTS) +
               '<a href="#caveats">caveats</a><a href="#run">how this was run</a></nav>')

    m = (run or {}).get("machine") or {}
    pairs = [("CPUs", str(m.get("cpus") or (machine or {}).get("cpus", "?"))),
             ("CPU model", m.get("cpu_model") or (machine or {}).get("cpu_model", "?")),
             ("kernel", m.get("kernel") or (machine or {}).get("kernel", "?")),
             ("OS", m.get("os", "?")),
             ("compiler and build", f"{(machine or {}).get('compiler', '?')} {(machine or {}).get('build_type', '')}"),
             ("started (UTC)", (run or {}).get("start_utc", (machine or {}).get("timestamp_utc", "?"))),
             ("lab time", f"{num((run or {}).get('lab_s'))} s (the build before it not counted)"),
             ("run kind", kind)]
    out.append("<h2>Machine</h2>")
    out.append(key_value_table("machine", pairs))
    out.extend(sections)

    out.append('<section id="caveats"><h2>Caveats</h2><ul class="caveats">')
    if kind == "quick":
        out.append(f"<li><strong>{esc(QUICK_LINE)}</strong>: fewer calls per point, fewer runs and tasks per "
                   "pool workload and fewer micro-benchmark repetitions than the publication run.</li>")
    out.append("<li>A 2-core VM is noisy: compare ratios within one run, not across runs.</li>")
    out.append("<li>The published figures were measured on other machines (study 000: an OpenHarmony device; "
               "study 004: Windows): the ratios say how far apart the two setups are, not which library "
               "is faster on the same hardware.</li>")
    out.extend(f"<li>{esc(c)}</li>" for c in caveats)
    out.append("</ul></section>")

    out.append('<section id="run"><h2>How this was run</h2>')
    t = Table("run-commands", "The commands scripts/lab ran, in order")
    t.header([("part", "l"), ("kind", "l"), ("command", "l"), "exit", "seconds"])
    for c in (run or {}).get("commands", []):
        what = f"skipped: {c['skipped']}" if c.get("skipped") else c.get("command", "")
        if c.get("earlier"):
            what += f"  (earlier invocation, started {c.get('start_utc', '?')})"
        t.row([(c.get("part", ""), "l"), (c.get("kind", "?"), "l"), (what, "l"), str(c.get("status", "–")),
               num(c.get("wall_s"))])
    out.append(t.render())
    out.append(f'<p class="note">Generated {esc(datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))} '
               "by bench/lab/report/html_report.py.</p></section>")
    out.append("</main></body></html>\n")
    return "\n".join(out)


def main(argv):
    args = argv[1:]
    out_path = None
    if len(args) == 3 and args[1] == "--out":
        out_path = args[2]
        args = args[:1]
    if len(args) != 1 or args[0].startswith("-"):
        print("usage: html_report.py RESULTS_DIR [--out FILE]", file=sys.stderr)
        return 2
    results_dir = args[0]
    if not os.path.isdir(results_dir):
        print(f"html_report.py: {results_dir} is not a directory", file=sys.stderr)
        return 2
    out_path = out_path or os.path.join(results_dir, "index.html")
    page = build_page(results_dir)
    temp = f"{out_path}.tmp-{os.getpid()}"
    try:
        with open(temp, "w", encoding="utf-8") as f:
            f.write(page)
        os.replace(temp, out_path)
    finally:
        if os.path.exists(temp):
            os.unlink(temp)
    print(out_path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
