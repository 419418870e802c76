#!/usr/bin/env python3
"""`ropecheck check` stays under --max-memory: a golden set of about 75 MB (Llama-3.1-8B, 2048 tokens,
8 heads, f32 and bf16) checked with --max-memory 96M, for a kernel, a candidate file and an .npz
candidate, and as two --shard parts; each process's peak resident set (getrusage of the child, which
counts mapped file pages) must stay under the limit. Reading whole tensors, the same check peaks at about
twice the set's size. No timing is asserted.

Usage:
    python3 tests/python/test_check_memory.py --ropecheck build/release/cli/ropecheck
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile

LIMIT_MIB = 96


def peak_rss_mib(cmd: list[str], cwd: str) -> tuple[int, float, str]:
    """Runs cmd in a fork and returns its exit code, its own peak RSS in MiB and its stderr."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.chdir(cwd)
        os.dup2(w, 2)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.execv(cmd[0], cmd)
    os.close(w)
    with os.fdopen(r) as f:
        err = f.read()
    _, status, usage = os.wait4(pid, 0)
    return os.waitstatus_to_exitcode(status), usage.ru_maxrss / 1024.0, err.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ropecheck", required=True)
    opts = parser.parse_args()
    rc = os.path.abspath(opts.ropecheck)
    failed = 0
    with tempfile.TemporaryDirectory(prefix="ropecheck-memory-") as tmp:
        subprocess.run([rc, "golden", "--preset", "llama-3.1-8b", "--positions", "0:2048", "--heads", "8", "--dtypes",
                        "f32,bf16", "--out", "set", "--quiet"], cwd=tmp, check=True, stdout=subprocess.DEVNULL)
        subprocess.run([rc, "golden", "--preset", "llama-3.1-8b", "--positions", "0:2048", "--heads", "8", "--dtypes",
                        "f32", "--format", "npy", "--out", "npz", "--quiet"], cwd=tmp, check=True, stdout=subprocess.DEVNULL)
        size = sum(os.path.getsize(os.path.join(tmp, "set", f)) for f in os.listdir(os.path.join(tmp, "set")))
        print("set: %.1f MiB" % (size / 2**20))
        limit = ["--max-memory", "%dM" % LIMIT_MIB, "--no-diagnose"]
        runs = {
            "kernel": ["check", "--golden", "set", "--kernel", "builtin:hf", *limit],
            "file": ["check", "--golden", "set", "--candidate", "set/outputs_f32.safetensors", *limit],
            "npz file": ["check", "--golden", "set", "--candidate", "npz/outputs_f32.npz", *limit],
            "part 1/2": ["check", "--golden", "set", "--kernel", "builtin:hf", "--shard", "1/2", "--report", "p1.json",
                         "--max-memory", "%dM" % LIMIT_MIB],
            "part 2/2": ["check", "--golden", "set", "--kernel", "builtin:hf", "--shard", "2/2", "--report", "p2.json",
                         "--max-memory", "%dM" % LIMIT_MIB],
        }
        for name, args in runs.items():
            code, mib, err = peak_rss_mib([rc, *args], tmp)
            ok = code in (0, 1, 3) and mib <= LIMIT_MIB
            failed += not ok
            print("%s %s: exit %d, peak RSS %.1f MiB (limit %d MiB)%s" % ("ok  " if ok else "FAIL", name, code, mib, LIMIT_MIB,
                                                                          "" if ok else ": " + err))
    print("%d failed" % failed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
