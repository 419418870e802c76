#!/usr/bin/env python3
"""The golden contract pinned across machines and commits (tests/data/golden_contract/README.md).

An independent Python implementation of the input generator "ropecheck-irwin-hall-bf16" version 1,
written from its documentation only (golden/include/ropecheck/golden/input_generator.hpp, the comment
at the top; no C++ is read or run for it), checked against the values pinned in
tests/data/golden_contract/input_generator_v1.json. With --ropecheck BIN it also writes the pinned
small golden set with that binary and checks that

  * every data file's SHA-256 is the pinned one (golden_set_v1.json), and
  * the set's q and k inputs are, value for value, this generator's output.

Usage:
    python3 tests/python/test_golden_contract.py [--ropecheck build/release/cli/ropecheck]
Prints one line per check and "N passed, M failed"; exits 0 only when nothing failed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import struct
import subprocess
import sys
import tempfile

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "golden_contract")
MASK = (1 << 64) - 1
STREAMS = {"q": 1, "k": 2}


def splitmix64_finalizer(x: int) -> int:
    """x ^= x >> 30; x *= 0xBF58476D1CE4E5B9; x ^= x >> 27; x *= 0x94D049BB133111EB; x ^= x >> 31 (mod 2^64)."""
    x &= MASK
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & MASK
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & MASK
    x ^= x >> 31
    return x


def round_to_8_significant_bits(n: int) -> int:
    """n rounded to 8 significant bits, ties to even (on the magnitude; the sign is kept)."""
    m = abs(n)
    drop = m.bit_length() - 8
    if drop > 0:
        q, rest = divmod(m, 1 << drop)
        half = 1 << (drop - 1)
        if rest > half or (rest == half and q % 2 == 1):
            q += 1
        m = q << drop
    return -m if n < 0 else m


def generate_input(seed: int, stream: str, i: int) -> float:
    """Element i of a stream: the documented four lines."""
    z = splitmix64_finalizer(seed * 0x9E3779B97F4A7C15 + STREAMS[stream] * 0xD1B54A32D192ED03 + i)
    n = (z & 0xFFFF) + ((z >> 16) & 0xFFFF) + ((z >> 32) & 0xFFFF) + ((z >> 48) & 0xFFFF) - 131070
    return round_to_8_significant_bits(n) / 32768.0  # exact: 8 significant bits, power-of-two divisor


def f32_bits(x: float) -> str:
    return "0x%08x" % struct.unpack("<I", struct.pack("<f", x))[0]


def sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_safetensors_f32(path: str, name: str):
    """The f32 tensor `name` of a safetensors file, with the standard library only."""
    with open(path, "rb") as f:
        data = f.read()
    (hlen,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + hlen])
    t = header[name]
    assert t["dtype"] == "F32", t
    b, e = t["data_offsets"]
    raw = data[8 + hlen + b:8 + hlen + e]
    return list(struct.unpack("<%df" % (len(raw) // 4), raw)), t["shape"]


class Runner:
    def __init__(self):
        self.passed = self.failed = 0

    def check(self, desc: str, problems: list):
        if problems:
            self.failed += 1
            print("FAIL  %s\n        %s" % (desc, "; ".join(problems[:5])))
        else:
            self.passed += 1
            print("PASS  %s" % desc)


def check_generator(r: Runner):
    pinned = json.load(open(os.path.join(DATA, "input_generator_v1.json")))
    problems = []
    if pinned.get("generator") != "ropecheck-irwin-hall-bf16" or pinned.get("version") != 1:
        problems.append("pinned file is for %r version %r" % (pinned.get("generator"), pinned.get("version")))
    n = 0
    for case in pinned["cases"]:
        for i, (bits, dec) in enumerate(zip(case["f32_bits"], case["values"])):
            x = generate_input(case["seed"], case["stream"], case["first_index"] + i)
            n += 1
            if f32_bits(x) != bits or x != float(dec):
                problems.append("seed %d stream %s index %d: %r (%s), pinned %s (%s)"
                                % (case["seed"], case["stream"], case["first_index"] + i, x, f32_bits(x), dec, bits))
    r.check("independent Python generator reproduces the %d pinned values" % n, problems)
    # The documented properties: exact in bf16 (low 16 bits of the f32 zero), |x| < 4.
    problems = []
    for i in range(2000):
        x = generate_input(42, "k", i)
        if int(f32_bits(x), 16) & 0xFFFF or not abs(x) < 4:
            problems.append("index %d: %r" % (i, x))
    r.check("generated values are exact in bf16 and below 4 in magnitude (2000 values)", problems)


def check_golden_set(r: Runner, ropecheck: str):
    pinned = json.load(open(os.path.join(DATA, "golden_set_v1.json")))
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "set")
        cmd = [ropecheck] + pinned["command"] + ["--out", out, "--quiet"]
        p = subprocess.run(cmd, capture_output=True, text=True)
        r.check("ropecheck %s exits 0" % " ".join(pinned["command"]),
                [] if p.returncode == 0 else ["exit %d: %s" % (p.returncode, p.stderr.strip()[:300])])
        if p.returncode != 0:
            return
        problems = []
        for f, want in sorted(pinned["files"].items()):
            got = sha256(os.path.join(out, f))
            if got != want:
                problems.append("%s: sha256 %s, pinned %s" % (f, got, want))
        manifest = json.load(open(os.path.join(out, "manifest.json")))
        listed = {e["file"]: e["sha256"] for e in manifest["files"]}
        if listed != pinned["files"]:
            problems.append("manifest files[] %r differ from the pinned list" % sorted(listed))
        r.check("the set's %d data files have the pinned SHA-256 values" % len(pinned["files"]), problems)
        problems = []
        seed = manifest["generator"]["seed"]
        for stream in ("q", "k"):
            vals, shape = read_safetensors_f32(os.path.join(out, "inputs.safetensors"), stream)
            for i, v in enumerate(vals):
                if v != generate_input(seed, stream, i):
                    problems.append("%s[%d] = %r, generator %r" % (stream, i, v, generate_input(seed, stream, i)))
                    break
        r.check("the set's q and k are this generator's values (seed %d)" % seed, problems)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ropecheck", help="the ropecheck binary (also checks the pinned golden set)")
    args = ap.parse_args()
    r = Runner()
    check_generator(r)
    if args.ropecheck:
        check_golden_set(r, args.ropecheck)
    print("%d passed, %d failed" % (r.passed, r.failed))
    return 1 if r.failed else 0


if __name__ == "__main__":
    sys.exit(main())
