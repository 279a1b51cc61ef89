#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Charts for xthread-bench results.

Usage: charts.py LAB RESULTS_JSON OUT_DIR

LAB is "xcall" or "napi" (both use the xcall points format, schema xthread-bench/xcall/2 or /1), drawn here,
"pool" (schema xthread-bench/pool/1), drawn by pool_charts.py beside this file, or "advise" (schema
xthread-bench/advise/1), drawn by advise_charts.py beside it: render(doc, out_dir, save), where
save(fig, file_name) writes a matplotlib figure atomically and records its name.

Each PNG is written to a temporary file and renamed, so a failure never leaves a half-written chart.
The names of the files written are printed on stdout, one per line; errors go to stderr with exit
status != 0. xthread-bench runs this with /usr/bin/python3 (Debian's python3-matplotlib).

With XTHREAD_LAB_KIND=quick in the environment (scripts/lab's default quick run sets it), every chart
carries the line "quick run — for publication use scripts/lab --full", so a quick chart is never mistaken
for a publication one.
"""

import json
import math
import os
import sys

LOAD_ORDER = ["idle", "medium", "heavy"]
LOAD_COLORS = {"idle": "#4c78a8", "medium": "#f58518", "heavy": "#e45756"}
CASE_COLORS = {1: "#4c78a8", 2: "#54a24b", 3: "#e45756"}
CASE_NAMES = {1: "case 1: main", 2: "case 2: worker", 3: "case 3: worker -> main"}
IMPL_STYLES = {"xthread": "-", "node-api": "--", "published": ":"}
IMPL_COLORS = {"xthread": "#4c78a8", "plain": "#f58518", "node-api": "#54a24b", "node-api-raw": "#b279a2"}
# xthread with its main loop hosted (xcall --host): one series per host, drawn in its own style.
HOST_STYLES = {"uv": (0, (5, 1)), "uv-nested": (0, (1, 1))}


def fail(message, status=2):
    print(f"charts.py: {message}", file=sys.stderr)
    sys.exit(status)


def load_matplotlib():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        return plt
    except ImportError as exc:
        fail(f"matplotlib is not available for {sys.executable} ({exc}); "
             "on Debian: apt-get install python3-matplotlib", 3)


class Saver:
    def __init__(self, plt, out_dir):
        self.plt = plt
        self.out_dir = out_dir
        self.written = []

    def __call__(self, fig, name):
        final = os.path.join(self.out_dir, name)
        temp = os.path.join(self.out_dir, f".{name}.tmp-{os.getpid()}")
        if os.environ.get("XTHREAD_LAB_KIND") == "quick":
            fig.text(0.5, -0.02, "quick run — for publication use scripts/lab --full", ha="center", va="top",
                     fontsize=9, color="#9a6700")
        try:
            fig.savefig(temp, format="png", dpi=110, bbox_inches="tight")
            os.replace(temp, final)
        finally:
            self.plt.close(fig)
            if os.path.exists(temp):
                os.unlink(temp)
        self.written.append(name)


# ---------------------------------------------------------------------------------------------- xcall


def sweep_payload(points):
    payloads = {p["payload"] for p in points}
    return 10 if 10 in payloads else min(payloads)


def first_variant(points):
    """The (work_ns, hot) the study tables use: study conditions if measured, else the first seen."""
    variants = [(p["work_ns"], p["hot"]) for p in points]
    return (0, False) if (0, False) in variants else variants[0]


def condition_text(p):
    """", 4 callers, 2 busy" when the point had several callers or busy threads (xcall --callers,
    --oversubscribe); "" for the study's condition and for points written before those keys existed."""
    callers, busy = p.get("callers", 1), p.get("busy_threads", 0)
    return (f", {callers} callers" if callers != 1 else "") + (f", {busy} busy" if busy else "")


def study_point(p):
    """Drawn in the study's charts: every implementation but the plain contender, the study's condition."""
    return p["implementation"] != "plain" and not condition_text(p)


def series_name(p):
    """A point's series: its implementation, with the main loop's host when it was not direct."""
    host = p.get("host", "direct")  # files written before --host existed: direct
    name = p["implementation"] if host == "direct" else f"{p['implementation']} ({host})"
    return name + condition_text(p)


def series_style(p):
    host = p.get("host", "direct")
    return HOST_STYLES.get(host, "-.") if host != "direct" else IMPL_STYLES.get(p["implementation"], "-.")


def by_impl(points):
    out = {}
    for p in points:
        out.setdefault(series_name(p), []).append(p)
    return out


def find(points, case, load, payload, work, hot):
    for p in points:
        if (p["case"], p["load"], p["payload"], p["work_ns"], p["hot"]) == (case, load, payload, work, hot):
            return p
    return None


def xcall_load_bars(plt, doc, points, save):
    work, hot = first_variant(points)
    payload = sweep_payload(points)
    impls = by_impl(points)
    panels = []
    ref = doc.get("reference") or {}
    if payload == 10 and work == 0 and not hot and ref.get("load_mean_us"):
        table = ref["load_mean_us"]
        panels.append(("OpenHarmony, published (study 000)",
                       lambda c, l: table.get(str(c), {}).get(l)))
    for name, pts in impls.items():
        panels.append((f"{name} (this machine)",
                       lambda c, l, pts=pts: (find(pts, c, l, payload, work, hot) or {}).get("total_us", {}).get("mean")))
    cases = sorted({p["case"] for p in points})
    loads = [l for l in LOAD_ORDER if any(p["load"] == l for p in points)]
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.2), squeeze=False)
    width = 0.8 / max(1, len(loads))
    for ax, (title, value) in zip(axes[0], panels):
        for i, load in enumerate(loads):
            xs, ys = [], []
            for j, case in enumerate(cases):
                v = value(case, load)
                if v is not None:
                    xs.append(j + (i - (len(loads) - 1) / 2) * width)
                    ys.append(v)
            bars = ax.bar(xs, ys, width, label=load, color=LOAD_COLORS.get(load))
            ax.bar_label(bars, labels=[f"{y:.0f}" if y >= 100 else f"{y:.1f}" for y in ys], fontsize=7, padding=1)
        ax.set_xticks(range(len(cases)))
        ax.set_xticklabels([CASE_NAMES.get(c, f"case {c}") for c in cases], fontsize=8)
        ax.set_ylabel("mean latency per call (us)")
        ax.set_title(title, fontsize=10)
        ax.legend(title="main-thread load", fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    suffix = "" if (work, hot) == (0, False) else f", work {work} ns{' hot' if hot else ''}"
    fig.suptitle(f"Cross-thread call, main-thread load x case, payload {payload} chars{suffix}")
    save(fig, "xcall_load.png")


def xcall_payload_curve(plt, doc, points, save):
    work, hot = first_variant(points)
    idle = [p for p in points if p["load"] == "idle" and p["work_ns"] == work and p["hot"] == hot]
    if len({p["payload"] for p in idle}) < 2:
        return
    fig, ax = plt.subplots(figsize=(7, 4.6))
    for name, pts in by_impl(idle).items():
        for case in sorted({p["case"] for p in pts}):
            series = sorted((p["payload"], p["total_us"]["mean"]) for p in pts if p["case"] == case)
            ax.plot([s[0] for s in series], [s[1] for s in series], linestyle=series_style(pts[0]), marker="o",
                    color=CASE_COLORS.get(case), label=f"{name}, {CASE_NAMES.get(case, case)}")
    ref = (doc.get("reference") or {}).get("payload_mean_us")
    if ref and (work, hot) == (0, False):
        measured_cases = {p["case"] for p in idle}
        for case_key, row in sorted(ref.items()):
            case = int(case_key)
            if case not in measured_cases:
                continue
            series = sorted((int(k), v) for k, v in row.items())
            ax.plot([s[0] for s in series], [s[1] for s in series], IMPL_STYLES["published"], marker="x",
                    color=CASE_COLORS.get(case), alpha=0.7, label=f"OpenHarmony published, {CASE_NAMES.get(case, case)}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("payload, total characters (log)")
    ax.set_ylabel("mean latency per call, us (log)")
    ax.set_title("Cross-thread call vs payload, idle main thread")
    ax.grid(which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    save(fig, "xcall_payload.png")


def xcall_cdf(plt, doc, points, save):
    work, hot = first_variant(points)
    payload = sweep_payload(points)
    chosen = [p for p in points if p["payload"] == payload and p["work_ns"] == work and p["hot"] == hot
              and p.get("samples", {}).get("total_ns")]
    cases = sorted({p["case"] for p in chosen})
    if not cases:
        return
    fig, axes = plt.subplots(1, len(cases), figsize=(5 * len(cases), 4), squeeze=False, sharey=True)
    for ax, case in zip(axes[0], cases):
        for p in chosen:
            if p["case"] != case:
                continue
            xs = sorted(v / 1000.0 for v in p["samples"]["total_ns"])
            ys = [(i + 1) / len(xs) for i in range(len(xs))]
            ax.step(xs, ys, where="post", linestyle=series_style(p),
                    color=LOAD_COLORS.get(p["load"]), label=f"{series_name(p)}, {p['load']}")
        ax.set_xscale("log")
        ax.set_xlabel("total latency, us (log)")
        ax.set_title(CASE_NAMES.get(case, f"case {case}"), fontsize=10)
        ax.grid(which="both", alpha=0.3)
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel("fraction of calls")
    fig.suptitle(f"Latency CDF per case, payload {payload} chars")
    save(fig, "xcall_cdf.png")


PRIORITY_COLORS = {("normal", False): "#4c78a8", ("normal", True): "#54a24b", ("high", False): "#f58518",
                   ("high", True): "#e45756"}


def xcall_priority_cdf(plt, priority, save):
    """xcall --priority-point: the latency CDF of each call variant, one panel per host."""
    variants = [v for v in priority.get("variants") or [] if (v.get("samples") or {}).get("total_ns")]
    hosts = list(dict.fromkeys(v.get("host", "direct") for v in variants))
    if not hosts:
        fail("the priority point has no samples to chart")
    fig, axes = plt.subplots(1, len(hosts), figsize=(5.5 * len(hosts), 4), squeeze=False, sharey=True)
    for ax, host in zip(axes[0], hosts):
        for v in variants:
            if v.get("host", "direct") != host:
                continue
            xs = sorted(t / 1000.0 for t in v["samples"]["total_ns"])
            ys = [(i + 1) / len(xs) for i in range(len(xs))]
            name = f"{v['priority']}{', at_front' if v['at_front'] else ''}"
            ax.step(xs, ys, where="post", color=PRIORITY_COLORS.get((v["priority"], v["at_front"])), label=name)
        ax.set_xscale("log")
        ax.set_xlabel("total latency, us (log)")
        ax.set_title(f"main loop host: {host}", fontsize=10)
        ax.grid(which="both", alpha=0.3)
        ax.legend(title="call", fontsize=7)
    axes[0][0].set_ylabel("fraction of calls")
    fig.suptitle(f"Case 1 beside a standing backlog of {priority.get('backlog_tasks', '?')} normal tasks "
                 f"of {(priority.get('backlog_task_ns') or 0) / 1000:g} us: latency CDF per call variant")
    save(fig, "xcall_priority.png")


def rep_median(p, key):
    """Median over the point's repetitions of total_us[key] ("cpu": cpu_us_per_call); the pooled value when
    the point has no repetitions."""
    reps = p.get("repetitions") or []
    values = sorted(v for v in ((r.get("cpu_us_per_call") if key == "cpu" else (r.get("total_us") or {}).get(key))
                                for r in reps) if v is not None)
    if not values:
        return p.get("cpu_us_per_call") if key == "cpu" else p["total_us"][key]
    n = len(values)
    return values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2


def xcall_contenders(plt, points, save):
    """xcall --impl, --callers, --oversubscribe: p50, p99 and CPU per call of each contender, per case and
    condition (medians over the repetitions)."""
    if not any(p["implementation"] == "plain" or condition_text(p) for p in points):
        return
    groups = list(dict.fromkeys((p["case"], p["load"], p.get("callers", 1), p.get("busy_threads", 0)) for p in points))
    impls = list(dict.fromkeys(p["implementation"] for p in points))
    fig, axes = plt.subplots(1, 3, figsize=(17, 4.8), squeeze=False)
    width = 0.8 / max(1, len(impls))
    for ax, (key, title, log) in zip(axes[0], (("p50", "p50 latency, us (log)", True),
                                               ("p99", "p99 latency, us (log)", True),
                                               ("cpu", "process CPU per call, us", False))):
        for i, impl in enumerate(impls):
            xs, ys = [], []
            for j, (case, load, callers, busy) in enumerate(groups):
                p = next((q for q in points if q["implementation"] == impl and q["case"] == case and q["load"] == load
                          and q.get("callers", 1) == callers and q.get("busy_threads", 0) == busy), None)
                v = rep_median(p, key) if p else None
                if v is not None and v > 0:
                    xs.append(j + (i - (len(impls) - 1) / 2) * width)
                    ys.append(v)
            ax.bar(xs, ys, width, label=impl, color=IMPL_COLORS.get(impl))
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels([f"case {c}\n{l}\n{n} callers\n{b} busy" for c, l, n, b in groups], fontsize=7)
        if log:
            ax.set_yscale("log")
        ax.set_title(title, fontsize=10)
        ax.grid(axis="y", which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Contenders per case and condition (callers, busy threads), medians over the repetitions")
    save(fig, "xcall_contenders.png")


def render_xcall(plt, doc, save):
    points = doc.get("points")
    if not points and isinstance(doc.get("priority"), dict):
        xcall_priority_cdf(plt, doc["priority"], save)
        return
    if not isinstance(points, list) or not points:
        fail("results have no points to chart")
    study = [p for p in points if study_point(p)]
    if study:
        xcall_load_bars(plt, doc, study, save)
        xcall_payload_curve(plt, doc, study, save)
        xcall_cdf(plt, doc, study, save)
    xcall_contenders(plt, points, save)


# ---------------------------------------------------------------------------------------------- main


def main(argv):
    if len(argv) != 4:
        fail("usage: charts.py LAB RESULTS_JSON OUT_DIR")
    lab, results, out_dir = argv[1], argv[2], argv[3]
    try:
        with open(results, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as exc:
        fail(f"cannot read {results}: {exc}")
    if not os.path.isdir(out_dir):
        fail(f"{out_dir} is not a directory")
    plt = load_matplotlib()
    save = Saver(plt, out_dir)
    if lab in ("xcall", "napi"):
        render_xcall(plt, doc, save)
    elif lab == "pool":
        import pool_charts  # beside this file (the build copies both next to xthread-bench)

        pool_charts.render(doc, out_dir, save)
    elif lab == "advise":
        import advise_charts  # beside this file, like pool_charts

        advise_charts.render(doc, out_dir, save)
    else:
        fail(f"unknown lab '{lab}' (expected xcall, napi, pool or advise)")
    for name in save.written:
        print(name)


if __name__ == "__main__":
    main(sys.argv)
