#!/usr/bin/env python3
"""Checks bench/torch_side_by_side.py and its ctypes shim (bench/rope_ctypes_shim.cpp).

    python3 tests/python/test_torch_side_by_side.py --shim build/release/bench/librope_ctypes_shim.so

1. Without torch (numpy only): the shim's C contract (ABI version, one-line errors with code 2 for an
   unknown recipe / dtype / preset, malformed spec JSON, a null pointer, a shape that does not match
   the plan), and our kernel through it against a float64 evaluation, element by element, within the
   bound of the accuracy class the recipe promises (accuracy/ERROR_MODEL.md, the class table): hf in f32
   -> fp32-angle, hf in bf16 -> bf16-table, accurate in f32 -> f32-reduced (the binary64 angle term,
   fp32-angle's constant), accurate in bf16 and f64 -> fp64-angle. Positions reach 2^20 so that the
   angle term matters.
2. With torch: the script's Hugging Face transcription (HfRotary + apply_rotary_pos_emb) against the
   same float64 evaluation and bounds (fp32-angle in f32, bf16-table in bf16), our hf against torch
   (fraction of equal elements printed, the difference within the sum of both bounds), and a short
   end-to-end run of the script (exit 0, every timing row in its JSON) plus its bad-input exit (2).

Deterministic (numpy / torch generators with the seed printed). Exit 0 pass, 1 fail, 77 skip: torch is
not importable (the numpy part has then passed; torch is opt-in, scripts/install-deps --torch).
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.util
import json
import math
import os
import subprocess
import sys
import tempfile

import ml_dtypes
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(REPO, "bench", "torch_side_by_side.py")
SEED = 4242

U = {"f64": 2.0 ** -53, "f32": 2.0 ** -24, "f16": 2.0 ** -11, "bf16": 2.0 ** -8}
G = 2.0 ** -5  # second-order allowance, ERROR_MODEL.md section 8
NP_DTYPE = {"f32": np.float32, "f64": np.float64, "bf16": ml_dtypes.bfloat16}

failures = []


def check(ok: bool, what: str) -> None:
    if not ok:
        failures.append(what)
        print(f"FAIL: {what}")


def spec_json(head_dim: int, base: float) -> str:
    return json.dumps({"name": "side-by-side-test", "family": "rope",
                       "rope": {"head_dim": head_dim, "rotary_dim": head_dim, "base": base,
                                "layout": "half_split", "scaling": {"type": "none"}}})


# ---- the float64 evaluation and the class bounds -----------------------------------------------

def rotate64(x64: np.ndarray, positions: np.ndarray, base: float):
    """x [S, H, D] (half-split) rotated in binary64; also returns theta [S, D/2] and w [D/2]."""
    d = x64.shape[-1]
    half = d // 2
    w = np.array([base ** (-(2.0 * j) / d) for j in range(half)])
    theta = positions.astype(np.float64)[:, None] * w[None, :]
    c, s = np.cos(theta)[:, None, :], np.sin(theta)[:, None, :]
    a, b = x64[..., :half], x64[..., half:]
    return np.concatenate((a * c - b * s, b * c + a * s), axis=-1), theta, w


def bound(x64: np.ndarray, theta: np.ndarray, w: np.ndarray, cls: str, dt: str) -> np.ndarray:
    """Per-element bound B * M of accuracy/ERROR_MODEL.md's class table (att = 1; the underflow floor F is
    left out: no output here is near the subnormals), plus the float64 evaluation's own error
    (|theta| u64 from the angle, a few u64 from the rest)."""
    half = x64.shape[-1] // 2
    m = np.abs(x64[..., :half]) + np.abs(x64[..., half:])  # M of pair j, [S, H, D/2]
    at = np.abs(theta)[:, None, :]
    ln_w = np.abs(np.log(w))[None, None, :]
    if cls == "fp64-angle":
        angle = np.minimum((1 + G) * (6 * ln_w + 14) * U["f64"] * at, 2)
        const = (1 + G) * (8 * U["f64"] + U[dt])
    elif cls == "fp32-angle":
        angle = np.minimum((1 + G) * (6 * ln_w + 14) * U["f32"] * at, 2)
        const = (1 + G) * (8 * U["f32"] + U[dt])
    elif cls == "f32-reduced":  # the angle in binary64, sin / cos and the rest in f32
        angle = np.minimum((1 + G) * (6 * ln_w + 14) * U["f64"] * at, 2)
        const = (1 + G) * (8 * U["f32"] + U[dt])
    elif cls == "bf16-table":
        angle = np.minimum((1 + G) * (6 * ln_w + 14) * U["f32"] * at, 2)
        const = (1 + G) * (6 * U["f32"] + 3 * U["bf16"] + U[dt])
    else:
        raise ValueError(cls)
    ref_err = (at + 8) * U["f64"]
    b = (angle + const + ref_err) * m
    return np.concatenate((b, b), axis=-1)


def worst_ratio(got: np.ndarray, x_in: np.ndarray, positions: np.ndarray, base: float, cls: str, dt: str):
    """max |got - exact| / bound and where (token, head, channel)."""
    x64 = x_in.astype(np.float64)
    ref, theta, w = rotate64(x64, positions, base)
    err = np.abs(got.astype(np.float64) - ref)
    b = bound(x64, theta, w, cls, dt) + 1e-300
    ratio = err / b
    i = np.unravel_index(int(np.argmax(ratio)), ratio.shape)
    return float(ratio[i]), tuple(int(v) for v in i), float(err[i])


def test_positions(tokens: int) -> np.ndarray:
    # Small positions, then log-spaced up to 2^20 (the angle term grows with position).
    small = np.arange(min(tokens // 2, 64))
    large = np.unique(np.round(np.logspace(6, 20, tokens - small.size, base=2.0)).astype(np.int64))
    pos = np.concatenate([small, large])
    while pos.size < tokens:
        pos = np.append(pos, pos[-1] + 1)
    return pos.astype(np.int64)


def random_inputs(rng, tokens: int, heads: int, d: int, dt: str) -> np.ndarray:
    return rng.standard_normal((tokens, heads, d)).astype(np.float32).astype(NP_DTYPE[dt])


# ---- the shim through ctypes -------------------------------------------------------------------

class Shim:
    def __init__(self, path: str):
        lib = ctypes.CDLL(path)
        lib.rc_shim_abi_version.restype = ctypes.c_int
        lib.rc_shim_last_error.restype = ctypes.c_char_p
        lib.rc_shim_cpu_path.restype = ctypes.c_char_p
        lib.rc_shim_plan_new.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int64,
                                         ctypes.POINTER(ctypes.c_void_p)]
        lib.rc_shim_plan_free.argtypes = [ctypes.c_void_p]
        lib.rc_shim_plan_free.restype = None
        lib.rc_shim_rope_apply.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int64,
                                           ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                                           ctypes.c_void_p, ctypes.c_int]
        self.lib = lib

    def error(self) -> str:
        return self.lib.rc_shim_last_error().decode()

    def plan(self, spec: str, recipe: str):
        out = ctypes.c_void_p()
        rc = self.lib.rc_shim_plan_new(spec.encode(), recipe.encode(), -1, ctypes.byref(out))
        return rc, out

    def apply(self, plan, dt: str, q: np.ndarray, k, positions: np.ndarray, threads: int = 1) -> int:
        return self.lib.rc_shim_rope_apply(plan, dt.encode(), q.ctypes.data, q.shape[1],
                                           None if k is None else k.ctypes.data, 0 if k is None else k.shape[1],
                                           q.shape[0], q.shape[2], positions.ctypes.data, threads)


def shim_contract(shim: Shim) -> None:
    check(shim.lib.rc_shim_abi_version() == 1, "rc_shim_abi_version() is 1")
    path = shim.lib.rc_shim_cpu_path().decode()
    check(path in ("avx512", "portable"), f"rc_shim_cpu_path() is avx512 or portable, got '{path}'")
    spec = spec_json(128, 500000.0)

    def expect_plan_error(s: str, recipe: str, needle: str) -> None:
        rc, p = shim.plan(s, recipe)
        msg = shim.error()
        check(rc == 2 and not p.value and needle in msg and "\n" not in msg,
              f"plan_new({s[:30]!r}, {recipe!r}) -> rc 2, one line naming {needle!r}; got rc {rc}, '{msg}'")

    expect_plan_error(spec, "no-such-recipe", "no-such-recipe")
    expect_plan_error("no-such-preset", "hf", "no-such-preset")
    expect_plan_error("{\"name\": ", "hf", "malformed")
    expect_plan_error("transformer-base", "hf", "sinusoidal")

    rc, plan = shim.plan("llama-3-8b", "hf")
    check(rc == 0 and bool(plan.value), f"plan_new(llama-3-8b, hf) succeeds: rc {rc}, '{shim.error()}'")
    q = np.zeros((2, 1, 128), np.float32)
    pos = np.arange(2, dtype=np.int64)
    for args, needle in [((plan, "f8", q, None, pos), "f8"),
                         ((None, "f32", q, None, pos), "plan"),
                         ((plan, "f32", np.zeros((2, 1, 64), np.float32), None, pos), "")]:
        rc = shim.apply(*args)
        msg = shim.error()
        check(rc == 2 and needle in msg and msg and "\n" not in msg,
              f"rope_apply with bad input ({needle or 'head_dim 64 for a 128 plan'}) -> rc 2, one line; "
              f"got rc {rc}, '{msg}'")
    rc = shim.lib.rc_shim_rope_apply(plan, b"f32", None, 1, None, 0, 2, 128, pos.ctypes.data, 1)
    check(rc == 2 and "null" in shim.error(), f"rope_apply with q null -> rc 2; got {rc}, '{shim.error()}'")
    check(shim.apply(plan, "f32", q, None, pos) == 0 and shim.error() == "", "a good call clears the last error")
    shim.lib.rc_shim_plan_free(plan)
    shim.lib.rc_shim_plan_free(None)  # like free(NULL)


def shim_accuracy(shim: Shim) -> None:
    rng = np.random.default_rng(SEED)
    base, d, tokens = 500000.0, 128, 160
    spec = spec_json(d, base)
    pos = test_positions(tokens)
    cases = [("hf", "f32", "fp32-angle"), ("hf", "bf16", "bf16-table"),
             ("accurate", "f32", "f32-reduced"), ("accurate", "bf16", "fp64-angle"),
             ("accurate", "f64", "fp64-angle")]
    for recipe, dt, cls in cases:
        rc, plan = shim.plan(spec, recipe)
        check(rc == 0, f"plan_new({recipe}) rc {rc}: {shim.error()}")
        if rc:
            continue
        for threads in (1, 2):
            q = random_inputs(rng, tokens, 4, d, dt)
            k = random_inputs(rng, tokens, 2, d, dt)
            q_in, k_in = q.copy(), k.copy()
            rc = shim.apply(plan, dt, q, k, pos, threads)
            check(rc == 0, f"rope_apply({recipe}, {dt}, threads {threads}) rc {rc}: {shim.error()}")
            if rc:
                continue
            for name, got, x_in in (("q", q, q_in), ("k", k, k_in)):
                r, where, err = worst_ratio(got, x_in, pos, base, cls, dt)
                print(f"  ours {recipe:8} {dt:4} threads {threads} {name}: worst error / {cls} bound = {r:.3f}")
                check(r <= 1.0, f"ours {recipe} {dt} threads {threads}: {name} error {err:.3e} at (token, head, "
                                f"channel) {where}, position {pos[where[0]]}, exceeds the {cls} bound by {r:.3f}x "
                                f"(seed {SEED}, positions test_positions({tokens}))")
        shim.lib.rc_shim_plan_free(plan)


# ---- with torch --------------------------------------------------------------------------------

def load_script():
    spec = importlib.util.spec_from_file_location("torch_side_by_side", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def torch_checks(torch, shim: Shim, shim_path: str) -> None:
    mod = load_script()
    base, d, tokens = 500000.0, 128, 160
    pos = test_positions(tokens)
    rotary = mod.HfRotary(torch, d, base)
    gen = torch.Generator().manual_seed(SEED)
    rc, plan = shim.plan(spec_json(d, base), "hf")
    check(rc == 0, f"plan_new(hf): {shim.error()}")
    for dt, tdt, cls in (("f32", torch.float32, "fp32-angle"), ("bf16", torch.bfloat16, "bf16-table")):
        q_store = torch.randn(1, tokens, 4, d, generator=gen).to(tdt)
        k_store = torch.randn(1, tokens, 2, d, generator=gen).to(tdt)
        position_ids = torch.from_numpy(pos)[None, :]
        q_hf, k_hf = q_store.transpose(1, 2), k_store.transpose(1, 2)
        cos, sin = rotary(q_hf, position_ids)
        tq, tk = mod.apply_rotary_pos_emb(torch, q_hf, k_hf, cos, sin)
        tq, tk = tq.transpose(1, 2).contiguous(), tk.transpose(1, 2).contiguous()
        oq, ok = q_store.clone(), k_store.clone()
        rc = shim.lib.rc_shim_rope_apply(plan, dt.encode(), oq.data_ptr(), 4, ok.data_ptr(), 2, tokens, d,
                                         position_ids.data_ptr(), 1)
        check(rc == 0, f"rope_apply on torch buffers ({dt}): {shim.error()}")
        equal = total = 0
        for name, t_out, o_out, x_in in (("q", tq, oq, q_store), ("k", tk, ok, k_store)):
            x = x_in[0].float().numpy()
            r, where, err = worst_ratio(t_out[0].float().numpy(), x, pos, base, cls, dt)
            print(f"  torch HF {dt:4} {name}: worst error / {cls} bound = {r:.3f}")
            check(r <= 1.0, f"torch HF transcription {dt}: {name} error {err:.3e} at {where} exceeds the {cls} "
                            f"bound by {r:.3f}x (seed {SEED})")
            width = torch.int32 if dt == "f32" else torch.int16
            equal += int((t_out.view(width) == o_out.view(width)).sum())
            total += t_out.numel()
            # Both within their bound of the exact value: within the sum of the two of each other.
            x64 = x.astype(np.float64)
            _, theta, w = rotate64(x64, pos, base)
            diff = np.abs(t_out[0].double().numpy() - o_out[0].double().numpy())
            b = 2 * bound(x64, theta, w, cls, dt)
            check(bool(np.all(diff <= b)), f"ours hf vs torch {dt} {name}: differ by more than two {cls} bounds")
        print(f"  ours hf vs torch {dt}: {equal}/{total} elements bit-identical ({100 * equal / total:.2f} %)")
    shim.lib.rc_shim_plan_free(plan)

    # End to end, small: exit 0 and every row in the JSON.
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "side.json")
        cmd = [sys.executable, SCRIPT, "--shim", shim_path, "--tokens", "256", "--reps", "2", "--warmup", "1",
               "--threads", "1,2", "--json", out]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        check(p.returncode == 0, f"{' '.join(cmd)} exits 0; got {p.returncode}: {p.stderr.strip()}")
        if p.returncode == 0:
            doc = json.load(open(out))
            rows = {(r["dtype"], r["threads"], r["impl"]) for r in doc["timings"]}
            want = {(dt, n, impl) for dt in ("f32", "bf16") for n in (1, 2)
                    for impl in ("torch cos/sin+apply", "torch apply only", "ours hf", "ours accurate")}
            check(rows == want, f"script JSON has every timing row; missing {sorted(want - rows)}")
            check(all(r["best_ms"] > 0 and len(r["times_ms"]) == 2 for r in doc["timings"]), "timings positive, 2 reps")
            check(all("ratio_vs_torch_full" in r for r in doc["timings"] if r["impl"].startswith("ours")),
                  "every ours row has its ratios")
            check(len(doc["accuracy"]) == 2 and all(0 <= a["hf_vs_torch"]["fraction_equal"] <= 1
                                                    for a in doc["accuracy"]), "accuracy entries for f32 and bf16")
    p = subprocess.run([sys.executable, SCRIPT, "--shim", shim_path, "--dtypes", "f8"], capture_output=True, text=True)
    msg = p.stderr.strip()
    check(p.returncode == 2 and "f8" in msg and "\n" not in msg,
          f"script with --dtypes f8 exits 2 with one line; got {p.returncode}: '{msg}'")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shim", required=True, help="librope_ctypes_shim.so")
    args = ap.parse_args()
    print(f"seed {SEED}; shim {args.shim}")
    # torch before the shim, as the script does (its bundled libgomp.so.1 is then the one OpenMP runtime).
    try:
        import torch
    except ImportError as e:
        torch, why = None, str(e)
    shim = Shim(args.shim)
    shim_contract(shim)
    shim_accuracy(shim)
    if failures:
        print(f"{len(failures)} failure(s); reproduce: python3 {' '.join(sys.argv)}")
        return 1
    if torch is None:
        print(f"SKIP: torch is not importable ({why}); the shim checks above passed. torch is opt-in: "
              "scripts/install-deps --torch")
        return 77
    print(f"torch {torch.__version__}")
    torch_checks(torch, shim, args.shim)
    if failures:
        print(f"{len(failures)} failure(s); reproduce: python3 {' '.join(sys.argv)}")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
