#!/usr/bin/env python3
"""Cross-check an MLA golden set (DeepSeek's rotary slice and k_pe) against mpmath.

Usage:
    python3 tests/python/mpmath_golden_mla.py --ropecheck build/cli/ropecheck --presets-dir reference/presets

Writes `ropecheck golden --preset deepseek-v3-mla` (a few tokens, two heads, positions up to 2^24 - 1, every
dtype), reads its safetensors with a plain parser (struct, no numpy) and checks, from GOLDEN_FORMAT.md
("MLA sets") and SPEC_FORMAT.md ("MLA") alone:

* shapes: q / q_rot.<dt> [tokens, heads, 192], k_pe / k_pe_rot.<dt> [tokens, 64], no k / k_rot;
* q_nope (channels 0..127) of every q_rot.<dt> equals q bit for bit (copied, exact in every dtype);
* q_pe (128..191) and k_pe_rot: mpmath_reference.py's rotation of the stored inputs (the slice at its
  offset; k_pe as a head of 64 channels), rounded once to each dtype, bit for bit.

Prints one line and exits 0 only when everything matched.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mpmath import mpf  # noqa: E402

import mpmath_attention as ma  # noqa: E402
import mpmath_reference as ref  # noqa: E402
from mpmath_golden_attention import read_safetensors  # noqa: E402

PRESET = "deepseek-v3-mla"
POSITIONS = "0,1,7,4096,65537,16777215"
HEADS = 2
DTYPES = ("f64", "f32", "f16", "bf16")


def bits(v: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", v))[0]


def expected(rs, positions, x, seq_len):
    """{dtype: [value per channel]} per token, from mpmath at 512 bits, each rounding certified."""
    res = ref.compute_rope(rs, positions, x, seq_len, precision=512)
    out = []
    for row in res.rows:
        per = {d: [] for d in DTYPES}
        for v in row["rotated"]:
            r = ma.rounded(v.mp, mpf(2) ** -400 * (abs(v.mp) + 1))
            if r is None:
                raise RuntimeError("rounding not certified at 512 bits")
            for d in DTYPES:
                per[d].append(r[d])
        out.append(per)
    return out


def check(tool: str, presets: str, work: str) -> list:
    out = os.path.join(work, PRESET)
    subprocess.run([tool, "golden", "--preset", PRESET, "--positions", POSITIONS, "--heads", str(HEADS), "--out", out,
                    "--quiet", "--dtypes", "f32,f16,bf16"], check=True, capture_output=True)
    manifest = json.load(open(os.path.join(out, "manifest.json")))
    spec = ref.load_spec(os.path.join(presets, PRESET + ".json"))
    rs = ref.parse_spec(spec)
    D, R, o = rs.head_dim, rs.rotary_dim, rs.rotary_offset
    names = {t["name"]: t for t in manifest["tensors"]}
    bad = []
    if "k" in names or "k_rot.f32" in names:
        bad.append("an MLA set must hold k_pe, not k")
    inputs = read_safetensors(os.path.join(out, "inputs.safetensors"))
    positions = inputs["positions"]
    T = len(positions)
    for name, shape in (("q", [T, HEADS, D]), ("k_pe", [T, R])):
        if names[name]["shape"] != shape:
            bad.append("%s has shape %s, wanted %s" % (name, names[name]["shape"], shape))
    q, k_pe = inputs["q"], inputs["k_pe"]
    outs = {d: read_safetensors(os.path.join(out, "outputs_%s.safetensors" % d)) for d in DTYPES}
    seq = manifest["seq_len"]
    for h in range(HEADS):
        for t in range(T):
            row = q[(t * HEADS + h) * D:(t * HEADS + h + 1) * D]
            want = expected(rs, [positions[t]], row, seq)[0]
            for d in DTYPES:
                got = outs[d]["q_rot." + d][(t * HEADS + h) * D:(t * HEADS + h + 1) * D]
                for c in range(D):
                    w = row[c] if not o <= c < o + R else want[d][c]  # q_nope: the input itself
                    if bits(got[c]) != bits(w):
                        bad.append("q_rot.%s token %d head %d channel %d: %r, wanted %r" % (d, t, h, c, got[c], w))
    key = rs.key_spec()
    for t in range(T):
        want = expected(key, [positions[t]], k_pe[t * R:(t + 1) * R], seq)[0]
        for d in DTYPES:
            got = outs[d]["k_pe_rot." + d][t * R:(t + 1) * R]
            for c in range(R):
                if bits(got[c]) != bits(want[d][c]) and not (math.isnan(got[c]) and math.isnan(want[d][c])):
                    bad.append("k_pe_rot.%s token %d channel %d: %r, wanted %r" % (d, t, c, got[c], want[d][c]))
    return bad


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ropecheck", required=True)
    ap.add_argument("--presets-dir", required=True)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as work:
        bad = check(a.ropecheck, a.presets_dir, work)
    for line in bad[:20]:
        print("  MISMATCH " + line)
    print("%s: %s" % (PRESET, "FAILED (%d)" % len(bad) if bad else "passed"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
