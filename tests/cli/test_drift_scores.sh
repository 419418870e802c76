#!/usr/bin/env bash
# `ropecheck drift --scores` (drift/DRIFT.md, "Scores"): the files and their columns, one stdout line per
# kernel, the recipes ordered as their rotations are (bf16-positions far above accurate), and without
# gnuplot (--no-plots) the script still written. Bad input is in hostile_inputs.py.
# Usage: test_drift_scores.sh ROPECHECK
set -u
rc_bin="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

out="$tmp/scores"
"$rc_bin" drift --preset llama-3.1-8b --scores --recipes builtin:accurate,builtin:bf16-positions --heads 2 \
  --pairs dist:100000:4,tail:100001:1:997 --no-plots --out "$out" >"$tmp/stdout" 2>"$tmp/stderr"
code=$?
[ "$code" -eq 0 ] || { cat "$tmp/stdout" "$tmp/stderr"; fail "drift --scores exited $code"; }
for f in scores.json scores_pairs.csv scores_rows.csv scores_bins.csv scores_plot_data.csv scores.gp; do
  [ -s "$out/$f" ] || fail "missing or empty $f"
done
[ -e "$out/scores-distance.png" ] && fail "--no-plots wrote a PNG"
grep -q "^  bf16-positions " "$tmp/stdout" || { cat "$tmp/stdout"; fail "no stdout line for bf16-positions"; }
[ "$(head -1 "$out/scores_pairs.csv")" = "candidate,query,key,head,exact,score,error,f32_units,bf16_units,rel,bound_ratio,nonfinite" ] \
  || fail "scores_pairs.csv header: $(head -1 "$out/scores_pairs.csv")"
head -1 "$out/scores_rows.csv" | grep -q "^candidate,query,head,keys,prob_rel,out_rel$" || fail "scores_rows.csv header"
head -1 "$out/scores_bins.csv" | grep -q "f32_units_median" || fail "scores_bins.csv header"
python3 - "$out/scores.json" <<'PY' || fail "scores.json"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["storage"] == "bf16" and j["heads"] == 2, j
k = {x["name"]: x for x in j["kernels"]}
acc, bp = k["accurate"]["total"], k["bf16-positions"]["total"]
assert acc["count"] == j["pair_count"] * 2, (acc["count"], j["pair_count"])
# bf16 storage: accurate's logits are off by about the bf16 logit's own rounding; bf16-positions by far more.
assert 0.1 < acc["bf16_units_median"] < 10, acc
assert bp["bf16_units_median"] > 10 * acc["bf16_units_median"], (bp, acc)
assert bp["prob_rel_max"] > acc["prob_rel_max"]
assert all(b["lo"] < b["hi"] for b in k["accurate"]["by_distance"])
PY
echo "ok"
