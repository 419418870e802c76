#!/usr/bin/env python3
"""Interop of golden sets with real Python clients.

Usage:
    python3 tests/python/test_interop.py --ropecheck build/release/cli/ropecheck [--keep DIR] [-v]

Generates golden sets with `ropecheck golden` into a temporary folder (safetensors and --format npy;
RoPE presets with 2 heads, YaRN with an attention factor, an interleaved partial-rotary preset, the
multimodal presets qwen2-vl-7b (chunked) and qwen3-vl-8b (interleaved) with image grids and triples,
and the sinusoidal presets fairseq-transformer and transformer-base) and checks them with the
libraries users actually have:

  * safetensors: `safetensors.numpy.load_file` (F64/F32/F16/I64; it has no BF16) and
    `safetensors.safe_open(..., framework="np")` after `import ml_dtypes` (BF16 too); the byte layout
    equals what the reference writer (`safetensors.numpy.save`) produces for the same tensors;
  * .npz: `np.load`; bf16 members are `<u2` bit patterns read with `.view(ml_dtypes.bfloat16)`;
    members are ZIP_STORED with valid CRCs and byte-identical to `np.save` of the loaded array;
  * manifest: every listed file's size and sha256, every tensor's file, dtype and shape, nothing extra;
    positions int64 [tokens] or [3, tokens] (multimodal) and equal to the documented --positions
    grammar; q and k f32 [tokens, heads, head_dim] and exactly representable in bf16;
  * values: every f32/f16/bf16 output equals the float64 copy rounded once (round-to-nearest-even) to
    that dtype; the rounding is computed here from float64 bits (numpy's f64->f32 and f64->f16 casts
    are single roundings and are used as a second opinion; ml_dtypes' f64->bf16 cast rounds via f32,
    i.e. twice, so it is not used for that); an element where the two differ only counts as correct
    if the exact value, computed with mpmath, rounds directly to the golden value (double rounding);
  * the float64 copy itself is the correctly rounded exact value: a few hundred elements per set are
    recomputed with mpmath at 200 bits from the inverse frequencies and attention factor printed by
    `ropecheck spec --json` (45 significant digits) and rounded to f64, f32, f16 and bf16 here;
  * the same set written as safetensors and as .npz holds the same values;
  * determinism: the same command twice, and with --threads 1 vs --threads 2, gives byte-identical
    folders (manifest included).

PyTorch is not used: PyPI's Linux torch wheels pull gigabytes of CUDA packages, and numpy serves
numpy in its place. Prints one line per failed check (every check with -v) and a final line
"N passed, M failed"; exits 0 only when every check passed.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zipfile
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import ml_dtypes  # noqa: F401  (registers bfloat16 with numpy; safe_open(framework="np") needs it)
import mpmath
import safetensors
import safetensors.numpy as st_numpy
from safetensors import safe_open

BF16 = np.dtype(ml_dtypes.bfloat16)

# Golden sets to generate: (id, preset, positions, heads, format). Small on purpose (whole run well
# under a minute on 2 cores).
CASES: List[Tuple[str, str, str, int, str]] = [
    ("llama31-st", "llama-3.1-8b", "log:131071:4,4097,100003", 2, "safetensors"),
    ("llama31-npz", "llama-3.1-8b", "log:131071:4,4097,100003", 2, "npy"),
    ("gpt-oss-yarn-st", "gpt-oss-20b", "0:3,4095,65537,131071", 1, "safetensors"),
    ("gpt-j-partial-npz", "gpt-j-6b", "0:5,2047", 2, "npy"),
    ("qwen2-vl-st", "qwen2-vl-7b", "0:8,grid:8:2:3,20,30/12/7", 2, "safetensors"),
    ("qwen2-vl-npz", "qwen2-vl-7b", "0:8,grid:8:2:3,20,30/12/7", 2, "npy"),
    ("qwen3-vl-st", "qwen3-vl-8b", "0:4,grid:4:3:2,100/40/70", 1, "safetensors"),
    ("fairseq-st", "fairseq-transformer", "0:6,1000,65535", 1, "safetensors"),
    ("fairseq-npz", "fairseq-transformer", "0:6,1000,65535", 1, "npy"),
    ("vaswani-st", "transformer-base", "0:3,511,8191", 1, "safetensors"),
]
DTYPES = "f32,f16,bf16"

# Determinism runs: (id, preset, positions, heads, format); each is generated four times (default
# threads twice, --threads 1, --threads 2) and the folders compared byte for byte.
DETERMINISM: List[Tuple[str, str, str, int, str]] = [
    ("det-llama31-st", "llama-3.1-8b", "0:131072:61,log:131071:2", 2, "safetensors"),
    ("det-qwen2-vl-npz", "qwen2-vl-7b", "0:600,grid:600:16:16", 2, "npy"),
    ("det-fairseq-st", "fairseq-transformer", "0:1024:3", 1, "safetensors"),
]

MP_PREC = 200          # bits for the mpmath spot check
SPOT_PER_TENSOR = 48   # sampled elements per output tensor (f64 copy), plus the first and last element

# IEEE binary formats: significand bits (with the hidden one), emin, emax, numpy dtype, uint view.
FORMATS: Dict[str, Tuple[int, int, int, np.dtype, np.dtype]] = {
    "f64": (53, -1022, 1023, np.dtype(np.float64), np.dtype(np.uint64)),
    "f32": (24, -126, 127, np.dtype(np.float32), np.dtype(np.uint32)),
    "f16": (11, -14, 15, np.dtype(np.float16), np.dtype(np.uint16)),
    "bf16": (8, -126, 127, BF16, np.dtype(np.uint16)),
}
MANIFEST_DTYPES = {"f64": np.dtype(np.float64), "f32": np.dtype(np.float32), "f16": np.dtype(np.float16),
                   "bf16": BF16, "i64": np.dtype(np.int64), "i32": np.dtype(np.int32)}


# --------------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------------

class Results:
    def __init__(self, verbose: bool) -> None:
        self.passed = 0
        self.failed = 0
        self.verbose = verbose
        self.notes: List[str] = []

    def check(self, name: str, ok: bool, detail: str = "") -> bool:
        if ok:
            self.passed += 1
            if self.verbose:
                print("  ok    %s%s" % (name, (": " + detail) if detail else ""))
        else:
            self.failed += 1
            print("  FAIL  %s%s" % (name, (": " + detail) if detail else ""))
        return ok

    def note(self, text: str) -> None:
        self.notes.append(text)
        print("  note  " + text)


# --------------------------------------------------------------------------------------------------
# Correct rounding, computed here
# --------------------------------------------------------------------------------------------------

def rne_from_f64(x: np.ndarray, fmt: str) -> np.ndarray:
    """Round float64 values once, to nearest even, to `fmt`; returns an array of that dtype.

    Exact: scaling by a power of two and np.rint (ties to even) are exact on binary64, and the
    rounded value has at most `p` significant bits, so the final astype only relabels it."""
    p, emin, emax, dt, _ = FORMATS[fmt]
    x = np.asarray(x, dtype=np.float64)
    finite = np.isfinite(x)
    xf = np.where(finite, x, 0.0)
    _, e = np.frexp(np.abs(xf))                 # |x| = m 2^e, m in [0.5, 1): the top bit is 2^(e-1)
    q = np.maximum(e - p, emin - (p - 1))       # exponent of the ulp (subnormals: fixed quantum)
    r = np.ldexp(np.rint(np.ldexp(xf, -q)), q)
    max_finite = (2.0 - 2.0 ** (1 - p)) * 2.0 ** emax
    r = np.where(np.abs(r) > max_finite, np.copysign(np.inf, r), r)
    r = np.where(finite, r, x)
    with np.errstate(over="ignore"):
        return r.astype(dt)


def round_mpf(x: mpmath.mpf, fmt: str) -> float:
    """Round an mpmath value once, to nearest even, to `fmt` (returned as the Python float holding it)."""
    p, emin, emax, _, _ = FORMATS[fmt]
    sign, man, exp, _bc = x._mpf_
    if not man:
        if x._mpf_ == mpmath.libmp.fzero:
            return 0.0
        raise ValueError("non-finite %r" % (x,))
    man = int(man)
    top = exp + man.bit_length() - 1
    q = max(top - (p - 1), emin - (p - 1))
    if exp >= q:
        n, e = man << (exp - q), q
    else:
        sh = q - exp
        n = man >> sh
        rem = man - (n << sh)
        half = 1 << (sh - 1)
        if rem > half or (rem == half and (n & 1)):
            n += 1
        e = q
    if n and n.bit_length() + e - 1 > emax:     # |rounded| >= 2^(emax+1): overflow
        v = math.inf
    else:
        v = math.ldexp(float(n), e)             # n <= 2^p: float(n) is exact
    return -v if sign else v


def bits(a: np.ndarray, fmt: str) -> np.ndarray:
    return np.ascontiguousarray(a).view(FORMATS[fmt][4])


def self_test_rounding(res: Results) -> None:
    """The rounding helpers on hand-made ties and near-ties, and the ml_dtypes cast's behaviour."""
    cases = [  # (float64 input, fmt, expected)
        (1 + 2.0 ** -8 + 2.0 ** -40, "bf16", 1 + 2.0 ** -7),   # just above a bf16 tie: up
        (1 + 2.0 ** -8, "bf16", 1.0),                           # exact tie: to even (down)
        (1 + 3 * 2.0 ** -8, "bf16", 1 + 2.0 ** -6),             # exact tie: to even (up)
        (1 + 2.0 ** -11 + 2.0 ** -40, "f16", 1 + 2.0 ** -10),
        (1 + 2.0 ** -11, "f16", 1.0),
        (1 + 2.0 ** -24 + 2.0 ** -50, "f32", 1 + 2.0 ** -23),
        (1 + 2.0 ** -24, "f32", 1.0),
        (-(1 + 2.0 ** -8 + 2.0 ** -40), "bf16", -(1 + 2.0 ** -7)),
        (2.0 ** -133 * 1.5, "bf16", 2.0 ** -132),                # bf16 subnormal tie -> even
        (2.0 ** -25 * 1.0000001, "f16", 2.0 ** -24),             # f16 subnormal, above half the quantum
        (65520.0, "f16", math.inf),                              # f16 overflow at the tie
        (65519.99, "f16", 65504.0),
    ]
    ok = True
    detail = []
    for x, fmt, want in cases:
        got = float(rne_from_f64(np.array([x]), fmt).astype(np.float64)[0])
        got_mp = round_mpf(mpmath.mpf(x), fmt)
        if got != want or got_mp != want:
            ok = False
            detail.append("%r -> %s: numpy-rint %r, mpf %r, want %r" % (x, fmt, got, got_mp, want))
    res.check("rounding helpers on ties, subnormals, overflow", ok, "; ".join(detail))
    x = np.array([1 + 2.0 ** -8 + 2.0 ** -40])
    via = float(x.astype(BF16).astype(np.float64)[0])
    if via != 1 + 2.0 ** -7:
        res.note("ml_dtypes %s casts float64 -> bfloat16 via float32 (double rounding: "
                 "1 + 2^-8 + 2^-40 -> %r, correct is 1 + 2^-7); bf16 rounding is computed here"
                 % (ml_dtypes.__version__, via))
    h = float(np.array([1 + 2.0 ** -11 + 2.0 ** -40]).astype(np.float16).astype(np.float64)[0])
    res.check("numpy float64 -> float16 cast is a single rounding", h == 1 + 2.0 ** -10, repr(h))


# --------------------------------------------------------------------------------------------------
# The --positions grammar (core/include/ropecheck/core/positions.hpp), written from its comment
# --------------------------------------------------------------------------------------------------

def expected_positions(argument: str) -> List[Tuple[int, int, int]]:
    out: List[Tuple[int, int, int]] = []
    for item in argument.split(","):
        c = item.split(":")
        if "/" in item:
            t, h, w = (int(v) for v in item.split("/"))
            out.append((t, h, w))
        elif c[0] == "log":
            mx, k = int(c[1]), int(c[2])
            pts = {0}
            e = 0
            while (1 << e) <= mx + 1:
                p2 = 1 << e
                if 0 < p2 - 1 <= mx:
                    pts.add(p2 - 1)        # the last position before each power of two
                for m in range(k):
                    v = p2 * (k + m) // k
                    if v <= mx:
                        pts.add(v)
                e += 1
            out += [(p, p, p) for p in sorted(pts)]
        elif c[0] == "grid":
            s, hh, ww = int(c[1]), int(c[2]), int(c[3])
            out += [(s, s + r, s + col) for r in range(hh) for col in range(ww)]
        elif len(c) == 1:
            p = int(item)
            out.append((p, p, p))
        else:
            a, b = int(c[0]), int(c[1])
            step = int(c[2]) if len(c) == 3 else 1
            out += [(p, p, p) for p in range(a, b, step)]
    return out


# --------------------------------------------------------------------------------------------------
# Running ropecheck
# --------------------------------------------------------------------------------------------------

def run(cmd: Sequence[str]) -> subprocess.CompletedProcess:
    return subprocess.run(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def golden(exe: str, out: str, preset: str, positions: str, heads: int, fmt: str,
           extra: Sequence[str] = ()) -> subprocess.CompletedProcess:
    return run([exe, "golden", "--preset", preset, "--positions", positions, "--heads", str(heads),
                "--dtypes", DTYPES, "--format", fmt, "--out", out, "--quiet", *extra])


# --------------------------------------------------------------------------------------------------
# Loading with the real clients
# --------------------------------------------------------------------------------------------------

def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def st_header(raw: bytes) -> Tuple[int, Dict[str, Any]]:
    n = struct.unpack("<Q", raw[:8])[0]
    return n, json.loads(raw[8:8 + n].decode("utf-8"))


def load_safetensors(res: Results, cid: str, path: str) -> Dict[str, np.ndarray]:
    fname = os.path.basename(path)
    with safe_open(path, framework="np") as f:
        keys = list(f.keys())
        meta = f.metadata()
        tensors = {k: f.get_tensor(k) for k in keys}
    res.check("%s: %s opens with safe_open(framework='np')" % (cid, fname), len(keys) > 0)
    has_bf16 = any(v.dtype == BF16 for v in tensors.values())
    if not has_bf16:
        plain = st_numpy.load_file(path)
        same = set(plain) == set(tensors) and all(
            plain[k].dtype == tensors[k].dtype and plain[k].shape == tensors[k].shape
            and np.array_equal(plain[k].view(np.uint8), tensors[k].view(np.uint8)) for k in plain)
        res.check("%s: %s loads with safetensors.numpy.load_file, same as safe_open" % (cid, fname), same)
    # The byte layout of the reference writer: same header length, same offsets, same data bytes.
    raw = open(path, "rb").read()
    n, hdr = st_header(raw)
    as_plain = {k: (v.view(np.uint16) if v.dtype == BF16 else v) for k, v in tensors.items()}
    ref = st_numpy.save(as_plain, metadata=meta)
    n2, hdr2 = st_header(ref)
    offs = {k: v["data_offsets"] for k, v in hdr.items() if k != "__metadata__"}
    offs2 = {k: v["data_offsets"] for k, v in hdr2.items() if k != "__metadata__"}
    # (BF16 is saved as U16 there, a shorter header string: only the lengths may then differ)
    same_len = n == n2 or has_bf16
    res.check("%s: %s laid out like safetensors' own writer (alignment order, 8-byte header padding)"
              % (cid, fname), same_len and n % 8 == 0 and offs == offs2 and raw[8 + n:] == ref[8 + n2:],
              "header %d vs %d bytes, offsets %s vs %s" % (n, n2, offs, offs2) if offs != offs2 or n != n2 else "")
    return tensors


def load_npz(res: Results, cid: str, path: str) -> Dict[str, np.ndarray]:
    fname = os.path.basename(path)
    with zipfile.ZipFile(path) as z:
        infos = z.infolist()
        bad = z.testzip()
        res.check("%s: %s is a valid ZIP (CRCs), members ZIP_STORED named <tensor>.npy" % (cid, fname),
                  bad is None and all(i.compress_type == zipfile.ZIP_STORED and i.filename.endswith(".npy")
                                      for i in infos), "bad member %r" % bad if bad else "")
        members = {i.filename: z.read(i.filename) for i in infos}
    with np.load(path) as npz:
        tensors = {k: npz[k] for k in npz.files}
    same_bytes = []
    for name, raw in members.items():
        b = io.BytesIO()
        np.save(b, tensors[name[:-4]])
        same_bytes.append(b.getvalue() == raw)
    res.check("%s: %s loads with np.load; every member byte-identical to np.save of it" % (cid, fname),
              all(same_bytes) and set(tensors) == {m[:-4] for m in members})
    return tensors


def load_set(res: Results, cid: str, d: str, manifest: dict) -> Dict[str, np.ndarray]:
    """All tensors of a set as numpy arrays (bf16 as ml_dtypes.bfloat16), checked against the manifest."""
    by_file: Dict[str, Dict[str, np.ndarray]] = {}
    for fe in manifest["files"]:
        path = os.path.join(d, fe["file"])
        if fe["file"].endswith(".safetensors"):
            by_file[fe["file"]] = load_safetensors(res, cid, path)
        else:
            by_file[fe["file"]] = load_npz(res, cid, path)
    out: Dict[str, np.ndarray] = {}
    listed: Dict[str, set] = {}
    for t in manifest["tensors"]:
        listed.setdefault(t["file"], set()).add(t["name"])
        arr = by_file.get(t["file"], {}).get(t["name"])
        if not res.check("%s: tensor %s present in %s" % (cid, t["name"], t["file"]), arr is not None):
            continue
        want = MANIFEST_DTYPES[t["dtype"]]
        if t["dtype"] == "bf16" and t["file"].endswith(".npz"):
            ok = (arr.dtype == np.dtype("<u2") and t.get("npy_storage") == "uint16 bit patterns")
            res.check("%s: %s stored in .npz as <u2 bit patterns (manifest says so)" % (cid, t["name"]), ok,
                      "dtype %s, npy_storage %r" % (arr.dtype, t.get("npy_storage")))
            arr = arr.view(BF16)
        res.check("%s: %s dtype %s and shape %s as in the manifest" % (cid, t["name"], t["dtype"], t["shape"]),
                  arr.dtype == want and list(arr.shape) == list(t["shape"]),
                  "file has %s %s" % (arr.dtype, list(arr.shape)))
        out[t["name"]] = arr
    for f, tensors in by_file.items():
        extra = set(tensors) - listed.get(f, set())
        res.check("%s: %s holds no tensor the manifest does not list" % (cid, f), not extra, str(sorted(extra)))
    return out


# --------------------------------------------------------------------------------------------------
# The exact values (mpmath), from the spec ropecheck prints
# --------------------------------------------------------------------------------------------------

class Exact:
    def __init__(self, spec_out: dict, tensors: Dict[str, np.ndarray]) -> None:
        mpmath.mp.prec = MP_PREC
        self.spec = spec_out["spec"]
        self.family = self.spec["family"]
        pos = tensors["positions"].astype(np.int64)
        self.pos3 = pos if pos.ndim == 2 else np.stack([pos, pos, pos])
        if self.family == "rope":
            r = self.spec["rope"]
            self.inv = [mpmath.mpf(s) for s in spec_out["inverse_frequencies"]]
            self.att = mpmath.mpf(spec_out["attention_factor"])
            self.layout = r["layout"]
            self.head_dim = r["head_dim"]
            proportional = r.get("scaling", {}).get("type") == "proportional"
            self.width = r["head_dim"] if proportional else r["rotary_dim"]
            self.axes = self._axes(len(self.inv), r.get("mrope"))
            self.q = tensors["q"].astype(np.float64)
            self.k = tensors["k"].astype(np.float64)
        else:
            s = self.spec["sinusoidal"]
            self.w = [mpmath.mpf(v) for v in spec_out["frequencies"]]
            self.d = s["d_model"]
            self.layout = s["layout"]
            self.kind = s["frequencies"]
            self.offset = int(s.get("position_offset", 0))
        self._cs: Dict[Tuple[int, int], Tuple[mpmath.mpf, mpmath.mpf]] = {}

    @staticmethod
    def _axes(pairs: int, mrope: Optional[dict]) -> List[int]:
        if not mrope:
            return [0] * pairs
        t, h, w = mrope["section"]
        axes = []
        for f in range(pairs):
            if mrope.get("interleaved"):
                axes.append(1 if (f % 3 == 1 and f < 3 * h) else 2 if (f % 3 == 2 and f < 3 * w) else 0)
            else:
                axes.append(0 if f < t else 1 if f < t + h else 2)
        return axes

    def _cos_sin(self, p: int, w: mpmath.mpf, key: Tuple[int, int]):
        if key not in self._cs:
            self._cs[key] = mpmath.cos_sin(p * w)
        return self._cs[key]

    def rope_cs(self, tok: int, j: int):
        p = int(self.pos3[self.axes[j], tok])
        return self._cos_sin(p, self.inv[j], (tok, j))

    def value(self, base: str, idx: Tuple[int, ...]) -> mpmath.mpf:
        if base in ("cos", "sin"):
            c, s = self.rope_cs(idx[0], idx[1])
            return c if base == "cos" else s
        if base in ("q_rot", "k_rot"):
            tok, h, ch = idx
            x = self.q if base == "q_rot" else self.k
            if ch >= self.width:
                return mpmath.mpf(x[tok, h, ch])               # pass-through channel, copied
            if self.layout == "half_split":
                half = self.width // 2
                j, first = (ch, True) if ch < half else (ch - half, False)
                a, b = x[tok, h, j], x[tok, h, j + half]
            else:
                j, first = ch // 2, ch % 2 == 0
                a, b = x[tok, h, 2 * j], x[tok, h, 2 * j + 1]
            c, s = self.rope_cs(tok, j)
            a, b = mpmath.mpf(a), mpmath.mpf(b)
            return self.att * (a * c - b * s) if first else self.att * (b * c + a * s)
        if base == "pe":
            tok, col = idx
            q = int(self.pos3[0, tok]) + self.offset
            if self.kind == "vaswani":
                ns = (self.d + 1) // 2
                if self.layout == "interleaved":
                    i, is_sin = col // 2, col % 2 == 0
                else:
                    i, is_sin = (col, True) if col < ns else (col - ns, False)
            else:
                n = self.d // 2
                if col >= 2 * n:
                    return mpmath.mpf(0)
                if self.layout == "interleaved":
                    i, is_sin = col // 2, col % 2 == 0
                else:
                    i, is_sin = (col, True) if col < n else (col - n, False)
            c, s = self._cos_sin(q, self.w[i], (q, -1 - i))
            return s if is_sin else c
        raise KeyError(base)


# --------------------------------------------------------------------------------------------------
# Checks on one set
# --------------------------------------------------------------------------------------------------

def check_files(res: Results, cid: str, d: str, manifest: dict) -> None:
    res.check("%s: manifest format ropecheck-golden v1" % cid,
              manifest.get("format") == "ropecheck-golden" and manifest.get("format_version") == 1)
    listed = {fe["file"] for fe in manifest["files"]}
    present = set(os.listdir(d)) - {"manifest.json"}
    res.check("%s: folder holds exactly the files the manifest lists" % cid, listed == present,
              "listed %s, present %s" % (sorted(listed), sorted(present)))
    for fe in manifest["files"]:
        path = os.path.join(d, fe["file"])
        if not os.path.exists(path):
            continue
        size, digest = os.path.getsize(path), sha256_file(path)
        res.check("%s: %s size and sha256 match the manifest" % (cid, fe["file"]),
                  size == fe["bytes"] and digest == fe["sha256"],
                  "size %d vs %d, sha256 %s vs %s" % (size, fe["bytes"], digest, fe["sha256"]))


def check_inputs(res: Results, cid: str, manifest: dict, spec_out: dict, t: Dict[str, np.ndarray]) -> None:
    pos = t.get("positions")
    mp_info = manifest["positions"]
    multimodal = spec_out["spec"].get("family") == "rope" and bool(spec_out["spec"]["rope"].get("mrope"))
    want_shape = [3, mp_info["tokens"]] if multimodal else [mp_info["tokens"]]
    if pos is None:
        return
    res.check("%s: positions int64 %s (%s)" % (cid, want_shape, "t,h,w streams" if multimodal else "1-D"),
              pos.dtype == np.int64 and list(pos.shape) == want_shape
              and mp_info["streams"] == (3 if multimodal else 1),
              "%s %s, streams %s" % (pos.dtype, list(pos.shape), mp_info["streams"]))
    exp_cmp = expected_positions(mp_info["argument"])
    got = [tuple(int(v) for v in pos[:, i]) for i in range(pos.shape[1])] if pos.ndim == 2 else \
        [(int(v),) * 3 for v in pos]
    missing = sorted(set(exp_cmp) - set(got))
    extra = sorted(set(got) - set(exp_cmp))
    res.check("%s: positions follow the documented grammar for %r" % (cid, mp_info["argument"]),
              got == exp_cmp, "missing %s, unexpected %s, %d vs %d tokens"
              % ([m[0] if m[0] == m[1] == m[2] else m for m in missing][:8],
                 [m[0] if m[0] == m[1] == m[2] else m for m in extra][:8], len(got), len(exp_cmp)))
    flat = pos.reshape(-1)
    res.check("%s: manifest positions min/max/tokens agree with the tensor" % cid,
              int(flat.min()) == mp_info["min"] and int(flat.max()) == mp_info["max"]
              and pos.shape[-1] == mp_info["tokens"])
    if spec_out["spec"]["family"] != "rope":
        res.check("%s: sinusoidal set has no q/k" % cid, "q" not in t and "k" not in t)
        return
    heads = manifest["generator"]["heads"]
    head_dim = spec_out["spec"]["rope"]["head_dim"]
    for name in ("q", "k"):
        x = t.get(name)
        if x is None:
            res.check("%s: %s present" % (cid, name), False)
            continue
        res.check("%s: %s f32 [tokens, heads, head_dim] = %s" % (cid, name, [mp_info["tokens"], heads, head_dim]),
                  x.dtype == np.float32 and list(x.shape) == [mp_info["tokens"], heads, head_dim])
        back = x.astype(BF16).astype(np.float32)
        res.check("%s: %s finite, exactly representable in bf16" % (cid, name),
                  bool(np.all(np.isfinite(x))) and np.array_equal(back.view(np.uint32), x.view(np.uint32)),
                  "%d values not bf16" % int(np.count_nonzero(back.view(np.uint32) != x.view(np.uint32))))
    if "q" in t and "k" in t:
        res.check("%s: q and k differ and are not all zero" % cid,
                  not np.array_equal(t["q"], t["k"]) and bool(np.any(t["q"] != 0)))


def output_bases(t: Dict[str, np.ndarray]) -> List[str]:
    return sorted({n.split(".")[0] for n in t if n.endswith(".f64")})


def check_rounding(res: Results, cid: str, t: Dict[str, np.ndarray], exact: Exact, manifest: dict) -> None:
    """Every f32/f16/bf16 output equals its f64 copy rounded once to that dtype."""
    for base in output_bases(t):
        f64 = t[base + ".f64"]
        res.check("%s: %s.f64 finite" % (cid, base), bool(np.all(np.isfinite(f64))))
        for fmt in ("f32", "f16", "bf16"):
            name = "%s.%s" % (base, fmt)
            if name not in t or fmt not in manifest["dtypes"]:
                continue
            g = t[name]
            mine = rne_from_f64(f64, fmt)
            diff = np.flatnonzero(bits(mine, fmt).reshape(-1) != bits(g, fmt).reshape(-1))
            if fmt in ("f32", "f16"):   # numpy's casts round once: a second opinion on the helper
                cast = f64.astype(FORMATS[fmt][3])
                res.check("%s: %s: numpy astype and the rounding helper agree" % (cid, name),
                          np.array_equal(bits(cast, fmt), bits(mine, fmt)))
            explained, unexplained = 0, []
            for flat in diff[:64]:
                idx = np.unravel_index(int(flat), g.shape)
                ex = exact.value(base, tuple(int(i) for i in idx))
                if round_mpf(ex, fmt) == float(g[idx].astype(np.float64)):
                    explained += 1     # a genuine double-rounding case: golden is right, f64 path is not
                else:
                    unexplained.append("%s%s: golden %r, round(f64 %r) = %r, exact %s" % (
                        name, tuple(int(i) for i in idx), float(g[idx].astype(np.float64)), float(f64[idx]),
                        float(mine[idx].astype(np.float64)), mpmath.nstr(ex, 25)))
            ok = len(diff) == explained and len(diff) <= 64
            res.check("%s: %s == %s.f64 rounded once (RNE) to %s, %d values" % (cid, name, base, fmt, g.size), ok,
                      "%d differ; %s" % (len(diff), "; ".join(unexplained[:4])))
            if explained:
                res.note("%s: %s: %d element(s) where rounding the f64 copy would double-round; golden "
                         "matches the exact value" % (cid, name, explained))


def check_spot(res: Results, cid: str, t: Dict[str, np.ndarray], exact: Exact, manifest: dict, seed: int) -> int:
    """The f64 copy (and every other dtype) against mpmath at MP_PREC bits, on sampled elements."""
    rng = np.random.default_rng(seed)
    total = 0
    for base in output_bases(t):
        f64 = t[base + ".f64"]
        n = f64.size
        picks = set(rng.choice(n, size=min(SPOT_PER_TENSOR, n), replace=False).tolist()) | {0, n - 1}
        bad: Dict[str, List[str]] = {}
        for flat in sorted(picks):
            idx = tuple(int(i) for i in np.unravel_index(flat, f64.shape))
            ex = exact.value(base, idx)
            total += 1
            for fmt in manifest["dtypes"]:
                name = "%s.%s" % (base, fmt)
                if name not in t:
                    continue
                want = round_mpf(ex, fmt)
                got = float(t[name][idx].astype(np.float64))
                if not (got == want and math.copysign(1, got) == math.copysign(1, want)):
                    bad.setdefault(fmt, []).append("%s%s: golden %r, exact %s rounds to %r" % (
                        name, idx, got, mpmath.nstr(ex, 30), want))
        for fmt in manifest["dtypes"]:
            if "%s.%s" % (base, fmt) in t:
                res.check("%s: %s.%s == mpmath (%d bits) rounded to %s on %d sampled elements"
                          % (cid, base, fmt, MP_PREC, fmt, len(picks)), fmt not in bad,
                          "; ".join(bad.get(fmt, [])[:4]) + (" (%d bad)" % len(bad[fmt]) if fmt in bad else ""))
    return total


def check_attention_factor(res: Results, cid: str, manifest: dict, spec_out: dict) -> None:
    if spec_out["spec"]["family"] != "rope":
        return
    a = mpmath.mpf(manifest["attention_factor"])
    b = mpmath.mpf(spec_out["attention_factor"])
    res.check("%s: manifest attention_factor equals `ropecheck spec` (%s)" % (cid, spec_out["attention_factor"][:12]),
              abs(a - b) <= abs(b) * mpmath.mpf(10) ** -38)


def compare_sets(res: Results, a_id: str, b_id: str, ta: Dict[str, np.ndarray], tb: Dict[str, np.ndarray]) -> None:
    same = set(ta) == set(tb) and all(
        ta[n].dtype == tb[n].dtype and ta[n].shape == tb[n].shape
        and np.array_equal(np.ascontiguousarray(ta[n]).view(np.uint8), np.ascontiguousarray(tb[n]).view(np.uint8))
        for n in ta)
    res.check("%s vs %s: safetensors and .npz hold identical tensors" % (a_id, b_id), same)


def folder_bytes(d: str) -> Dict[str, bytes]:
    return {f: open(os.path.join(d, f), "rb").read() for f in sorted(os.listdir(d))}


# --------------------------------------------------------------------------------------------------

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ropecheck", required=True, help="path to the ropecheck executable")
    ap.add_argument("--keep", help="write the golden sets here (must not exist) instead of a temp dir")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every check, not only failures")
    args = ap.parse_args()
    exe = os.path.abspath(args.ropecheck)
    if not os.access(exe, os.X_OK):
        print("test_interop: %s is not executable" % exe, file=sys.stderr)
        return 2
    print("test_interop: numpy %s, ml_dtypes %s, safetensors %s, mpmath %s; %s"
          % (np.__version__, ml_dtypes.__version__, safetensors.__version__, mpmath.__version__, exe))
    res = Results(args.verbose)
    t_start = time.monotonic()
    if args.keep:
        os.makedirs(args.keep)
        root = args.keep
    else:
        root = tempfile.mkdtemp(prefix="ropecheck-interop-")
    gen_time = 0.0
    spots = 0
    try:
        self_test_rounding(res)
        loaded: Dict[str, Dict[str, np.ndarray]] = {}
        spec_cache: Dict[Tuple[str, int], dict] = {}
        for n, (cid, preset, positions, heads, fmt) in enumerate(CASES):
            print("%s: ropecheck golden --preset %s --positions %s --heads %d --format %s"
                  % (cid, preset, positions, heads, fmt))
            d = os.path.join(root, cid)
            t0 = time.monotonic()
            p = golden(exe, d, preset, positions, heads, fmt)
            gen_time += time.monotonic() - t0
            if not res.check("%s: ropecheck golden exits 0" % cid, p.returncode == 0,
                             "rc %d: %s" % (p.returncode, p.stderr.strip()[-400:])):
                continue
            manifest = json.load(open(os.path.join(d, "manifest.json")))
            key = (preset, manifest.get("seq_len"))   # null for sinusoidal specs
            if key not in spec_cache:
                seq = ["--seq-len", str(int(key[1]))] if key[1] is not None else []
                sp = run([exe, "spec", "--preset", preset, "--json", *seq])
                if not res.check("%s: ropecheck spec --json exits 0" % cid, sp.returncode == 0, sp.stderr.strip()):
                    continue
                spec_cache[key] = json.loads(sp.stdout)
            spec_out = spec_cache[key]
            res.check("%s: manifest spec equals `ropecheck spec --json`'s spec" % cid,
                      manifest["spec"] == spec_out["spec"])
            check_files(res, cid, d, manifest)
            t = load_set(res, cid, d, manifest)
            loaded[cid] = t
            check_inputs(res, cid, manifest, spec_out, t)
            check_attention_factor(res, cid, manifest, spec_out)
            exact = Exact(spec_out, t)
            check_rounding(res, cid, t, exact, manifest)
            spots += check_spot(res, cid, t, exact, manifest, seed=1000 + n)
        # The same command in both formats holds the same values.
        by_cmd: Dict[Tuple[str, str, int], List[str]] = {}
        for cid, preset, positions, heads, fmt in CASES:
            if cid in loaded:
                by_cmd.setdefault((preset, positions, heads), []).append(cid)
        for ids in by_cmd.values():
            for other in ids[1:]:
                compare_sets(res, ids[0], other, loaded[ids[0]], loaded[other])
        # Determinism.
        for cid, preset, positions, heads, fmt in DETERMINISM:
            print("%s: 4 runs (default threads x2, --threads 1, --threads 2) of --preset %s --positions %s"
                  % (cid, preset, positions))
            runs = [("again", []), ("threads1", ["--threads", "1"]), ("threads2", ["--threads", "2"])]
            base = os.path.join(root, cid + "-first")
            t0 = time.monotonic()
            p = golden(exe, base, preset, positions, heads, fmt)
            gen_time += time.monotonic() - t0
            if not res.check("%s: ropecheck golden exits 0" % cid, p.returncode == 0, p.stderr.strip()[-400:]):
                continue
            ref = folder_bytes(base)
            for tag, extra in runs:
                d = os.path.join(root, "%s-%s" % (cid, tag))
                t0 = time.monotonic()
                p = golden(exe, d, preset, positions, heads, fmt, extra)
                gen_time += time.monotonic() - t0
                if not res.check("%s-%s: ropecheck golden exits 0" % (cid, tag), p.returncode == 0, p.stderr.strip()):
                    continue
                other = folder_bytes(d)
                differ = [f for f in sorted(set(ref) | set(other)) if ref.get(f) != other.get(f)]
                res.check("%s: %s gives a byte-identical folder (%d files, manifest included)"
                          % (cid, tag, len(ref)), not differ, "differ: %s" % differ)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    elapsed = time.monotonic() - t_start
    print("test_interop: %d mpmath spot values; %.1f s total (%.1f s in ropecheck golden)" % (spots, elapsed, gen_time))
    print("%d passed, %d failed" % (res.passed, res.failed))
    return 0 if res.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
