#!/usr/bin/env python3
"""Checking from Python vs the CLI on the same data (the 1.2x bar): a Llama-3.1-8B golden set of
131072 positions x 8 heads in bf16, the candidate pair q_rot.bf16 / k_rot.bf16 (the golden values with
one element changed), checked with class fp32-angle, alternating the two ways RUNS times.

    build/py-venv/bin/python bench/python_check_overhead.py --ropecheck build/release/cli/ropecheck \\
        --work /tmp/bench-py [--runs 3] [--positions 0:131072] [--heads 8]

CLI: `ropecheck check --golden SET --candidate cand.safetensors --only q_rot.bf16,k_rot.bf16`, wall time
of the process (golden set read and hashed, candidate read, checked). Python: ropecheck.load(SET) and
ropecheck.check(g, {"q_rot.bf16": q, "k_rot.bf16": k}, only=...) with q, k already NumPy arrays in memory
(what a user holding a kernel's output has): wall and CPU time (user + system) of both calls. Prints
every run, the medians and their ratios (CPU time is the steadier figure on a shared machine).
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import time

import numpy as np
import safetensors.numpy as stn

import ropecheck


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ropecheck", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--positions", default="0:131072")
    ap.add_argument("--heads", type=int, default=8)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    golden_dir, cand = os.path.join(a.work, "golden"), os.path.join(a.work, "cand.safetensors")
    if not os.path.exists(golden_dir):
        subprocess.run([a.ropecheck, "golden", "--preset", "llama-3.1-8b", "--positions", a.positions, "--heads",
                        str(a.heads), "--dtypes", "bf16", "--out", golden_dir, "--quiet"], check=True)
    g = ropecheck.load(golden_dir)
    q, k = np.array(g["q_rot.bf16"]), np.array(g["k_rot.bf16"])
    q[q.shape[0] // 2, 0, 0] = -q[q.shape[0] // 2, 0, 0] + 1
    if not os.path.exists(cand):
        stn.save_file({"q_rot.bf16": q, "k_rot.bf16": k}, cand)
    del g
    only = ["q_rot.bf16", "k_rot.bf16"]
    def cpu(who: int) -> float:
        u = resource.getrusage(who)
        return u.ru_utime + u.ru_stime

    cli_wall, py_wall, cli_cpu, py_cpu = [], [], [], []
    for _ in range(a.runs):
        t, c0 = time.perf_counter(), cpu(resource.RUSAGE_CHILDREN)
        p = subprocess.run([a.ropecheck, "check", "--golden", golden_dir, "--candidate", cand, "--only", ",".join(only)],
                           stdout=subprocess.DEVNULL)
        cli_wall.append(time.perf_counter() - t)
        cli_cpu.append(cpu(resource.RUSAGE_CHILDREN) - c0)
        t, c0 = time.perf_counter(), cpu(resource.RUSAGE_SELF)
        r = ropecheck.check(ropecheck.load(golden_dir), {"q_rot.bf16": q, "k_rot.bf16": k}, only=only)
        py_wall.append(time.perf_counter() - t)
        py_cpu.append(cpu(resource.RUSAGE_SELF) - c0)
        assert p.returncode == 1 and r.verdict == "fail"  # the changed element is caught both ways
    for what, cli, py in (("wall", cli_wall, py_wall), ("CPU", cli_cpu, py_cpu)):
        c, y = statistics.median(cli), statistics.median(py)
        print(f"{what:4}  CLI    {' '.join(f'{x:.2f}' for x in cli)} s, median {c:.2f} s")
        print(f"{what:4}  Python {' '.join(f'{x:.2f}' for x in py)} s, median {y:.2f} s")
        print(f"{what:4}  ratio Python / CLI (medians): {y / c:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
