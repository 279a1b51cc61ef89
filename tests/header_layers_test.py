#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The headers' layers point one way (issue #24): base -> core -> coroutines -> execution -> asio.

For every installed header under include/xthread/, preprocesses it alone with the project's compiler and
checks that it pulls in no xthread header of a layer above its own. With --max-lines HEADER=N (given for
g++ 12, the compiler the goal is stated for) it also checks that HEADER alone preprocesses to at most N
lines. Usage: header_layers_test.py COMPILER INCLUDE_DIR [--flag F]... [--max-lines HEADER=N]...
Prints one line per violation and exits 1; exits 0 when every header keeps its layer.
"""
import argparse
import pathlib
import re
import subprocess
import sys
import tempfile

# The layer of each public header; detail/ headers are base. A header may include its own layer and below.
LAYERS = ["base", "core", "coroutines", "execution", "asio", "umbrella"]
LAYER_OF = {
    "xthread/errors.hpp": "base",
    "xthread/latency_histogram.hpp": "base",
    "xthread/priority.hpp": "base",
    "xthread/version.hpp": "base",
    "xthread/event_loop.hpp": "core",
    "xthread/thread_pool.hpp": "core",
    "xthread/thread_safe_function.hpp": "core",
    "xthread/future.hpp": "core",
    "xthread/loop_thread.hpp": "core",
    "xthread/task_group.hpp": "core",
    "xthread/coro.hpp": "coroutines",
    "xthread/schedule.hpp": "coroutines",
    "xthread/execution.hpp": "execution",
    "xthread/asio.hpp": "asio",
    "xthread/xthread.hpp": "umbrella",
}


def layer_of(header):
    if header.startswith("xthread/detail/"):
        return "base"
    return LAYER_OF.get(header)


def preprocess(compiler, include_dir, flags, header):
    with tempfile.NamedTemporaryFile("w", suffix=".cpp", delete=False) as tu:
        tu.write(f"#include <{header}>\n")
    try:
        result = subprocess.run([compiler, "-std=c++20", *flags, "-E", f"-I{include_dir}", tu.name],
                                capture_output=True, text=True, check=False)
    finally:
        pathlib.Path(tu.name).unlink()
    if result.returncode != 0:
        raise RuntimeError(f"{header} does not preprocess alone:\n{result.stderr.strip()}")
    return result.stdout


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("compiler")
    parser.add_argument("include_dir")
    parser.add_argument("--flag", action="append", default=[])
    parser.add_argument("--skip", action="append", default=[], help="a header not to check (e.g. asio.hpp without Boost)")
    parser.add_argument("--max-lines", action="append", default=[])
    args = parser.parse_args()
    include_dir = pathlib.Path(args.include_dir).resolve()
    limits = dict(item.split("=", 1) for item in args.max_lines)

    failures = []
    headers = sorted(str(p.relative_to(include_dir)) for p in include_dir.glob("xthread/**/*.hpp"))
    marker = re.compile(r'^# \d+ "' + re.escape(str(include_dir)) + r'/(xthread/[^"]+)"', re.MULTILINE)
    for header in headers:
        if header in args.skip:
            continue
        own = layer_of(header)
        if own is None:
            failures.append(f"{header}: no layer assigned (add it to LAYER_OF in {pathlib.Path(__file__).name})")
            continue
        text = preprocess(args.compiler, include_dir, args.flag, header)
        for included in sorted(set(marker.findall(text)) - {header}):
            theirs = layer_of(included)
            if theirs is None or LAYERS.index(theirs) > LAYERS.index(own):
                failures.append(f"{header} ({own}) pulls in {included} ({theirs or 'no layer'})")
        if header in limits:
            lines = text.count("\n")
            if lines > int(limits[header]):
                failures.append(f"{header} alone preprocesses to {lines} lines, over the limit of {limits[header]}")
            else:
                print(f"{header}: {lines} lines (limit {limits[header]})")
    for failure in failures:
        print(failure)
    print(f"{len(headers) - len(args.skip)} headers checked, {len(failures)} violations")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
