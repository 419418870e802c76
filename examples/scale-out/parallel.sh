#!/usr/bin/env bash
# A golden set written as N shards in parallel on one machine (or over ssh: add `--sshlogin host1,host2`
# and a shared --out folder), then merged into the bytes one run writes.
# Usage: parallel.sh ROPECHECK OUT N GOLDEN-ARGUMENTS...
#   e.g. parallel.sh ropecheck llama31-2p22 8 --preset llama-3.1-8b --positions 0:4194304 --dtypes bf16
set -euo pipefail
rc="$1" out="$2" n="$3"
shift 3
parts="$(mktemp -d "${out%/}.parts.XXXXXX")"
trap 'rm -rf "$parts"' EXIT
# One job per shard; each uses one thread, so N jobs fill N cores (--jobs 0: as many as the cores).
parallel --halt now,fail=1 --jobs 0 \
  "$rc" golden "$@" --threads 1 --quiet --shard {}/"$n" --out "$parts/part{}" ::: $(seq 1 "$n")
"$rc" merge "$parts"/part* --out "$out"
