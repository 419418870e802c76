#!/usr/bin/env python3
"""Cross-check a golden set's attached files (golden --scores, --attention) against mpmath.

Usage:
    python3 tests/python/mpmath_golden_attention.py --ropecheck build/cli/ropecheck --presets-dir reference/presets

Writes small sets with `ropecheck golden --scores ... --attention ... [--softcap] [--sinks]`, reads their
scores.safetensors and attention.safetensors with a plain safetensors parser (struct, no numpy), and
evaluates every stored value again with mpmath_attention.py's independent formulas (mpmath_reference.py's
rotation, then scale, soft-cap, softmax with sinks, the weighted sum), rounded once to each dtype; every
stored value must equal mpmath's bit for bit. This proves the files, not only the engine behind them
(mpmath_attention.py proves the engine): the inputs the set documents (score_q, score_k, attention_q,
attention_k, attention_v, attention_sinks), the pairs' and the block's order, the mask and the layout.
Prints one line per set and "N passed, M failed"; exits 0 only when everything matched.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mpmath import mp  # noqa: E402

import mpmath_attention as ma  # noqa: E402
import mpmath_reference as ref  # noqa: E402

SIZES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8}


def decode(dtype: str, raw: bytes) -> list:
    if dtype == "BF16":  # the upper half of an f32
        return [struct.unpack("<f", b"\0\0" + raw[i:i + 2])[0] for i in range(0, len(raw), 2)]
    fmt = {"F64": "d", "F32": "f", "F16": "e", "I64": "q"}[dtype]
    return list(struct.unpack("<%d%s" % (len(raw) // SIZES[dtype], fmt), raw))


def read_safetensors(path: str) -> dict:
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, t in header.items():
        if name != "__metadata__":
            a, b = t["data_offsets"]
            out[name] = decode(t["dtype"], data[8 + n + a:8 + n + b])
    return out


SETS = [
    ("llama-3.1-8b", ["--positions", "0:6", "--heads", "2", "--scores", "causal:0:4,dist:70000:1,pair:3:9",
                      "--attention", "causal:60000:6:4", "--seed", "11"], {}),
    ("gpt-oss-20b", ["--positions", "0:5", "--heads", "2", "--attention", "causal:131066:5:3", "--sinks",
                     "--seed", "12"], {"sinks": True}),
    ("gemma-3-4b-global", ["--positions", "0:4", "--scores", "tail:4096:1:1021", "--attention", "full:4090:4",
                           "--softcap", "50", "--seed", "13"], {"softcap": 50.0, "noncausal": True}),
]


def certified(fn):
    prec = 256 + 2 * 131072 .bit_length()
    while True:
        with mp.workprec(prec):
            want = fn()
        if want is not None:
            return want
        if prec >= ma.MAX_PRECISION:
            raise RuntimeError("could not certify at %d bits" % prec)
        prec *= 2


def check_set(tool: str, presets: str, preset: str, args: list, extra: dict, work: str) -> list:
    out = os.path.join(work, preset)
    subprocess.run([tool, "golden", "--preset", preset, "--out", out, "--quiet", "--dtypes", "f32,f16,bf16"] + args,
                   check=True, capture_output=True)
    manifest = json.load(open(os.path.join(out, "manifest.json")))
    spec = ref.load_spec(os.path.join(presets, preset + ".json"))
    bad, n = [], 0
    if "scores" in manifest:
        s = read_safetensors(os.path.join(out, manifest["scores"]["file"]))
        pos = s["score_positions"]
        tokens = sorted(set(pos))
        case = {"group": manifest["scores"]["group"], "softcap": manifest["scores"]["softcap"]}
        dump = {"positions": [[p] * 3 for p in tokens],
                "q": [x.hex() for _ in tokens for x in s["score_q"]],
                "k": [x.hex() for _ in tokens for x in s["score_k"]], "v": []}
        pb = ma.Problem(spec, {k: v for k, v in case.items() if v is not None}, dump)
        qt = [tokens.index(p) for p in pos[0::2]]
        kt = [tokens.index(p) for p in pos[1::2]]
        want = certified(lambda: ma.expected_pairs(pb, ref.rope_params(pb.rs, manifest["seq_len"]), qt, kt))
        for f in ("f64", "f32", "f16", "bf16"):
            bad += ma.compare("scores." + f, [x.hex() for x in s["scores." + f]], want[f])
            n += len(want[f])
    if "attention" in manifest:
        a = read_safetensors(os.path.join(out, manifest["attention"]["file"]))
        rec = manifest["attention"]
        case = {"group": rec["group"], "window": rec["window"], "noncausal": not rec["causal"]}
        if rec["softcap"] is not None:
            case["softcap"] = rec["softcap"]
        if rec["sinks"]:
            case["sinks"] = a["attention_sinks"]
        dump = {"positions": [[p] * 3 for p in a["attention_positions"]], "q": [x.hex() for x in a["attention_q"]],
                "k": [x.hex() for x in a["attention_k"]], "v": [x.hex() for x in a["attention_v"]]}
        pb = ma.Problem(spec, case, dump)
        want = certified(lambda: ma.expected_block(pb, ref.rope_params(pb.rs, manifest["seq_len"])))
        for f in ("f64", "f32", "f16", "bf16"):
            bad += ma.compare("attention_out." + f, [x.hex() for x in a["attention_out." + f]], want[1][f])
            n += len(want[1][f])
    for key, value in extra.items():  # the options reached the record
        rec = manifest.get("attention", manifest.get("scores"))
        if key == "noncausal" and rec.get("causal") is not (not value):
            bad.append("record: causal is %s" % rec.get("causal"))
        if key in ("sinks", "softcap") and rec.get(key) != value:
            bad.append("record: %s is %s, wanted %s" % (key, rec.get(key), value))
    return bad, n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ropecheck", required=True)
    ap.add_argument("--presets-dir", required=True)
    args = ap.parse_args()
    passed = failed = 0
    with tempfile.TemporaryDirectory() as work:
        for preset, cli, extra in SETS:
            t0 = time.time()
            bad, n = check_set(args.ropecheck, args.presets_dir, preset, cli, extra, work)
            print("%-18s %-90s %6d values: %s (%.1f s)" % (preset, " ".join(cli), n, "ok" if not bad and n else "FAILED",
                                                           time.time() - t0))
            bad += [] if n else ["no value compared"]
            for b in bad[:10]:
                print("    " + b)
            passed += not bad
            failed += bool(bad)
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
