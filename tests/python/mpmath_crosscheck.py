#!/usr/bin/env python3
"""Cross-check the C++ exact reference (reference_dump) against the independent mpmath reference.

Usage:
    python3 tests/python/mpmath_crosscheck.py --dump-tool build/tests/tools/reference_dump \
        --presets-dir reference/presets --specs-dir tests/python/specs

For every spec (each *.json in --presets-dir and in --specs-dir) and a fixed position list (always
including 0, 1, 2, 7, 4095, 4096, 65537, 2^20 and 2^24 - 1; multimodal specs get equal triples and mixed
ones such as (p, p//3, p//7)), runs

    reference_dump --spec FILE --positions LIST [--seq-len N]

and compares every number it prints bit for bit with the mpmath value correctly rounded to binary64
(frequencies, attention factor, per position cos, sin and rotated vector for RoPE, and the rotated k_pe
key of an MLA spec; the encoding row for sinusoidal specs). dynamic and longrope specs are also run with explicit sequence lengths on both sides
of their switch points. Prints one line per spec and a final line "N passed, M failed" (specs); exits 0
only when nothing mismatched and every run succeeded.
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import struct
import subprocess
import sys
import time
from typing import Any, List, Optional, Sequence, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpmath_reference as ref  # noqa: E402

# Always includes 0, 1, 2, 7, 4095, 4096, 65537, 2^20 and 2^24 - 1 (the largest position a float32
# holds exactly in every integer below it); the others add band edges and odd values.
POSITIONS_1D = [0, 1, 2, 3, 7, 100, 4095, 4096, 8191, 8192, 65535, 65537, 131071, 131072, 1000003,
                1 << 20, (1 << 23) + 1, (1 << 24) - 3, (1 << 24) - 1]


def mrope_positions() -> List[Tuple[int, int, int]]:
    out = [(p, p, p) for p in POSITIONS_1D]
    out += [(p, p // 3, p // 7) for p in POSITIONS_1D if p > 2 and p not in (3, 8191, 131071)]
    out += [(0, 4095, (1 << 24) - 1), ((1 << 24) - 1, 65537, 0), (1 << 20, (1 << 24) - 1, 7)]
    return out


def seq_len_runs(spec: dict) -> List[Optional[int]]:
    """Sequence lengths to run a spec with (None = no --seq-len)."""
    runs: List[Optional[int]] = [None]
    if spec.get("family") != "rope":
        return runs
    r = spec.get("rope", {})
    sc = r.get("scaling", {"type": "none"})
    L = int(r.get("max_position_embeddings", 0))
    typ = sc.get("type")
    if typ == "dynamic":
        runs += sorted({max(L // 2, 1), L, 4 * L + 3})
    elif typ == "longrope":
        Lo = int(sc.get("original_max_position_embeddings", L))
        runs += sorted({Lo, Lo + 1, 2 * Lo})
    return runs


def bits(v: float) -> int:
    return struct.unpack("<q", struct.pack("<d", v))[0]


def ulp_distance(a: float, b: float) -> int:
    def key(v):
        i = bits(v)
        return i if i >= 0 else -(i & 0x7FFFFFFFFFFFFFFF)
    return abs(key(a) - key(b))


class RunError(Exception):
    pass


def parse_hex(s: Any, what: str) -> float:
    if not isinstance(s, str):
        raise RunError("%s: expected a hex string, got %r" % (what, s))
    try:
        v = float.fromhex(s)
    except ValueError:
        raise RunError("%s: cannot parse %r" % (what, s))
    if not math.isfinite(v):
        raise RunError("%s: non-finite value %r" % (what, s))
    return v


def run_dump(tool: str, spec_path: str, positions: Sequence[Any], seq_len: Optional[int],
             timeout: float) -> dict:
    def fmt(p):
        return ":".join(str(v) for v in p) if isinstance(p, tuple) else str(p)
    cmd = [tool, "--spec", spec_path, "--positions", ",".join(fmt(p) for p in positions)]
    if seq_len is not None:
        cmd += ["--seq-len", str(seq_len)]
    try:
        cp = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RunError("cannot run %s: %s" % (" ".join(cmd), e))
    if cp.returncode != 0:
        raise RunError("%s exited with %d: %s" % (" ".join(cmd), cp.returncode, cp.stderr.strip()[-2000:]))
    try:
        return json.loads(cp.stdout)
    except ValueError as e:
        raise RunError("dump output is not JSON (%s): %s" % (e, cp.stdout[:300]))


class Checker:
    def __init__(self, name: str, max_print: int):
        self.name = name
        self.max_print = max_print
        self.compared = 0
        self.mismatches = 0
        self.errors: List[str] = []
        self.notes: List[str] = []

    def value(self, run: str, quantity: str, index: Any, position: Any, got_hex: Any, exp: ref.Value):
        got = parse_hex(got_hex, "%s %s[%s] position %s" % (run, quantity, index, position))
        self.compared += 1
        if bits(got) == bits(exp.f64):
            return
        self.mismatches += 1
        if self.mismatches <= self.max_print:
            print("  MISMATCH %s%s: %s[%s] position=%s dump=%s mpmath=%s (%d ulp) exact=%s"
                  % (self.name, run, quantity, index, json.dumps(position), got_hex, ref.hex64(exp.f64),
                     ulp_distance(got, exp.f64), ref.mp_str(exp.mp, 40)))
        elif self.mismatches == self.max_print + 1:
            print("  ... further mismatches of %s not printed" % self.name)

    def error(self, msg: str):
        self.errors.append(msg)
        print("  ERROR %s: %s" % (self.name, msg))


def check_run(chk: Checker, spec: dict, spec_path: str, tool: str, seq_len: Optional[int], timeout: float):
    run = " (no --seq-len)" if seq_len is None else " (--seq-len %d)" % seq_len
    fam = spec["family"]
    is_mrope = fam == "rope" and "mrope" in spec.get("rope", {})
    positions: List[Any] = mrope_positions() if is_mrope else list(POSITIONS_1D)
    out = run_dump(tool, spec_path, positions, seq_len, timeout)
    if not isinstance(out, dict):
        raise RunError("dump output is not an object")
    if out.get("family") != fam:
        raise RunError("family %r, expected %r" % (out.get("family"), fam))
    rows = out.get("rows")
    if not isinstance(rows, list) or len(rows) != len(positions):
        raise RunError("expected %d rows, got %r" % (len(positions), None if rows is None else len(rows)))

    key_res = None
    if fam == "rope":
        x = [parse_hex(h, "input[%d]" % i) for i, h in enumerate(out.get("input") or [])]
        res = ref.compute(spec, positions, x=x, seq_len=seq_len)
        rs = ref.parse_spec(spec)
        if rs.key_layout == "k_pe":  # MLA: the k_pe key is the input's rotary block, rotated alone
            o = rs.rotary_offset
            key_res = ref.compute_rope(rs.key_spec(), positions, x[o:o + rs.rotary_dim], seq_len)
    else:
        res = ref.compute(spec, positions)

    if res.precision != res.formula_precision:
        chk.notes.append("mpmath needed %d bits (formula %d) to certify the rounding%s"
                         % (res.precision, res.formula_precision, run))
    wpb = out.get("working_precision_bits")
    if wpb != res.formula_precision:
        chk.notes.append("working_precision_bits%s: dump %r, formula gives %d"
                         % (run, wpb, res.formula_precision))

    def compare_list(quantity, got, exp, position):
        if not isinstance(got, list) or len(got) != len(exp):
            raise RunError("%s at position %s: expected %d values, got %r"
                           % (quantity, position, len(exp), None if not isinstance(got, list) else len(got)))
        for i, (g, e) in enumerate(zip(got, exp)):
            chk.value(run, quantity, i, position, g, e)

    compare_list("frequencies", out.get("frequencies"), res.frequencies, None)
    if fam == "rope":
        chk.value(run, "attention_factor", 0, None, out.get("attention_factor"), res.attention_factor)
    for k, (row, erow) in enumerate(zip(rows, res.rows)):
        want_pos = erow["position"]
        if row.get("position") != want_pos:
            raise RunError("row %d: position %r, expected %r" % (k, row.get("position"), want_pos))
        if fam == "rope":
            compare_list("cos", row.get("cos"), erow["cos"], want_pos)
            compare_list("sin", row.get("sin"), erow["sin"], want_pos)
            compare_list("rotated", row.get("rotated"), erow["rotated"], want_pos)
            if key_res is not None:
                compare_list("rotated_key", row.get("rotated_key"), key_res.rows[k]["rotated"], want_pos)
        else:
            compare_list("pe", row.get("pe"), erow["pe"], want_pos)


def collect_specs(dirs: Sequence[str]) -> List[str]:
    files: List[str] = []
    for d in dirs:
        if d:
            if not os.path.isdir(d):
                print("warning: %s is not a directory" % d, file=sys.stderr)
                continue
            files += sorted(glob.glob(os.path.join(d, "*.json")))
    return files


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dump-tool", required=True, help="path to the reference_dump executable")
    ap.add_argument("--presets-dir", default=None, help="directory of preset *.json specs")
    ap.add_argument("--specs-dir", default=None, help="directory of extra *.json specs")
    ap.add_argument("--only", action="append", default=[], help="check only specs with this name (repeatable)")
    ap.add_argument("--max-print", type=int, default=20, help="mismatch lines printed per spec")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per dump-tool run")
    ap.add_argument("--longrope-default-seq-len", choices=["max_position_embeddings", "none"],
                    default=ref.LONGROPE_DEFAULT_SEQ_LEN,
                    help="what a longrope spec does when --seq-len is not given: 'none' = short "
                         "factors (SPEC_FORMAT, default), 'max_position_embeddings' = s = L")
    ap.add_argument("-v", "--verbose", action="store_true", help="print notes (e.g. working precision)")
    args = ap.parse_args(argv)
    ref.LONGROPE_DEFAULT_SEQ_LEN = args.longrope_default_seq_len

    files = collect_specs([args.presets_dir, args.specs_dir])
    if not files:
        print("no spec files found")
        print("0 passed, 0 failed")
        return 2
    t0 = time.time()
    passed = failed = 0
    seen = {}
    for path in files:
        try:
            spec = ref.load_spec(path)
            name = spec.get("name") if isinstance(spec, dict) else None
        except (OSError, ValueError) as e:
            spec, name = None, None
            load_err = str(e)
        label = name or os.path.basename(path)
        if args.only and label not in args.only:
            continue
        chk = Checker(label, args.max_print)
        if spec is None:
            chk.error("cannot read %s: %s" % (path, load_err))
        else:
            if label in seen:
                chk.error("duplicate spec name (also in %s)" % seen[label])
            seen[label] = path
            try:
                ref.parse_spec(spec)
                runs = seq_len_runs(spec)
            except ref.SpecError as e:
                chk.error("mpmath reference rejects the spec: %s" % e)
                runs = []
            for sl in runs:
                try:
                    check_run(chk, spec, path, args.dump_tool, sl, args.timeout)
                except RunError as e:
                    chk.error(("" if sl is None else "seq_len %d: " % sl) + str(e))
                except (ref.SpecError, ValueError, RuntimeError) as e:
                    chk.error(("" if sl is None else "seq_len %d: " % sl) + "mpmath: %s" % e)
        ok = chk.mismatches == 0 and not chk.errors
        if args.verbose:
            for n in chk.notes:
                print("  note %s: %s" % (label, n))
        print("%s: %d numbers compared, %d mismatches%s%s"
              % (label, chk.compared, chk.mismatches,
                 "" if not chk.errors else ", %d errors" % len(chk.errors), "" if ok else "  FAIL"))
        if ok:
            passed += 1
        else:
            failed += 1
    if args.verbose:
        print("elapsed %.1f s" % (time.time() - t0))
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
