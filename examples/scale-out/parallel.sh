#!/usr/bin/env bash
# A golden set written by N shards in parallel straight into one shared set, then finished by
# `merge --shared` (no copy). On one machine as is; over ssh add `--sshlogin host1,host2` and put OUT on
# a filesystem every host sees. If a shard fails, run the script again: the same run reuses the
# staging folder OUT.staging and the merge finds every shard recorded.
# Usage: parallel.sh ROPECHECK OUT N GOLDEN-ARGUMENTS...
#   e.g. parallel.sh ropecheck llama31-2p22 8 --preset llama-3.1-8b --positions 0:4194304 --dtypes bf16
set -euo pipefail
rc="$1" out="$2" n="$3"
shift 3
# One job per shard; each uses one thread, so N jobs fill N cores (--jobs 0: as many as the cores).
parallel --halt now,fail=1 --jobs 0 \
  "$rc" golden "$@" --threads 1 --quiet --shard {}/"$n" --shared-out "$out" ::: $(seq 1 "$n")
"$rc" merge --shared "$out"
