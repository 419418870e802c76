#!/usr/bin/env bash
# A check of a golden set split into N parts run in parallel on one machine (or over ssh: add
# `--sshlogin host1,host2` and paths every host reads), then merged into the report one run writes.
# The exit code is the merged verdict's: 0 pass, 1 fail, 3 not tested, 2 unusable input.
# Usage: parallel-check.sh ROPECHECK REPORT N CHECK-ARGUMENTS...
#   e.g. parallel-check.sh ropecheck report.json 8 --golden llama31-2p22 --kernel builtin:hf --class fp32-angle
set -uo pipefail
rc="$1" report="$2" n="$3"
shift 3
parts="$(mktemp -d "${report%.json}.parts.XXXXXX")"
trap 'rm -rf "$parts"' EXIT
# A part exits 1 or 3 when its own tokens fail or are not tested: that is not an error of the job, so
# only exit 2 (unusable input) stops the others. The merge gives the verdict on the whole run.
parallel --halt now,fail=1 --jobs 0 \
  "$rc" check "$@" --threads 1 --shard {}/"$n" --report "$parts/part{}.json" '>/dev/null; [ $? -ne 2 ]' ::: $(seq 1 "$n") ||
  exit 2
"$rc" merge "$parts"/part*.json --out "$report"
