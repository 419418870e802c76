#!/usr/bin/env python3
"""RoPE computed exactly the way Hugging Face Llama computes it, checked with `ropecheck check`.

For PyTorch users: this is `LlamaRotaryEmbedding` + `apply_rotary_pos_emb` from transformers, op for
op, written with numpy (+ ml_dtypes for bfloat16) because torch is not installable on our CI
machines. README.md beside this file shows the same thing with torch tensors.

    python3 examples/pytorch_users/hf_rope_numpy.py --ropecheck build/release/cli/ropecheck

What it does:
  1. `ropecheck golden` writes a golden set (default: llama-3.1-8b, 2 heads, positions up to 114688);
  2. reads its inputs (positions, q, k) with safetensors' numpy loader;
  3. computes inv_freq, cos, sin and the rotated q, k as transformers does (variants.md 1.1, 1.6, 1.8):
       inv_freq  float32, from a float32 power (and the llama3 / linear rescaling, in float32)
       angle     float32 position x float32 inv_freq (one rounded product per element)
       cos, sin  float32, then cast to the activation dtype
       q*cos + rotate_half(q)*sin, every * and + rounded to the activation dtype
     for activations in bfloat16, float16 and float32;
  4. saves each result as a candidate safetensors file (q_rot.<dt>, k_rot.<dt>, cos.<dt>, sin.<dt>);
  5. runs `ropecheck check --golden ... --candidate ... --report ...` on each and prints the accuracy
     class it lands in: the strictest class it satisfies (exact, fp64-angle, f32-reduced, fp32-angle,
     f16-table, bf16-table).

For contrast it also checks a classic bug (inv_freq cast to bf16 with the model, f32 activations),
which must not satisfy fp32-angle.

Exit status: 0 when every candidate lands in the class expected for its recipe (bf16 -> bf16-table,
f16 -> f16-table, f32 -> fp32-angle, or stricter) and the bug is caught, 1 otherwise, 2 on unusable
input.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from typing import List, Optional, Tuple

import numpy as np
import ml_dtypes
import safetensors.numpy as st_numpy

# Strictest first (props/include/ropecheck/accuracy/error_model.hpp).
CLASSES = ["exact", "fp64-angle", "f32-reduced", "fp32-angle", "f16-table", "bf16-table"]

# Activation dtypes of the three recipes, and the class each should land in (or a stricter one).
RECIPES: List[Tuple[str, np.dtype, str]] = [
    ("bf16", np.dtype(ml_dtypes.bfloat16), "bf16-table"),
    ("f16", np.dtype(np.float16), "f16-table"),
    ("f32", np.dtype(np.float32), "fp32-angle"),
]


# --------------------------------------------------------------------------------------------------
# Hugging Face, op for op. Comments quote transformers; numpy 2 keeps float32 when a Python scalar
# meets a float32 array (NEP 50), as torch does.
# --------------------------------------------------------------------------------------------------

def f32(x) -> np.float32:
    return np.float32(x)


def hf_rdiv(scalar: float, t: np.ndarray) -> np.ndarray:
    """torch's `scalar / tensor` is `tensor.reciprocal() * scalar` (torch/_tensor.py __rdiv__)."""
    return (f32(1) / t) * f32(scalar)


def hf_inv_freq(rope: dict) -> Tuple[np.ndarray, float]:
    """inv_freq (float32) and attention_scaling as modeling_rope_utils computes them."""
    base, dim = rope["base"], rope["rotary_dim"]
    scaling = rope.get("scaling", {"type": "none"})
    # _compute_default_rope_parameters:
    #   inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).to(torch.float) / dim))
    exponent = np.arange(0, dim, 2, dtype=np.int64).astype(np.float32) / f32(dim)
    inv_freq = hf_rdiv(1.0, np.power(f32(base), exponent))
    typ = scaling["type"]
    if typ in ("none", "default"):
        return inv_freq, 1.0
    if typ == "linear":
        # _compute_linear_scaling_rope_parameters: inv_freq /= factor
        return inv_freq / f32(scaling["factor"]), 1.0
    if typ == "llama3":
        # _compute_llama3_parameters
        factor = scaling["factor"]
        low_freq_factor = scaling["low_freq_factor"]
        high_freq_factor = scaling["high_freq_factor"]
        old_context_len = scaling["original_max_position_embeddings"]
        low_freq_wavelen = old_context_len / low_freq_factor          # Python floats
        high_freq_wavelen = old_context_len / high_freq_factor
        wavelen = hf_rdiv(2 * math.pi, inv_freq)                        # 2 * math.pi / inv_freq
        # wavelen < high_freq_wavelen: do nothing; wavelen > low_freq_wavelen: divide by factor
        inv_freq_llama = np.where(wavelen > f32(low_freq_wavelen), inv_freq / f32(factor), inv_freq)
        # otherwise: interpolate between the two, using a smooth factor
        smooth_factor = (hf_rdiv(old_context_len, wavelen) - f32(low_freq_factor)) / f32(high_freq_factor - low_freq_factor)
        smoothed_inv_freq = (f32(1) - smooth_factor) * inv_freq_llama / f32(factor) + smooth_factor * inv_freq_llama
        is_medium_freq = ~(wavelen < f32(high_freq_wavelen)) & ~(wavelen > f32(low_freq_wavelen))
        return np.where(is_medium_freq, smoothed_inv_freq, inv_freq_llama).astype(np.float32), 1.0
    raise SystemExit("hf_rope_numpy: scaling %r is not covered by this example (default, linear, llama3 are)" % typ)


def hf_cos_sin(inv_freq: np.ndarray, attention_scaling: float, position_ids: np.ndarray, dtype: np.dtype):
    """LlamaRotaryEmbedding.forward for one sequence: returns cos, sin [S, rotary_dim] in `dtype`."""
    # inv_freq_expanded = self.inv_freq[None, :, None].float().expand(B, -1, 1)
    # position_ids_expanded = position_ids[:, None, :].float()
    # freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
    #   (inner dimension 1: one float32 product per element, autocast disabled)
    pos = position_ids.astype(np.float32)                     # exact below 2^24
    freqs = pos[:, None] * inv_freq[None, :]
    emb = np.concatenate([freqs, freqs], axis=-1)             # emb = torch.cat((freqs, freqs), dim=-1)
    cos = np.cos(emb) * f32(attention_scaling)                # cos = emb.cos() * self.attention_scaling
    sin = np.sin(emb) * f32(attention_scaling)
    return cos.astype(dtype), sin.astype(dtype)               # return cos.to(dtype=x.dtype), sin.to(...)


def rotate_half(x: np.ndarray) -> np.ndarray:
    """Rotates half the hidden dims of the input."""
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return np.concatenate([-x2, x1], axis=-1)


def hf_apply(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, rotary_dim: int) -> np.ndarray:
    """apply_rotary_pos_emb for q or k laid out [S, heads, head_dim] (cos.unsqueeze over heads);
    partial rotary slices first and concatenates the pass-through channels back (Phi, GPT-NeoX)."""
    x_rot, x_pass = x[..., :rotary_dim], x[..., rotary_dim:]
    c, s = cos[:, None, :], sin[:, None, :]
    out = (x_rot * c) + (rotate_half(x_rot) * s)             # q_embed = (q * cos) + (rotate_half(q) * sin)
    return np.concatenate([out, x_pass], axis=-1)


# --------------------------------------------------------------------------------------------------
# ropecheck
# --------------------------------------------------------------------------------------------------

def run(cmd: List[str], quiet: bool = False) -> subprocess.CompletedProcess:
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if not quiet and p.stderr.strip():
        print(p.stderr.strip(), file=sys.stderr)
    return p


def land(exe: str, golden: str, candidate: str, report_path: str, dt: str) -> Tuple[Optional[str], List[str], dict]:
    """Runs the checker on the candidate's four dtype-`dt` outputs (--only: the set has other dtypes,
    which this candidate does not make; without it the run would be "not tested", exit 3); returns
    (strictest class satisfied or None, every class satisfied, report).

    The report (checker/CHECK_REPORT.md) lists "satisfied_classes", strictest first, whatever the
    verdict class; the exit status (0 pass, 1 fail) is about the default verdict class (fp32-angle)."""
    only = ",".join("%s.%s" % (base, dt) for base in ("q_rot", "k_rot", "cos", "sin"))
    p = run([exe, "check", "--golden", golden, "--candidate", candidate, "--only", only, "--report", report_path],
            quiet=True)
    if p.returncode not in (0, 1) or not os.path.exists(report_path):
        raise SystemExit("hf_rope_numpy: `ropecheck check` failed (exit %d): %s" % (p.returncode, p.stderr.strip()))
    report = json.load(open(report_path))
    sat = [c for c in CLASSES if c in report["satisfied_classes"]]
    return (sat[0] if sat else None), sat, report


def per_tensor(report: dict, cls: Optional[str]) -> List[str]:
    lines = []
    for t in report["tensors"]:
        margin = next((c["worst_margin"] for c in t["classes"] if c["class"] == cls), None)
        lines.append("    %-11s %5.1f%% identical to the correctly rounded value, max %.3g ulp%s" % (
            t["golden"], 100.0 * t["identical"] / max(t["elements"], 1), t["metrics"]["max_ulps"],
            ", worst element at %.2f of the %s bound" % (margin, cls) if margin is not None else ""))
    return lines


def find_ropecheck(arg: Optional[str]) -> str:
    if arg:
        return os.path.abspath(arg)
    here = os.path.dirname(os.path.abspath(__file__))
    built = os.path.join(here, "..", "..", "build", "release", "cli", "ropecheck")
    if os.access(built, os.X_OK):
        return os.path.abspath(built)
    found = shutil.which("ropecheck")
    if not found:
        raise SystemExit("hf_rope_numpy: no ropecheck found; pass --ropecheck PATH")
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ropecheck", help="the ropecheck executable (default: build/release/cli/ropecheck, then PATH)")
    ap.add_argument("--preset", default="llama-3.1-8b", help="a half-split RoPE preset with default, linear "
                    "or llama3 scaling (default llama-3.1-8b)")
    ap.add_argument("--positions", default="0:4096:331,log:131071:4", help="golden positions (ropecheck syntax)")
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--out", help="work folder (kept); default a temporary folder, removed at the end")
    args = ap.parse_args()
    exe = find_ropecheck(args.ropecheck)

    work = os.path.abspath(args.out) if args.out else tempfile.mkdtemp(prefix="hf-rope-numpy-")
    os.makedirs(work, exist_ok=True)
    golden = os.path.join(work, "golden")
    try:
        # 1. golden set
        p = run([exe, "golden", "--preset", args.preset, "--positions", args.positions, "--heads", str(args.heads),
                 "--dtypes", "f32,f16,bf16", "--out", golden, "--overwrite", "--quiet"])
        if p.returncode != 0:
            return 2
        manifest = json.load(open(os.path.join(golden, "manifest.json")))
        rope = manifest["spec"].get("rope")
        if rope is None or rope["layout"] != "half_split" or rope.get("mrope"):
            print("hf_rope_numpy: %s is not a plain half-split RoPE spec (the Llama recipe)" % args.preset,
                  file=sys.stderr)
            return 2

        # 2. inputs, with safetensors' own numpy loader
        inputs = st_numpy.load_file(os.path.join(golden, "inputs.safetensors"))
        positions, q, k = inputs["positions"], inputs["q"], inputs["k"]
        pairs = rope["rotary_dim"] // 2
        print("golden: %s, %d tokens (positions %d..%d), %d heads, head_dim %d, rotary_dim %d"
              % (args.preset, len(positions), positions.min(), positions.max(), q.shape[1], rope["head_dim"],
                 rope["rotary_dim"]))

        # 3.-5. the Hugging Face recipe in each activation dtype, checked
        inv_freq, attention_scaling = hf_inv_freq(rope)
        failures = 0
        for tag, dtype, expected in RECIPES:
            cos, sin = hf_cos_sin(inv_freq, attention_scaling, positions, dtype)
            q_rot = hf_apply(q.astype(dtype), cos, sin, rope["rotary_dim"])   # q, k are exact in bf16
            k_rot = hf_apply(k.astype(dtype), cos, sin, rope["rotary_dim"])
            candidate = os.path.join(work, "hf_llama_%s.safetensors" % tag)
            st_numpy.save_file({"q_rot.%s" % tag: q_rot, "k_rot.%s" % tag: k_rot,
                                # tables in frequency order: the first half of cat(freqs, freqs)
                                "cos.%s" % tag: np.ascontiguousarray(cos[:, :pairs]),
                                "sin.%s" % tag: np.ascontiguousarray(sin[:, :pairs])},
                               candidate, metadata={"recipe": "transformers LlamaRotaryEmbedding, %s activations" % tag})
            best, sat, report = land(exe, golden, candidate, os.path.join(work, "report_%s.json" % tag), tag)
            ok = best is not None and CLASSES.index(best) <= CLASSES.index(expected)
            failures += not ok
            print("HF Llama RoPE, %-4s activations: lands in %-10s (satisfies: %s; violates: %s)  expected %s or "
                  "stricter: %s" % (tag, best or "no class", ", ".join(sat) or "none",
                                    ", ".join(c for c in CLASSES if c not in sat) or "none", expected,
                                    "ok" if ok else "NOT MET"))
            print("\n".join(per_tensor(report, best)))

        # For contrast, a classic precision bug: `model.to(torch.bfloat16)` also casts the rotary
        # module's inv_freq buffer, so forward's `.float()` only widens bf16-rounded frequencies.
        # The angle error then grows like position x 2^-9 instead of 2^-24: not an fp32-angle kernel.
        cos, sin = hf_cos_sin(inv_freq.astype(ml_dtypes.bfloat16).astype(np.float32), attention_scaling,
                              positions, np.dtype(np.float32))
        candidate = os.path.join(work, "bug_bf16_inv_freq_f32.safetensors")
        st_numpy.save_file({"q_rot.f32": hf_apply(q, cos, sin, rope["rotary_dim"]),
                            "k_rot.f32": hf_apply(k, cos, sin, rope["rotary_dim"]),
                            "cos.f32": np.ascontiguousarray(cos[:, :pairs]),
                            "sin.f32": np.ascontiguousarray(sin[:, :pairs])}, candidate)
        best, sat, report = land(exe, golden, candidate, os.path.join(work, "report_bug.json"), "f32")
        caught = "fp32-angle" not in sat
        failures += not caught
        first = min((c["first_violating_position"] for t in report["tensors"] for c in t["classes"]
                     if c["class"] == "fp32-angle" and c["first_violating_position"] is not None), default=None)
        print("bug for contrast, bf16 inv_freq + f32 activations: lands in %s; fp32-angle %s"
              % (best or "no class", "violated from position %s on: caught" % first if caught
                 else "holds: NOT caught (the checker is too lax)"))
        if args.out:
            print("candidates and reports in %s" % work)
        return 1 if failures else 0
    finally:
        if not args.out:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
