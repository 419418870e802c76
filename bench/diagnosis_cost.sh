#!/usr/bin/env bash
# What the differential diagnosis (checker/DIAGNOSIS.md) adds to a failing `ropecheck check`: the same
# check with --no-diagnose and with the diagnosis, alternating, RUNS times each; prints every wall time
# and the medians' ratio (diagnosis added / check without it), taken in this one run.
#
#   bash bench/diagnosis_cost.sh ROPECHECK GOLDEN_SET KERNEL [RUNS] [CHECK OPTIONS...]
#   e.g. bash bench/diagnosis_cost.sh build/release/cli/ropecheck big builtin:bf16-positions 3 --only cos,sin,q_rot,k_rot
set -u
[ $# -ge 3 ] || { echo "usage: $0 ROPECHECK GOLDEN_SET KERNEL [RUNS] [CHECK OPTIONS...]" >&2; exit 2; }
BIN=$1 SET=$2 KERNEL=$3 RUNS=${4:-3}
shift $(($# < 4 ? $# : 4))
wall() {  # seconds of one check
  local t0 t1
  t0=$(date +%s.%N)
  "$BIN" check --golden "$SET" --kernel "$KERNEL" "$@" >/dev/null 2>&1
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc
}
median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
without="" with=""
for _ in $(seq "$RUNS"); do
  a=$(wall "$@" --no-diagnose); b=$(wall "$@")
  echo "no diagnosis ${a} s   with diagnosis ${b} s"
  without+="$a"$'\n' with+="$b"$'\n'
done
m0=$(printf '%s' "$without" | median) m1=$(printf '%s' "$with" | median)
echo "median: check ${m0} s, with diagnosis ${m1} s, diagnosis added $(echo "$m1 - $m0" | bc) s = $(echo "scale=3; ($m1 - $m0) / $m0" | bc) x the check"
