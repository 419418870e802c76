#!/usr/bin/env python3
"""Cross-check ropecheck's correctly rounded attention scores and outputs against mpmath.

Usage:
    python3 tests/python/mpmath_attention.py --dump-tool build/tests/attention_dump --presets-dir reference/presets

Written from the formulas (attention/include/ropecheck/attention/spec.hpp, accuracy/ERROR_MODEL.md
section 16.1), not from the C++: the rotation is mpmath_reference.py's independent one (its inverse
frequencies, attention factor, pair channels and multimodal axes), applied to every token's query heads
and key; then

    s = scale * <R(m) q, R(n) k>        scale = 1/sqrt(head_dim) unless given (exact)
    t = cap * tanh(s / cap)             with a soft-cap
    p_j = exp(t_j) / (exp(z) + sum exp(t_j'))   over the visible keys (token index j <= i when causal,
                                        i - j < W with a window, |i - j| < W without causal), z the sink
    o = sum p_j V_j

evaluated with mpmath at a working precision of 256 bits plus the angles' size, and rounded once to
f64, f32, f16 and bf16 (round to nearest, ties to even, gradual underflow) with exact integer
arithmetic. A value is accepted only when both ends of [x - err, x + err] round alike, err a generous
bound (2^(64 - wp) times the value's magnitude); otherwise the whole case is computed again at twice the
precision. Exact values are computed exactly (fractions): a logit whose query and key share every
position stream is scale * att^2 <q, k>_rotated + <q, k>_passthrough (a rotation keeps dot products), a
rational number when scale and att are; a row with one visible key and no sink has the output V_0. Such
values may be ties, which only exact arithmetic rounds right.

For every case the dump tool runs twice (the fast path, and --force-fallback: every inexact value
through the MPFR fallback); each number it prints must equal mpmath's bit for bit (+0 and -0 equal).
Prints one line per case and "N passed, M failed"; exits 0 only when everything matched.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from fractions import Fraction
from typing import List, Optional, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpmath  # noqa: E402
from mpmath import mp, mpf  # noqa: E402

import mpmath_reference as ref  # noqa: E402

FORMATS = {"f64": (53, -1022, 1023), "f32": (24, -126, 127), "f16": (11, -14, 15), "bf16": (8, -126, 127)}
MAX_PRECISION = 4096


def round_fraction(x: Fraction, fmt: str) -> float:
    """x rounded once to the format (nearest, ties to even, subnormals, overflow to inf), as a float."""
    p, emin, emax = FORMATS[fmt]
    if x == 0:
        return 0.0
    neg, a = x < 0, abs(x)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1                                  # now 2^e <= a < 2^(e+1)
    q = max(e, emin) - (p - 1)                  # exponent of the quantum
    scaled = a / (Fraction(2) ** q)
    n = scaled.numerator // scaled.denominator
    rem = scaled - n
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and n % 2 == 1):
        n += 1
    v = Fraction(n) * Fraction(2) ** q
    if v >= Fraction(2) ** (emax + 1):
        r = math.inf
    else:
        r = float(v)                            # exact: v is a value of the format
    return -r if neg else r


def fraction_of(x: mpf) -> Fraction:
    sign, man, exp, _ = x._mpf_
    f = Fraction(int(man)) * Fraction(2) ** int(exp)
    return -f if sign else f


def rounded(x, err: mpf) -> Optional[dict]:
    """{format: value} when every real within err of x rounds alike in every format, else None.
    x is a Fraction (exact) or an mpf."""
    if isinstance(x, Fraction):
        return {f: round_fraction(x, f) for f in FORMATS}
    c, e = fraction_of(x), fraction_of(mpf(err))
    out = {}
    for f in FORMATS:
        lo, hi = round_fraction(c - e, f), round_fraction(c + e, f)
        if lo != hi or math.copysign(1, lo) != math.copysign(1, hi):
            return None
        out[f] = lo
    return out


class Problem:
    def __init__(self, spec: dict, case: dict, dump: dict):
        self.rs = ref.parse_spec(spec)
        self.case = case
        self.pos = [tuple(p) for p in dump["positions"]]
        self.q = [float.fromhex(h) for h in dump["q"]]
        self.k = [float.fromhex(h) for h in dump["k"]]
        self.v = [float.fromhex(h) for h in dump["v"]]
        self.G = case.get("group", 1)
        self.D = self.rs.head_dim
        self.axes = ref.mrope_axes(self.rs)
        self.pairs = [self.rs.pair_channels(j) for j in range(self.rs.pairs)]
        covered = {c for ab in self.pairs for c in ab}
        self.passthrough = [c for c in range(self.D) if c not in covered]
        self.scale_given = case.get("scale")
        self.cap = case.get("softcap")
        self.sinks = case.get("sinks")

    def visible(self, i: int) -> List[int]:
        n, w = len(self.pos), self.case.get("window", 0)
        causal = not self.case.get("noncausal", False)
        out = []
        for j in range(n):
            if causal and j > i:
                continue
            if w and (i - j >= w or (not causal and j - i >= w)):
                continue
            out.append(j)
        return out

    def head(self, vec, token, h, heads):
        base = (token * heads + h) * self.D
        return vec[base:base + self.D]


def exact_scale(pb: Problem):
    """The scale as a Fraction when rational (given, or 1/sqrt(d) with d a square), else None."""
    if pb.scale_given is not None:
        return Fraction(pb.scale_given)
    r = math.isqrt(pb.D)
    return Fraction(1, r) if r * r == pb.D else None


def logit(pb: Problem, prm, qv, kv, pq, pk):
    """(value, err): a Fraction with err 0 when exact, else an mpf and its error bound."""
    same = all(pq[pb.axes[j]] == pk[pb.axes[j]] for j in range(len(pb.pairs)))
    sc = exact_scale(pb)
    if same and pb.cap is None and sc is not None and prm.att_exact:
        att2 = fraction_of(prm.att) ** 2
        rot = sum(Fraction(qv[a]) * Fraction(kv[a]) + Fraction(qv[b]) * Fraction(kv[b]) for a, b in pb.pairs)
        pas = sum(Fraction(qv[c]) * Fraction(kv[c]) for c in pb.passthrough)
        return sc * (att2 * rot + pas), mpf(0)
    att = prm.att
    Q, K = [mpf(x) for x in qv], [mpf(x) for x in kv]
    mag, big = mpf(0), mpf(1)
    for j, (a, b) in enumerate(pb.pairs):
        for vec, p in ((Q, pq), (K, pk)):
            ang = p[pb.axes[j]] * prm.inv[j]
            big = max(big, abs(ang))
            c, s = mp.cos(ang), mp.sin(ang)
            xa, xb = vec[a], vec[b]
            vec[a], vec[b] = att * (xa * c - xb * s), att * (xb * c + xa * s)
    dot = mpf(0)
    for c in range(pb.D):
        dot += Q[c] * K[c]
        mag += abs(Q[c] * K[c])
    scale = mpf(pb.scale_given) if pb.scale_given is not None else 1 / mp.sqrt(pb.D)
    s = scale * dot
    if pb.cap is not None:
        s = pb.cap * mp.tanh(s / pb.cap)
    return s, (scale * mag + 1) * big * mpf(2) ** (64 - mp.prec)


def row_output(pb: Problem, logits, errs, keys, h):
    """Outputs of one row as (values, err): exact (V_0) for one key without a sink."""
    dv = pb.D
    if len(keys) == 1 and pb.sinks is None:
        return [Fraction(pb.v[keys[0] * dv + c]) for c in range(dv)], mpf(0)
    t = [mpf(x.numerator) / x.denominator if isinstance(x, Fraction) else x for x in logits]
    z = mpf(pb.sinks[h]) if pb.sinks is not None else None
    mx = max(t + ([z] if z is not None else []))
    e = [mp.exp(x - mx) for x in t]
    Z = sum(e) + (mp.exp(z - mx) if z is not None else 0)
    outs = []
    vmax = max(abs(pb.v[j * dv + c]) for j in keys for c in range(dv))
    for c in range(dv):
        outs.append(sum(e[n] * pb.v[keys[n] * dv + c] for n in range(len(keys))) / Z)
    err = (vmax + 1) * (max(errs) * 4 + mpf(2) ** (64 - mp.prec))
    return outs, err


def expected_block(pb: Problem, prm) -> Optional[Tuple[dict, dict]]:
    scores = {f: [] for f in FORMATS}
    outputs = {f: [0.0] * (len(pb.pos) * pb.G * pb.D) for f in FORMATS}
    for h in range(pb.G):
        for i in range(len(pb.pos)):
            keys = pb.visible(i)
            ls, es = [], []
            for j in keys:
                l, e = logit(pb, prm, pb.head(pb.q, i, h, pb.G), pb.head(pb.k, j, 0, 1), pb.pos[i], pb.pos[j])
                r = rounded(l, e)
                if r is None:
                    return None
                for f in FORMATS:
                    scores[f].append(r[f])
                ls.append(l)
                es.append(e)
            outs, err = row_output(pb, ls, es, keys, h)
            for c, o in enumerate(outs):
                r = rounded(o, err)
                if r is None:
                    return None
                for f in FORMATS:
                    outputs[f][(i * pb.G + h) * pb.D + c] = r[f]
    return scores, outputs


def expected_pairs(pb: Problem, prm, qt, kt) -> Optional[dict]:
    scores = {f: [0.0] * (pb.G * len(qt)) for f in FORMATS}
    for h in range(pb.G):
        for p, (i, j) in enumerate(zip(qt, kt)):
            l, e = logit(pb, prm, pb.head(pb.q, i, h, pb.G), pb.head(pb.k, j, 0, 1), pb.pos[i], pb.pos[j])
            r = rounded(l, e)
            if r is None:
                return None
            for f in FORMATS:
                scores[f][h * len(qt) + p] = r[f]
    return scores


def run_dump(tool: str, spec_path: str, case: dict, force: bool) -> dict:
    cmd = [tool, "--spec", spec_path, "--seed", str(case.get("seed", 1)), "--group", str(case.get("group", 1))]
    for key in ("positions", "pairs", "scale", "softcap", "window"):
        if key in case:
            cmd += ["--" + key, str(case[key])]
    if case.get("noncausal"):
        cmd.append("--noncausal")
    if "sinks" in case:
        cmd += ["--sinks", ",".join(repr(z) for z in case["sinks"])]
    if force:
        cmd.append("--force-fallback")
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def compare(name: str, got: List[str], want: List[float]) -> List[str]:
    bad = []
    for i, (g, w) in enumerate(zip(got, want)):
        if float.fromhex(g) != w:
            bad.append("%s[%d]: ropecheck %s, mpmath %s" % (name, i, g, ref.hex64(w)))
    if len(got) != len(want):
        bad.append("%s: %d values, mpmath %d" % (name, len(got), len(want)))
    return bad


CASES = [
    ("llama-3.1-8b", {"positions": "0:5", "group": 2, "seed": 1}),
    ("gpt-oss-20b", {"positions": "131066:131071", "group": 2, "sinks": [0.5, -1.25], "window": 3, "seed": 2}),
    ("gemma-3-4b-global", {"positions": "4090:4094", "softcap": 50.0, "scale": 0.0625, "seed": 3}),
    ("phi-3.5-mini", {"positions": "0,7,4095,65537", "noncausal": True, "seed": 4}),
    ("deepseek-v3", {"positions": "1000:1005", "group": 3, "seed": 5}),
    ("gpt-neox-20b", {"positions": "3:7", "window": 2, "noncausal": True, "seed": 6}),
    ("qwen2-vl-7b", {"positions": "5/2/3,6/6/6,7/3/9,8/8/2", "seed": 7}),
    ("llama-3.1-8b", {"pairs": "dist:131071:2,tail:70000:1:9973,pair:0:0,pair:5:9", "group": 2, "seed": 8}),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dump-tool", required=True)
    ap.add_argument("--presets-dir", required=True)
    args = ap.parse_args()
    passed = failed = 0
    for preset, case in CASES:
        t0 = time.time()
        spec_path = os.path.join(args.presets_dir, preset + ".json")
        spec = ref.load_spec(spec_path)
        dumps = [run_dump(args.dump_tool, spec_path, case, force) for force in (False, True)]
        pb = Problem(spec, case, dumps[0])
        max_pos = max(abs(x) for p in pb.pos for x in p)
        prec = 256 + max(1, 2 * max_pos).bit_length()
        while True:
            with mp.workprec(prec):
                prm = ref.rope_params(pb.rs, None)
                want = (expected_pairs(pb, prm, dumps[0]["query_token"], dumps[0]["key_token"]) if "pairs" in case
                        else expected_block(pb, prm))
            if want is not None:
                break
            if prec >= MAX_PRECISION:
                raise RuntimeError("%s: could not certify at %d bits" % (preset, prec))
            prec *= 2
        bad = []
        for d, label in zip(dumps, ("fast", "fallback")):
            scores = want if "pairs" in case else want[0]
            for f in FORMATS:
                bad += compare("%s scores %s" % (label, f), d["scores"][f], scores[f])
                if "pairs" not in case:
                    bad += compare("%s outputs %s" % (label, f), d["outputs"][f], want[1][f])
        n = sum(len(dumps[0]["scores"][f]) + len(dumps[0].get("outputs", {}).get(f, [])) for f in FORMATS)
        status = "ok" if not bad else "FAILED"
        print("%-18s %-60s %6d values x 2 runs at %d bits (%d fallback values in the fast run): %s (%.1f s)"
              % (preset, json.dumps(case), n, prec, dumps[0]["fallback_values"], status, time.time() - t0))
        for b in bad[:10]:
            print("    " + b)
        passed += not bad
        failed += bool(bad)
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
