# SPDX-License-Identifier: MIT
"""Charts of `xthread-bench advise` (schema xthread-bench/advise/1), drawn for charts.py.

charts.py imports this file for lab "advise" and calls render(doc, out_dir, save), where save(fig, name)
writes the figure atomically and records its name. Charts:
  advise_sweep.png  with --sweep: p50 (solid, with the repetitions' min-max range) and p99 (dashed) of each
                    placement against the measured duty, log scale, the load model (dotted) of cases 1 and 3,
                    and the crossover as a vertical line
  advise_point.png  a single point: p50 (with its range) and p99 bars per placement, in rank order
"""

CASE_COLORS = {1: "#4c78a8", 2: "#54a24b", 3: "#e45756"}
CASE_NAMES = {1: "case 1: main thread", 2: "case 2: worker", 3: "case 3: worker → main"}


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _title(doc):
    cfg = doc.get("config") or {}
    return (f"callee {cfg.get('callee_us', '?')} µs, payload {cfg.get('payload', '?')} chars, "
            f"period {cfg.get('period_ms', '?')} ms")


def sweep_chart(plt, doc, save):
    rows = sorted(doc["sweep"], key=lambda r: r["duty"])
    fig, ax = plt.subplots(figsize=(8, 4.8))
    for case in (1, 2, 3):
        xs, p50, lo, hi, p99, model = [], [], [], [], [], []
        for row in rows:
            placement = next((p for p in row["placements"] if p["case"] == case), None)
            if placement is None:
                continue
            xs.append(100 * row["duty"])
            p50.append(placement["p50_us"])
            lo.append(placement["p50_range_us"][0])
            hi.append(placement["p50_range_us"][1])
            p99.append(placement["p99_us"])
            model.append(placement.get("model_us"))
        if not xs:
            continue
        color = CASE_COLORS[case]
        ax.plot(xs, p50, "-o", color=color, markersize=4, label=f"{CASE_NAMES[case]} p50")
        ax.fill_between(xs, lo, hi, color=color, alpha=0.15, linewidth=0)
        ax.plot(xs, p99, "--", color=color, linewidth=1, label=f"{CASE_NAMES[case]} p99")
        if case in (1, 3) and all(m is not None for m in model):
            ax.plot(xs, model, ":", color=color, linewidth=1.5, label=f"{CASE_NAMES[case]} model (mean)")
    crossover = doc.get("crossover") or {}
    if crossover.get("duty") is not None:
        x = 100 * crossover["duty"]
        ax.axvline(x, color="#333333", linewidth=1)
        ax.annotate(f"crossover {x:.0f} %", (x, 1), xycoords=("data", "axes fraction"), xytext=(4, -14),
                    textcoords="offset points", fontsize=8,
                    bbox={"boxstyle": "round", "facecolor": "white", "edgecolor": "#cccccc"})
    ax.set_yscale("log")
    ax.set_xlabel("measured main-thread duty (%)")
    ax.set_ylabel("µs per call (log)")
    ax.set_title(f"advise sweep: {_title(doc)}", fontsize=9)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.14))
    fig.tight_layout()
    save(fig, "advise_sweep.png")


def point_chart(plt, doc, save):
    points = doc["points"]
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    xs = list(range(len(points)))
    width = 0.38
    p50 = [p["p50_us"] for p in points]
    lower = [max(0.0, p["p50_us"] - p["p50_range_us"][0]) for p in points]
    upper = [max(0.0, p["p50_range_us"][1] - p["p50_us"]) for p in points]
    colors = [CASE_COLORS.get(p["case"], "#9d9d9d") for p in points]
    ax.bar([x - width / 2 for x in xs], p50, width, color=colors, yerr=[lower, upper], capsize=4, label="p50")
    ax.bar([x + width / 2 for x in xs], [p["p99_us"] for p in points], width, color=colors, alpha=0.45, hatch="//",
           label="p99")
    for x, p in zip(xs, points):
        ax.annotate(f"{p['p50_us']:.3g}", (x - width / 2, p["p50_us"]), textcoords="offset points", xytext=(0, 2),
                    ha="center", fontsize=7)
    ax.set_xticks(xs)
    ax.set_xticklabels([CASE_NAMES.get(p["case"], str(p["case"])) for p in points], fontsize=8)
    ax.set_yscale("log")
    ax.set_ylim(bottom=0.5 * min([p["p50_range_us"][0] for p in points] + p50))
    ax.set_ylabel("µs per call (log)")
    duty = points[0].get("duty", 0) if points else 0
    load = points[0].get("target_ms", 0) if points else 0
    ax.set_title(f"advise: {_title(doc)}\nmain-thread load {load:g} ms, duty {100 * duty:.0f} %", fontsize=9)
    ax.grid(axis="y", alpha=0.3, which="both")
    from matplotlib.patches import Patch

    ax.legend(handles=[Patch(color="#888888", label="p50 [min–max over the repetitions]"),
                       Patch(facecolor="#888888", alpha=0.45, hatch="//", label="p99")], fontsize=7)
    fig.tight_layout()
    save(fig, "advise_point.png")


def render(doc, out_dir, save):
    del out_dir  # every chart goes through save()
    schema = doc.get("schema")
    if schema != "xthread-bench/advise/1":
        raise SystemExit(f"advise_charts.py: expected schema xthread-bench/advise/1, got {schema!r}")
    plt = _plt()
    if doc.get("sweep"):
        sweep_chart(plt, doc, save)
    elif doc.get("points"):
        point_chart(plt, doc, save)
    else:
        raise SystemExit("advise_charts.py: the results have neither a sweep nor points")
