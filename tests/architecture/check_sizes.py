#!/usr/bin/env python3
"""No function over 120 lines and no source file over 450 lines outside tests/ (the project's rules).

Functions are measured by lizard (PyPI, pinned in tests/python/requirements.txt), which parses C, C++
and Python; a function's length is its lines from signature to closing brace, comments included.
Usage: check_sizes.py SOURCE_DIR. Prints every offender, one line each, and exits 1 when there is one;
exits 2 with one line when lizard is not installed (scripts/install-deps installs it): never passes unchecked.
"""
import os
import subprocess
import sys

try:
    import lizard
except ImportError:
    print("size: lizard is not installed; pip install -r tests/python/requirements.txt", file=sys.stderr)
    sys.exit(2)

MAX_FUNCTION, MAX_FILE = 120, 450
SRC = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", ".."))
SOURCE = (".cpp", ".hpp", ".h", ".c", ".cu", ".cuh", ".py")

def source_files(root: str) -> list[str]:
    """Files git tracks or would track; without git (a source tarball), every file below root but build trees."""
    try:
        return subprocess.run(["git", "-C", root, "ls-files", "--cached", "--others", "--exclude-standard"], check=True,
                              capture_output=True, text=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        out = []
        for d, dirs, names in os.walk(root):
            dirs[:] = [x for x in dirs if not x.startswith(".") and x != "build"]
            out += [os.path.relpath(os.path.join(d, n), root) for n in names]
        return out


files = source_files(SRC)
files = [f for f in files if f.endswith(SOURCE) and not f.startswith("tests/") and os.path.isfile(os.path.join(SRC, f))]
offenders = []
for f in sorted(files):
    path = os.path.join(SRC, f)
    with open(path, encoding="utf-8", errors="replace") as fh:
        lines = sum(1 for _ in fh)
    if lines > MAX_FILE:
        offenders.append(f"{f}: {lines} lines (at most {MAX_FILE})")
    # lizard knows .cu / .cuh as C++ by content; hand it the path with a C++ suffix where it does not
    name = path if not f.endswith((".cu", ".cuh")) else path + ".cpp"
    info = lizard.analyze_file.analyze_source_code(name, open(path, encoding="utf-8", errors="replace").read())
    for fn in info.function_list:
        if fn.length > MAX_FUNCTION:
            offenders.append(f"{f}:{fn.start_line}: {fn.long_name.split('(')[0]} is {fn.length} lines (at most {MAX_FUNCTION})")
for o in offenders:
    print("size: " + o)
print(f"size: {len(files)} files checked, {len(offenders)} over the limits")
sys.exit(1 if offenders else 0)
