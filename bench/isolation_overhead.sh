#!/usr/bin/env bash
# The cost of running kernel plugins isolated (plugin/include/ropecheck/plugin/client.hpp)
# against --in-process, as ratios from one run: each command is timed REPEATS times (default 3),
# isolated and in-process alternating, and the medians of wall time and of CPU time (user + system,
# the kernel host included) are compared. On a shared machine wall time is noisy; CPU time is the
# steadier figure of the cost.
#
#   bash bench/isolation_overhead.sh ROPECHECK PLUGIN.so GOLDEN_DIR [REPEATS]
#
# GOLDEN_DIR: e.g. `ropecheck golden --preset llama-3.1-8b --positions 0:131072 --heads 8 --dtypes f32
# --out GOLDEN_DIR` (4.3 GB), or - to time props only; PLUGIN.so: examples/plugin_hf_fp32. Times
# `check --golden GOLDEN_DIR --kernel PLUGIN.so` and `props --kernel PLUGIN.so --preset llama-3.1-8b
# --cases 200 --dtype f32`.
set -u
[ $# -ge 3 ] || { echo "usage: $0 ROPECHECK PLUGIN.so GOLDEN_DIR [REPEATS]" >&2; exit 2; }
BIN=$1 PLUGIN=$2 GOLDEN=$3 REPEATS=${4:-3}

seconds() {  # seconds COMMAND...: "WALL CPU" of one run, CPU = user + system of it and its children
  local f
  f=$(mktemp)
  /usr/bin/time -f "%e %U %S" -o "$f" "$@" >/dev/null 2>&1
  # (time writes "Command exited with non-zero status N" first when the run exits non-zero: props exits 3
  # where some property is not tested.)
  tail -n 1 "$f" | awk '{ printf "%.3f %.3f\n", $1, $2 + $3 }'
  rm -f "$f"
}
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

measure() {  # measure NAME ARGS...: alternates isolated / in-process runs; medians of wall and CPU time, ratios
  local name=$1 iw=() ic=() pw=() pc=() i r
  shift
  for ((i = 0; i < REPEATS; i++)); do
    r=$(seconds "$BIN" "$@")
    iw+=("${r% *}") ic+=("${r#* }")
    r=$(seconds "$BIN" "$@" --in-process)
    pw+=("${r% *}") pc+=("${r#* }")
  done
  local a b c d
  a=$(median "${iw[@]}") b=$(median "${pw[@]}") c=$(median "${ic[@]}") d=$(median "${pc[@]}")
  python3 -c "print(f'{\"$name\"}: wall isolated {$a:.2f} s, in-process {$b:.2f} s, ratio {$a / $b:.3f}; CPU isolated {$c:.2f} s, in-process {$d:.2f} s, ratio {$c / $d:.3f}')"
  echo "  wall: ${iw[*]} / ${pw[*]}; CPU: ${ic[*]} / ${pc[*]}"
}

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
[ "$GOLDEN" = - ] || measure "check (golden set, plugin)" check --golden "$GOLDEN" --kernel "$PLUGIN"
measure "props --cases 200 --dtype f32 (llama-3.1-8b)" props --kernel "$PLUGIN" --preset llama-3.1-8b --cases 200 --dtype f32
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
