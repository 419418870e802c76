#!/usr/bin/env python3
"""scripts/ninja-log-summary on a hand-made .ninja_log: an edge with two outputs counts once, a rebuilt
output counts its latest run only, a custom command logged under a relative and an absolute name is one
edge named by the relative one, and a missing log is exit 2 with one line. Exits 0 when all hold."""

import os
import subprocess
import sys
import tempfile

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "ninja-log-summary")
LOG = """# ninja log v5
0\t4000\t0\tcore/CMakeFiles/ropecheck_core.dir/src/spec.cpp.o\taaaa
0\t9000\t0\tkernels/cuda/CMakeFiles/k.dir/rope_apply.cu.o\tbbbb
0\t9000\t0\tkernels/cuda/CMakeFiles/k.dir/rope_apply.cu.o.d\tbbbb
100\t1100\t0\ttests/CMakeFiles/ropecheck_golden_asan.dir/__/io/src/npy.cpp.o\tcccc
5000\t7000\t0\tcore/CMakeFiles/ropecheck_core.dir/src/spec.cpp.o\tdddd
0\t3000\t0\ttests/fuzz_targets/fuzz_npy\teeee
0\t3000\t0\t/abs/build/tests/fuzz_targets/fuzz_npy\teeee
"""


def main() -> int:
    failures = []
    with tempfile.TemporaryDirectory(prefix="ropecheck_ninja_log_") as tmp:
        path = os.path.join(tmp, ".ninja_log")
        with open(path, "w") as f:
            f.write(LOG)
        out = subprocess.run([sys.executable, SCRIPT, tmp, "--group"], capture_output=True, text=True).stdout
        lines = out.splitlines()
        # edges: spec.cpp (latest run 2 s), rope_apply (9 s, two outputs), npy asan copy (1 s), fuzz_npy (3 s)
        if not lines or lines[0] != "4 edges, 15.0 s summed over edges":
            failures.append("first line %r, expected '4 edges, 15.0 s summed over edges'" % (lines[:1],))
        expected_top = ["kernels/cuda/rope_apply.cu", "tests/fuzz_targets/fuzz_npy", "core/src/spec.cpp",
                        "io/src/npy.cpp [ropecheck_golden_asan]"]
        top = [line.split("%", 1)[1].strip() for line in lines[1:5]]
        if top != expected_top:
            failures.append("top edges %r, expected %r" % (top, expected_top))
        if "     1.0 s  (sanitized copies of the libraries)" not in lines:
            failures.append("no per-folder line for the sanitized copies: %r" % lines)
        missing = subprocess.run([sys.executable, SCRIPT, os.path.join(tmp, "nothing")], capture_output=True, text=True)
        if missing.returncode != 2 or len(missing.stderr.splitlines()) != 1:
            failures.append("missing log: exit %d, stderr %r" % (missing.returncode, missing.stderr))
    for f in failures:
        print("FAILED: " + f)
    print("ninja-log-summary: %s" % ("all checks hold" if not failures else "%d failed" % len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
