#!/usr/bin/env python3
"""Golden sets byte-identical to those earlier binaries wrote for the same commands.

tests/data/golden_contract/f00ba66_sets.json holds seven `ropecheck golden` argument lists and the
SHA-256 of every file each one wrote at f00ba66 (manifest.json included); 92301ca_sets.json seven more
(YaRN, interleaved mrope, partial rotary, npy, a seed of 2^64 - 1, fairseq's sinusoidal layout, a shard),
written at 92301ca, before golden/ was split. This writes each set again with BIN and compares: the
same file names, and every file's SHA-256. One changed byte anywhere fails.

Usage:
    python3 tests/python/test_golden_bytes.py --ropecheck build/release/cli/ropecheck
Prints one line per set and "N passed, M failed"; exits 0 only when nothing failed.
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

PINNED = [os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "golden_contract", name)
          for name in ("f00ba66_sets.json", "92301ca_sets.json")]


def sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def check_set(binary: str, args: list[str], pinned: dict[str, str], out: str) -> list[str]:
    """The problems of one set (empty when its files are the pinned ones, byte for byte)."""
    cmd = [binary, "golden", *args, "--out", out, "--quiet"]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        return ["exit %d: %s" % (run.returncode, run.stderr.strip())]
    written = sorted(os.listdir(out))
    problems = []
    if written != sorted(pinned):
        problems.append("files %s, pinned %s" % (written, sorted(pinned)))
    for name in written:
        if name in pinned and sha256(os.path.join(out, name)) != pinned[name]:
            problems.append("%s: sha256 %s, pinned %s" % (name, sha256(os.path.join(out, name)), pinned[name]))
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ropecheck", required=True, help="the ropecheck binary under test")
    parser.add_argument("--pinned", nargs="+", default=PINNED, help="the pinned hashes (default: %(default)s)")
    opts = parser.parse_args()
    sets = []
    for path in opts.pinned:
        with open(path) as f:
            sets += json.load(f)["sets"]
    failed = 0
    with tempfile.TemporaryDirectory(prefix="ropecheck_golden_bytes_") as tmp:
        for i, s in enumerate(sets, 1):
            command = "ropecheck golden " + shlex.join(s["args"])
            problems = check_set(opts.ropecheck, s["args"], s["files"], os.path.join(tmp, "set%d" % i))
            if problems:
                failed += 1
                print("FAIL set %d (%s)" % (i, command))
                for p in problems:
                    print("  " + p)
            else:
                print("ok   set %d: %d files identical (%s)" % (i, len(s["files"]), command))
    print("%d passed, %d failed" % (len(sets) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
