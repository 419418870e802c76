#!/usr/bin/env python3
"""Check reports byte-identical to those an earlier binary wrote for the same commands.

tests/data/check_reports/a16b261_reports.json holds golden sets (`ropecheck golden` arguments) and
`ropecheck check` runs on them (kernels and candidate files, every criterion kind, --only, an .npz set,
multimodal and sinusoidal sets, failing runs with their diagnosis), each with its exit code and the
SHA-256 of its --report JSON and of its terminal output, written by a16b261's binary (three-valued
class results, the check still reading whole tensors), before the check read its data in blocks. This runs each check again with BIN and compares, as pinned and in small blocks (a small
--max-memory) on one and two threads. Paths are relative to one folder, so the reports do not depend on
where it lies.

Usage:
    python3 tests/python/test_check_reports.py --ropecheck build/release/cli/ropecheck
    python3 tests/python/test_check_reports.py --ropecheck OLD_BIN --write   # pin what OLD_BIN writes
Prints one line per run and "N failed"; exits 0 only when nothing failed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import subprocess
import sys
import tempfile

PINNED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "check_reports", "a16b261_reports.json")


def sha256_bytes(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def run_check(binary: str, args: str, cwd: str) -> dict:
    report = os.path.join(cwd, "report.json")
    if os.path.exists(report):
        os.remove(report)
    run = subprocess.run([binary, "check", *shlex.split(args), "--report", "report.json"], cwd=cwd, capture_output=True)
    got = {"exit": run.returncode, "stdout_sha256": sha256_bytes(run.stdout)}
    if os.path.exists(report):
        with open(report, "rb") as f:
            got["report_sha256"] = sha256_bytes(f.read())
    return got


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ropecheck", required=True, help="the ropecheck binary under test")
    parser.add_argument("--pinned", default=PINNED)
    parser.add_argument("--write", action="store_true", help="rewrite the pinned results from this binary")
    opts = parser.parse_args()
    opts.ropecheck = os.path.abspath(opts.ropecheck)
    with open(opts.pinned) as f:
        pinned = json.load(f)
    failed = 0
    with tempfile.TemporaryDirectory(prefix="ropecheck-reports-") as tmp:
        for s in pinned["sets"]:
            run = subprocess.run([opts.ropecheck, "golden", *shlex.split(s["args"]), "--out", s["name"], "--quiet"],
                                 cwd=tmp, capture_output=True, text=True)
            if run.returncode != 0:
                print("FAIL golden %s: exit %d: %s" % (s["name"], run.returncode, run.stderr.strip()))
                return 1
        for c in pinned["checks"]:
            if opts.write:
                c.update(run_check(opts.ropecheck, c["args"], tmp))
                continue
            want = {k: c[k] for k in ("exit", "stdout_sha256", "report_sha256") if k in c}
            # Also in blocks of a few dozen tokens (a budget just above the check's reserve of 64 MiB and
            # one hasher's 8 MiB), and on two threads: the same bytes. Not where a diagnosis is made: that
            # budget leaves it no room (it reads the set whole), which the report would say.
            diagnosed = "--diagnose" in c["args"] or (c["exit"] == 1 and "--no-diagnose" not in c["args"])
            for extra in ("", " --max-memory 73M --threads 1", " --threads 2"):
                if extra and ("--threads" in c["args"] or (diagnosed and "max-memory" in extra)):
                    continue
                got = run_check(opts.ropecheck, c["args"] + extra, tmp)
                have = {k: got[k] for k in want if k in got}
                ok = have == want
                failed += not ok
                print("%s %s%s%s" % ("ok  " if ok else "FAIL", c["args"], extra, "" if ok else ": got %s, pinned %s" % (got, want)))
    if opts.write:
        with open(opts.pinned, "w") as f:
            json.dump(pinned, f, indent=1)
            f.write("\n")
        print("wrote %s" % opts.pinned)
        return 0
    print("%d failed" % failed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
