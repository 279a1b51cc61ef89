# SPDX-License-Identifier: MIT
"""Charts of the pool lab (schema xthread-bench/pool/1), drawn for charts.py.

charts.py imports this file for lab "pool" and calls render(doc, out_dir, save), where
save(fig, name) writes the figure atomically and records its name. Charts:
  pool_throughput.png  one panel per workload: each pool's headline number (median over the runs) with
                       its min-max range; eterfree also shows the ceiling and the study's published
                       figure, roundtrip the futex floor, burst the ideal and the 2x-ideal goal; fib and
                       skynet the ratio to oneTBB's wall time under each bar, and a pool that cannot run
                       them (a result with "cannot") an empty slot labelled "cannot"
  pool_efficiency.png  measured throughput as a share of the ceiling (eterfree by both of the study's
                       methods, fine), with min-max ranges; only when eterfree or fine ran
"""

import math

POOL_COLORS = {"xthread": "#4c78a8", "xthread-group": "#72b7b2", "asio": "#f58518", "tbb": "#54a24b",
               "naive": "#9d9d9d"}


def _color(pool):
    return POOL_COLORS.get(pool, "#b279a2")


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _bars(ax, pools, medians, mins, maxs, unit, cannot=None, notes=None):
    """Bars with min-max ranges; pools with cannot[i] set get no bar, only the label "cannot";
    notes[i] (optional) is a second line under a bar's number."""
    cannot = cannot or [False] * len(pools)
    notes = notes or [""] * len(pools)
    medians = [0.0 if c else m for m, c in zip(medians, cannot)]
    mins = [0.0 if c else v for v, c in zip(mins, cannot)]
    maxs = [0.0 if c else v for v, c in zip(maxs, cannot)]
    xs = list(range(len(pools)))
    lower = [max(0.0, m - lo) for m, lo in zip(medians, mins)]
    upper = [max(0.0, hi - m) for m, hi in zip(medians, maxs)]
    ax.bar(xs, medians, color=[_color(p) for p in pools], yerr=[lower, upper], capsize=4,
           error_kw={"elinewidth": 1, "ecolor": "#333333"})
    ax.set_xticks(xs)
    ax.set_xticklabels(pools, fontsize=7 if len(pools) > 4 else None)
    ax.set_ylabel(unit)
    ax.grid(axis="y", alpha=0.3)
    top = max([v for v in maxs + medians if isinstance(v, (int, float)) and math.isfinite(v)] or [1.0])
    for x, m, c, note in zip(xs, medians, cannot, notes):
        if c:
            ax.annotate("cannot", (x, 0), textcoords="offset points", xytext=(0, 4), ha="center", fontsize=7,
                        color="#e45756", rotation=90, va="bottom")
            continue
        label = _short(m) + (f"\n{note}" if note else "")
        ax.annotate(label, (x, m), textcoords="offset points", xytext=(0, 2), ha="center", fontsize=7)
    ax.set_ylim(0, top * 1.25 if top > 0 else 1)


def _short(v):
    a = abs(v)
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    return f"{v:.3f}"


def _results_by_workload(doc):
    order = []
    groups = {}
    for r in doc.get("results", []):
        w = r["workload"]
        if w not in groups:
            groups[w] = []
            order.append(w)
        groups[w].append(r)
    return order, groups


def throughput_chart(plt, doc, save):
    order, groups = _results_by_workload(doc)
    if not order:
        raise SystemExit("pool_charts.py: results have no series to chart")
    cols = min(4, len(order))
    rows = math.ceil(len(order) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.6 * rows), squeeze=False)
    cal = doc.get("calibration", {})
    cfg = doc.get("config", {})
    for i, w in enumerate(order):
        ax = axes[i // cols][i % cols]
        series = groups[w]
        h = series[0]["headline"]
        pools = [s["pool"] for s in series]
        cannot = [bool(s.get("cannot")) for s in series]
        notes = None
        if w in ("fib", "skynet"):
            notes = []
            for s in series:
                ratio = (s.get("fork_join") or {}).get("wall_over_tbb")
                notes.append(f"{ratio:.2f}x tbb" if ratio is not None and s["pool"] != "tbb" else "")
        _bars(ax, pools, [s["headline"]["median"] for s in series], [s["headline"]["min"] for s in series],
              [s["headline"]["max"] for s in series], h["unit"], cannot, notes)
        better = "higher is better" if h["higher_is_better"] else "lower is better"
        if w == "idle":
            size = f"{series[0]['threads']} threads, {cfg.get('idle_window_ns', 0) / 1e9:g} s"
        else:
            size = f"{series[0]['threads']} threads, {series[0]['tasks']} tasks"
        ax.set_title(f"{w}: {h['name']}\n({better}; {size})", fontsize=8)
        if w == "eterfree":
            ceiling = cal.get("eterfree_ceiling_tasks_per_ms")
            if ceiling:
                ax.axhline(ceiling, color="#e45756", linestyle="--", linewidth=1, label=f"ceiling {ceiling:.2f}")
            published = doc.get("published", {}).get("eterfree", {}).get("average", {}).get("tasks_per_ms")
            if published:
                ax.axhline(published, color="#333333", linestyle=":", linewidth=1,
                           label=f"study 004 published {published:.2f} (10 s window)")
            window_ns = cfg.get("window_ns")
            tasks = cfg.get("tasks")
            if window_ns and tasks:
                cap = tasks / (window_ns / 1e6)
                ax.axhline(cap, color="#b279a2", linestyle="-.", linewidth=1, label=f"window-method cap {cap:.2f}")
            top = max([ceiling or 0, published or 0] + [s["headline"]["max"] for s in series])
            ax.set_ylim(0, top * 1.6)
            ax.legend(fontsize=6, loc="upper center", ncol=1, framealpha=0.9)
        if w == "roundtrip":
            floors = cal.get("floors", {})
            floor = floors.get("futex_roundtrip_ns", {}).get("p50")
            sleep = floors.get("sleep_roundtrip_ns", {}).get("p50")
            if floor:
                ax.axhline(floor / 1e3, color="#e45756", linestyle="--", linewidth=1,
                           label=f"futex floor p50 {floor / 1e3:.2f} us")
            if sleep:
                ax.axhline(sleep / 1e3, color="#b279a2", linestyle=":", linewidth=1,
                           label=f"sleep floor (raw futex) p50 {sleep / 1e3:.2f} us")
            if floor or sleep:
                top = max([floor or 0, sleep or 0]) / 1e3
                top = max([top] + [s["headline"]["max"] for s in series])
                ax.set_ylim(0, top * 1.35)
                ax.legend(fontsize=6, loc="upper right", framealpha=0.9)
        if w == "burst":
            ideal = cal.get("burst_ideal_ms")
            if ideal:
                ax.axhline(ideal, color="#54a24b", linestyle="--", linewidth=1, label=f"ideal {ideal:.1f} ms")
                ax.axhline(2 * ideal, color="#e45756", linestyle=":", linewidth=1, label=f"goal 2x ideal {2 * ideal:.1f} ms")
                top = max([2 * ideal] + [s["headline"]["max"] for s in series])
                ax.set_ylim(0, top * 1.25)
                ax.legend(fontsize=6, loc="upper right", framealpha=0.9)
        if w == "idle":
            ax.axhline(1.0, color="#e45756", linestyle="--", linewidth=1, label="1 % goal")
            ax.set_ylim(0, max(1.25, max(s["headline"]["max"] for s in series) * 1.18))
            ax.legend(fontsize=6, loc="upper left")
        if any(cannot):
            ax.set_xlabel("cannot: no nested wait that helps (a task blocked in its join holds its worker)", fontsize=6)
    for j in range(len(order), rows * cols):
        axes[j // cols][j % cols].axis("off")
    runs = cfg.get("runs", "?")
    fig.suptitle(f"xthread-bench pool: median of {runs} interleaved runs, bars = min-max", fontsize=10)
    fig.tight_layout()
    save(fig, "pool_throughput.png")


def efficiency_chart(plt, doc, save):
    order, groups = _results_by_workload(doc)
    panels = [w for w in ("eterfree", "fine") if w in groups]
    if not panels:
        return
    cal = doc.get("calibration", {})
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 3.8), squeeze=False)
    for ax, w in zip(axes[0], panels):
        series = groups[w]
        pools = [s["pool"] for s in series]
        eff = [s.get("efficiency", {"median": 0, "min": 0, "max": 0}) for s in series]
        if w == "eterfree":
            ceiling = cal.get("eterfree_ceiling_tasks_per_ms") or 0
            xs = list(range(len(pools)))
            width = 0.38
            med = [100 * e["median"] for e in eff]
            lo = [max(0.0, 100 * (e["median"] - e["min"])) for e in eff]
            hi = [max(0.0, 100 * (e["max"] - e["median"])) for e in eff]
            ax.bar([x - width / 2 for x in xs], med, width, color=[_color(p) for p in pools], yerr=[lo, hi],
                   capsize=3, label="completion of all tasks")
            window = [100 * s["eterfree"]["window"]["avg_tasks_per_ms"] / ceiling if ceiling else 0 for s in series]
            ax.bar([x + width / 2 for x in xs], window, width, color=[_color(p) for p in pools], alpha=0.45,
                   hatch="//", label="count at window end (study's method)")
            for x, m in zip(xs, med):
                ax.annotate(f"{m:.1f}", (x - width / 2, m), textcoords="offset points", xytext=(0, 2), ha="center",
                            fontsize=7)
            ax.set_xticks(xs)
            ax.set_xticklabels(pools)
            body = cal.get("eterfree_body_ns", {}).get("mean")
            sub = f"ceiling = threads / one task body alone ({body / 1e3:.0f} us)" if body else "ceiling"
            ax.set_title(f"eterfree: % of ceiling\n{sub}", fontsize=8)
            ax.set_ylim(0, max(med + window + [100]) * 1.45)
        else:
            _bars(ax, pools, [100 * e["median"] for e in eff], [100 * e["min"] for e in eff],
                  [100 * e["max"] for e in eff], "% of ceiling")
            body = cal.get("fine_body_ns")
            sub = f"ceiling = workers / task ({body:.0f} ns); the producer shares the cores" if body else "ceiling"
            ax.set_title(f"fine: % of ceiling\n{sub}", fontsize=8)
        ax.set_ylabel("% of ceiling")
        ax.axhline(100, color="#e45756", linestyle="--", linewidth=1, label="ceiling")
        ax.grid(axis="y", alpha=0.3)
        if w == "fine":
            ax.set_ylim(0, max([100 * e["max"] for e in eff] + [100]) * 1.3)
        ax.legend(fontsize=6, loc="upper center", ncol=3, framealpha=0.9)
    fig.tight_layout()
    save(fig, "pool_efficiency.png")


def render(doc, out_dir, save):
    schema = doc.get("schema")
    if schema != "xthread-bench/pool/1":
        raise SystemExit(f"pool_charts.py: expected schema xthread-bench/pool/1, got {schema!r}")
    plt = _plt()
    throughput_chart(plt, doc, save)
    efficiency_chart(plt, doc, save)
