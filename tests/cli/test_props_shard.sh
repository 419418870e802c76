#!/usr/bin/env bash
# `props --shard I/N --report PART` + `ropecheck merge PARTS --out REPORT`: for N in 1, 2, 3, 7 parts (every N on the first case, one N on the others),
# run as separate processes in parallel, the merged report equals one run's --report (with
# --no-diagnose) byte for byte, reproduce lines included, and merge exits with the run's exit code:
# a correct target (exit 0), a mutant that fails (exit 1) and saturated bounds (exit 3). Parts of
# different runs, duplicate or missing shards, and bad --shard uses are refused with one line and exit 2.
# Usage: test_props_shard.sh ROPECHECK
set -u
rc_bin="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=shard_parts.sh
source "$(dirname "$0")/shard_parts.sh"

# name | expected exit | part counts | props arguments
cases=(
  "hf|0|1 2 3 7|--target hf-fp32 --preset llama-3.1-8b --cases 5 --max-pos 65536 --dtype f32"
  "mutant|1|3|--target mutant:bf16-inv-freq --preset llama-3.1-8b --cases 5 --max-pos 65536 --dtype f32 --only norm,inverse,composition,attention_factor,head_independence,yarn_frequencies,linear_scaling"
  "saturated|3|2|--target hf-fp32 --preset llama-3.1-8b --cases 5 --dtype f32 --only norm,composition,relative_shift"
)
for c in "${cases[@]}"; do
  IFS='|' read -r name want counts args <<<"$c"
  # shellcheck disable=SC2086
  "$rc_bin" props $args --no-diagnose --report "$tmp/$name.one.json" >/dev/null 2>"$tmp/err"
  code=$?
  [ "$code" -eq "$want" ] || { cat "$tmp/err"; fail "$name: one run exited $code, expected $want"; }
  for n in $counts; do
    # shellcheck disable=SC2086
    run_parts "$name" "$n" --report json props $args
    merge_expect "$name" "$n" "$want"
  done
done
grep -q '"reproduce": "ropecheck props --target mutant:bf16-inv-freq' "$tmp/mutant.3.merged.json" ||
  fail "the merged mutant report has no reproduce line"

# ---- refusals: one line, exit 2, no output --------------------------------------------------------
P="$tmp/hf.3.part"
A=(props --target hf-fp32 --preset llama-3.1-8b --max-pos 65536 --dtype f32)
"$rc_bin" "${A[@]}" --cases 6 --shard 2/3 --report "$tmp/cases.json" >/dev/null
expect2 "differ in report.cases" "$tmp/m1" merge "${P}1.json" "$tmp/cases.json" "${P}3.json" --out "$tmp/m1"
expect2 "differ in report.target" "$tmp/m2" merge "${P}1.json" "$tmp/mutant.3.part2.json" "${P}3.json" --out "$tmp/m2"
expect2 "shard 2/3 given twice" "$tmp/m3" merge "${P}1.json" "${P}2.json" "${P}2.json" "${P}3.json" --out "$tmp/m3"
expect2 "shard 1/3 is missing" "$tmp/m4" merge "${P}2.json" "${P}3.json" --out "$tmp/m4"
expect2 "differ in shard_count" "$tmp/m5" merge "${P}1.json" "$tmp/hf.2.part2.json" "${P}3.json" --out "$tmp/m5"
expect2 "exists" "" merge "${P}1.json" "${P}2.json" "${P}3.json" --out "$tmp/hf.one.json"
expect2 "--shard needs --report" "" "${A[@]}" --cases 5 --shard 1/2
expect2 "--shard: not with --self-test" "$tmp/r0" props --self-test --shard 1/2 --report "$tmp/r0"
expect2 "--junit: not with --shard" "$tmp/r1" "${A[@]}" --cases 5 --shard 1/2 --report "$tmp/r1" --junit "$tmp/j.xml"
expect2 "cannot be split into 4 non-empty shards" "$tmp/r2" "${A[@]}" --cases 5 --only inverse,norm,composition --shard 1/4 --report "$tmp/r2"
echo "PASS: props parts merged equal one run byte for byte (N = 1, 2, 3, 7; 3; 2) over ${#cases[@]} runs (exit 0, 1, 3); refusals exit 2"
