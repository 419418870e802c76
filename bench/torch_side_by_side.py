#!/usr/bin/env python3
"""PyTorch on CPU doing RoPE the Hugging Face way (eager), side by side with ropecheck's fast kernel.

One process, one run, the same buffers: q [tokens, 32 heads, 128] and k [tokens, 8 heads, 128]
(Llama-3-8B: base 500000, half-split, no scaling), positions 0..tokens-1, in float32 and bfloat16.

  torch    LlamaRotaryEmbedding's cos / sin + apply_rotary_pos_emb, written here op for op from
           /work/shared/research/variants.md section 1.8 (nothing copied from transformers). q and k
           are what HF's attention holds: the projection output [1, S, H, D] viewed as [1, H, S, D]
           by .transpose(1, 2), unsqueeze_dim=1. Timed twice: "cos/sin + apply" (the rotary module
           and the apply, what one forward pays) and "apply only" (cos / sin computed beforehand).
  ours     ropecheck's CPU kernels through their kernel ABI library (ropecheck/kernel_abi.h,
           libropecheck_builtin_kernels.so) with ctypes (bench/kernel_abi_ctypes.py):
           ropecheck_rope_apply for q, then for k, reading float32 inputs (the ABI's x: the stored
           values, exact) and writing into the same [1, S, H, D] storage torch reads, positions from
           the same int64 tensor; recipe and threads set with ropecheck_kernel_configure before each
           pair of calls. It computes cos / sin inline, so its one time compares with both torch times.

Timing: torch.set_num_threads(n) and our threads = n for each n of --threads; --warmup untimed
calls of each implementation, then --reps rounds calling each once in turn (load changes on a shared
machine hit all alike); best and median reported, ratios from the best. GB/s counts the
bytes a single pass must move: q and k read once and written once (2 x (|q| + |k|) x element size);
torch moves more (temporaries), which is the point of the comparison; ours reads float32 inputs (the
kernel ABI's), so in bf16 / f16 it moves 1.5 times that.

Accuracy (once, on fresh copies of the inputs): both outputs against a float64 evaluation in numpy
(exact-enough frequencies base^(-2j/D), angle, cos / sin and rotation in binary64, from the inputs
as stored), max and mean absolute error; and whether our `hf` recipe reproduces torch bit for bit
(the fraction of equal elements of q and k).

    python3 bench/torch_side_by_side.py                          # defaults: about a minute or two
    python3 bench/torch_side_by_side.py --json out.json --reps 9
    python3 bench/torch_side_by_side.py --tokens 512 --reps 1 --warmup 0   # smoke run

The kernel library: --kernel-lib PATH, or $ROPECHECK_BUILTIN_KERNELS, or
build/release/kut/libropecheck_builtin_kernels.so.
Exit status: 0 done, 2 unusable input (bad option, no torch, no kernel library). Needs torch (opt-in:
scripts/install-deps --torch), numpy and ml_dtypes.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DEFAULT_KERNEL_LIB = os.path.join(REPO, "build", "release", "kut", "libropecheck_builtin_kernels.so")
sys.path.insert(0, HERE)
from kernel_abi_ctypes import ABI_VERSION, KernelLibrary  # noqa: E402  (bench/kernel_abi_ctypes.py)


def fail(message: str, code: int = 2) -> "NoReturn":  # type: ignore[name-defined]
    print(f"torch_side_by_side: {message}", file=sys.stderr)
    sys.exit(code)


# --------------------------------------------------------------------------------------------------
# The Hugging Face way, eager (variants.md 1.1 and 1.8), written for this benchmark.
# --------------------------------------------------------------------------------------------------

class HfRotary:
    """LlamaRotaryEmbedding with rope_type "default": inv_freq at init, cos / sin per forward."""

    def __init__(self, torch, head_dim: int, base: float):
        self.torch = torch
        # inv_freq = 1 / base^(arange(0, dim, 2) / dim): int64 arange cast to float32, f32 power.
        exponent = torch.arange(0, head_dim, 2, dtype=torch.int64).to(dtype=torch.float) / head_dim
        self.inv_freq = 1.0 / (base ** exponent)
        self.attention_scaling = 1.0  # "default" rope type

    def __call__(self, x, position_ids):
        torch = self.torch
        with torch.no_grad():
            inv = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
            pos = position_ids[:, None, :].float()
            with torch.autocast(device_type=x.device.type, enabled=False):  # HF forces float32 here
                freqs = (inv.float() @ pos.float()).transpose(1, 2)  # [B, S, D/2], one f32 product each
                emb = torch.cat((freqs, freqs), dim=-1)
                cos = emb.cos() * self.attention_scaling
                sin = emb.sin() * self.attention_scaling
            return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)


def rotate_half(torch, x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rotary_pos_emb(torch, q, k, cos, sin, unsqueeze_dim: int = 1):
    """q * cos + rotate_half(q) * sin in the activation dtype (every * and + rounds to it)."""
    with torch.no_grad():
        cos = cos.unsqueeze(unsqueeze_dim)
        sin = sin.unsqueeze(unsqueeze_dim)
        q_embed = (q * cos) + (rotate_half(torch, q) * sin)
        k_embed = (k * cos) + (rotate_half(torch, k) * sin)
        return q_embed, k_embed


# --------------------------------------------------------------------------------------------------
# Our kernel through ctypes.
# --------------------------------------------------------------------------------------------------

class Ours:
    """rope_apply of ropecheck's CPU kernels through the kernel ABI (ropecheck/kernel_abi.h) with ctypes:
    libropecheck_builtin_kernels.so, configured "RECIPE:threads=N" before each call."""

    def __init__(self, path: str, spec: dict):
        try:
            self.lib = KernelLibrary(path)
        except (OSError, AttributeError) as e:
            fail(f"cannot load the kernel library {path}: {e} (build it: cmake --build <build dir> "
                 "--target ropecheck_builtin_kernels)")
        if self.lib.version != ABI_VERSION:
            fail(f"kernel library {path} has kernel ABI version {self.lib.version}, this script speaks {ABI_VERSION}")
        self.lib.set_spec(spec)
        name = self.lib.name  # "builtin:accurate (avx512)"
        self.cpu_path = name[name.find("(") + 1:name.rfind(")")] if "(" in name else name

    def apply(self, recipe: str, dtype: str, xq, xk, q, k, positions, threads: int) -> None:
        """Rotates the float32 inputs xq, xk [.., S, H, D] (contiguous) into q, k (same shape, `dtype`)."""
        self.lib.configure(f"{recipe}:threads={threads}")
        tokens, q_heads, _ = q.shape[-3:]
        for name, x, out, heads in (("q", xq, q, q_heads), ("k", xk, k, k.shape[-2])):
            self.lib.rope_apply(dtype, name, x.data_ptr(), out.data_ptr(), tokens, heads, positions.data_ptr())


# --------------------------------------------------------------------------------------------------
# Measurement.
# --------------------------------------------------------------------------------------------------

def openmp_runtimes() -> List[str]:
    """The OpenMP runtime libraries mapped into this process (Linux /proc; empty elsewhere)."""
    try:
        with open("/proc/self/maps") as f:
            return sorted({line.split()[-1] for line in f if "gomp" in line or "libomp" in line or "libiomp" in line})
    except OSError:
        return []


def time_round_robin(runs: Sequence[Tuple[str, Callable[[], object]]], warmup: int, reps: int) -> Dict[str, List[float]]:
    """Warm-up calls of each, then `reps` rounds that call each implementation once in turn: a change
    of load on the shared machine then hits every implementation alike instead of one block."""
    for _, fn in runs:
        for _ in range(warmup):
            fn()
    times: Dict[str, List[float]] = {name: [] for name, _ in runs}
    for _ in range(reps):
        for name, fn in runs:
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return times


def float64_rotation(np, x64, positions, head_dim: int, base: float):
    """q or k [S, H, D] rotated in binary64: inv_freq, angle, cos / sin and the rotation."""
    half = head_dim // 2
    inv = np.array([base ** (-(2.0 * j) / head_dim) for j in range(half)], dtype=np.float64)
    theta = positions.astype(np.float64)[:, None] * inv[None, :]  # [S, D/2]
    c = np.cos(theta)[:, None, :]
    s = np.sin(theta)[:, None, :]
    a, b = x64[..., :half], x64[..., half:]
    return np.concatenate((a * c - b * s, b * c + a * s), axis=-1)


def error_stats(np, got64, ref64) -> Dict[str, float]:
    err = np.abs(got64 - ref64)
    return {"max_abs": float(err.max()), "mean_abs": float(err.mean())}


def bits(np, t):
    """A torch tensor's bit patterns as a numpy integer array (bf16 has no numpy dtype)."""
    import torch
    width = {torch.float32: torch.int32, torch.bfloat16: torch.int16, torch.float16: torch.int16}[t.dtype]
    return t.contiguous().view(width).numpy()


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    """The options, checked (exit 2 on a bad one); adds threads_list, dtype_names and recipes."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kernel-lib", default=os.environ.get("ROPECHECK_BUILTIN_KERNELS", DEFAULT_KERNEL_LIB),
                    help="libropecheck_builtin_kernels.so (default $ROPECHECK_BUILTIN_KERNELS or build/release/kut/...)")
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--q-heads", type=int, default=32)
    ap.add_argument("--k-heads", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--base", type=float, default=500000.0)
    ap.add_argument("--dtypes", default="f32,bf16", help="comma-separated: f32, bf16, f16")
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    ap.add_argument("--recipes", default="hf,accurate",
                    help="our recipes to time (the first is the like-for-like one; hf is always checked bit for bit)")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--seed", type=int, default=20261121)
    ap.add_argument("--no-accuracy", action="store_true", help="timings only")
    ap.add_argument("--json", metavar="FILE", help="also write every figure as JSON")
    args = ap.parse_args(argv)

    if args.tokens < 1 or args.q_heads < 1 or args.k_heads < 1:
        fail("--tokens, --q-heads and --k-heads must be >= 1")
    if args.head_dim < 2 or args.head_dim % 2:
        fail(f"--head-dim must be even and >= 2, got {args.head_dim}")
    if not args.base > 1.0:
        fail(f"--base must be > 1, got {args.base}")
    if args.reps < 1 or args.warmup < 0:
        fail("--reps must be >= 1 and --warmup >= 0")
    try:
        args.threads_list = [int(t) for t in args.threads.split(",")]
    except ValueError:
        fail(f"--threads must be comma-separated integers, got '{args.threads}'")
    if any(t < 1 for t in args.threads_list):
        fail(f"--threads must be >= 1, got '{args.threads}'")
    args.dtype_names = args.dtypes.split(",")
    args.recipes = args.recipes.split(",")
    return args


class Bench:
    """One run: the libraries, our kernel library, the inputs, and the figures as they are measured."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        # torch first: its bundled libgomp.so.1 is then the OpenMP runtime our module binds to as well.
        try:
            import torch
        except ImportError as e:
            fail(f"torch is not importable ({e}); it is opt-in: scripts/install-deps --torch")
        import numpy as np
        self.torch, self.np = torch, np
        self.torch_dtypes = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
        for d in args.dtype_names:
            if d not in self.torch_dtypes:
                fail(f"unknown dtype '{d}' in --dtypes (f32, bf16, f16)")
        if not os.path.exists(args.kernel_lib):
            fail(f"no kernel library at {args.kernel_lib} (build the ropecheck_builtin_kernels target, or pass --kernel-lib)")
        spec = {"name": "torch-side-by-side", "family": "rope",
                "rope": {"head_dim": args.head_dim, "rotary_dim": args.head_dim, "base": args.base,
                         "layout": "half_split", "max_position_embeddings": args.tokens, "scaling": {"type": "none"}}}
        self.ours = Ours(args.kernel_lib, spec)
        self.plans = list(dict.fromkeys(args.recipes + ["hf"]))
        for r in self.plans:  # an unknown recipe: exit 2 with the library's message
            try:
                self.ours.lib.configure(r)
            except Exception as e:
                fail(str(e))
        self.S, self.Hq, self.Hk, self.D = args.tokens, args.q_heads, args.k_heads, args.head_dim
        self.results: List[Dict[str, object]] = []
        self.accuracy: List[Dict[str, object]] = []

    def print_environment(self) -> None:
        args, torch, np = self.args, self.torch, self.np
        S, Hq, Hk, D = self.S, self.Hq, self.Hk, self.D
        self.load_start = os.getloadavg()
        self.omp = openmp_runtimes()
        print(f"torch {torch.__version__} ({torch.backends.cpu.get_cpu_capability()}), numpy {np.__version__}, "
              f"python {platform.python_version()}; our CPU path: {self.ours.cpu_path}; "
              f"OpenMP runtime(s) loaded: {', '.join(self.omp) or 'unknown'}")
        print(f"q [{S}, {Hq}, {D}], k [{S}, {Hk}, {D}], positions 0..{S - 1}, base {args.base:g}, half-split; "
              f"inputs N(0,1) from torch.Generator seed {args.seed}; warmup {args.warmup}, reps {args.reps}")
        print(f"load average at start: {self.load_start[0]:.2f} {self.load_start[1]:.2f} {self.load_start[2]:.2f} "
              f"({os.cpu_count()} CPUs)")

    def make_inputs(self) -> None:
        torch, S, D = self.torch, self.S, self.D
        gen = torch.Generator().manual_seed(self.args.seed)
        self.q32 = torch.randn(1, S, self.Hq, D, generator=gen, dtype=torch.float32)
        self.k32 = torch.randn(1, S, self.Hk, D, generator=gen, dtype=torch.float32)
        self.position_ids = torch.arange(S, dtype=torch.int64)[None, :]  # [1, S], contiguous
        self.rotary = HfRotary(torch, D, self.args.base)

    def run_dtype(self, dname: str) -> None:
        """Accuracy (unless --no-accuracy), then the timings, in one dtype."""
        torch = self.torch
        dt = self.torch_dtypes[dname]
        # The projection outputs [1, S, H, D]; HF's attention sees them as [1, H, S, D] views.
        # Copies (.to(float32) alone would alias q32, and our in-place timing calls would rotate it).
        q_store = self.q32.to(dt, copy=True)
        k_store = self.k32.to(dt, copy=True)
        q_hf, k_hf = q_store.transpose(1, 2), k_store.transpose(1, 2)
        # Our kernels take float32 inputs (the kernel ABI's x), here the stored values exactly.
        q_x, k_x = q_store.to(torch.float32, copy=True), k_store.to(torch.float32, copy=True)
        if not self.args.no_accuracy:
            self.measure_accuracy(dname, q_store, k_store, q_hf, k_hf, q_x, k_x)
        self.time_dtype(dname, q_store, k_store, q_hf, k_hf, q_x, k_x)

    def measure_accuracy(self, dname, q_store, k_store, q_hf, k_hf, q_x, k_x) -> None:
        """Once, on fresh copies: every output against float64, and our hf recipe against torch bit for bit."""
        torch, np, D, position_ids = self.torch, self.np, self.D, self.position_ids
        threads = max(self.args.threads_list)
        torch.set_num_threads(threads)
        cos, sin = self.rotary(q_hf, position_ids)
        tq, tk = apply_rotary_pos_emb(torch, q_hf, k_hf, cos, sin)
        tq, tk = tq.transpose(1, 2).contiguous(), tk.transpose(1, 2).contiguous()  # back to [1, S, H, D]
        ours = {}
        for r in self.plans:
            oq, ok = q_store.clone(), k_store.clone()
            self.ours.apply(r, dname, q_x, k_x, oq, ok, position_ids, threads)
            ours[r] = (oq, ok)
        pos_np = position_ids[0].numpy()
        entry: Dict[str, object] = {"dtype": dname}
        for name, (x_in, outs) in {"q": (q_store, [("torch", tq)] + [(f"ours-{r}", ours[r][0]) for r in ours]),
                                   "k": (k_store, [("torch", tk)] + [(f"ours-{r}", ours[r][1]) for r in ours])}.items():
            ref = float64_rotation(np, x_in[0].double().numpy(), pos_np, D, self.args.base)
            for impl, out in outs:
                entry[f"{name}.{impl}"] = error_stats(np, out[0].double().numpy(), ref)
            del ref
        bt = np.concatenate([bits(np, tq).ravel(), bits(np, tk).ravel()])
        bo = np.concatenate([bits(np, ours["hf"][0]).ravel(), bits(np, ours["hf"][1]).ravel()])
        equal = int(np.count_nonzero(bt == bo))
        diff = torch.cat([(tq.double() - ours["hf"][0].double()).abs().flatten(),
                          (tk.double() - ours["hf"][1].double()).abs().flatten()])
        entry["hf_vs_torch"] = {"equal": equal, "elements": int(bt.size), "fraction_equal": equal / bt.size,
                                "max_abs_diff": float(diff.max())}
        self.accuracy.append(entry)

    def time_dtype(self, dname, q_store, k_store, q_hf, k_hf, q_x, k_x) -> None:
        """torch both ways and each of our recipes, round robin, for each thread count."""
        torch, args, rotary, position_ids = self.torch, self.args, self.rotary, self.position_ids
        useful_bytes = 2 * (q_store.numel() + k_store.numel()) * q_store.element_size()
        cos_pre, sin_pre = rotary(q_hf, position_ids)
        for n in args.threads_list:
            torch.set_num_threads(n)

            def torch_full():
                c, s = rotary(q_hf, position_ids)
                return apply_rotary_pos_emb(torch, q_hf, k_hf, c, s)

            def torch_apply():
                return apply_rotary_pos_emb(torch, q_hf, k_hf, cos_pre, sin_pre)

            runs: List[Tuple[str, Callable[[], object]]] = [("torch cos/sin+apply", torch_full),
                                                            ("torch apply only", torch_apply)]
            for r in args.recipes:
                # From the float32 inputs into the storage torch reads (the values stay bounded).
                runs.append((f"ours {r}", lambda r=r: self.ours.apply(r, dname, q_x, k_x, q_store, k_store, position_ids, n)))
            row_times = time_round_robin(runs, args.warmup, args.reps)
            for impl, _ in runs:
                ts = row_times[impl]
                best, med = min(ts), statistics.median(ts)
                self.results.append({"dtype": dname, "threads": n, "impl": impl, "best_ms": best * 1e3,
                                     "median_ms": med * 1e3, "gbps_best": useful_bytes / best / 1e9,
                                     "times_ms": [t * 1e3 for t in ts]})
            full_best = min(row_times["torch cos/sin+apply"])
            apply_best = min(row_times["torch apply only"])
            for res in self.results[-len(runs):]:
                if str(res["impl"]).startswith("ours"):
                    res["ratio_vs_torch_full"] = res["best_ms"] / (full_best * 1e3)
                    res["ratio_vs_torch_apply"] = res["best_ms"] / (apply_best * 1e3)

    def print_report(self) -> None:
        print()
        print("time in ms (best and median of the reps); GB/s = 2 x (|q| + |k|) bytes / best time;")
        print("ratio = our best time / torch's best time (below 1: ours is faster), in parentheses its inverse, "
              "the speed-up")
        header = f"{'dtype':5} {'thr':>3}  {'implementation':22} {'best':>9} {'median':>9} {'GB/s':>7}  " \
                 f"{'vs torch cos/sin+apply':>22}  {'vs torch apply only':>19}"
        print(header)
        print("-" * len(header))
        for res in self.results:
            full = res.get("ratio_vs_torch_full")
            app = res.get("ratio_vs_torch_apply")
            fr = f"{full:.3f} ({1 / full:.1f}x)" if full else ""
            ar = f"{app:.3f} ({1 / app:.1f}x)" if app else ""
            print(f"{res['dtype']:5} {res['threads']:>3}  {res['impl']:22} {res['best_ms']:9.2f} {res['median_ms']:9.2f} "
                  f"{res['gbps_best']:7.2f}  {fr:>22}  {ar:>19}")
        if self.accuracy:
            self.print_accuracy()
        print()
        print(f"load average at end: {self.load_end[0]:.2f} {self.load_end[1]:.2f} {self.load_end[2]:.2f}")

    def print_accuracy(self) -> None:
        print()
        print("accuracy against a float64 evaluation (max / mean absolute error over every element)")
        impls = ["torch"] + [f"ours-{r}" for r in self.plans]
        print(f"{'dtype':5} {'tensor':6} " + " ".join(f"{i:>24}" for i in impls))
        for entry in self.accuracy:
            for name in ("q", "k"):
                cells = []
                for i in impls:
                    st = entry[f"{name}.{i}"]
                    cells.append(f"{st['max_abs']:.3e} / {st['mean_abs']:.2e}")  # type: ignore[index]
                print(f"{entry['dtype']:5} {name:6} " + " ".join(f"{c:>24}" for c in cells))
        print()
        print("our hf recipe against torch, bit for bit (q and k together)")
        for entry in self.accuracy:
            h = entry["hf_vs_torch"]
            print(f"  {entry['dtype']:5} {h['equal']}/{h['elements']} equal ({100 * h['fraction_equal']:.4f} %), "  # type: ignore[index]
                  f"max |difference| {h['max_abs_diff']:.3e}")  # type: ignore[index]

    def write_json(self, path: str) -> None:
        args, torch, np = self.args, self.torch, self.np
        doc = {
            "config": {"tokens": self.S, "q_heads": self.Hq, "k_heads": self.Hk, "head_dim": self.D, "base": args.base,
                       "dtypes": args.dtype_names, "threads": args.threads_list, "recipes": args.recipes,
                       "reps": args.reps, "warmup": args.warmup, "seed": args.seed},
            "environment": {"torch": torch.__version__, "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
                            "numpy": np.__version__, "python": platform.python_version(),
                            "our_cpu_path": self.ours.cpu_path, "openmp_runtimes": self.omp, "cpus": os.cpu_count(),
                            "load_start": list(self.load_start), "load_end": list(self.load_end)},
            "timings": self.results,
            "accuracy": self.accuracy,
        }
        with open(path, "w") as f:
            json.dump(doc, f, indent=1)
        print(f"wrote {path}")


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    bench = Bench(args)
    bench.print_environment()
    bench.make_inputs()
    for dname in args.dtype_names:
        bench.run_dtype(dname)
    bench.load_end = os.getloadavg()
    bench.print_report()
    if args.json:
        bench.write_json(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
