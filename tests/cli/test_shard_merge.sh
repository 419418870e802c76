#!/usr/bin/env bash
# `golden --shard I/N` + `ropecheck merge`: for N in 1, 2, 3, 7 shards, run as separate processes in
# parallel, the merged folder equals one run byte for byte (every file, manifest included), over a
# half-split, an interleaved + yarn, an MLA (slice + k_pe), an mrope, a longrope (seq_len from the whole set) and a sinusoidal
# spec, and in .npz. Parts from different runs, duplicate or missing shards, a whole set given as a
# part, and a shard given to `check` are refused with one line and exit 2, leaving no output.
# Usage: test_shard_merge.sh ROPECHECK
set -u
rc_bin="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=shard_parts.sh
source "$(dirname "$0")/shard_parts.sh"  # fail, expect2, hashes

# name | golden arguments
cases=(
  "llama|--preset llama-3.1-8b --positions log:131071:4 --heads 2 --dtypes f32,bf16"
  "deepseek|--preset deepseek-v3 --positions 0:40,4095,65535 --dtypes f16"
  "mla|--preset deepseek-v3-mla --positions 0:12,131071 --heads 2 --dtypes bf16"
  "qwen2vl|--preset qwen2-vl-7b --positions 0:8,grid:8:2:3,20/3/4 --dtypes bf16"
  "phi35|--preset phi-3.5-mini --positions 0:20,8191 --dtypes f32"
  "sinus|--preset transformer-base --positions 0:30"
  "npz|--preset llama-2-7b --positions 0:21 --format npy --dtypes bf16"
)
for c in "${cases[@]}"; do
  name="${c%%|*}"; args="${c#*|}"
  # shellcheck disable=SC2086
  "$rc_bin" golden $args --out "$tmp/$name.one" --quiet >/dev/null 2>"$tmp/err" || { cat "$tmp/err"; fail "$name: golden"; }
  for n in 1 2 3 7; do
    pids=()
    for ((i = 1; i <= n; i++)); do
      # shellcheck disable=SC2086
      "$rc_bin" golden $args --shard "$i/$n" --out "$tmp/$name.$n.part$i" --quiet --threads 1 >/dev/null 2>"$tmp/err.$i" &
      pids+=($!)
    done
    for ((i = 1; i <= n; i++)); do
      wait "${pids[$((i - 1))]}" || { cat "$tmp/err.$i"; fail "$name: golden --shard $i/$n"; }
    done
    parts=()
    for ((i = n; i >= 1; i--)); do parts+=("$tmp/$name.$n.part$i"); done  # any order
    "$rc_bin" merge "${parts[@]}" --out "$tmp/$name.$n.merged" >/dev/null 2>"$tmp/err" || { cat "$tmp/err"; fail "$name: merge of $n"; }
    diff <(hashes "$tmp/$name.one") <(hashes "$tmp/$name.$n.merged") >"$tmp/diff" ||
      { cat "$tmp/diff"; fail "$name: $n shards merged differ from one run"; }
  done
  # The merged set is a golden set like any other: check accepts it.
  [ "$name" = sinus ] || "$rc_bin" check --golden "$tmp/$name.3.merged" --kernel builtin:accurate >/dev/null 2>"$tmp/err" ||
    { cat "$tmp/err"; fail "$name: check on the merged set"; }
done

# ---- refusals: one line, exit 2, no output --------------------------------------------------------
L="$tmp/llama"
"$rc_bin" golden --preset llama-2-7b --positions 0:21 --dtypes bf16 --shard 1/3 --out "$tmp/other.part1" --quiet >/dev/null
"$rc_bin" golden --preset llama-3.1-8b --positions log:131071:4 --heads 2 --dtypes f32,bf16 --shard 2/2 --seed 5 \
  --out "$tmp/seed5.part2" --quiet >/dev/null
expect2 "different runs: they differ in 'spec'" "$tmp/m1" merge "$L.3.part1" "$tmp/other.part1" --out "$tmp/m1"
expect2 "differ in 'generator'" "$tmp/m2" merge "$L.2.part1" "$tmp/seed5.part2" --out "$tmp/m2"
expect2 "is shard 1/3 but" "$tmp/m3" merge "$L.3.part1" "$L.2.part2" --out "$tmp/m3"
expect2 "shard 2/3 is given twice" "$tmp/m4" merge "$L.3.part1" "$L.3.part2" "$L.3.part2" "$L.3.part3" --out "$tmp/m4"
expect2 "1 of 3 shards missing (2)" "$tmp/m5" merge "$L.3.part1" "$L.3.part3" --out "$tmp/m5"
expect2 "is a whole golden set, not a shard" "$tmp/m6" merge "$tmp/llama.one" --out "$tmp/m6"
expect2 "already exists" "" merge "$L.2.part1" "$L.2.part2" --out "$tmp/llama.one"
expect2 "is shard 1/3 of a golden set, not a whole set" "" check --golden "$L.3.part1" --kernel builtin:hf
expect2 "shards are numbered 1..3" "$tmp/g1" golden --preset llama-2-7b --positions 0:8 --shard 0/3 --out "$tmp/g1"
expect2 "shards are numbered 1..3" "$tmp/g2" golden --preset llama-2-7b --positions 0:8 --shard 4/3 --out "$tmp/g2"
expect2 "expected I/N" "$tmp/g3" golden --preset llama-2-7b --positions 0:8 --shard 1-3 --out "$tmp/g3"
expect2 "cannot be split into 9 non-empty shards" "$tmp/g4" golden --preset llama-2-7b --positions 0:8 --shard 1/9 --out "$tmp/g4"
# A shard whose data were edited fails the reader's hash check inside merge.
cp -r "$L.2.part1" "$tmp/edited.part1"
printf '\x01' | dd of="$tmp/edited.part1/outputs_bf16.safetensors" bs=1 seek=200 conv=notrunc status=none
expect2 "hash mismatch" "$tmp/m7" merge "$tmp/edited.part1" "$L.2.part2" --out "$tmp/m7"
# ... and one byte of data at the end of a file (the merge hashes each part while it copies it).
cp -r "$L.2.part2" "$tmp/edited.part2"
f="$tmp/edited.part2/outputs_f64.safetensors"
printf '\x01' | dd of="$f" bs=1 seek=$(($(stat -c %s "$f") - 1)) conv=notrunc status=none
expect2 "hash mismatch for .*outputs_f64.safetensors" "$tmp/m8" merge "$L.2.part1" "$tmp/edited.part2" --out "$tmp/m8"
echo "PASS: shard + merge byte-identical for N = 1, 2, 3, 7 over ${#cases[@]} specs; refusals exit 2"
