#!/usr/bin/env bash
# `check --shard I/N --report PART` + `ropecheck merge PARTS --out REPORT`: for N in 1, 2, 3, 7 parts (every N on the first case, one N on the others),
# run as separate processes in parallel, the merged report equals one run's --report byte for byte
# and merge exits with the run's exit code: a built-in kernel failing its class (exit 1), a candidate
# file that leaves outputs untested (exit 3) and a passing sinusoidal one (exit 0). Parts of different
# runs, duplicate or missing shards, and bad --shard uses are refused with one line and exit 2,
# leaving no output. `merge --diagnose` gives one run's report with its diagnosis. The GNU parallel example (examples/scale-out/parallel-check.sh) gives the same
# report and exit code (skipped with a message when GNU parallel is not installed).
# Usage: test_check_shard.sh ROPECHECK EXAMPLES_DIR
set -u
rc_bin="$1"
ex="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=shard_parts.sh
source "$(dirname "$0")/shard_parts.sh"

"$rc_bin" golden --preset llama-3.1-8b --positions log:131071:4 --heads 2 --dtypes f32,bf16 --out "$tmp/llama" --quiet >/dev/null ||
  fail "golden llama"
"$rc_bin" golden --preset transformer-base --positions 0:30 --dtypes f32 --out "$tmp/sinus" --quiet >/dev/null || fail "golden sinus"

# name | expected exit | part counts | check arguments (every N on one case: the split itself is
# covered for N in 1, 2, 3, 7 on every kind of tensor by test_check_shard; this keeps the CLI test short)
cases=(
  "hf|1|1 2 3 7|--golden $tmp/llama --kernel builtin:hf --class f32-reduced --worst 5"
  "file|3|3|--golden $tmp/llama --candidate $tmp/llama/outputs_bf16.safetensors --class exact"
  "sinus|0|2|--golden $tmp/sinus --candidate $tmp/sinus/outputs_f32.safetensors"
)
for c in "${cases[@]}"; do
  IFS='|' read -r name want counts args <<<"$c"
  # shellcheck disable=SC2086
  "$rc_bin" check $args --no-diagnose --report "$tmp/$name.one.json" >/dev/null 2>"$tmp/err"
  code=$?
  [ "$code" -eq "$want" ] || { cat "$tmp/err"; fail "$name: one run exited $code, expected $want"; }
  for n in $counts; do
    # shellcheck disable=SC2086
    run_parts "$name" "$n" --report json check $args --threads 1
    merge_expect "$name" "$n" "$want"
  done
done

# merge --diagnose reads the set and the candidate again and diagnoses as one run does by default.
"$rc_bin" check --golden "$tmp/llama" --kernel builtin:hf --class f32-reduced --worst 5 --report "$tmp/hf.diag.json" >/dev/null
grep -q '"diagnosis"' "$tmp/hf.diag.json" || fail "one failing run wrote no diagnosis"
for n in 3; do
  "$rc_bin" merge "$tmp"/hf.$n.part*.json --diagnose --out "$tmp/hf.$n.diag.json" >"$tmp/out" 2>"$tmp/err"
  code=$?
  [ "$code" -eq 1 ] || { cat "$tmp/err"; fail "merge --diagnose of $n exited $code, expected 1"; }
  cmp "$tmp/hf.diag.json" "$tmp/hf.$n.diag.json" || fail "merge --diagnose of $n differs from one run"
  grep -q "^diagnosis: " "$tmp/out" || fail "merge --diagnose printed no diagnosis"
done

# ---- refusals: one line, exit 2, no output --------------------------------------------------------
P="$tmp/hf.3.part"
L="$tmp/llama"
"$rc_bin" check --golden "$L" --kernel builtin:hf --class fp32-angle --worst 5 --shard 2/3 --report "$tmp/crit.json" >/dev/null
"$rc_bin" check --golden "$L" --kernel builtin:accurate --class f32-reduced --worst 5 --shard 2/3 --report "$tmp/acc.json" >/dev/null
"$rc_bin" check --golden "$L" --candidate "$L/outputs_f32.safetensors" --class exact --shard 2/3 --report "$tmp/f32.json" >/dev/null
expect2 "differ in header.criterion" "$tmp/m1" merge "${P}1.json" "$tmp/crit.json" "${P}3.json" --out "$tmp/m1"
expect2 "differ in run.candidate" "$tmp/m2" merge "${P}1.json" "$tmp/acc.json" "${P}3.json" --out "$tmp/m2"
expect2 "differ in header.not_tested" "$tmp/m3" merge "$tmp/file.3.part1.json" "$tmp/f32.json" "$tmp/file.3.part3.json" --out "$tmp/m3"
expect2 "shard 2/3 given twice" "$tmp/m4" merge "${P}1.json" "${P}2.json" "${P}2.json" "${P}3.json" --out "$tmp/m4"
expect2 "shard 2/3 is missing" "$tmp/m5" merge "${P}1.json" "${P}3.json" --out "$tmp/m5"
expect2 "differ in shard_count" "$tmp/m6" merge "${P}1.json" "$tmp/hf.2.part2.json" "${P}3.json" --out "$tmp/m6"
expect2 "not both" "$tmp/m7" merge "${P}1.json" "$L" --out "$tmp/m7"
expect2 "unknown part format 'ropecheck-check-report'" "$tmp/m8" merge "$tmp/hf.one.json" --out "$tmp/m8"
expect2 "parts of different commands" "$tmp/m9" merge "${P}1.json" "$tmp/hf.one.json" --out "$tmp/m9"
echo '{' >"$tmp/bad.json"
expect2 "neither a shard folder nor a part report" "$tmp/m10" merge "$tmp/bad.json" --out "$tmp/m10"
expect2 "exists" "" merge "${P}1.json" "${P}2.json" "${P}3.json" --out "$tmp/hf.one.json"
expect2 "--diagnose: only for check parts" "$tmp/m11" merge "$L" --diagnose --out "$tmp/m11"
# A failing file candidate (another seed's outputs: other q, k), then changed after its part was written.
"$rc_bin" golden --preset llama-3.1-8b --positions log:131071:4 --heads 2 --dtypes f32,bf16 --seed 2 --out "$tmp/seed2" --quiet >/dev/null
cp "$tmp/seed2/outputs_bf16.safetensors" "$tmp/cand.safetensors"
"$rc_bin" check --golden "$L" --candidate "$tmp/cand.safetensors" --shard 1/1 --report "$tmp/cand.json" >/dev/null
[ $? -eq 1 ] || fail "another seed's outputs did not fail"
cp "$L/outputs_bf16.safetensors" "$tmp/cand.safetensors"
expect2 "is not the candidate the parts checked" "$tmp/m12" merge "$tmp/cand.json" --diagnose --out "$tmp/m12"
# Parts whose counts a check cannot have written (edited by hand, broken on the way): negative violations
# turned a failing run into PASS; counts above the elements or position bins that do not add up.
tamper() {  # tamper NAME PYTHON: writes $tmp/NAME.json, part 2 of hf.3 changed by the statement on t (cos.f64)
  python3 - "${P}2.json" "$tmp/$1.json" "$2" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
t = d["tensors"][0]
exec(sys.argv[3])
json.dump(d, open(sys.argv[2], "w"))
PY
}
tamper negative 't["violations"] = -t["violations"] - 1000; [b.update(violations=0) for b in t["position_bins"]]'
expect2 "'violations' of cos.f64 is negative" "$tmp/m13" merge "${P}1.json" "$tmp/negative.json" "${P}3.json" --out "$tmp/m13"
tamper negbins 'b = t["position_bins"][-1]; b["violations"] = -b["violations"] - 5'
expect2 "'position_bins.violations' of cos.f64 is negative" "$tmp/m14" merge "${P}1.json" "$tmp/negbins.json" "${P}3.json" --out "$tmp/m14"
tamper toomany 't["nan"] = t["elements"] + 1'
expect2 "'nan' of cos.f64 ([0-9]*) exceeds its elements" "$tmp/m15" merge "${P}1.json" "$tmp/toomany.json" "${P}3.json" --out "$tmp/m15"
tamper bins 't["position_bins"][-1]["elements"] -= 1'
expect2 "do not add up" "$tmp/m16" merge "${P}1.json" "$tmp/bins.json" "${P}3.json" --out "$tmp/m16"
expect2 "--shard needs --report" "" check --golden "$L" --kernel builtin:hf --shard 1/2
expect2 "--baseline: not with --shard" "$tmp/r1" check --golden "$L" --kernel builtin:hf --shard 1/2 --baseline "$tmp/hf.one.json" --report "$tmp/r1"
expect2 "--diagnose: not with --shard" "$tmp/r2" check --golden "$L" --kernel builtin:hf --shard 1/2 --diagnose --report "$tmp/r2"
expect2 "shards are numbered 1..3" "$tmp/r3" check --golden "$L" --kernel builtin:hf --shard 4/3 --report "$tmp/r3"
expect2 "cannot be split into 1000 non-empty shards" "$tmp/r4" check --golden "$L" --kernel builtin:hf --shard 1/1000 --report "$tmp/r4"
if command -v parallel >/dev/null; then
  # shellcheck disable=SC2086
  bash "$ex/parallel-check.sh" "$rc_bin" "$tmp/par.json" 3 --golden "$L" --kernel builtin:hf --class f32-reduced --worst 5 \
    >/dev/null 2>"$tmp/err"
  code=$?
  [ "$code" -eq 1 ] || { cat "$tmp/err"; fail "parallel-check.sh exited $code, expected 1"; }
  cmp "$tmp/hf.one.json" "$tmp/par.json" || fail "parallel-check.sh: the merged report differs from one run"
  ls -d "$tmp"/par.parts.* >/dev/null 2>&1 && fail "parallel-check.sh left its parts folder behind"
else
  echo "note: GNU parallel is not installed (apt install parallel): examples/scale-out/parallel-check.sh not run"
fi
echo "PASS: check parts merged equal one run byte for byte (N = 1, 2, 3, 7; 3; 2) over ${#cases[@]} cases (exit 1, 3, 0); merge --diagnose; refusals exit 2"
