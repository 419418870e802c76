#!/usr/bin/env bash
# `golden --shard I/N --shared-out DIR` + `merge --shared DIR`: for N in 1, 2, 3, 7 shards, run as
# separate processes in parallel into one shared set, the finished set equals one run byte for byte
# (every file, manifest included), over a two-dtype spec, a sinusoidal spec and an mrope spec in .npz.
# Refused with one line and exit 2, changing nothing: a shard of another run (spec, N) joining the
# staging folder, a merge with a missing shard or a killed one (no completion record), a record given
# twice, a record of another run, an existing DIR; a rerun of the missing shard completes the set.
# Usage: test_shared_shards.sh ROPECHECK
set -u
rc_bin="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=shard_parts.sh
source "$(dirname "$0")/shard_parts.sh"  # fail, expect2, hashes

# shared NAME N ARGS...: shards 1..N of `golden ARGS` in parallel into $tmp/NAME.N (not merged).
shared() {
  local name="$1" n="$2" i
  shift 2
  local pids=()
  for ((i = 1; i <= n; i++)); do
    "$rc_bin" golden "$@" --shard "$i/$n" --shared-out "$tmp/$name.$n" --quiet --threads 1 >/dev/null 2>"$tmp/err.$i" &
    pids+=($!)
  done
  for ((i = 1; i <= n; i++)); do
    wait "${pids[$((i - 1))]}" || { cat "$tmp/err.$i"; fail "$name: golden --shard $i/$n --shared-out"; }
  done
}

# name | golden arguments
cases=(
  "llama|--preset llama-3.1-8b --positions log:131071:4 --heads 2 --dtypes f32,bf16"
  "sinus|--preset transformer-base --positions 0:30 --dtypes f16"
  "mrope-npz|--preset qwen2-vl-7b --positions 0:9,grid:8:2:3,20/3/4 --format npy --dtypes bf16,f32"
)
for c in "${cases[@]}"; do
  name="${c%%|*}"
  read -r -a args <<<"${c#*|}"
  "$rc_bin" golden "${args[@]}" --out "$tmp/$name.one" --quiet >/dev/null 2>"$tmp/err" || { cat "$tmp/err"; fail "$name: golden"; }
  for n in 1 2 3 7; do
    shared "$name" "$n" "${args[@]}"
    "$rc_bin" merge --shared "$tmp/$name.$n" >/dev/null 2>"$tmp/err" || { cat "$tmp/err"; fail "$name: merge --shared of $n"; }
    diff <(hashes "$tmp/$name.one") <(hashes "$tmp/$name.$n") >"$tmp/diff" ||
      { cat "$tmp/diff"; fail "$name: $n shards written into one set differ from one run"; }
    [ ! -e "$tmp/$name.$n.staging" ] || fail "$name: merge --shared left the staging folder behind"
  done
done
# The finished set is a golden set like any other.
"$rc_bin" check --golden "$tmp/llama.3" --kernel builtin:accurate >/dev/null 2>"$tmp/err" || { cat "$tmp/err"; fail "check on the set"; }

# ---- refusals: one line, exit 2 ------------------------------------------------------------------
L=(--preset llama-3.1-8b --positions log:131071:4 --heads 2 --dtypes f32,bf16)
S="$tmp/s"
"$rc_bin" golden "${L[@]}" --shard 1/3 --shared-out "$S" --quiet >/dev/null || fail "shard 1/3"
"$rc_bin" golden "${L[@]}" --shard 3/3 --shared-out "$S" --quiet >/dev/null || fail "shard 3/3"
# Another run's shard refuses the staging folder before it computes (and leaves it as it was).
tree() { (cd "$1" && find . -type f -print0 | sort -z | xargs -0 sha256sum); }
before="$(tree "$S.staging")"
expect2 "belongs to another run: it differs in 'spec'" "" golden --preset llama-2-7b --positions 0:21 --shard 2/3 --shared-out "$S"
expect2 "belongs to another run: it differs in 'shard_count' (3 vs 4)" "" golden "${L[@]}" --shard 2/4 --shared-out "$S"
expect2 "belongs to another run: it differs in 'generator'" "" golden "${L[@]}" --seed 9 --shard 2/3 --shared-out "$S"
[ "$before" = "$(tree "$S.staging")" ] || fail "a refused shard changed the staging folder"
expect2 "1 of 3 shards have no completion record (2)" "$S" merge --shared "$S"
# A duplicated or foreign record.
cp "$S.staging/shard-1-of-3.json" "$S.staging/shard-1-of-3-copy.json"
expect2 "shard 1/3 is recorded twice" "$S" merge --shared "$S"
rm "$S.staging/shard-1-of-3-copy.json"
shared other 3 --preset llama-2-7b --positions 0:21 --dtypes bf16
cp "$tmp/other.3.staging/shard-2-of-3.json" "$S.staging/shard-2-of-3.json"
expect2 "'shard-2-of-3.json' is a shard of another run: it differs in 'spec'" "$S" merge --shared "$S"
rm "$S.staging/shard-2-of-3.json"
# The missing shard, run now, completes the set; a shard killed before its record counts as missing.
"$rc_bin" golden "${L[@]}" --shard 2/3 --shared-out "$S" --quiet >/dev/null || fail "shard 2/3"
rm "$S.staging/shard-3-of-3.json"  # as if shard 3 had been killed before it finished
expect2 "1 of 3 shards have no completion record (3)" "$S" merge --shared "$S"
"$rc_bin" golden "${L[@]}" --shard 3/3 --shared-out "$S" --quiet >/dev/null || fail "shard 3/3 again"
# An existing DIR: refused by the merge (and by new shards) unless --overwrite, which replaces it.
mkdir "$S"
expect2 "already exists (use --overwrite" "" merge --shared "$S"
expect2 "already exists (use --overwrite" "" golden "${L[@]}" --shard 1/3 --shared-out "$S"
"$rc_bin" merge --shared "$S" --overwrite >/dev/null 2>"$tmp/err" || { cat "$tmp/err"; fail "merge --shared --overwrite"; }
diff <(hashes "$tmp/llama.one") <(hashes "$S") || fail "the completed set differs from one run"
expect2 "no staging folder" "" merge --shared "$tmp/nothing"
expect2 "needs --shard I/N" "$tmp/g" golden "${L[@]}" --shared-out "$tmp/g"
expect2 "takes no parts and no --out" "" merge --shared "$S" --out "$tmp/x"
echo "PASS: shards written into one set give one run's bytes for N = 1, 2, 3, 7 over ${#cases[@]} specs; refusals exit 2"
