#!/usr/bin/env python3
"""Cross-check golden sets of specs with the Q/K RMSNorm stage against mpmath, bit for bit.

Usage:
    python3 tests/python/mpmath_golden_norm.py --ropecheck build/cli/ropecheck --presets-dir reference/presets

Writes sets with `ropecheck golden` for qwen3-8b (weight form "w", Qwen3RMSNorm) and for a Gemma 3 spec
given the stage with form "1+w" (Gemma3RMSNorm), at positions up to 2^24 - 1, reads the weights from the
set's recorded spec and q, k, q_rot.<dt>, k_rot.<dt> with a plain safetensors parser, and evaluates every
stored value again with mpmath_reference.py's independent formulas: rms_norm (SPEC_FORMAT.md, "q_norm /
k_norm") then its rotation (inverse frequencies, attention factor, pair channels), rounded once to f64, f32,
f16 and bf16 (mpmath_attention.rounded: accepted only when the whole error interval rounds alike, else the
token is evaluated again at twice the precision). Prints one line per set and "N passed, M failed".
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mpmath import mp, mpf  # noqa: E402

import mpmath_attention as ma  # noqa: E402
import mpmath_golden_attention as mga  # noqa: E402
import mpmath_reference as ref  # noqa: E402

POSITIONS = "0,1,7,4095,65537,1048576,16777215"


def expected_head(rs, prm, x, norm, pos):
    """The rounded values of one normalized-then-rotated head ({format: [values]}), or None when the
    working precision cannot decide one of them."""
    y = ref.rms_norm(x, norm)
    out, scale = list(y), [mpf(1)] * len(y)
    for j, inv in enumerate(prm.inv):
        ang = pos * inv
        c, s = mp.cos_sin(ang)
        a, b = rs.pair_channels(j)
        out[a], out[b] = prm.att * (y[a] * c - y[b] * s), prm.att * (y[b] * c + y[a] * s)
        scale[a] = scale[b] = (abs(ang) + 1) * (abs(y[a]) + abs(y[b]) + 1)
    got = {f: [] for f in ma.FORMATS}
    for v, sc in zip(out, scale):
        r = ma.rounded(v, sc * mpf(2) ** (64 - mp.prec))
        if r is None:
            return None
        for f in ma.FORMATS:
            got[f].append(r[f])
    return got


def check_set(tool, spec_args, work, name):
    out = os.path.join(work, name)
    subprocess.run([tool, "golden"] + spec_args + ["--positions", POSITIONS, "--heads", "2", "--dtypes", "f32,f16,bf16",
                                                  "--seed", "21", "--out", out, "--quiet"], check=True, capture_output=True)
    m = json.load(open(os.path.join(out, "manifest.json")))
    rs = ref.parse_spec(m["spec"])
    inp = mga.read_safetensors(os.path.join(out, "inputs.safetensors"))
    outs = {f: mga.read_safetensors(os.path.join(out, "outputs_%s.safetensors" % f)) for f in ma.FORMATS}
    D, H, bad, n = rs.head_dim, 2, [], 0
    for t, pos in enumerate(inp["positions"]):
        for which, norm in (("q", rs.q_norm), ("k", rs.k_norm)):
            for h in range(H):
                base = (t * H + h) * D
                prec = 320 + max(1, pos).bit_length()
                while True:
                    with mp.workprec(prec):
                        want = expected_head(rs, ref.rope_params(rs, m["seq_len"]), inp[which][base:base + D], norm, pos)
                    if want is not None:
                        break
                    prec *= 2
                for f in ma.FORMATS:
                    bad += ma.compare("%s_rot.%s[%d, %d]" % (which, f, t, h),
                                      [v.hex() for v in outs[f]["%s_rot.%s" % (which, f)][base:base + D]], want[f])
                    n += D
    return bad, n, rs


def gemma_with_norm(presets, work):
    spec = ref.load_spec(os.path.join(presets, "gemma-3-4b-global.json"))
    spec["name"] = "gemma-3-4b-global-qk-norm"
    for key in ("q_norm", "k_norm"):
        spec["rope"][key] = {"eps": 1e-6, "weight_form": "1+w"}
    path = os.path.join(work, "gemma-norm.json")
    with open(path, "w") as f:
        json.dump(spec, f)
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ropecheck", required=True)
    ap.add_argument("--presets-dir", required=True)
    args = ap.parse_args()
    passed = failed = 0
    with tempfile.TemporaryDirectory() as work:
        for name, spec_args in (("qwen3-8b", ["--preset", "qwen3-8b"]),
                                ("gemma-1+w", ["--spec", gemma_with_norm(args.presets_dir, work)])):
            t0 = time.time()
            bad, n, rs = check_set(args.ropecheck, spec_args, work, name)
            forms = "/".join(x["weight_form"] for x in (rs.q_norm, rs.k_norm))
            ok = not bad and n > 0 and rs.q_norm["weight"] is not None
            print("%-10s forms %-7s %6d values: %s (%.1f s)" % (name, forms, n, "ok" if ok else "FAILED", time.time() - t0))
            for b in bad[:10]:
                print("    " + b)
            passed += ok
            failed += not ok
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
