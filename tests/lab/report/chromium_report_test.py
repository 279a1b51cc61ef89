#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Renders results/index.html, as scripts/lab makes it, in headless Chromium and checks what a reader sees.

Usage: chromium_report_test.py --bench XTHREAD_BENCH --micro XTHREAD_MICRO --node NODE [--addon ADDON]
(run by ctest as lab_report_chromium).

1. Finds Chromium (Debian package `chromium`) and a font with Chinese glyphs (fc-list :lang=zh; Debian
   package fonts-wqy-microhei); when missing it installs them with apt-get (apt-get update first if a
   package is unknown; sudo -n when not root). If that fails the test is skipped (exit 77)
   with the reason, except under CI=true, where it fails: CI must run this test.
2. Makes a tiny results set in seconds with the real commands (xcall, an advise sweep, napi when the addon
   was built, pool, micro at minimal sizes), run.json through run_json.py, then the page through
   html_report.py.
3. Loads the page in headless Chromium through the DevTools protocol (render_page.mjs, Node's built-in
   WebSocket) and checks: every expected table id, every chart an <img> whose data: URI decoded to a
   non-empty image, the section headings, the quick-run banner, napi shown as "not run" when skipped, no
   scripts, no request beyond the page itself, and no console message of level error or warning, no
   uncaught exception, no browser log error; and that the studies' Chinese titles are drawn with a font
   that has their glyphs (CSS.getPlatformFontsForNode), not as boxes.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
REPORT = os.path.join(SOURCE, "bench", "lab", "report")
SKIP = 77
CHINESE_FONT = "fonts-wqy-microhei"  # 1.6 MB; scripts/install-deps.sh installs it beside chromium


def log(message):
    print(f"lab_report_chromium: {message}", flush=True)


def find_chromium():
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


def install_packages(packages):
    """apt-get install PACKAGES (after apt-get update when apt does not know them); the reason on failure."""
    prefix = [] if os.geteuid() == 0 else ["sudo", "-n"]
    if prefix and not shutil.which("sudo"):
        return "not root and no sudo"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    install = prefix + ["apt-get", "install", "-y", "-qq", "--no-install-recommends"] + packages
    log("missing: " + " ".join(install))
    started = time.monotonic()
    try:
        result = subprocess.run(install, env=env, capture_output=True, text=True)
        if result.returncode != 0:
            log("apt-get install failed; apt-get update, then again")
            subprocess.run(prefix + ["apt-get", "update", "-qq"], env=env, capture_output=True, text=True)
            result = subprocess.run(install, env=env, capture_output=True, text=True)
    except OSError as exc:
        return f"cannot run {install[0]}: {exc}"
    if result.returncode != 0:
        return f"apt-get install {' '.join(packages)} failed: {(result.stderr or result.stdout).strip()[-300:]}"
    log(f"installed {' '.join(packages)} in {time.monotonic() - started:.0f} s")
    return None


def chinese_font_families():
    """The font families fontconfig says cover Chinese (fc-list :lang=zh), as Chromium on Linux finds them."""
    try:
        result = subprocess.run(["fc-list", ":lang=zh", "family"], capture_output=True, text=True)
    except OSError:
        return set()
    return {name.strip() for line in result.stdout.splitlines() for name in line.split(",") if name.strip()}


def run(argv, stdout_path=None, env=None):
    started = time.monotonic()
    with open(stdout_path, "w") if stdout_path else open(os.devnull, "w") as out:
        result = subprocess.run(argv, stdout=out, stderr=subprocess.PIPE, text=True, env=env)
    if result.returncode != 0:
        raise SystemExit(f"lab_report_chromium: FAILED: {' '.join(argv)} exited {result.returncode}: "
                         f"{result.stderr.strip()[-500:]}")
    return time.monotonic() - started


def make_results(args, results):
    """A tiny scripts/lab-like run: the real commands at minimal sizes; returns whether napi ran."""
    env = dict(os.environ, XTHREAD_LAB_KIND="quick")
    phases = []
    napi = bool(args.addon and os.path.isfile(args.addon))
    tiny = ["--calls", "3", "--warmup", "1", "--floor-round-trips", "200", "--quiet"]
    commands = {
        "xcall": [args.bench, "xcall", "--out", f"{results}/xcall"] + tiny,
        "pool": [args.bench, "pool", "--runs", "1", "--tasks", "64", "--window", "20ms", "--idle-window", "20ms",
                 "--ops", "400", "--burst-long", "5ms", "--burst-short", "1ms", "--fib-n", "15",
                 "--out", f"{results}/pool", "--quiet"],
        "napi": [args.bench, "napi", "--addon", args.addon or "", "--out", f"{results}/napi"] + tiny,
        "advise": [args.bench, "advise", "--sweep", "--callee-us", "5", "--payload", "1000", "--calls", "3",
                   "--repetitions", "1", "--out", f"{results}/advise", "--quiet"],
        "micro": [args.micro, "--benchmark_filter=SpinFloor|CallSync/hot", "--benchmark_repetitions=2",
                  "--benchmark_enable_random_interleaving=true", "--benchmark_report_aggregates_only=true",
                  f"--benchmark_out={results}/micro/micro.json", "--benchmark_out_format=json"],
    }
    for part in ("xcall", "advise", "pool", "napi", "micro"):
        os.makedirs(f"{results}/{part}", exist_ok=True)
        if part == "napi" and not napi:
            phases.append(f"napi\t0\t0\tthe Node-API addon was not built\t{' '.join(commands[part])}")
            continue
        seconds = run(commands[part], f"{results}/{part}/table.txt", env)
        log(f"{part}: {seconds:.1f} s")
        phases.append(f"{part}\t0\t{seconds:.0f}\t\t{' '.join(commands[part])}")
    with open(f"{results}/phases.tsv", "w") as f:
        f.write("\n".join(phases) + "\n")
    run([sys.executable, os.path.join(REPORT, "run_json.py"), f"{results}/run.json", "--kind", "quick",
         "--start-utc", "2026-01-01T00:00:00Z", "--lab-seconds", "1", "--build-dir", "test", f"{results}/phases.tsv"])
    run([sys.executable, os.path.join(REPORT, "html_report.py"), results])
    return napi


def check(page, napi):
    problems = []

    def expect(condition, message):
        if not condition:
            problems.append(message)

    tables = ["machine", "xcall-load", "xcall-payload", "xcall-phases", "xcall-loads", "xcall-floors",
              "xcall-case-ratios", "pool-eterfree-runs", "pool-eterfree", "pool-summary", "pool-goals",
              "pool-calibration", "advise-sweep", "micro", "run-commands"]
    charts = ["chart-xcall-xcall_load", "chart-xcall-xcall_payload", "chart-xcall-xcall_cdf",
              "chart-pool-pool_throughput", "chart-pool-pool_efficiency", "chart-advise-advise_sweep"]
    if napi:
        tables += ["napi-load", "napi-payload", "napi-phases", "napi-loads", "napi-floors", "napi-case-ratios"]
        charts += ["chart-napi-xcall_load", "chart-napi-xcall_payload", "chart-napi-xcall_cdf"]
    expect(sorted(page["tables"]) == sorted(tables),
           f"tables: expected {sorted(tables)}, the page has {sorted(page['tables'])}")
    images = {i["id"]: i for i in page["images"]}
    expect(sorted(images) == sorted(charts), f"charts: expected {sorted(charts)}, the page has {sorted(images)}")
    for i in page["images"]:
        expect(i["src_prefix"] == "data:image/png;base64,", f"{i['id']}: src is not an inline PNG")
        expect(i["complete"] and i["width"] > 0 and i["height"] > 0,
               f"{i['id']}: did not decode to an image ({i['width']}x{i['height']})")
    for heading in ("xthread lab results", "Machine", "Study 000 — a call into another thread, with the answer back",
                    "Study 000 on real Node.js (Node-API) beside xthread",
                    "Study 004 — thread pools (Eterfree) and what separates pools",
                    "Micro-benchmarks (Google Benchmark)",
                    "Advise — where should a callee run: the main thread or a worker?", "Caveats", "How this was run"):
        expect(heading in page["headings"], f"heading missing: {heading}")
    expect("quick run — for publication use scripts/lab --full" in (page["banner"] or ""),
           f"no quick-run banner: {page['banner']!r}")
    sections = {s["id"]: s for s in page["sections"]}
    for part in ("xcall", "advise", "pool", "micro"):
        expect(sections.get(part, {}).get("class") == "", f"section {part} missing or marked not run")
    if not napi:
        expect(sections.get("napi", {}).get("class") == "not-run" and "not run" in sections["napi"]["text"],
               "napi was skipped but its section does not say \"not run\"")
    expect(page["scripts"] == 0, f"{page['scripts']} <script> elements")
    expect(not page["links"], f"<link> elements: {page['links']}")
    expect(not page["requests"], f"requests beyond the page: {page['requests']}")
    bad_console = [c for c in page["console"] if c["type"] in ("error", "assert", "warning")]
    expect(not bad_console, f"console: {bad_console}")
    expect(not page["exceptions"], f"uncaught exceptions: {page['exceptions']}")
    bad_log = [e for e in page["log"] if e["level"] in ("error", "warning")]
    expect(not bad_log, f"browser log: {bad_log}")
    # The studies' Chinese titles are drawn with a font that has their glyphs (not as boxes): fontconfig's
    # fonts for Chinese drew at least as many glyphs as the element's text has CJK characters.
    chinese = chinese_font_families()
    expect(page["cjk"], "no element with Chinese text: the studies' cited titles are missing")
    for element in page["cjk"]:
        drawn = sum(f["glyphCount"] for f in element["fonts"] if f["familyName"] in chinese)
        expect(drawn >= element["cjk_chars"],
               f"Chinese text drawn without a Chinese font ({drawn} of {element['cjk_chars']} glyphs; fonts "
               f"{[(f['familyName'], f['glyphCount']) for f in element['fonts']]}): {element['text']!r}")
    return problems


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bench", required=True)
    parser.add_argument("--micro", required=True)
    parser.add_argument("--node", required=True)
    parser.add_argument("--addon")
    args = parser.parse_args()
    in_ci = os.environ.get("CI") == "true"
    started = time.monotonic()

    missing = ([] if find_chromium() else ["chromium"]) + ([] if chinese_font_families() else [CHINESE_FONT])
    if missing:
        reason = install_packages(missing)
        chromium = find_chromium()
        if not chromium or not chinese_font_families():
            reason = reason or ("chromium still not on PATH after installing it" if not chromium
                                else f"fc-list :lang=zh lists no font after installing {CHINESE_FONT}")
            if in_ci:
                log(f"FAILED: CI=true and {' '.join(missing)} cannot be installed ({reason})")
                return 1
            log(f"SKIPPED: {' '.join(missing)} cannot be installed ({reason}); install the Debian packages")
            return SKIP
    chromium = find_chromium()
    if not args.node or not os.path.isfile(args.node):
        log(f"{'FAILED' if in_ci else 'SKIPPED'}: node not found ({args.node!r}); scripts/install-deps.sh installs it")
        return 1 if in_ci else SKIP

    with tempfile.TemporaryDirectory(prefix="xthread-lab-report-") as results:
        napi = make_results(args, results)
        render_started = time.monotonic()
        result = subprocess.run([args.node, "--experimental-websocket", "--no-warnings",
                                 os.path.join(HERE, "render_page.mjs"), chromium, f"{results}/index.html"],
                                capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            log(f"FAILED: rendering in Chromium: {result.stderr.strip()[-1500:]}")
            return 1
        page = json.loads(result.stdout)
        log(f"rendered in Chromium in {time.monotonic() - render_started:.1f} s: {len(page['tables'])} tables, "
            f"{len(page['images'])} charts, napi {'ran' if napi else 'not run (no addon)'}")
        problems = check(page, napi)
    for p in problems:
        log(f"FAILED: {p}")
    if problems:
        return 1
    log(f"passed in {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
