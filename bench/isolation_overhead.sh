#!/usr/bin/env bash
# The cost of running kernel plugins isolated (golden/include/ropecheck/golden/plugin_client.hpp)
# against --in-process, as ratios from one run: each command is timed REPEATS times (default 3),
# isolated and in-process alternating, and the medians are compared.
#
#   bash bench/isolation_overhead.sh ROPECHECK PLUGIN.so GOLDEN_DIR [REPEATS]
#
# GOLDEN_DIR: e.g. `ropecheck golden --preset llama-3.1-8b --positions 0:131072 --heads 8 --dtypes f32
# --out GOLDEN_DIR` (4.3 GB); PLUGIN.so: examples/plugin_hf_fp32. Times `check --golden GOLDEN_DIR
# --kernel PLUGIN.so` and `props --kernel PLUGIN.so --preset llama-3.1-8b --cases 200`.
set -u
[ $# -ge 3 ] || { echo "usage: $0 ROPECHECK PLUGIN.so GOLDEN_DIR [REPEATS]" >&2; exit 2; }
BIN=$1 PLUGIN=$2 GOLDEN=$3 REPEATS=${4:-3}

seconds() {  # seconds COMMAND...: wall time of one run (its output discarded)
  local t0 t1
  t0=$(date +%s.%N)
  "$@" >/dev/null 2>&1
  t1=$(date +%s.%N)
  python3 -c "print(f'{$t1 - $t0:.3f}')"
}
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

measure() {  # measure NAME ARGS...: alternates isolated / in-process runs, prints both medians and the ratio
  local name=$1 iso=() inp=() i
  shift
  for ((i = 0; i < REPEATS; i++)); do
    iso+=("$(seconds "$BIN" "$@")")
    inp+=("$(seconds "$BIN" "$@" --in-process)")
  done
  local mi mp
  mi=$(median "${iso[@]}")
  mp=$(median "${inp[@]}")
  python3 -c "print(f'{\"$name\":<40} isolated {$mi:8.2f} s   in-process {$mp:8.2f} s   ratio {$mi / $mp:.3f}   (runs: ${iso[*]} / ${inp[*]})')"
}

measure "check (golden set, plugin)" check --golden "$GOLDEN" --kernel "$PLUGIN"
measure "props --cases 200 (llama-3.1-8b)" props --kernel "$PLUGIN" --preset llama-3.1-8b --cases 200
