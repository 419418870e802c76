#!/usr/bin/env bash
# examples/scale-out: the GNU parallel script and the Slurm array script (its tasks run one after
# another here, with SLURM_ARRAY_TASK_ID / COUNT set by hand) each write shards into one shared set
# and finish it (`merge --shared`) into the bytes of one run. Exit 77 (skipped) without GNU parallel, saying how to install it.
# Usage: test_scale_out_examples.sh ROPECHECK EXAMPLES_DIR
set -u
rc_bin="$1"
ex="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
hashes() { (cd "$1" && sha256sum -- * | sort -k2); }

args=(--preset qwen2.5-7b-yarn --positions log:65535:4 --heads 2 --dtypes f32,bf16)
"$rc_bin" golden "${args[@]}" --out "$tmp/one" --quiet >/dev/null || fail "golden"

# Slurm: 3 array tasks, then the merge the dependent job would run.
for i in 1 2 3; do
  SLURM_ARRAY_TASK_ID=$i SLURM_ARRAY_TASK_COUNT=3 OUT="$tmp/slurm" ROPECHECK="$rc_bin" GOLDEN_ARGS="${args[*]}" \
    bash "$ex/slurm-golden.sbatch" >/dev/null 2>"$tmp/err" || { cat "$tmp/err"; fail "slurm task $i"; }
done
"$rc_bin" merge --shared "$tmp/slurm" >/dev/null || fail "merge --shared of the Slurm tasks"
diff <(hashes "$tmp/one") <(hashes "$tmp/slurm") || fail "Slurm example: the set differs from one run"

if ! command -v parallel >/dev/null; then
  echo "SKIPPED: GNU parallel is not installed (scripts/install-deps installs it: apt install parallel); the Slurm example passed"
  exit 77
fi
bash "$ex/parallel.sh" "$rc_bin" "$tmp/par" 5 "${args[@]}" >/dev/null 2>"$tmp/err" || { cat "$tmp/err"; fail "parallel.sh"; }
diff <(hashes "$tmp/one") <(hashes "$tmp/par") || fail "GNU parallel example: merged set differs from one run"
[ ! -e "$tmp/par.staging" ] || fail "parallel.sh left its staging folder behind"
echo "PASS: the GNU parallel (5 shards) and Slurm (3 array tasks) examples give one run's bytes"
