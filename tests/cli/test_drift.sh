#!/usr/bin/env bash
# `ropecheck drift`: one command writes the tables, JSON and plots (drift/DRIFT.md); the known figures
# of research/precision.md appear in the JSON; --compare; unusable input exits 2 with one line on
# stderr, nothing on stdout and no output folder.
# Usage: test_drift.sh ROPECHECK HF_PLUGIN
set -u
rc_bin="$1"
hf_plugin="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# ---- a sweep on a base-1e4, d=128 preset (llama-2-7b) to 131072, f32 storage ----------------------
out="$tmp/sweep"
"$rc_bin" drift --preset llama-2-7b --recipes builtin:hf,builtin:bf16-inv-freq,builtin:bf16-positions,builtin:accurate --dtype f32 \
  --max-pos 131072 --out "$out" >"$tmp/stdout" 2>"$tmp/stderr"
code=$?
[ "$code" -eq 0 ] || { cat "$tmp/stdout" "$tmp/stderr"; fail "drift exited $code"; }
for f in drift.json bins.csv positions.csv breakdown.csv uniqueness.csv summary.md plot_data.csv drift.gp \
         drift-angle.png drift-cos-sin.png drift-rotated.png drift-shift.png; do
  [ -s "$out/$f" ] || fail "missing or empty $f"
done
ls -a "$tmp" | grep -q partial && fail "a temporary folder was left behind"
grep -q "^  bf16-positions " "$tmp/stdout" || { cat "$tmp/stdout"; fail "no stdout line for bf16-positions"; }
head -c 8 "$out/drift-angle.png" | od -An -c | grep -q "P   N   G" || fail "drift-angle.png is not a PNG"

expect_header() {  # FILE COLUMN...: the CSV header holds these columns
  local file="$1"; shift
  local header
  header="$(head -1 "$out/$file")"
  for c in "$@"; do
    echo ",$header," | grep -q ",$c," || fail "$file: no column $c (header: $header)"
  done
}
expect_header bins.csv candidate bin lo hi samples angle_err_max angle_err_rms cos_sin_err_max table_err_max \
  rot_ulp_max rot_ulp_rms rot_rel_max shift_1_max shift_16_max shift_1024_max shift_1024_rms nonfinite distinct_below_hi
expect_header positions.csv candidate position bin angle_err_max cos_sin_err_max rot_ulp_max rot_rel_max shift_1_max nonfinite
expect_header breakdown.csv candidate class position quantity head pair channel error allowed
expect_header uniqueness.csv candidate positions distinct first_collision collides_with
grep -q "^| candidate | exact |" "$out/summary.md" || fail "summary.md: no breakdown table"

# The known figures, read from the JSON.
python3 - "$out/drift.json" <<'PY' || fail "known figures not reproduced in drift.json"
import json, sys
d = json.load(open(sys.argv[1]))
c = {x["name"]: x for x in d["candidates"]}
def angle_below(name, end):
    return max(b["angle_err"]["max"] for b in c[name]["bins"] if b["hi"] <= end and b["angle_err"])
def distinct_below(name, edge):
    return [b["distinct_below_hi"] for b in c[name]["bins"] if b["hi"] == edge][0]
checks = [
    ("hf angle error below 4096 ~ 2.4e-4", 2.4e-4 / 1.5 < angle_below("hf", 4096) < 2.4e-4 * 1.5),
    ("hf angle error below 131072 ~ 7.8e-3", 7.8e-3 / 1.5 < angle_below("hf", 131072) < 7.8e-3 * 1.5),
    ("bf16-inv-freq: whole radians by 4096", angle_below("bf16-inv-freq", 4096) >= 1.0),
    ("bf16-positions: 1409 distinct below 131072", c["bf16-positions"]["uniqueness"]["distinct"] == 1409),
    ("bf16-positions: 385 below 512", distinct_below("bf16-positions", 512) == 385),
    ("bf16-positions: 769 below 4096", distinct_below("bf16-positions", 4096) == 769),
    ("bf16-positions: first collision 257", c["bf16-positions"]["uniqueness"]["first_collision"] == 257),
    ("bf16-positions breaks fp32-angle by 257", c["bf16-positions"]["breakdown"]["fp32-angle"]["position"] <= 257),
    ("accurate never breaks fp32-angle", c["accurate"]["breakdown"]["fp32-angle"]["position"] is None),
    ("accurate within ~1 ulp of f32", c["accurate"]["total"]["cos_sin_err"]["max"] <= 2 ** -23),
    ("sampling plan recorded", d["sampling"]["max_pos"] == 131072 and len(d["sampling"]["positions"]) > 1000),
]
bad = [name for name, ok in checks if not ok]
for name in bad:
    print("not reproduced:", name)
sys.exit(1 if bad else 0)
PY

# --no-plots: the script but no PNG; the default recipe list and output folder name.
(cd "$tmp" && "$rc_bin" drift --preset llama-3.1-8b --max-pos 300 --no-plots --no-uniqueness >"$tmp/stdout" 2>"$tmp/stderr") \
  || { cat "$tmp/stderr"; fail "--no-plots run failed"; }
[ -s "$tmp/drift-llama-3.1-8b/drift.gp" ] || fail "default --out drift-<preset> not written"
ls "$tmp/drift-llama-3.1-8b/"*.png >/dev/null 2>&1 && fail "--no-plots wrote PNGs"
[ ! -e "$tmp/drift-llama-3.1-8b/uniqueness.csv" ] || fail "--no-uniqueness wrote uniqueness.csv"
grep -q "^  fast-sincos " "$tmp/stdout" || fail "default --recipes is not every recipe"

# ---- --compare: two recipes, and a recipe against a plugin ------------------------------------------
# Every compared pair has a verdict: hf and bf16-positions disagree beyond twice the
# fp32-angle bound from position 257 (exit 1).
"$rc_bin" drift --preset llama-3.1-8b --compare builtin:hf,builtin:bf16-positions --dtype f32 --max-pos 4096 --out "$tmp/cmp" \
  >"$tmp/stdout" 2>"$tmp/stderr"
code=$?
[ "$code" -eq 1 ] || { cat "$tmp/stdout" "$tmp/stderr"; fail "--compare builtin:hf,builtin:bf16-positions exited $code, expected 1"; }
grep -q "^FAIL: .*cannot both be fp32-angle" "$tmp/stdout" || { cat "$tmp/stdout"; fail "--compare: no FAIL verdict line"; }
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['verdict']=='fail' and d['class']=='fp32-angle' and d['first_violation']>=257 and d['total']['violations']>0, (d['verdict'], d['first_violation'])" \
  "$tmp/cmp/compare.json" || fail "--compare builtin:hf,bf16-positions: bad verdict in compare.json"
for f in compare.json compare_bins.csv compare_positions.csv compare_plot_data.csv summary.md compare.gp drift-compare.png; do
  [ -s "$tmp/cmp/$f" ] || fail "--compare: missing $f"
done
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['first_difference_all']['position'] == 257, d['first_difference_all']" \
  "$tmp/cmp/compare.json" || fail "--compare builtin:hf,bf16-positions: first difference is not 257"
grep -q "first differ at position 257" "$tmp/stdout" || { cat "$tmp/stdout"; fail "--compare: stdout does not name 257"; }
"$rc_bin" drift --preset llama-3.1-8b --compare "hf,plugin:$hf_plugin" --dtype f32 --max-pos 2048 --out "$tmp/cmp2" \
  >"$tmp/stdout" 2>"$tmp/stderr" || { cat "$tmp/stderr"; fail "--compare with a plugin exited nonzero"; }
grep -q "^PASS: A and B agree" "$tmp/stdout" || { cat "$tmp/stdout"; fail "--compare builtin:hf,plugin: no PASS line"; }
# A sweep of plugins only: no angle / cos-sin data; those plots are left out (gnuplot used to fail the run).
"$rc_bin" drift --preset llama-3.1-8b --recipes "plugin:$hf_plugin" --max-pos 2048 --out "$tmp/plugin_only" --quiet \
  >"$tmp/stdout" 2>"$tmp/stderr" || { cat "$tmp/stderr"; fail "drift with only a plugin exited nonzero"; }
for f in drift-rotated.png drift-shift.png; do [ -s "$tmp/plugin_only/$f" ] || fail "plugin-only drift: missing $f"; done
[ ! -e "$tmp/plugin_only/drift-angle.png" ] || fail "plugin-only drift: drift-angle.png drawn without angle data"
grep -q "drift-angle.png is not drawn" "$tmp/plugin_only/drift.gp" || fail "plugin-only drift: drift.gp does not say why"
# Past ~1.16e6 the fp32-angle bound of the highest frequencies is saturated: not tested (exit 3), per bin.
"$rc_bin" drift --preset llama-3.1-8b --compare builtin:hf,builtin:meta --dtype f32 --max-pos 2000000 --no-uniqueness --no-plots \
  --out "$tmp/cmp3" >"$tmp/stdout" 2>"$tmp/stderr"
code=$?
[ "$code" -eq 3 ] || { cat "$tmp/stdout" "$tmp/stderr"; fail "--compare builtin:hf,builtin:meta to 2e6 exited $code, expected 3"; }
grep -q "^NOT TESTED: .*use a stricter class (f32-reduced, fp64-angle) here" "$tmp/stdout" || { cat "$tmp/stdout"; fail "--compare: no NOT TESTED line"; }
python3 - "$tmp/cmp3/compare.json" <<'PY' || fail "--compare builtin:hf,meta: saturation not reported per bin"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["verdict"] == "not-tested" and d["total"]["violations"] == 0, (d["verdict"], d["total"]["violations"])
first = d["first_saturated"]
assert 1_000_000 < first < 1_300_000, first
for b in d["bins"]:
    if b["hi"] <= first: assert b["saturated"] == 0, (b["lo"], b["hi"], b["saturated"])
    if b["lo"] >= first and b["samples"] > 0: assert b["saturated"] > 0, (b["lo"], b["hi"], b["saturated"])
PY
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['b']['name'].startswith('plugin:')" \
  "$tmp/cmp2/compare.json" || fail "--compare: plugin side not named"

# ---- unusable input: exit 2, one line on stderr, nothing on stdout, no output folder -----------------
expect2() {
  local dir="$tmp/bad"
  rm -rf "$dir"
  "$rc_bin" drift "$@" --out "$dir" >"$tmp/out" 2>"$tmp/err"
  local c=$?
  [ "$c" -eq 2 ] || { cat "$tmp/err"; fail "drift $* exited $c, expected 2"; }
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || { cat "$tmp/err"; fail "drift $*: expected one line on stderr"; }
  [ ! -s "$tmp/out" ] || fail "drift $*: stdout not empty"
  [ ! -e "$dir" ] || fail "drift $*: output folder created"
  ls -a "$tmp" | grep -q partial && fail "drift $*: temporary folder left behind"
  return 0
}
expect2 --preset llama-3.1-8b --recipes builtin:hf,no-such-recipe --max-pos 64
grep -q "no-such-recipe" "$tmp/err" || fail "unknown recipe not named"
expect2 --preset llama-3.1-8b --max-pos 0
expect2 --preset llama-3.1-8b --max-pos 16777217
expect2 --preset llama-3.1-8b --max-pos -5
expect2 --preset transformer-base --max-pos 64
grep -q "RoPE only" "$tmp/err" || fail "sinusoidal spec: message does not say RoPE only"
expect2 --preset no-such-preset --max-pos 64
expect2 --preset llama-3.1-8b --max-pos 64 --dtype f8
expect2 --preset llama-3.1-8b --max-pos 64 --compare builtin:hf
expect2 --preset llama-3.1-8b --max-pos 64 --recipes "plugin:$tmp/missing.so"
expect2 --preset llama-3.1-8b --max-pos 64 --shifts 1,x
expect2 --preset llama-3.1-8b --max-pos 64 --heads 0
ROPECHECK_GNUPLOT=/nonexistent/gnuplot expect2 --preset llama-3.1-8b --max-pos 64
grep -q "gnuplot" "$tmp/err" || fail "missing gnuplot not named"
# An existing output folder (without --overwrite) and an unwritable one (its parent is a file).
mkdir -p "$tmp/exists"
"$rc_bin" drift --preset llama-3.1-8b --max-pos 64 --out "$tmp/exists" >"$tmp/out" 2>"$tmp/err"
[ $? -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "existing --out: expected exit 2 with one line"
touch "$tmp/afile"
"$rc_bin" drift --preset llama-3.1-8b --max-pos 64 --out "$tmp/afile/out" >"$tmp/out" 2>"$tmp/err"
[ $? -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] || { cat "$tmp/err"; fail "unwritable --out: expected exit 2 with one line"; }
"$rc_bin" drift --preset llama-3.1-8b --max-pos 64 --out "$tmp/exists" --overwrite --no-uniqueness >/dev/null 2>&1 \
  || fail "--overwrite did not replace the folder"
[ -s "$tmp/exists/drift.json" ] || fail "--overwrite: no drift.json"
echo "drift CLI: ok"
