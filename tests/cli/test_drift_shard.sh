#!/usr/bin/env bash
# `drift --shard I/N --out PART.json` + `ropecheck merge PARTS --out DIR`: for N in 1, 2, 3, 7 parts (every N on the first case, one N on the others), run
# as separate processes in parallel, the merged folder equals one run's: every file byte for byte, and
# drift.json apart from its timing fields (`seconds` at the top, per candidate and per uniqueness pass).
# Parts of different runs, duplicate or missing shards, and bad --shard uses are refused with one
# line and exit 2, leaving no output.
# Usage: test_drift_shard.sh ROPECHECK
set -u
rc_bin="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=shard_parts.sh
source "$(dirname "$0")/shard_parts.sh"

# drift.json without its timing fields: every "seconds" key (top level, per candidate, per uniqueness
# pass) is written on a line of its own (dump with indent).
untimed() { grep -v '^ *"seconds": ' "$1"; }
same_folder() {  # same_folder ONE MERGED: every file equal, drift.json apart from timing fields
  local f
  [ "$(cd "$1" && ls)" = "$(cd "$2" && ls)" ] || { diff <(cd "$1" && ls) <(cd "$2" && ls); return 1; }
  for f in "$1"/*; do
    f="$(basename "$f")"
    if [ "$f" = drift.json ]; then
      diff <(untimed "$1/$f") <(untimed "$2/$f") | head -20
      [ "${PIPESTATUS[0]}" -eq 0 ] || return 1
    else
      cmp "$1/$f" "$2/$f" || return 1
    fi
  done
}

# name | part counts | drift arguments
cases=(
  "llama|1 2 3 7|--preset llama-3.1-8b --recipes builtin:hf,builtin:bf16-table,builtin:f16-positions --max-pos 4096 --window 16 --per-octave 8 --heads 2"
  "qwen2vl|3|--preset qwen2-vl-7b --recipes builtin:meta,builtin:bf16-positions --dtype f32 --max-pos 3000 --window 8 --per-octave 4 --no-uniqueness --shifts 1,7"
)
for c in "${cases[@]}"; do
  IFS='|' read -r name counts args <<<"$c"
  # shellcheck disable=SC2086
  "$rc_bin" drift $args --no-plots --quiet --threads 1 --out "$tmp/$name.one" >/dev/null 2>"$tmp/err" || { cat "$tmp/err"; fail "$name: drift"; }
  for n in $counts; do
    # shellcheck disable=SC2086
    run_parts "$name" "$n" --out json drift $args --no-plots --quiet --threads 1
    "$rc_bin" merge "${parts[@]}" --out "$tmp/$name.$n.merged" >/dev/null 2>"$tmp/err" || { cat "$tmp/err"; fail "$name: merge of $n"; }
    same_folder "$tmp/$name.one" "$tmp/$name.$n.merged" || fail "$name: $n parts merged differ from one run"
  done
done

# ---- refusals: one line, exit 2, no output --------------------------------------------------------
P="$tmp/llama.3.part"
D=(drift --preset llama-3.1-8b --max-pos 4096 --window 16 --per-octave 8 --heads 2 --no-plots --quiet)
"$rc_bin" "${D[@]}" --recipes builtin:hf,builtin:bf16-table --shard 2/3 --out "$tmp/other.json" >/dev/null
"$rc_bin" "${D[@]}" --recipes builtin:hf,builtin:bf16-table,builtin:f16-positions --seed 9 --shard 2/3 --out "$tmp/seed.json" >/dev/null
expect2 "differ in run.command_line" "$tmp/m1" merge "${P}1.json" "$tmp/other.json" "${P}3.json" --out "$tmp/m1"
expect2 "differ in setup.seed" "$tmp/m2" merge "${P}1.json" "$tmp/seed.json" "${P}3.json" --out "$tmp/m2"
expect2 "shard 2/3 given twice" "$tmp/m3" merge "${P}1.json" "${P}2.json" "${P}2.json" "${P}3.json" --out "$tmp/m3"
expect2 "shard 3/3 is missing" "$tmp/m4" merge "${P}1.json" "${P}2.json" --out "$tmp/m4"
expect2 "differ in shard_count" "$tmp/m5" merge "${P}1.json" "$tmp/llama.2.part2.json" "${P}3.json" --out "$tmp/m5"
expect2 "exists" "" merge "${P}1.json" "${P}2.json" "${P}3.json" --out "$tmp/llama.one"
expect2 "--shard needs --out" "" "${D[@]}" --recipes builtin:hf --shard 1/2
expect2 "--compare: not with --shard" "$tmp/r1" "${D[@]}" --compare builtin:hf,builtin:meta --shard 1/2 --out "$tmp/r1"
expect2 "plugin kernels are not split" "$tmp/r2" "${D[@]}" --recipes builtin:hf,plugin:/nonexistent.so --shard 1/2 --out "$tmp/r2"
expect2 "shards are numbered 1..2" "$tmp/r3" "${D[@]}" --recipes builtin:hf --shard 3/2 --out "$tmp/r3"
expect2 "cannot be split into 100000 non-empty shards" "$tmp/r4" "${D[@]}" --recipes builtin:hf --shard 1/100000 --out "$tmp/r4"
echo "PASS: drift parts merged equal one run (timing fields aside) (N = 1, 2, 3, 7; 3) over ${#cases[@]} sweeps; refusals exit 2"
