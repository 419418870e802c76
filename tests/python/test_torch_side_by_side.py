#!/usr/bin/env python3
"""Checks bench/torch_side_by_side.py and ropecheck's kernels through the kernel ABI with ctypes
(libropecheck_builtin_kernels.so, kut/src/builtin_plugin.cpp; bench/kernel_abi_ctypes.py).

    python3 tests/python/test_torch_side_by_side.py --kernel-lib build/release/kut/libropecheck_builtin_kernels.so

1. Without torch (numpy only): the library's C contract as ctypes meets it (ABI version 1, its name,
   ropecheck_kernel_configure refusing an unknown recipe or a bad thread count with one line,
   ROPECHECK_UNSUPPORTED for an unknown output dtype, a sinusoidal spec or a head_dim that does not
   match the spec, a failure (2) with one line for malformed spec JSON), and our kernel through it
   against a float64 evaluation, element by element, within the
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
sys.path.insert(0, os.path.join(REPO, "bench"))
from kernel_abi_ctypes import AbiError, KernelLibrary  # noqa: E402
SEED = 4242

U = {"f64": 2.0 ** -53, "f32": 2.0 ** -24, "f16": 2.0 ** -11, "bf16": 2.0 ** -8}
G = 2.0 ** -5  # second-order allowance, ERROR_MODEL.md section 8
NP_DTYPE = {"f32": np.float32, "f64": np.float64, "bf16": ml_dtypes.bfloat16}

failures = []


def check(ok: bool, what: str) -> None:
    if not ok:
        failures.append(what)
        print(f"FAIL: {what}")


def rope_spec(head_dim: int, base: float) -> dict:
    return {"name": "side-by-side-test", "family": "rope",
            "rope": {"head_dim": head_dim, "rotary_dim": head_dim, "base": base,
                     "layout": "half_split", "scaling": {"type": "none"}}}


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


# ---- the kernel library through ctypes ------------------------------------------------------

def call(lib: KernelLibrary, dt: str, x: np.ndarray, out: np.ndarray, positions: np.ndarray, name: str = "q"):
    """rope_apply of float32 x [S, H, D] into out; (rc, message), rc 0 when it returned ROPECHECK_OK."""
    try:
        lib.rope_apply(dt, name, x.ctypes.data, out.ctypes.data, x.shape[0], x.shape[1], positions.ctypes.data)
        return 0, ""
    except AbiError as e:
        return e.rc, e.message


def abi_contract(lib: KernelLibrary) -> None:
    check(lib.version == 1, f"ropecheck_kernel_abi_version() is 1, got {lib.version}")
    caps = lib.lib.ropecheck_kernel_capabilities
    caps.restype = ctypes.c_uint64
    check(caps() == (1 | 2 | 4 | 8 | 0xF00),
          f"capabilities: negative positions, attention scores, Q/K norm, MLA and all four output dtypes, got {caps():#x}")
    lib.configure("hf")
    check(lib.name in ("builtin:hf (avx512)", "builtin:hf (portable)"), f"name after configure('hf'): '{lib.name}'")

    def expect_refused(options: str, needle: str) -> None:
        try:
            lib.configure(options)
            check(False, f"configure('{options}') is refused")
        except AbiError as e:
            check(e.rc != 0 and needle in e.message and "\n" not in e.message,
                  f"configure('{options}') -> nonzero, one line naming {needle!r}; got {e.rc}, '{e.message}'")

    expect_refused("no-such-recipe", "no-such-recipe")
    expect_refused("hf:threads=-1", "threads")
    expect_refused("hf:threads=two", "two")
    check(lib.name.startswith("builtin:hf "), f"a refused configuration keeps the last one: '{lib.name}'")

    lib.set_spec(rope_spec(128, 500000.0))
    x = np.zeros((2, 1, 128), np.float32)
    out = np.zeros((2, 1, 128), np.float32)
    pos = np.arange(2, dtype=np.int64)
    rc, msg = call(lib, "f32", x, out, pos)
    check(rc == 0 and msg == "", f"a good call returns OK without a message; got {rc}, '{msg}'")
    lib.set_spec(rope_spec(64, 500000.0))  # the problem's head_dim 64, its spec JSON's 128: sizes disagree
    lib._spec = json.dumps(rope_spec(128, 500000.0)).encode()
    rc, msg = call(lib, "f32", np.zeros((2, 1, 64), np.float32), np.zeros((2, 1, 64), np.float32), pos)
    check(rc == 1 and "match" in msg and "\n" not in msg, f"head_dim 64 for a 128 spec -> UNSUPPORTED; got {rc}, '{msg}'")
    lib.set_spec(rope_spec(128, 500000.0))
    lib._spec = b'{"name": '
    rc, msg = call(lib, "f32", x, out, pos)
    check(rc == 2 and msg and "\n" not in msg, f"malformed spec JSON -> 2 with one line; got {rc}, '{msg}'")
    with open(os.path.join(REPO, "reference", "presets", "transformer-base.json")) as f:
        lib._spec = f.read().encode()
    rc, msg = call(lib, "f32", x, out, pos)
    check(rc == 1 and "RoPE" in msg, f"a sinusoidal spec -> UNSUPPORTED naming RoPE; got {rc}, '{msg}'")
    lib.set_spec(rope_spec(128, 500000.0))
    try:
        lib.rope_apply("f8", "q", x.ctypes.data, out.ctypes.data, 2, 1, pos.ctypes.data)
        check(False, "dtype f8 is refused")
    except ValueError as e:
        check("f8" in str(e), f"dtype f8 is refused naming it: '{e}'")


def abi_accuracy(lib: KernelLibrary) -> None:
    rng = np.random.default_rng(SEED)
    base, d, tokens = 500000.0, 128, 160
    lib.set_spec(rope_spec(d, base))
    pos = test_positions(tokens)
    cases = [("hf", "f32", "fp32-angle"), ("hf", "bf16", "bf16-table"),
             ("accurate", "f32", "f32-reduced"), ("accurate", "bf16", "fp64-angle"),
             ("accurate", "f64", "fp64-angle")]
    for recipe, dt, cls in cases:
        for threads in (1, 2):
            lib.configure(f"{recipe}:threads={threads}")
            for name, heads in (("q", 4), ("k", 2)):
                x_in = random_inputs(rng, tokens, heads, d, dt)
                got = np.zeros_like(x_in)
                rc, msg = call(lib, dt, x_in.astype(np.float32), got, pos, name)
                check(rc == 0, f"rope_apply({recipe}, {dt}, threads {threads}, {name}) rc {rc}: {msg}")
                if rc:
                    continue
                r, where, err = worst_ratio(got, x_in, pos, base, cls, dt)
                print(f"  ours {recipe:8} {dt:4} threads {threads} {name}: worst error / {cls} bound = {r:.3f}")
                check(r <= 1.0, f"ours {recipe} {dt} threads {threads}: {name} error {err:.3e} at (token, head, "
                                f"channel) {where}, position {pos[where[0]]}, exceeds the {cls} bound by {r:.3f}x "
                                f"(seed {SEED}, positions test_positions({tokens}))")


# ---- with torch --------------------------------------------------------------------------------

def load_script():
    spec = importlib.util.spec_from_file_location("torch_side_by_side", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def torch_checks(torch, lib: KernelLibrary, lib_path: str) -> None:
    mod = load_script()
    base, d, tokens = 500000.0, 128, 160
    pos = test_positions(tokens)
    rotary = mod.HfRotary(torch, d, base)
    gen = torch.Generator().manual_seed(SEED)
    lib.set_spec(rope_spec(d, base))
    lib.configure("hf:threads=1")
    for dt, tdt, cls in (("f32", torch.float32, "fp32-angle"), ("bf16", torch.bfloat16, "bf16-table")):
        q_store = torch.randn(1, tokens, 4, d, generator=gen).to(tdt)
        k_store = torch.randn(1, tokens, 2, d, generator=gen).to(tdt)
        position_ids = torch.from_numpy(pos)[None, :]
        q_hf, k_hf = q_store.transpose(1, 2), k_store.transpose(1, 2)
        cos, sin = rotary(q_hf, position_ids)
        tq, tk = mod.apply_rotary_pos_emb(torch, q_hf, k_hf, cos, sin)
        tq, tk = tq.transpose(1, 2).contiguous(), tk.transpose(1, 2).contiguous()
        oq, ok = q_store.clone(), k_store.clone()
        for name, x, o in (("q", q_store, oq), ("k", k_store, ok)):
            x32 = x.float().contiguous()
            try:
                lib.rope_apply(dt, name, x32.data_ptr(), o.data_ptr(), tokens, o.shape[-2], position_ids.data_ptr())
            except AbiError as e:
                check(False, f"rope_apply into torch buffers ({dt}, {name}): {e}")
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

    # End to end, small: exit 0 and every row in the JSON.
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "side.json")
        cmd = [sys.executable, SCRIPT, "--kernel-lib", lib_path, "--tokens", "256", "--reps", "2", "--warmup", "1",
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
    p = subprocess.run([sys.executable, SCRIPT, "--kernel-lib", lib_path, "--dtypes", "f8"], capture_output=True, text=True)
    msg = p.stderr.strip()
    check(p.returncode == 2 and "f8" in msg and "\n" not in msg,
          f"script with --dtypes f8 exits 2 with one line; got {p.returncode}: '{msg}'")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kernel-lib", required=True, help="libropecheck_builtin_kernels.so")
    args = ap.parse_args()
    print(f"seed {SEED}; kernel library {args.kernel_lib}")
    # torch before the library, as the script does (its bundled libgomp.so.1 is then the one OpenMP runtime).
    try:
        import torch
    except ImportError as e:
        torch, why = None, str(e)
    lib = KernelLibrary(args.kernel_lib)
    abi_contract(lib)
    abi_accuracy(lib)
    if failures:
        print(f"{len(failures)} failure(s); reproduce: python3 {' '.join(sys.argv)}")
        return 1
    if torch is None:
        print(f"SKIP: torch is not importable ({why}); the kernel library checks above passed. torch is opt-in: "
              "scripts/install-deps --torch")
        return 77
    print(f"torch {torch.__version__}")
    torch_checks(torch, lib, args.kernel_lib)
    if failures:
        print(f"{len(failures)} failure(s); reproduce: python3 {' '.join(sys.argv)}")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
