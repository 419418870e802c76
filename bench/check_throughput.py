#!/usr/bin/env python3
"""How fast `ropecheck check` reads and judges a golden set, against reading the same files (a benchmark,
not a test: nothing is asserted). Writes a golden set (or reuses one), warms the page cache with it, then
in one run measures, on the files each check must read:

  read          a sequential read of the files, one after the other (4 MiB read()s)
  read+hash     the same read with SHA-256 (Python's hashlib: OpenSSL, as ropecheck hashes), one thread:
                what verifying the files against the manifest costs at the least
  sha256sum     coreutils' sha256sum of the same files
  check         `ropecheck check --kernel KERNEL --no-diagnose`, with --only (default q_rot.f32,k_rot.f32)
                and without it (every output): elements judged per second, GB/s of the files it must read,
                the ratio to read+hash's GB/s, and its peak RSS (the child's getrusage)

Each timing is the best of --repeat runs. The load average is printed with the figures (the machine may be
shared). docs/measurements.md has the figures and the commands.

Usage:
    python3 bench/check_throughput.py --ropecheck build/release/cli/ropecheck --dir /tmp/big \\
        --preset llama-3.1-8b --positions 0:131072 --heads 8 --dtypes f32,bf16
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time


def load() -> str:
    return "load %.2f %.2f %.2f" % os.getloadavg()


def timed(fn, repeat: int):
    best, value = None, None
    for _ in range(repeat):
        t = time.perf_counter()
        value = fn()
        dt = time.perf_counter() - t
        best = dt if best is None else min(best, dt)
    return best, value


def read_files(files: list[str], hash_them: bool) -> int:
    buf = bytearray(4 << 20)
    view = memoryview(buf)
    total = 0
    for f in files:
        h = hashlib.sha256() if hash_them else None
        fd = os.open(f, os.O_RDONLY)
        try:
            while True:
                n = os.readv(fd, [buf])
                if n == 0:
                    break
                if h is not None:
                    h.update(view[:n])
                total += n
        finally:
            os.close(fd)
    return total


def run_child(cmd: list[str]) -> tuple[int, float, float, str]:
    """exit code, wall seconds, peak RSS in MiB, stderr."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = proc.stderr.read().decode(errors="replace")
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, time.perf_counter() - t, usage.ru_maxrss / 1024.0, err.strip()


def files_read(manifest: dict, outputs: list[str]) -> list[str]:
    """The data files a kernel check of `outputs` reads: the inputs' file (positions, q, k) and, per
    output, its f64 truth's and its own."""
    by_name = {t["name"]: t["file"] for t in manifest["tensors"]}
    names = ["positions", "q", "k"] + [o.split(".")[0] + ".f64" for o in outputs] + outputs
    wanted = {by_name[n] for n in names if n in by_name}
    return [f["file"] for f in manifest["files"] if f["file"] in wanted]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ropecheck", required=True)
    p.add_argument("--dir", required=True, help="the golden set's folder (written when it has no manifest.json)")
    p.add_argument("--preset", default="llama-3.1-8b")
    p.add_argument("--positions", default="0:131072")
    p.add_argument("--heads", default="8")
    p.add_argument("--dtypes", default="f32,bf16")
    p.add_argument("--kernel", default="builtin:hf")
    p.add_argument("--only", default="q_rot.f32,k_rot.f32")
    p.add_argument("--threads", default="0")
    p.add_argument("--max-memory", default="", help="passed to check (default: check's own, 1 GiB)")
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--skip-full", action="store_true", help="only the --only check")
    o = p.parse_args()
    rc = os.path.abspath(o.ropecheck)
    if not os.path.exists(os.path.join(o.dir, "manifest.json")):
        t = time.perf_counter()
        subprocess.run([rc, "golden", "--preset", o.preset, "--positions", o.positions, "--heads", o.heads, "--dtypes",
                        o.dtypes, "--out", o.dir, "--quiet"], check=True, stdout=subprocess.DEVNULL)
        print("golden set written in %.1f s (%s)" % (time.perf_counter() - t, load()))
    with open(os.path.join(o.dir, "manifest.json")) as f:
        manifest = json.load(f)
    outputs = [t["name"] for t in manifest["tensors"] if t["role"] == "output"]
    sizes = {f["file"]: f["bytes"] for f in manifest["files"]}
    print("set %s: %d tokens, %s, %.2f GB in %d files" % (o.dir, manifest["positions"]["tokens"], ", ".join(manifest["dtypes"]),
                                                          sum(sizes.values()) / 1e9, len(sizes)))
    read_files([os.path.join(o.dir, f) for f in sizes], False)  # the page cache holds the set from here
    runs = [("--only " + o.only, o.only.split(","))]
    if not o.skip_full:
        runs.append(("every output", outputs))
    for title, outs in runs:
        files = [os.path.join(o.dir, f) for f in files_read(manifest, outs)]
        nbytes = sum(os.path.getsize(f) for f in files)
        t_read, _ = timed(lambda: read_files(files, False), o.repeat)
        t_hash, _ = timed(lambda: read_files(files, True), o.repeat)
        t_sum, _ = timed(lambda: subprocess.run(["sha256sum", *files], check=True, stdout=subprocess.DEVNULL), 1)
        cmd = [rc, "check", "--golden", o.dir, "--kernel", o.kernel, "--no-diagnose", "--threads", o.threads,
               "--report", os.path.join(o.dir, "..", "bench-report.json")]
        if title.startswith("--only"):
            cmd += ["--only", o.only]
        if o.max_memory:
            cmd += ["--max-memory", o.max_memory]
        best = None
        for _ in range(o.repeat):
            code, wall, rss, err = run_child(cmd)
            if code not in (0, 1, 3):
                print("check failed (exit %d): %s" % (code, err))
                return 1
            best = (wall, rss) if best is None or wall < best[0] else best
        with open(os.path.join(o.dir, "..", "bench-report.json")) as f:
            elements = sum(t["elements"] for t in json.load(f)["tensors"])
        wall, rss = best
        print("\ncheck %s: %d elements, %d files, %.2f GB to read (%s)" % (title, elements, len(files), nbytes / 1e9, load()))
        print("  read       %7.2f s  %6.2f GB/s" % (t_read, nbytes / t_read / 1e9))
        print("  read+hash  %7.2f s  %6.2f GB/s  (one thread)" % (t_hash, nbytes / t_hash / 1e9))
        print("  sha256sum  %7.2f s  %6.2f GB/s" % (t_sum, nbytes / t_sum / 1e9))
        print("  check      %7.2f s  %6.2f GB/s  %.1f M elements/s, %.2fx read+hash, %.2fx read, peak RSS %.0f MiB"
              % (wall, nbytes / wall / 1e9, elements / wall / 1e6, t_hash / wall, t_read / wall, rss))
    return 0


if __name__ == "__main__":
    sys.exit(main())
