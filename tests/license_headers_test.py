#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Every source file of the repository carries `SPDX-License-Identifier: MIT` in its first lines (after a
shebang), and the LICENSE file is the MIT license of "the xthread authors" (issue #23). Source files are
the ones git tracks (a fresh clone's files) with a source extension or a script name; prose and data
(Markdown, JSON) are not. Exit 0 when all have it, 1 with one line per file that does not."""
import os
import subprocess
import sys

SOURCE_EXTENSIONS = {".cpp", ".hpp", ".mjs", ".js", ".py", ".sh", ".in", ".gyp", ".supp", ".cmake"}
SCRIPTS = {"scripts/test", "scripts/lab", "scripts/lint", "scripts/docs", ".ci/run"}


def is_source(path: str) -> bool:
    name = os.path.basename(path)
    return path in SCRIPTS or name == "CMakeLists.txt" or os.path.splitext(name)[1] in SOURCE_EXTENSIONS


def main() -> int:
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    listed = subprocess.run(["git", "-C", root, "ls-files", "-z"], capture_output=True, check=False)
    if listed.returncode != 0:
        print(f"license_headers_test: not a git checkout ({root}): {listed.stderr.decode().strip()}")
        return 1
    files = [f for f in listed.stdout.decode().split("\0") if f and is_source(f)]
    missing = []
    for path in files:
        with open(os.path.join(root, path), encoding="utf-8") as handle:
            head = [handle.readline() for _ in range(3)]
        if not any("SPDX-License-Identifier: MIT" in line for line in head):
            missing.append(path)
    for path in missing:
        print(f"{path}: no 'SPDX-License-Identifier: MIT' in its first lines")
    with open(os.path.join(root, "LICENSE"), encoding="utf-8") as handle:
        license_text = handle.read()
    if not license_text.startswith("MIT License\n") or "the xthread authors" not in license_text.split("\n")[2]:
        print("LICENSE: not the MIT license of the xthread authors")
        missing.append("LICENSE")
    print(f"license_headers_test: {len(files)} source files, {len(missing)} without the MIT SPDX line")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
