#!/usr/bin/env python3
"""The quantized stores (core/quantized.hpp, reference/quantized_rounding.hpp) against their owners' own code.

Usage:
    python3 tests/python/quant_crosscheck.py --dump-tool build/dev/tests/quant_dump

Runs quant_dump on fixed-seed inputs with their edges (every FP8 value and midpoint, +-max, the overflow
thresholds, subnormals, ties, NaN, +-inf, all-zero and constant groups, f16 overflow of a block scale)
and compares bit for bit with:
  - ml_dtypes (float8_e4m3fn, float8_e5m2, bfloat16): every bit pattern decoded; one rounding from
    binary64 (the scalar constructor) and from binary32 (the numpy cast); the nonfinite overflow rule;
  - MLX (mx.to_fp8: the saturating e4m3 rule on finite inputs; mx.quantize / mx.dequantize in
    "affine" mode, int4 and int8, groups of 32 / 64 / 128, f32 / f16 / bf16);
  - numpy (float16 and float32 conversions of binary64);
  - gguf-py (gguf.quants Q8_0 / Q4_0, its port of ggml's quantize_row_q8_0_ref / q4_0_ref);
and checks the golden (exact) codes against the same owners wherever they are decided (margin above the
budget of the owner's binary32 roundings). A given-scale set (golden --stores e4m3fn:scale=V1/V2,
e5m2:nonfinite:scale=V: vLLM's static k_scale) is checked on every element, ties included: the code of
the exact quotient y / s, found among ml_dtypes' decoded values with exact rational arithmetic (ties to
the even code, then the overflow rule), and its margin 0 exactly on the ties. Prints one line per comparison with its counts; exits 0 when
nothing differs, 1 when something does, 77 when a library is missing (what could be run still is).
"""

from __future__ import annotations

import argparse
import bisect
import os
import subprocess
import sys
import tempfile

import numpy as np

SEED = 20250611
FAILURES: list[str] = []
SKIPPED: list[str] = []


def report(name: str, compared: int, mismatches: int, note: str = "") -> None:
    status = "ok" if mismatches == 0 else "MISMATCH"
    print(f"{status:8} {name}: {compared} compared, {mismatches} differ{(' (' + note + ')') if note else ''}")
    if mismatches or compared == 0:
        FAILURES.append(name)


class Tool:
    def __init__(self, exe: str, tmp: str) -> None:
        self.exe, self.tmp, self.n = exe, tmp, 0

    def run(self, args: list[str], inp: np.ndarray | None) -> bytes:
        self.n += 1
        files = []
        if inp is not None:
            path = os.path.join(self.tmp, f"in{self.n}")
            inp.tofile(path)
            files.append(path)
        out = os.path.join(self.tmp, f"out{self.n}")
        subprocess.run([self.exe, *args, *files, out], check=True)
        with open(out, "rb") as f:
            return f.read()


def same_bits(a: np.ndarray, b: np.ndarray) -> int:
    """Mismatches between two uint8 code arrays (NaN codes too: both sides write the sign and one pattern)."""
    return int(np.count_nonzero(a != b))


# ---- inputs -------------------------------------------------------------------------------------------


def fp8_edges(md_type) -> np.ndarray:
    codes = np.arange(256, dtype=np.uint8)
    vals = codes.view(md_type).astype(np.float64)
    fin = np.sort(np.unique(np.abs(vals[np.isfinite(vals)])))
    mids = (fin[:-1] + fin[1:]) / 2
    top = fin[-1] + (fin[-1] - fin[-2]) / 2  # max + half a step: the overflow threshold
    pts = np.concatenate([fin, mids, [top, top * 2, 1e30, 1e300]])
    near = np.concatenate([np.nextafter(pts, np.inf), np.nextafter(pts, -np.inf)])
    out = np.concatenate([pts, near, mids * (1 + 2.0**-40), mids * (1 - 2.0**-40)])
    out = np.concatenate([out, -out, [np.inf, -np.inf, np.nan, -np.nan, 0.0, -0.0]])
    return out.astype(np.float64)


def random_doubles(rng, n: int, lo: int, hi: int) -> np.ndarray:
    m = rng.uniform(1.0, 2.0, n)
    e = rng.integers(lo, hi, n)
    s = rng.choice([-1.0, 1.0], n)
    return s * np.ldexp(m, e)


# ---- ml_dtypes, MLX's to_fp8, numpy ----------------------------------------------------------------------


def check_fp8(tool: Tool, rng) -> None:
    try:
        import ml_dtypes as md
    except ImportError:
        SKIPPED.append("ml_dtypes")
        return
    for fmt, md_type in (("e4m3fn", md.float8_e4m3fn), ("e5m2", md.float8_e5m2)):
        mine = np.frombuffer(tool.run(["fp8-decode", fmt], None), dtype=np.float64)
        theirs = np.arange(256, dtype=np.uint8).view(md_type).astype(np.float64)
        bad = np.count_nonzero(~((mine == theirs) & (np.signbit(mine) == np.signbit(theirs)) | (np.isnan(mine) & np.isnan(theirs))))
        report(f"{fmt} decode, every bit pattern vs ml_dtypes", 256, int(bad))
        edges = fp8_edges(md_type)
        doubles = np.concatenate([edges, random_doubles(rng, 30000, -22, 20)])
        # One rounding from binary64: ml_dtypes' scalar constructor (ConvertFrom<double>).
        codes = np.frombuffer(tool.run(["fp8-encode", fmt, "nonfinite"], doubles), dtype=np.uint8)
        scalar = np.array([md_type(float(v)) for v in doubles], dtype=md_type).view(np.uint8)
        report(f"{fmt} encode binary64 (nonfinite) vs ml_dtypes scalar", len(doubles), same_bits(codes, scalar))
        # The numpy cast from float64 goes through binary32 (NPyCast -> CastToFloat): it equals our one
        # rounding of the binary32 nearest, and differs from the one rounding of the double where the
        # binary32 value lands on a tie.
        via_f32 = np.frombuffer(tool.run(["fp8-encode", fmt, "nonfinite"], doubles.astype(np.float32).astype(np.float64)), dtype=np.uint8)
        cast = doubles.astype(md_type).view(np.uint8)
        report(f"{fmt} numpy float64 cast == our rounding of float32(x)", len(doubles), same_bits(via_f32, cast),
               f"it differs from the one rounding of x on {int(np.count_nonzero(cast != codes))} inputs")
        floats = np.concatenate([edges, random_doubles(rng, 30000, -22, 20)]).astype(np.float32)
        codes32 = np.frombuffer(tool.run(["fp8-encode", fmt, "nonfinite"], floats.astype(np.float64)), dtype=np.uint8)
        report(f"{fmt} encode binary32 (nonfinite) vs ml_dtypes numpy cast", len(floats), same_bits(codes32, floats.astype(md_type).view(np.uint8)))
        # The golden (MPFR) rounding of the same doubles. MPFR does not keep the sign of a NaN: a NaN
        # input gives the positive NaN code there.
        raw = tool.run(["fp8-exact", fmt, "nonfinite"], doubles)
        exact = np.frombuffer(raw[: len(doubles)], dtype=np.uint8)
        nan = np.isnan(doubles)
        report(f"{fmt} golden (MPFR) code vs ml_dtypes scalar", len(doubles),
               same_bits(exact[~nan], scalar[~nan]) + same_bits(exact[nan], scalar[nan] & 0x7F))
    check_mlx_to_fp8(tool, rng)


def exact_fp8(r, table: list, top_code: int, saturate: bool, nan_code: int, inf_code: int) -> int:
    """The FP8 code of the rational r: nearest of ml_dtypes' positive finite values (table, with one
    virtual value a top step above the largest, code top_code + 1: reaching it is overflow), ties to the
    even code, then the overflow rule."""
    sign = 0x80 if r < 0 else 0
    a = abs(r)
    values = [v for v, _ in table]
    i = bisect.bisect_left(values, a)
    if i == len(values):
        code = top_code + 1
    elif values[i] == a or i == 0:
        code = table[i][1]
    else:
        lo, hi = table[i - 1], table[i]
        d_lo, d_hi = a - lo[0], hi[0] - a
        code = lo[1] if d_lo < d_hi or (d_lo == d_hi and lo[1] % 2 == 0) else hi[1]
    if code > top_code:
        code = top_code if saturate else (nan_code if inf_code is None else inf_code)
    return sign | code


def check_fp8_given(tool: Tool, rng) -> None:
    try:
        import ml_dtypes as md
    except ImportError:
        SKIPPED.append("ml_dtypes (given scales)")
        return
    from fractions import Fraction
    H, D = 2, 64
    for item, md_type, scales, saturate, top, inf in (
            ("e4m3fn:scale=0.3/0.001953125", md.float8_e4m3fn, [0.3, 2.0**-9], True, 0x7E, None),
            ("e5m2:nonfinite:scale=0.0625", md.float8_e5m2, [0.0625], False, 0x7B, 0x7C)):
        s32 = [Fraction(float(np.float32(v))) for v in scales]  # the given scale, rounded once to binary32
        vals = np.arange(top + 1, dtype=np.uint8).view(md_type).astype(np.float64)
        table = [(Fraction(float(v)), c) for c, v in enumerate(vals)]
        table.append((2 * table[-1][0] - table[-2][0], top + 1))
        # Random magnitudes, and exact ties: s times the midpoint of two neighbouring values (a double).
        y = random_doubles(rng, 4 * H * D, -14, 12)
        mids = (vals[1:] + vals[:-1]) / 2
        head = (np.arange(len(y)) // D) % H
        s_of = np.array([float(s32[h % len(s32)]) for h in head])
        tie_at = rng.choice(len(y), len(y) // 8, replace=False)
        y[tie_at] = rng.choice(mids, len(tie_at)) * s_of[tie_at] * rng.choice([-1.0, 1.0], len(tie_at))
        raw = tool.run(["fp8-given", item, str(H), str(D)], y)
        mine, zero = np.frombuffer(raw[:len(y)], dtype=np.uint8), np.frombuffer(raw[len(y):], dtype=np.uint8)
        theirs = np.array([exact_fp8(Fraction(float(v)) / s32[h % len(s32)], table, top, saturate, 0x7F, inf)
                           for v, h in zip(y, head)], dtype=np.uint8)
        report(f"{item} golden code of y / s vs ml_dtypes values, exact arithmetic", len(y), same_bits(mine, theirs))
        mid_set = {Fraction(float(m)) for m in mids}
        ties = np.array([abs(Fraction(float(v))) / s32[h % len(s32)] in mid_set for v, h in zip(y, head)])
        report(f"{item} margin 0 exactly on the ties", len(y), int(np.count_nonzero((zero != 0) != ties)),
               f"{int(ties.sum())} ties")


def check_mlx_to_fp8(tool: Tool, rng) -> None:
    try:
        import ml_dtypes as md
        import mlx.core as mx
    except ImportError:
        SKIPPED.append("mlx (to_fp8)")
        return
    # mx.to_fp8 (e4m3) saturates: +-inf and overflow to +-448. It also turns NaN into 448, which no
    # rule here models: NaN inputs are left out.
    x = np.concatenate([fp8_edges(md.float8_e4m3fn), random_doubles(rng, 30000, -22, 20)]).astype(np.float32)
    x = x[~np.isnan(x)]
    mine = np.frombuffer(tool.run(["fp8-encode", "e4m3fn", "saturate"], x.astype(np.float64)), dtype=np.uint8)
    theirs = np.array(mx.to_fp8(mx.array(x)))
    report("e4m3fn encode binary32 (saturate) vs mx.to_fp8", len(x), same_bits(mine, theirs))


def check_round_to(tool: Tool, rng) -> None:
    x = np.concatenate([random_doubles(rng, 40000, -150, 130), [65519.99, 65520.0, 65536.0, np.inf, -0.0, 1.0 + 2.0**-11]])
    for dt, ref in (("f32", lambda v: v.astype(np.float32).astype(np.float64)), ("f16", lambda v: v.astype(np.float16).astype(np.float64))):
        mine = np.frombuffer(tool.run(["round-to", dt], x), dtype=np.float64)
        theirs = ref(x)
        report(f"round-to {dt} vs numpy", len(x), int(np.count_nonzero(mine.view(np.uint64) != theirs.view(np.uint64))))
    try:
        import ml_dtypes as md
    except ImportError:
        return
    y = x[:10000]
    mine = np.frombuffer(tool.run(["round-to", "bf16"], y), dtype=np.float64)
    theirs = np.array([md.bfloat16(float(v)) for v in y], dtype=md.bfloat16).astype(np.float64)
    report("round-to bf16 vs ml_dtypes scalar", len(y), int(np.count_nonzero(mine.view(np.uint64) != theirs.view(np.uint64))))


# ---- MLX group-affine --------------------------------------------------------------------------------------


def affine_rows(rng, rows: int, cols: int) -> np.ndarray:
    w = rng.standard_normal((rows, cols)) * np.ldexp(1.0, rng.integers(-8, 8, (rows, 1)))
    w[0] = 0.0                                     # all zero
    w[1] = 0.3                                     # constant: R = 0, s0 clamped at 1e-7
    w[2] = rng.standard_normal(cols) * 1e-9        # R / n below 1e-7: the clamp
    w[3] = np.abs(w[3]) + 5.0                      # all positive, far from 0
    w[4, :] = np.linspace(-1.0, 1.0, cols)         # symmetric: |min| = |max|
    return w.astype(np.float32)


def check_affine(tool: Tool, rng) -> None:
    try:
        import ml_dtypes as md
        import mlx.core as mx
    except ImportError:
        SKIPPED.append("mlx")
        return
    mx_types = {"f32": (mx.float32, np.float32), "f16": (mx.float16, np.float16), "bf16": (mx.bfloat16, md.bfloat16)}
    for dt, (mxt, npt) in mx_types.items():
        for bits in (4, 8):
            for group in (32, 64, 128):
                w = affine_rows(rng, 24, 256).astype(npt).astype(np.float32)  # values of the dtype
                raw = tool.run(["affine", str(bits), str(group), dt], w)
                n_words, n_groups = w.size * bits // 32, w.size // group
                words = np.frombuffer(raw[: 4 * n_words], dtype=np.uint32)
                rest = np.frombuffer(raw[4 * n_words:], dtype=np.float64)
                scales, biases, deq = rest[:n_groups], rest[n_groups: 2 * n_groups], rest[2 * n_groups:]
                wq, s, b = mx.quantize(mx.array(w).astype(mxt), group_size=group, bits=bits)
                theirs_w = np.array(wq).reshape(-1)
                theirs_s = np.array(s.astype(mx.float32)).astype(np.float64).reshape(-1)
                theirs_b = np.array(b.astype(mx.float32)).astype(np.float64).reshape(-1)
                theirs_d = np.array(mx.dequantize(wq, s, b, group_size=group, bits=bits).astype(mx.float32)).astype(np.float64).reshape(-1)
                bad = int(np.count_nonzero(words != theirs_w) + np.count_nonzero(scales != theirs_s) + np.count_nonzero(biases != theirs_b))
                report(f"affine int{bits} g{group} {dt}: words, scales, biases vs mx.quantize", len(words) + 2 * n_groups, bad)
                report(f"affine int{bits} g{group} {dt}: values vs mx.dequantize", len(deq), int(np.count_nonzero(deq != theirs_d)))
                if dt == "f16":
                    continue
                raw = tool.run(["affine-exact", str(bits), str(group), dt], w)
                gw = np.frombuffer(raw[: 4 * n_words], dtype=np.uint32)
                rest = np.frombuffer(raw[4 * n_words: 4 * n_words + 16 * n_groups], dtype=np.float64)
                decided = np.frombuffer(raw[4 * n_words + 16 * n_groups:], dtype=np.uint8).astype(bool)
                codes = unpack(gw, bits, w.size)
                their_codes = unpack(theirs_w, bits, w.size)
                dec_el, dec_g = decided[: w.size], decided[w.size:]
                bad = int(np.count_nonzero((codes != their_codes) & dec_el))
                bad += int(np.count_nonzero((rest[:n_groups] != theirs_s) & dec_g) + np.count_nonzero((rest[n_groups:] != theirs_b) & dec_g))
                report(f"affine int{bits} g{group} {dt}: golden codes, scales, biases where decided vs mx.quantize",
                       int(dec_el.sum() + 2 * dec_g.sum()), bad, f"{int((~dec_el).sum())} codes undecided")


def unpack(words: np.ndarray, bits: int, n: int) -> np.ndarray:
    per = 32 // bits
    shifts = (np.arange(per, dtype=np.uint32) * bits)
    return ((words[:, None] >> shifts[None, :]) & ((1 << bits) - 1)).reshape(-1)[:n]


# ---- gguf-py ------------------------------------------------------------------------------------------------


def ggml_blocks(rng, n: int) -> np.ndarray:
    x = rng.standard_normal((n, 32)) * np.ldexp(1.0, rng.integers(-30, 20, (n, 1)))
    x[0] = 0.0                                            # all zero (+0): d = 0 (q8_0), -0 (q4_0)
    x[1] = np.arange(32) - 16.0
    x[1, 0] = 127.0                                       # d = 1: the codes are the values
    x[1, 1:6] = [2.5, -2.5, 0.5, -0.5, 126.5]             # roundf ties away from zero
    x[2] = np.arange(32) * 0.5 - 8.0                      # q4_0: d = 1, t + 8.5 on integers and halves
    x[3] = rng.standard_normal(32) * 1e7                  # q8_0 d above f16's max: inf
    x[4] = rng.standard_normal(32) * 1e-6                 # subnormal f16 d
    x[5, :] = 3.0                                         # constant
    x[6] = -x[6]
    x[6, 7] = -np.abs(x[6]).max() * 1.5                   # q4_0: a negative maximum
    x[7, 3], x[7, 9] = 5.0, -5.0                          # q4_0: +-max tie, the first wins
    return x.astype(np.float32)


def check_gguf(tool: Tool, rng) -> None:
    try:
        from gguf import GGMLQuantizationType as T
        from gguf import quants
    except ImportError:
        SKIPPED.append("gguf")
        return
    x = ggml_blocks(rng, 4000)
    for name, qt, size in (("q8_0", T.Q8_0, 34), ("q4_0", T.Q4_0, 18)):
        mine = np.frombuffer(tool.run([name], x), dtype=np.uint8)
        theirs = quants.quantize(x, qt).reshape(-1)
        differ = (mine.reshape(-1, size) != theirs.reshape(-1, size)).any(axis=1)
        report(f"{name} blocks (bytes) vs gguf.quants.quantize", len(x), int(np.count_nonzero(differ)))
        # Decoding: gguf's float32 dequantization equals q * d computed exactly.
        deq = quants.dequantize(mine.reshape(len(x), size), qt).reshape(-1).astype(np.float64)
        blocks = mine.reshape(-1, size)
        d = blocks[:, :2].copy().view(np.float16).astype(np.float64)
        if name == "q8_0":
            q = blocks[:, 2:].view(np.int8).astype(np.float64)
        else:
            lo, hi = blocks[:, 2:] & 15, blocks[:, 2:] >> 4
            q = np.concatenate([lo, hi], axis=1).astype(np.float64) - 8
        exact = (q * d).reshape(-1)
        finite = np.isfinite(exact)
        report(f"{name} values: gguf dequantize == code * d exactly", int(finite.sum()), int(np.count_nonzero(deq[finite] != exact[finite])))
        raw = tool.run([name + "-exact"], x)
        gold = np.frombuffer(raw[: len(x) * size], dtype=np.uint8).reshape(-1, size)
        decided = np.frombuffer(raw[len(x) * size:], dtype=np.uint8).astype(bool).reshape(-1, 33)
        gcodes, tcodes = codes_of(name, gold), codes_of(name, theirs.reshape(-1, size))
        bad = int(np.count_nonzero((gcodes != tcodes) & decided[:, :32]))
        bad += int(np.count_nonzero((gold[:, :2] != theirs.reshape(-1, size)[:, :2]).any(axis=1) & decided[:, 32]))
        report(f"{name} golden codes and d where decided vs gguf", int(decided.sum()), bad, f"{int((~decided).sum())} undecided")


def codes_of(name: str, blocks: np.ndarray) -> np.ndarray:
    if name == "q8_0":
        return blocks[:, 2:].view(np.int8).astype(np.int32)
    return np.concatenate([blocks[:, 2:] & 15, blocks[:, 2:] >> 4], axis=1).astype(np.int32)


def main() -> int:
    np.seterr(over="ignore", invalid="ignore")  # the edges overflow binary32 and f16 on purpose
    ap = argparse.ArgumentParser()
    ap.add_argument("--dump-tool", required=True)
    args = ap.parse_args()
    print(f"seed {SEED}")
    rng = np.random.default_rng(SEED)
    with tempfile.TemporaryDirectory() as tmp:
        tool = Tool(args.dump_tool, tmp)
        check_fp8(tool, rng)
        check_fp8_given(tool, rng)
        check_round_to(tool, rng)
        check_affine(tool, rng)
        check_gguf(tool, rng)
    if SKIPPED:
        print("not run (library missing): " + ", ".join(SKIPPED))
    if FAILURES:
        print(f"{len(FAILURES)} comparisons differ: " + "; ".join(FAILURES))
        return 1
    return 77 if SKIPPED else 0


if __name__ == "__main__":
    sys.exit(main())
