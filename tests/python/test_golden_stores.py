#!/usr/bin/env python3
"""Independent proof of `ropecheck golden --stores` (golden/GOLDEN_FORMAT.md, "Quantized stores").

Usage:
    python3 tests/python/test_golden_stores.py --ropecheck build/dev/cli/ropecheck

Writes a small set with every store family, reads stores.safetensors with a plain parser (json + numpy)
and recomputes every stored code, scale and bias from the set's f64 q_rot / k_rot with numpy and
ml_dtypes, from the definitions in GOLDEN_FORMAT.md (not from the C++): FP8 with vLLM's dynamic scale,
GGML q8_0 / q4_0 blocks (ggml's rules on the exact values), MLX affine groups. A stored quantity must
agree wherever it is decided: its margin (scale_margin) exceeds 2^-30 of the group's largest magnitude,
far above the double roundings of this numpy recomputation. Also checks that the .npz set carries the
same bytes (FP8 as uint8 bit patterns, named by the manifest). A second set stores FP8 over given scales
(vLLM's static k_scale: GIVEN, per tensor and per head): the `.scale` input must hold the listed values
rounded once to binary32 and every decided code must be ml_dtypes' rounding of y / s. A third set stores
FP8 over data-derived scales taken over every token (WHOLE: per tensor, per head), with one decided code
flipped in a copy as its teeth. Exits 0 when all agree, 1 otherwise, 77
when numpy or ml_dtypes is missing. Prints how many stored quantities the "decided" threshold leaves out.

With --teeth: the proof must fail on a copy of the set with one decided stored value broken (one bit of
an FP8 code, a q8_0 code, a q4_0 d, an int4 word, a bf16 MLX scale, an FP8 scale), naming the tensor.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

try:
    import ml_dtypes as md
    import numpy as np
except ImportError as e:  # what was not compared is not passed
    print(f"skipped: {e}")
    sys.exit(77)

NP = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "U8": "u1", "U32": "<u4", "F8_E4M3": "u1", "F8_E5M2": "u1",
      "BF16": "<u2"}
STORES = "e4m3fn,e5m2:nonfinite:per-token-head,q8_0,q4_0,int4g32,int8g64:bf16"
# Per head (3 heads): 0.3 is no binary32 value, 2^-9 drives most codes of head 1 past e4m3fn's range.
GIVEN = "e4m3fn:scale=0.3/0.001953125/2,e5m2:nonfinite:scale=0.0625"
# Data-derived scales over every token: per tensor, per head (vLLM's dynamic per-tensor quantization).
WHOLE = "e4m3fn:per-tensor,e5m2:nonfinite:per-head"
FAILS: list[str] = []
LEFT_OUT: dict[str, int] = {}


def read_safetensors(path: str) -> dict:
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    out = {}
    for name, e in json.loads(raw[8:8 + n]).items():
        if name == "__metadata__":
            continue
        b, f = e["data_offsets"]
        a = np.frombuffer(raw[8 + n + b:8 + n + f], dtype=NP[e["dtype"]]).reshape(e["shape"])
        if e["dtype"] == "BF16":
            a = (a.astype(np.uint32) << 16).view(np.float32)
        out[name] = a
    return out


def expect(what: str, same: np.ndarray, dec: np.ndarray | None = None) -> int:
    """Counts the compared quantities: those decided (dec); the others are left out, counted by kind."""
    dec = np.ones_like(same, dtype=bool) if dec is None else np.broadcast_to(dec, same.shape)
    bad = int(np.count_nonzero(~same & dec))
    if bad:
        FAILS.append(f"{what}: {bad} of {same.size} differ")
    left = int(np.count_nonzero(~dec))
    kind = what.split(".", 1)[1]  # "q_rot.q8_0 d" -> "q8_0 d"
    LEFT_OUT[kind] = LEFT_OUT.get(kind, 0) + left
    return same.size - left


def decided(margin: np.ndarray, amax: np.ndarray) -> np.ndarray:
    return margin > np.ldexp(amax, -30)


def fp8(y: np.ndarray, st: dict, name: str, fmt, fmax: float, saturate: bool, per_token: bool) -> int:
    g = y.reshape(y.shape[0], -1) if per_token else y.reshape(-1, y.shape[-1])
    amax = np.abs(g).max(axis=1)
    s_exact = np.maximum(amax / fmax, 1.0 / (fmax * 512.0))
    scale = st[name + ".scale"].reshape(-1)
    n = expect(name + ".scale", scale == s_exact.astype(np.float32), decided(st[name + ".scale_margin"].reshape(-1), amax))
    t = g * np.where(amax / fmax >= 1.0 / (fmax * 512.0), fmax / np.where(amax > 0, amax, 1), fmax * 512.0)[:, None]
    if saturate:
        t = np.clip(t, -fmax, fmax)
    want = np.array([fmt(v) for v in t.reshape(-1)], dtype=fmt).view(np.uint8)
    got = st[name].reshape(-1)
    same = (want == got) | (np.isnan(want.view(fmt).astype(np.float64)) & np.isnan(got.view(fmt).astype(np.float64)))
    m = st[name + ".margin"].reshape(-1)
    return n + expect(name, same, decided(m, np.repeat(amax, g.shape[1])))


def fp8_given(y: np.ndarray, st: dict, name: str, fmt, fmax: float, saturate: bool, listed: list[float]) -> int:
    """A given scale: code = fp8(y / s), s the head's listed scale rounded to binary32 (GOLDEN_FORMAT.md)."""
    s = np.array(listed, dtype=np.float32).astype(np.float64)
    n = expect(name + ".scale", st[name + ".scale"].astype(np.float64) == s)
    t = y / s[np.arange(y.shape[1]) % len(s)][None, :, None]  # one rounding of y / s in binary64
    if saturate:
        t = np.clip(t, -fmax, fmax)
    want = np.array([fmt(v) for v in t.reshape(-1)], dtype=fmt).view(np.uint8)
    got = st[name].reshape(-1)
    same = (want == got) | (np.isnan(want.view(fmt).astype(np.float64)) & np.isnan(got.view(fmt).astype(np.float64)))
    return n + expect(name, same, decided(st[name + ".margin"].reshape(-1), np.abs(y).reshape(-1)))


def fp8_whole(y: np.ndarray, st: dict, name: str, fmt, fmax: float, saturate: bool, per_head: bool) -> int:
    """A data-derived scale over every token (vLLM's dynamic per-tensor quantization; per head: over every
    token of the head): s* = max(amax / fmax, 1 / (fmax 512)) of the group's amax, codes fp8(y / s*)."""
    amax = np.abs(y).max(axis=(0, 2)) if per_head else np.array([np.abs(y).max()])
    s_exact = np.maximum(amax / fmax, 1.0 / (fmax * 512.0))
    n = expect(name + ".scale", st[name + ".scale"].reshape(-1) == s_exact.astype(np.float32),
               decided(st[name + ".scale_margin"].reshape(-1), amax))
    a = np.broadcast_to(amax[None, :, None] if per_head else amax[0], y.shape)
    t = y * np.where(a / fmax >= 1.0 / (fmax * 512.0), fmax / np.where(a > 0, a, 1), fmax * 512.0)
    if saturate:
        t = np.clip(t, -fmax, fmax)
    want = np.array([fmt(v) for v in t.reshape(-1)], dtype=fmt).view(np.uint8)
    got = st[name].reshape(-1)
    same = (want == got) | (np.isnan(want.view(fmt).astype(np.float64)) & np.isnan(got.view(fmt).astype(np.float64)))
    return n + expect(name, same, decided(st[name + ".margin"].reshape(-1), a.reshape(-1)))


def prove_whole(st: dict, f64: dict) -> int:
    n = 0
    for o in ("q_rot", "k_rot"):
        y = f64[o + ".f64"].astype(np.float64)
        n += fp8_whole(y, st, o + ".e4m3fn", md.float8_e4m3fn, 448.0, True, False)
        n += fp8_whole(y, st, o + ".e5m2", md.float8_e5m2, 57344.0, False, True)
    return n


def whole_teeth(st: dict, f64: dict) -> None:
    """One decided code of the per-tensor store flipped: prove_whole must name it (and nothing else)."""
    broken = dict(st)
    codes = st["q_rot.e4m3fn"].reshape(-1).copy()
    codes[most_decided(st["q_rot.e4m3fn.margin"])] ^= 0x01
    broken["q_rot.e4m3fn"] = codes
    saved = list(FAILS)
    FAILS.clear()
    prove_whole(broken, f64)
    ok = len(FAILS) == 1 and FAILS[0].startswith("q_rot.e4m3fn:")
    FAILS[:] = saved + ([] if ok else [f"whole-tensor teeth: a flipped decided code not caught alone ({FAILS})"])


def prove_given(st: dict, f64: dict, man: dict) -> int:
    n = 0
    for o in ("q_rot", "k_rot"):
        y = f64[o + ".f64"].astype(np.float64)
        n += fp8_given(y, st, o + ".e4m3fn", md.float8_e4m3fn, 448.0, True, [0.3, 2.0**-9, 2.0])
        n += fp8_given(y, st, o + ".e5m2", md.float8_e5m2, 57344.0, False, [0.0625])
    rec = {r["name"]: r for r in man["stores"]["stores"]}
    if rec["e4m3fn"].get("given_scales") != [float(np.float32(0.3)), 2.0**-9, 2.0] or \
            rec["e5m2"].get("item") != "e5m2:nonfinite:scale=0.0625":
        FAILS.append(f"manifest record of the given scales: {rec}")
    return n


def ggml(y: np.ndarray, st: dict, name: str, q4: bool) -> int:
    b = y.reshape(-1, 32)
    amax = np.abs(b).max(axis=1)
    blocks = st[name].reshape(-1, 18 if q4 else 34)
    d = blocks[:, :2].copy().view("<f2").reshape(-1)
    if q4:
        m = b[np.arange(len(b)), np.abs(b).argmax(axis=1)]  # the first of largest |x|
        dx = m / -8.0
        with np.errstate(divide="ignore", invalid="ignore"):
            code = np.minimum(15, np.floor(b / dx[:, None] + 8.5))
        code = np.where(dx[:, None] == 0, 8, code)
        qs = blocks[:, 2:]
        got = np.concatenate([qs & 0x0F, qs >> 4], axis=1)
    else:
        dx = amax / 127.0
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.where(amax[:, None] > 0, b * 127.0 / np.where(amax > 0, amax, 1)[:, None], 0.0)
        code = np.sign(t) * np.floor(np.abs(t) + 0.5)  # roundf: ties away from zero
        got = blocks[:, 2:].view(np.int8)
    n = expect(name + " d", d == dx.astype(np.float16), decided(st[name + ".scale_margin"].reshape(-1), amax))
    m = st[name + ".margin"].reshape(-1, 32)
    return n + expect(name + " codes", got == code, decided(m, amax[:, None]))


def affine(y: np.ndarray, st: dict, name: str, bits: int, gs: int, sdt) -> int:
    g = y.reshape(-1, gs)
    nq = 2 ** bits - 1
    mx, mn = g.max(axis=1), g.min(axis=1)
    neg = np.abs(mn) > np.abs(mx)
    s0 = np.maximum((mx - mn) / nq, float(np.float32(1e-7)))
    s0 = np.where(neg, s0, -s0)
    edge = np.where(neg, mn, mx)
    q0 = np.rint(edge / s0)
    scale = np.where(q0 != 0, edge / np.where(q0 != 0, q0, 1), s0)
    bias = np.where(q0 != 0, edge, 0.0)
    code = np.clip(np.rint((g - bias[:, None]) / scale[:, None]), 0, nq)
    words = st[name].reshape(-1)
    per = 32 // bits
    got = ((words[:, None] >> (bits * np.arange(per, dtype=np.uint32))) & nq).reshape(-1, gs)
    amax = np.abs(g).max(axis=1)
    dm = decided(st[name + ".decision_margin"].reshape(-1), amax)
    sm = decided(st[name + ".scale_margin"].reshape(-1), amax) & dm
    n = expect(name + ".scales", st[name + ".scales"].reshape(-1) == scale.astype(sdt), sm)
    n += expect(name + ".biases", st[name + ".biases"].reshape(-1) == bias.astype(sdt), sm)
    m = st[name + ".margin"].reshape(-1, gs)
    return n + expect(name + " codes", got == code, decided(m, amax[:, None]) & dm[:, None])


def prove(st: dict, f64: dict) -> int:
    n = 0
    for o in ("q_rot", "k_rot"):
        y = f64[o + ".f64"].astype(np.float64)
        n += fp8(y, st, o + ".e4m3fn", md.float8_e4m3fn, 448.0, True, True)
        n += fp8(y, st, o + ".e5m2", md.float8_e5m2, 57344.0, False, False)
        n += ggml(y, st, o + ".q8_0", False)
        n += ggml(y, st, o + ".q4_0", True)
        n += affine(y, st, o + ".int4g32", 4, 32, np.float32)
        n += affine(y, st, o + ".int8g64", 8, 64, md.bfloat16)
    return n


def write_set(ropecheck: str, out: str, fmt: str, stores: str = STORES, positions: str = "0:48") -> None:
    subprocess.run([ropecheck, "golden", "--preset", "llama-3.1-8b", "--positions", positions, "--heads", "3",
                    "--stores", stores, "--format", fmt, "--out", out, "--quiet"], check=True)


def most_decided(margin: np.ndarray) -> int:
    return int(np.argmax(margin.reshape(-1)))


def teeth(st_path: str, f64: dict, tmp: str) -> int:
    """One decided stored value broken (one bit) in a copy of the stores file: the proof must fail there."""
    raw = open(st_path, "rb").read()
    hlen = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + hlen])
    st = read_safetensors(st_path)
    m = lambda k: st[k].reshape(-1)  # noqa: E731
    i4 = most_decided(m("k_rot.int4g32.margin") * np.repeat(m("k_rot.int4g32.decision_margin"), 32))
    i8 = most_decided(m("k_rot.q8_0.margin"))
    # (tensor, byte offset in it, bit): the lowest bit of a code, of a scale's significand, a q4_0 d's exponent
    cases = [("q_rot.e4m3fn", most_decided(m("q_rot.e4m3fn.margin")), 0x01),
             ("q_rot.e4m3fn.scale", 4 * most_decided(m("q_rot.e4m3fn.scale_margin")), 0x01),
             ("k_rot.q8_0", i8 // 32 * 34 + 2 + i8 % 32, 0x01),
             ("q_rot.q4_0", 18 * most_decided(m("q_rot.q4_0.scale_margin")) + 1, 0x04),
             ("k_rot.int4g32", i4 // 8 * 4 + i4 % 8 // 2, 0x01 << (4 * (i4 % 2))),
             ("q_rot.int8g64.scales", 2 * most_decided(m("q_rot.int8g64.scale_margin") * m("q_rot.int8g64.decision_margin")),
              0x01)]
    caught = 0
    for name, off, bit in cases:
        b = bytearray(raw)
        b[8 + hlen + header[name]["data_offsets"][0] + off] ^= bit
        path = os.path.join(tmp, "broken.safetensors")
        open(path, "wb").write(bytes(b))
        FAILS.clear()
        prove(read_safetensors(path), f64)
        named = [f for f in FAILS if f.startswith(name + " ") or f.startswith(name + ":") or f.startswith(name + ".")]
        print(f"broken {name} (byte {off}): {'caught: ' + FAILS[0] if named else 'NOT CAUGHT ' + str(FAILS)}")
        caught += bool(named) and len(FAILS) == 1
    FAILS.clear()
    if caught != len(cases):
        FAILS.append(f"teeth: {len(cases) - caught} of {len(cases)} broken values not caught alone")
    return len(cases)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ropecheck", required=True)
    ap.add_argument("--teeth", action="store_true", help="break one stored value per family: the proof must fail")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        sets = {}
        for fmt in ("safetensors",) if a.teeth else ("safetensors", "npy"):
            sets[fmt] = os.path.join(tmp, fmt)
            write_set(a.ropecheck, sets[fmt], fmt)
        st_path = os.path.join(sets["safetensors"], "stores.safetensors")
        st = read_safetensors(st_path)
        f64 = read_safetensors(os.path.join(sets["safetensors"], "outputs_f64.safetensors"))
        if a.teeth:
            n = teeth(st_path, f64, tmp)
            print(f"{n} broken copies")
            for f in FAILS:
                print("FAIL", f)
            return 1 if FAILS else 0
        n = prove(st, f64)
        given = os.path.join(tmp, "given")
        write_set(a.ropecheck, given, "safetensors", GIVEN, "0:8,65528:65536")
        n += prove_given(read_safetensors(os.path.join(given, "stores.safetensors")),
                         read_safetensors(os.path.join(given, "outputs_f64.safetensors")),
                         json.load(open(os.path.join(given, "manifest.json"))))
        whole = os.path.join(tmp, "whole")  # scales over every token: 2 blocks of tokens, one scale
        write_set(a.ropecheck, whole, "safetensors", WHOLE, "0:8,65528:65536")
        wst = read_safetensors(os.path.join(whole, "stores.safetensors"))
        wf64 = read_safetensors(os.path.join(whole, "outputs_f64.safetensors"))
        n += prove_whole(wst, wf64)
        whole_teeth(wst, wf64)
        z = np.load(os.path.join(sets["npy"], "stores.npz"))
        for k, v in st.items():
            zk = z[k]
            if zk.dtype == np.uint16:  # bf16 bit patterns
                zk = (zk.astype(np.uint32) << 16).view(np.float32)
            FAILS.extend(f"npz {k}: bytes differ" for _ in [0] if not np.array_equal(zk.reshape(-1).view(np.uint8),
                                                                                     v.reshape(-1).view(np.uint8)))
        man = json.load(open(os.path.join(sets["npy"], "manifest.json")))
        e4 = [t for t in man["tensors"] if t["name"] == "q_rot.e4m3fn"][0]
        if e4.get("npy_storage") != "uint8 bit patterns" or e4.get("ml_dtypes") != "float8_e4m3fn":
            FAILS.append(f"manifest entry of q_rot.e4m3fn: {e4}")
    for f in FAILS:
        print("FAIL", f)
    left = sum(LEFT_OUT.values())
    print(f"{n} stored quantities compared, {left} left out as undecided "
          f"({', '.join(f'{k} {v}' for k, v in sorted(LEFT_OUT.items()) if v)}), {len(FAILS)} mismatching groups")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
