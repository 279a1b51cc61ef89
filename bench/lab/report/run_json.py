#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes RESULTS_DIR/run.json: what one scripts/lab invocation ran, so nothing in results/ is silently
a quick run (schema "xthread-lab/run/1"; html_report.py reads it).

Usage: run_json.py OUT_FILE --kind quick|full --start-utc TIME --lab-seconds S --build-dir DIR PHASES_TSV

PHASES_TSV has one line per part: PART <tab> EXIT_STATUS <tab> SECONDS <tab> SKIP_REASON <tab> COMMAND
(SKIP_REASON empty unless the part was skipped; COMMAND as shell words). Parts of an earlier run.json in
the same place that this invocation did not run are kept, marked "earlier": true, because their results
are still in the directory. Standard library only.
"""

import json
import os
import platform
import sys


def machine():
    model = "?"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    os_name = "?"
    try:
        with open("/etc/os-release", encoding="utf-8") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    os_name = line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return {"cpus": os.cpu_count(), "cpu_model": model, "kernel": f"{platform.system()} {platform.release()}",
            "os": os_name}


def main(argv):
    if len(argv) != 11 or argv[2::2][:4] != ["--kind", "--start-utc", "--lab-seconds", "--build-dir"]:
        print("usage: run_json.py OUT_FILE --kind quick|full --start-utc TIME --lab-seconds S --build-dir DIR "
              "PHASES_TSV", file=sys.stderr)
        return 2
    out, kind, start, lab_s, build_dir, phases = argv[1], argv[3], argv[5], float(argv[7]), argv[9], argv[10]
    commands = []
    with open(phases, encoding="utf-8") as f:
        for line in f:
            part, status, seconds, skipped, command = line.rstrip("\n").split("\t", 4)
            commands.append({"part": part, "kind": kind, "command": command, "status": int(status),
                             "wall_s": round(float(seconds), 1), "skipped": skipped or None, "start_utc": start})
    ran = {c["part"] for c in commands}
    try:
        with open(out, encoding="utf-8") as f:
            earlier = json.load(f).get("commands", [])
    except (OSError, ValueError, AttributeError):
        earlier = []
    for c in earlier:
        if isinstance(c, dict) and c.get("part") not in ran:
            commands.append(dict(c, earlier=True))
    doc = {"schema": "xthread-lab/run/1", "kind": kind, "start_utc": start, "lab_s": round(lab_s, 1),
           "build_dir": build_dir, "parts": [c["part"] for c in commands if not c.get("earlier")],
           "commands": commands, "machine": machine()}
    temp = f"{out}.tmp-{os.getpid()}"
    with open(temp, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2, ensure_ascii=False)
        f.write("\n")
    os.replace(temp, out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
