#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Unit tests of bench/lab/report/html_report.py and run_json.py on small synthetic results directories:
a part that did not run is a "not run" section (never an error), a skipped part says why, a quick run is
labelled as such, an xcall part gets its tables and its inlined chart, an advise part (a sweep or one point) its
table, recommendation, crossover and chart.

Usage: html_report_test.py (run by ctest as lab_report_html; standard library only)
"""

import base64
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPORT_DIR = os.path.join(HERE, "..", "..", "..", "bench", "lab", "report")
sys.path.insert(0, REPORT_DIR)
import html_report  # noqa: E402

# A 1x1 PNG: what a chart file looks like to the generator.
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==")


def summary(mean):
    return {"mean": mean, "p50": mean, "p90": mean, "p99": mean, "min": mean, "max": mean, "count": 3}


def point(case, load, payload, mean):
    return {"implementation": "xthread", "case": case, "load": load, "payload": payload, "work_ns": 0, "hot": False,
            "calls": 3, "total_us": summary(mean), "schedule_us": summary(mean / 2), "execute_us": summary(0.1),
            "notify_us": summary(mean / 2 - 0.1), "ratio_to_futex_floor": None, "model_us": None}


def xcall_doc():
    points = [point(c, "idle", p, 10.0 * c) for c in (1, 2, 3) for p in (10, 1000)]
    points += [point(c, l, 10, 100.0 * c) for c in (1, 2, 3) for l in ("medium", "heavy")]
    return {"schema": "xthread-bench/xcall/1",
            "machine": {"cpus": 2, "cpu_model": "Test CPU", "kernel": "Linux 6", "compiler": "g++ 12",
                        "build_type": "Release", "timestamp_utc": "2026-01-01T00:00:00Z"},
            "config": {"calls_idle": 3, "calls_loaded": 3, "gap_idle_ns": [0, 200000], "seed": 7},
            "floors": {k: summary(1000.0) for k in ("spin_roundtrip_ns", "futex_roundtrip_ns", "sleep_roundtrip_ns")},
            "loads": [{"load": "idle"}, {"load": "medium", "fib_n": 30, "target_ms": 2.0, "load_ms": 2.1, "duty": 0.26,
                                         "runs": 9}],
            "points": points,
            "reference": {"citation": {"study": "ThreadSafeFunctionPerf", "repository": "kkup180/thread-safe-function-perf"},
                          "calls_per_cell": 20, "load_mean_us": {"1": {"idle": 795}},
                          "payload_mean_us": {"1": {"10": 791, "1000": 795}}},
            "run": {"wall_s": 1.5}}


def advise_placement(case, p50, lo, hi, duty, target_ms, rank):
    return {"case": case, "placement": {1: "main thread", 2: "worker", 3: "worker → main"}[case], "rank": rank,
            "p50_us": p50, "p50_range_us": [lo, hi], "p50_repetitions_us": [lo, p50, hi], "p99_us": hi * 3,
            "mean_us": p50 * 1.1, "cpu_us_per_call": 40.0, "model_us": p50 * 1.05, "calls": 300,
            "target_ms": target_ms, "duty": duty, "load_ms": target_ms}


def advise_doc(sweep):
    doc = {"schema": "xthread-bench/advise/1",
           "machine": {"cpus": 2, "cpu_model": "Test CPU", "kernel": "Linux 6", "compiler": "g++ 12",
                       "build_type": "Release", "timestamp_utc": "2026-01-01T00:00:00Z"},
           "config": {"callee_us": 5, "payload": 1000, "period_ms": 8, "calls": 300, "repetitions": 5, "seed": 3,
                      "sweep": sweep},
           "method": "method: each load is 5 repetitions", "wall_s": 12.5}
    if not sweep:
        doc["points"] = [advise_placement(2, 29.0, 27.1, 30.5, 0.86, 7, 1),
                         advise_placement(1, 3046, 1828, 3386, 0.86, 7, 2),
                         advise_placement(3, 3253, 2851, 3906, 0.86, 7, 3)]
        doc["recommendation"] = "run it on a worker (case 2): p50 29.0 µs vs 3046 µs on the main thread"
        return doc
    rows = []
    for duty, main in ((0.0, 20.0), (0.5, 24.0), (0.875, 3000.0)):
        placements = [advise_placement(1, main, main * 0.9, main * 1.1, duty, 8 * duty, 1),
                      advise_placement(2, 21.0, 19.0, 23.0, duty, 8 * duty, 2),
                      advise_placement(3, main + 80, main + 60, main + 100, duty, 8 * duty, 3)]
        rows.append({"target_ms": 8 * duty, "duty": duty, "load_ms": 8 * duty, "period_ms": 8,
                     "winner": 2 if main > 100 else 1, "recommendation": "…", "placements": placements})
    doc.update({"sweep": rows, "points": [p for r in rows for p in r["placements"]],
                "crossover": {"duty": 0.61, "between": [0.5, 0.875],
                              "text": "crossover: a worker wins above duty 61 % (between the measured duties 50 % "
                                      "and 88 %)"},
                "recommendation": "run it on the main thread below duty 61 %, on a worker above"})
    return doc


class Dir:
    """A temporary results directory with helpers to fill it."""

    def __init__(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.path = self._tmp.name

    def write(self, rel, content):
        full = os.path.join(self.path, rel)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        mode = "wb" if isinstance(content, bytes) else "w"
        with open(full, mode) as f:
            f.write(content if isinstance(content, (str, bytes)) else json.dumps(content))

    def run_json(self, kind, phases):
        """run.json as scripts/lab writes it, through run_json.py; phases: (part, status, skip reason)."""
        tsv = os.path.join(self.path, "phases.tsv")
        with open(tsv, "w") as f:
            for part, status, skipped in phases:
                f.write(f"{part}\t{status}\t1\t{skipped}\txthread-bench {part} --out x\n")
        subprocess.run([sys.executable, os.path.join(REPORT_DIR, "run_json.py"), os.path.join(self.path, "run.json"),
                        "--kind", kind, "--start-utc", "2026-01-01T00:00:00Z", "--lab-seconds", "12",
                        "--build-dir", "build/release", tsv], check=True)

    def page(self):
        out = subprocess.run([sys.executable, os.path.join(REPORT_DIR, "html_report.py"), self.path],
                             check=True, capture_output=True, text=True).stdout.strip()
        self.assert_equal(out, os.path.join(self.path, "index.html"))
        with open(out, encoding="utf-8") as f:
            return f.read()

    @staticmethod
    def assert_equal(a, b):
        if a != b:
            raise AssertionError(f"{a!r} != {b!r}")

    def close(self):
        self._tmp.cleanup()


def section(page, part):
    m = re.search(rf'<section id="{part}"( class="([^"]*)")?>(.*?)</section>', page, re.S)
    return (m.group(2) or "", m.group(3)) if m else (None, None)


class HtmlReportTest(unittest.TestCase):
    def setUp(self):
        self.dir = Dir()

    def tearDown(self):
        self.dir.close()

    def test_empty_directory_is_every_part_not_run(self):
        page = self.dir.page()
        for part in ("xcall", "advise", "napi", "pool", "micro"):
            cls, body = section(page, part)
            self.assertEqual(cls, "not-run", part)
            self.assertIn("not run", body)
        self.assertIn("Run kind unknown", page)
        self.assertEqual(re.findall(r'<table id="([^"]+)"', page), ["machine", "run-commands"])

    def test_quick_xcall_only_with_napi_skipped(self):
        self.dir.write("xcall/results.json", xcall_doc())
        self.dir.write("xcall/xcall_load.png", PNG)
        self.dir.write("xcall/xcall_cdf.png", b"")  # an empty chart file is left out, not embedded
        self.dir.write("xcall/table.txt", "method: three cases\n(a) table\n")
        self.dir.run_json("quick", [("xcall", 0, ""), ("napi", 0, "the Node-API addon was not built")])
        page = self.dir.page()

        self.assertIn("quick run — for publication use scripts/lab --full", page)
        self.assertIn('class="banner quick"', page)
        tables = re.findall(r'<table id="([^"]+)"', page)
        for t in ("machine", "xcall-load", "xcall-payload", "xcall-phases", "xcall-loads", "xcall-floors",
                  "run-commands"):
            self.assertIn(t, tables)
        self.assertFalse([t for t in tables if t.startswith(("napi-", "pool-", "micro"))], tables)
        images = re.findall(r'<img class="chart" id="([^"]+)"[^>]*src="data:image/png;base64,([^"]+)"', page)
        self.assertEqual([i for i, _ in images], ["chart-xcall-xcall_load"])
        self.assertEqual(base64.b64decode(images[0][1]), PNG)

        cls, body = section(page, "napi")
        self.assertEqual(cls, "not-run")
        self.assertIn("not run — the Node-API addon was not built", body)
        for part in ("advise", "pool", "micro"):
            self.assertEqual(section(page, part)[0], "not-run", part)
        cls, body = section(page, "xcall")
        self.assertEqual(cls, "")
        self.assertIn("795", body)  # the published figure beside ours
        self.assertIn("method: three cases", page)  # the command's method line is among the caveats
        self.assertNotIn("<script", page)
        self.assertNotIn("http://", page)

    def test_hosted_xcall_points_are_their_own_series(self):
        doc = xcall_doc()
        hosted = []
        for host, factor in (("uv", 1.5), ("uv-nested", 3.0)):
            for p in doc["points"]:
                q = dict(p, host=host, total_us=summary(p["total_us"]["mean"] * factor))
                hosted.append(q)
        doc["points"] = hosted[:len(doc["points"])] + doc["points"] + hosted[len(doc["points"]):]  # uv first
        doc["loads"] = [dict(info, host=h) for h in ("uv", "direct", "uv-nested") for info in doc["loads"]]
        self.dir.write("xcall/results.json", doc)
        self.dir.run_json("quick", [("xcall", 0, "")])
        _, body = section(self.dir.page(), "xcall")
        for name in ("xthread (uv)", "xthread (uv-nested)", "uv/direct"):
            self.assertIn(name, body)
        # Case 1 idle 10 chars: direct 10, uv 15 (1.5x), whatever order the points came in.
        load_table = re.search(r'<table id="xcall-load".*?</table>', body, re.S).group(0)
        self.assertIn("1.50×", load_table)
        self.assertIn("15.0", load_table)

    def test_contenders_and_conditions_get_their_tables_and_stay_out_of_the_study_tables(self):
        doc = xcall_doc()
        doc["schema"] = "xthread-bench/xcall/2"
        idle10 = [p for p in doc["points"] if p["load"] == "idle" and p["payload"] == 10 and p["case"] in (1, 3)]
        extra = []
        for p in idle10:
            for impl, factor in (("xthread", 40.0), ("plain", 2.0)):
                q = dict(p, implementation=impl, callers=4, busy_threads=2,
                         total_us=summary(p["total_us"]["mean"] * factor), cpu_us_per_call=factor,
                         busy_cpu_share=0.5,
                         repetitions=[{"calls": 1, "total_us": summary(p["total_us"]["mean"] * factor),
                                       "cpu_us_per_call": factor}] * 3)
                extra.append(q)
        doc["points"] += extra
        doc["background"] = {"processes": 2, "nice": 15, "wall_s": 3.0, "cpu_s": 0.5, "autogroup": True}
        self.dir.write("xcall/results.json", doc)
        self.dir.run_json("quick", [("xcall", 0, "")])
        _, body = section(self.dir.page(), "xcall")
        contenders = re.search(r'<table id="xcall-contenders".*?</table>', body, re.S).group(0)
        self.assertIn("plain (mutex + condition variable)", contenders)
        self.assertIn("0.0500×", contenders)  # plain / xthread, same condition: 2 / 40
        self.assertIn("50 %", contenders)  # what the busy threads got
        ratios = re.search(r'<table id="xcall-case-ratios".*?</table>', body, re.S).group(0)
        self.assertIn("3.00×", ratios)  # case 3 / case 1 of every condition: 30 / 10
        load_table = re.search(r'<table id="xcall-load".*?</table>', body, re.S).group(0)
        self.assertNotIn("plain", load_table)
        self.assertNotIn("callers", load_table)
        self.assertIn("2 busy background processes at nice 15", body)

    def test_failed_part_and_earlier_part_are_labelled(self):
        self.dir.write("xcall/results.json", xcall_doc())
        self.dir.run_json("full", [("xcall", 0, "")])
        self.dir.write("napi/results.json", dict(xcall_doc(), schema="xthread-bench/napi/1"))
        self.dir.run_json("quick", [("napi", 1, "")])  # a later partial run: xcall is now "earlier"
        with open(os.path.join(self.dir.path, "run.json")) as f:
            run = json.load(f)
        self.assertEqual([(c["part"], c["kind"], c.get("earlier", False)) for c in run["commands"]],
                         [("napi", "quick", False), ("xcall", "full", True)])
        page = self.dir.page()
        self.assertIn("From an earlier scripts/lab invocation", section(page, "xcall")[1])
        self.assertIn("exit status 1", section(page, "napi")[1])

    def test_unreadable_results_are_not_an_error(self):
        self.dir.write("pool/results.json", "{not json")
        page = self.dir.page()
        cls, body = section(page, "pool")
        self.assertEqual(cls, "not-run")
        self.assertIn("unreadable results.json", body)

    def test_a_debug_google_benchmark_library_is_explained_in_the_caveats(self):
        micro = {"context": {"num_cpus": 2, "date": "2026-12-01", "library_build_type": "debug"},
                 "benchmarks": [{"name": "RoundTrip_CallSync/hot", "run_type": "iteration", "real_time": 350.0,
                                 "cpu_time": 340.0, "time_unit": "ns", "iterations": 1000}]}
        self.dir.write("micro/micro.json", micro)
        self.dir.run_json("quick", [("micro", 0, "")])
        page = self.dir.page()
        caveats = re.search(r'<section id="caveats">(.*?)</section>', page, re.S).group(1)
        self.assertIn("Library was built as DEBUG", caveats)
        self.assertIn("ratios within this run are unaffected", caveats)
        micro["context"]["library_build_type"] = "release"
        self.dir.write("micro/micro.json", micro)
        self.assertNotIn("Library was built as DEBUG", self.dir.page())

    def test_an_advise_sweep_gets_its_table_crossover_recommendation_and_chart(self):
        self.dir.write("advise/results.json", advise_doc(sweep=True))
        self.dir.write("advise/advise_sweep.png", PNG)
        self.dir.write("advise/table.txt", "method: each load is 5 repetitions\nrecommendation: x\n")
        self.dir.run_json("quick", [("advise", 0, "")])
        page = self.dir.page()
        cls, body = section(page, "advise")
        self.assertEqual(cls, "")
        self.assertIn('<table id="advise-sweep"', body)
        self.assertNotIn('id="advise-points"', body)
        self.assertIn('id="advise-crossover"', body)
        self.assertIn("a worker wins above duty 61 %", body)
        self.assertIn("run it on the main thread below duty 61 %, on a worker above", body)
        self.assertIn('id="chart-advise-advise_sweep"', body)
        self.assertIn("3000 [2700–3300]", body)  # p50 [range] of case 1 at the highest duty
        # advise sits after xcall in the page, as scripts/lab runs it
        self.assertLess(page.index('<section id="xcall"'), page.index('<section id="advise"'))
        self.assertLess(page.index('<section id="advise"'), page.index('<section id="napi"'))

    def test_a_single_advise_point_gets_its_ranked_placements(self):
        self.dir.write("advise/results.json", advise_doc(sweep=False))
        self.dir.write("advise/advise_point.png", PNG)
        page = self.dir.page()
        cls, body = section(page, "advise")
        self.assertEqual(cls, "")
        self.assertIn('<table id="advise-points"', body)
        self.assertNotIn('id="advise-crossover"', body)
        ranks = re.findall(r"<td class=\"l\">(case \d: [^<]+)</td>", body)
        self.assertEqual(ranks, ["case 2: worker", "case 1: main thread", "case 3: worker → main"])
        self.assertIn("run it on a worker (case 2)", body)
        self.assertIn('id="chart-advise-advise_point"', body)

    def test_numbers_keep_three_significant_digits(self):
        self.assertEqual([html_report.num(v) for v in (2324.4, 381.2, 18.14, 6.944, 0.4123, None, 0)],
                         ["2324", "381", "18.1", "6.94", "0.412", "–", "0"])


if __name__ == "__main__":
    unittest.main()
