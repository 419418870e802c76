#!/usr/bin/env bash
# Kernel plugins that misbehave (tests/plugins/bad_plugin.c, one build per mode) under `check`,
# `props` and `drift --compare`: a crash, a hang, an exit, a write outside the outputs or the
# message (past the guard bytes too), a signal to its own process group, a fork that keeps the socket,
# a closed socket, a hanging ropecheck_kernel_configure, unwritten or NaN outputs and unknown return
# codes are failed checks (exit 1) naming what happened, with the report still written; ropecheck
# itself never dies, hangs or exits 0 (plugin/include/ropecheck/plugin/client.hpp). Then what happens
# around the calls: a blocking destructor, forked children, a late write, a truncated arena; signals
# (nohup, an ignored SIGINT, another process killing the host, a stopped job); a host binary that is
# not ropecheck's; a kernel failing in one check shard only. Also: the kernel's stdout never reaches
# ropecheck's, and --in-process runs the good kernel the same way.
#
#   bash tests/cli/test_isolation.sh ROPECHECK BAD_PLUGIN_DIR [smoke]
#
# BAD_PLUGIN_DIR holds bad_plugin_<mode>.so. Prints PASS/FAIL per check and "N passed, M failed".
# With `smoke` (ctest cli_isolation_smoke): one crash, one hang, one overrun and NaN outputs under the
# three commands, a crash and a hang in the fused RoPE + attention call under check, then the good kernel; the rest runs in cli_isolation (label exhaustive).
set -u

if [ $# -lt 2 ] || [ $# -gt 3 ] || { [ $# -eq 3 ] && [ "$3" != smoke ]; }; then
  echo "usage: $0 ROPECHECK BAD_PLUGIN_DIR [smoke]" >&2
  exit 2
fi
SMOKE=0
[ $# -eq 3 ] && SMOKE=1
abspath() { case "$1" in /*) printf '%s\n' "$1" ;; *) printf '%s\n' "$PWD/$1" ;; esac; }
BIN=$(abspath "$1")
DIR=$(abspath "$2")
[ -x "$BIN" ] || { echo "no such executable: $BIN" >&2; exit 2; }
command -v python3 >/dev/null 2>&1 || { echo "python3 is required" >&2; exit 2; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/ropecheck_isolation.XXXXXX") || exit 2
trap 'rm -rf "$TMP"' EXIT
cd "$TMP" || exit 2

PASS=0
FAIL=0
check() {
  if [ -z "$2" ]; then PASS=$((PASS + 1)); echo "PASS $1"; else FAIL=$((FAIL + 1)); echo "FAIL $1: $2"; fi
}
# Every run is bounded: a hang of ropecheck itself is a failure of this test, not of CI.
run() {
  timeout 60 "$BIN" "$@" >"$TMP/out" 2>"$TMP/err"
  RC=$?
}
# json_has FILE PYTHON_EXPR: the expression over d (the JSON) is true.
json_has() {
  python3 - "$1" "$2" <<'PY' 2>&1
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    print("unreadable report: %s" % e); sys.exit(0)
if not eval(sys.argv[2]): print("report: %s is false" % sys.argv[2])
PY
}

"$BIN" golden --preset llama-3.1-8b --positions 0:32 --heads 2 --dtypes f32 --out "$TMP/G" --quiet >/dev/null 2>&1 ||
  { echo "cannot make the golden set" >&2; exit 2; }

# mode | what the message must say (a grep -E pattern; empty: no kernel failure)
CASES='exit0|exited with status 0 inside ropecheck_rope_apply
ctor_exit0|exited with status 0 while loading the library
underscore_exit|exited with status 0 inside ropecheck_rope_apply
segv|killed by SIGSEGV inside ropecheck_rope_apply
abort|killed by SIGABRT inside ropecheck_rope_apply
loop|no answer after 1 s inside ropecheck_rope_apply
overrun16|ropecheck_rope_apply wrote past the end of its output out
overrun1m|killed by SIGSEGV inside ropecheck_rope_apply|ropecheck_rope_apply wrote past the end of its output out
underrun|ropecheck_rope_apply wrote before the start of its output out
msg_overflow|ropecheck_rope_apply wrote past message_capacity
unwritten|ropecheck_rope_apply returned ROPECHECK_OK but left [0-9]+ of [0-9]+ elements of out unwritten
code42|ropecheck_rope_apply returned 42, which is neither ROPECHECK_OK nor ROPECHECK_UNSUPPORTED \(something went wrong\)
underrun1k|killed by SIGSEGV inside ropecheck_rope_apply|ropecheck_rope_apply wrote before the start of its output out
overrun128|ropecheck_rope_apply wrote past the end of its output out|killed by SIGSEGV inside ropecheck_rope_apply
kill_group|killed by SIGTERM, which it raised itself inside ropecheck_rope_apply
fork_segv|killed by SIGSEGV inside ropecheck_rope_apply
close_socket_hang|closed its connection to ropecheck and did not exit within 1 s \(killed\) inside ropecheck_rope_apply
configure_hang|no answer after 1 s inside ropecheck_kernel_configure
nan|'
[ "$SMOKE" = 1 ] && CASES=$(grep -E '^(segv|loop|overrun16|nan)\|' <<<"$CASES")

while IFS='|' read -r mode want want2; do
  [ -n "$want2" ] && want="$want|$want2"
  lib="$DIR/bad_plugin_$mode.so"
  [ -f "$lib" ] || { check "$mode: plugin built" "no $lib"; continue; }

  # check: exit 1, the failure named on stdout (one line per failed call), the report written and failed.
  rm -f "$TMP/r.json"
  run check --golden "$TMP/G" --kernel "$lib" --report "$TMP/r.json" --kernel-timeout 1
  p=""
  [ "$RC" -eq 1 ] || p+="exit code $RC (want 1); "
  grep -q '^FAIL' "$TMP/out" || p+="no FAIL line; "
  if [ -n "$want" ]; then
    grep -Eq "^KERNEL FAILURE: kernel '[^']*' \([^)]*bad_plugin_$mode.so\): ($want).* \(q_rot.f64: input q, 32 tokens x 2 heads, f64 output, spec llama-3.1-8b\)$" "$TMP/out" ||
      p+="no KERNEL FAILURE line for q_rot.f64 matching '$want': $(grep -m1 KERNEL "$TMP/out"); "
    [ -f "$TMP/r.json" ] && p+=$(json_has "$TMP/r.json" 'd["pass"] is False and any("q_rot.f64" in f["outputs"] for f in d["candidate_source"]["failures"]) and any(t["golden"] == "q_rot.f64" and not t["verdict"]["pass"] for t in d["tensors"])')
  else
    [ -f "$TMP/r.json" ] && p+=$(json_has "$TMP/r.json" 'd["pass"] is False and all(t["metrics"]["nan"] == t["elements"] for t in d["tensors"])')
  fi
  [ -f "$TMP/r.json" ] || p+="no report; "
  check "$mode: check fails (exit 1), names what happened, writes the report" "$p"

  # props: exit 1, the property fails naming the failure, calls lost counted, the report written.
  # A counterexample that is a kernel failure is not replayed as a golden-set check (it would only
  # crash or hang again: a timeout per replay); one crashing and one hanging mode run with the
  # diagnosis on to show that, the others skip it.
  rm -f "$TMP/p.json"
  diagnose=--no-diagnose
  [ "$mode" = segv ] || [ "$mode" = loop ] && diagnose=
  run props --kernel "$lib" --preset llama-3.1-8b --only relative_shift,norm --cases 5 --report "$TMP/p.json" --kernel-timeout 1 $diagnose
  p=""
  [ "$RC" -eq 1 ] || p+="exit code $RC (want 1); "
  grep -q '^FAIL relative_shift' "$TMP/out" || p+="relative_shift did not fail; "
  if [ -z "$diagnose" ]; then
    grep -q 'counterexample replayed' "$TMP/out" && p+="a kernel failure was replayed; "
    grep -q '^  diagnosis: none (the kernel failed' "$TMP/out" || p+="no note that the kernel failure is not diagnosed; "
  fi
  if [ -n "$want" ]; then
    grep -Eq "^  counterexample: kernel failure: .*($want)" "$TMP/out" || p+="no counterexample naming '$want'; "
    grep -Eq "^  relative_shift: kernel calls lost: [1-9][0-9]* of [1-9]" "$TMP/out" || p+="no count of lost calls; "
    [ -f "$TMP/p.json" ] && p+=$(json_has "$TMP/p.json" 'd["passed"] is False and all(not q["passed"] and "kernel failure" in q["counterexample"] for q in d["properties"])')
  fi
  [ -f "$TMP/p.json" ] || p+="no report; "
  check "$mode: props fails (exit 1), names what happened, counts lost calls, writes the report" "$p"

  # drift --compare: the outputs are written, exit 1, kernel_failures in compare.json.
  rm -rf "$TMP/D"
  run drift --preset llama-3.1-8b --compare "hf,plugin:$lib" --dtype f32 --max-pos 512 --no-plots --no-uniqueness \
    --out "$TMP/D" --kernel-timeout 1 --junit "$TMP/D.xml"
  p=""
  [ "$RC" -eq 1 ] || p+="exit code $RC (want 1); "
  # Once, with --junit too (it printed the failures twice).
  [ "$(grep -c '^KERNEL FAILURE' "$TMP/out")" -eq 1 ] || p+="KERNEL FAILURE printed $(grep -c '^KERNEL FAILURE' "$TMP/out") times; "
  grep -q '<failure type="fail" message="kernel calls failed"' "$TMP/D.xml" 2>/dev/null || p+="no failing JUnit case; "
  [ -n "$want" ] || want="returned [0-9]+ non-finite values"
  grep -Eq "^KERNEL FAILURE: [0-9]+ of [0-9]+ kernel calls lost; first: .*($want)" "$TMP/out" ||
    p+="no KERNEL FAILURE line matching '$want': $(grep -m1 KERNEL "$TMP/out"); "
  [ -f "$TMP/D/compare.json" ] && p+=$(json_has "$TMP/D/compare.json" 'len(d["kernel_failures"]) == 1')
  [ -f "$TMP/D/compare.json" ] || p+="no compare.json; "
  ls -a "$TMP" | grep -q partial && p+="a partial folder was left; "
  check "$mode: drift --compare fails (exit 1), names what happened, writes its outputs and JUnit, prints the failure once" "$p"
done <<<"$CASES"

# The fused entry point (ropecheck_rope_attention) under check: a set with an attention block, only its
# outputs asked for (f64 alone keeps a hang's timeouts to one per call). A crash and a hang there are
# that kernel's KERNEL FAILURE, the outputs fail (NaN), exit 1.
"$BIN" golden --preset llama-3.1-8b --positions 0:4 --heads 2 --dtypes f64 --attention causal:0:4 --out "$TMP/GA" \
  --quiet >/dev/null 2>&1 || { echo "cannot make the golden set with an attention block" >&2; exit 2; }
for pair in 'segv|killed by SIGSEGV' 'loop|no answer after 1 s'; do
  mode=${pair%%|*} want=${pair#*|}
  lib="$DIR/bad_plugin_$mode.so"
  rm -f "$TMP/a.json"
  run check --golden "$TMP/GA" --kernel "$lib" --only attention_out --report "$TMP/a.json" --kernel-timeout 1
  p=""
  [ "$RC" -eq 1 ] || p+="exit code $RC (want 1); "
  grep -Eq "^KERNEL FAILURE: kernel '[^']*' \([^)]*bad_plugin_$mode.so\): $want inside ropecheck_rope_attention.* \(attention_out.f64: a block of 4 tokens x 2 query heads, f64 output, spec llama-3.1-8b\)$" "$TMP/out" ||
    p+="no KERNEL FAILURE line for attention_out.f64: $(grep KERNEL "$TMP/out" | tail -1); "
  [ -f "$TMP/a.json" ] && p+=$(json_has "$TMP/a.json" 'd["pass"] is False and any("attention_out.f64" in f["outputs"] for f in d["candidate_source"]["failures"]) and d["attention"][0]["failed"] == d["attention"][0]["elements"]')
  [ -f "$TMP/a.json" ] || p+="no report; "
  check "$mode: the fused call's failure is the kernel's (check exit 1, KERNEL FAILURE, outputs failed)" "$p"
done

# The good kernel passes all three, isolated and in-process; an isolated kernel's stdout goes to
# stderr (in-process it is ropecheck's own stdout, as documented).
for mode in good stdout; do
  lib="$DIR/bad_plugin_$mode.so"
  hows=("" "--in-process")
  [ "$mode" = stdout ] && hows=("")
  for how in "${hows[@]}"; do
    run check --golden "$TMP/G" --kernel "$lib" --class fp32-angle $how
    p=""
    [ "$RC" -eq 0 ] || p+="check exit code $RC; "
    grep -q '^PASS$' "$TMP/out" && p+="the kernel's PASS line reached stdout; "
    run props --kernel "$lib" --preset llama-3.1-8b --max-pos 1000000 --only relative_shift,norm --cases 5 $how
    [ "$RC" -eq 0 ] || p+="props exit code $RC; "
    n=$(grep -c 'all properties hold' "$TMP/out")
    [ "$n" -eq 1 ] || p+="'all properties hold' $n times on stdout; "
    rm -rf "$TMP/D"
    run drift --preset llama-3.1-8b --compare "hf,plugin:$lib" --dtype f32 --max-pos 512 --no-plots --no-uniqueness \
      --out "$TMP/D" $how
    [ "$RC" -eq 0 ] || p+="drift exit code $RC; "
    if [ "$mode" = stdout ] && [ -z "$how" ]; then
      grep -q 'all properties hold' "$TMP/err" || p+="the kernel's stdout did not reach stderr; "
    fi
    check "$mode ${how:-isolated}: check, props and drift pass" "$p"
  done
done
if [ "$SMOKE" = 1 ]; then
  echo
  echo "$PASS passed, $FAIL failed (smoke: the other modes and what happens around the calls are in cli_isolation)"
  [ "$FAIL" -eq 0 ]
  exit
fi

# The kernel host keeps guard pages protected across calls: an overrun after several good calls (the
# plugin's fourth call in each host process) is still stopped at the guard page (SIGSEGV) and reported.
# One case: the first case already makes the fourth call; with more, RapidCheck shrinks the failure
# through hundreds of host restarts (1668 calls for 5 cases: a fifth of this whole test's time).
rm -f "$TMP/p.json"
run props --kernel "$DIR/bad_plugin_late_overrun1m.so" --preset llama-3.1-8b --only relative_shift,norm --cases 1 \
  --report "$TMP/p.json" --kernel-timeout 5
p=""
[ "$RC" -eq 1 ] || p+="exit code $RC (want 1); "
grep -Eq "^  counterexample: kernel failure: .*killed by SIGSEGV inside ropecheck_rope_apply \(after writing past the end of its out\)" "$TMP/out" ||
  p+="no counterexample naming the overrun: $(grep -m1 counterexample "$TMP/out"); "
[ -f "$TMP/p.json" ] && p+=$(json_has "$TMP/p.json" 'd["passed"] is False and any("kernel failure" in q.get("counterexample", "") for q in d["properties"])')
[ -f "$TMP/p.json" ] || p+="no report; "
check "late_overrun1m: an overrun after good calls fails props (exit 1) naming it" "$p"

# A kernel that leaves work behind: a library destructor that never returns (the host is killed after
# the grace period, min(--kernel-timeout, 5 s) = 1 s here, and the run ends with its verdict); a
# process it forked that sleeps holding stderr (killed with the host's process group: a pipe reading
# ropecheck's output closes when ropecheck exits); a thread that zeroes the last output when the
# library unloads (a write after the call returned: a failed check); truncating the shared memory
# (sealed: the kernel gets EPERM, ropecheck no SIGBUS).
for cmd in check props drift; do
  case $cmd in
    check) args=(check --golden "$TMP/G" --kernel "$DIR/bad_plugin_dtor_hang.so" --kernel-timeout 1) ;;
    props) args=(props --kernel "$DIR/bad_plugin_dtor_hang.so" --preset llama-3.1-8b --only norm --cases 2 --kernel-timeout 1) ;;
    drift) rm -rf "$TMP/D"
           args=(drift --preset llama-3.1-8b --compare "hf,plugin:$DIR/bad_plugin_dtor_hang.so" --dtype f32 --max-pos 64
                 --no-plots --no-uniqueness --out "$TMP/D" --kernel-timeout 1) ;;
  esac
  run "${args[@]}"
  p=""
  [ "$RC" -eq 0 ] || p+="exit code $RC (want 0: the outputs were right); "
  [ $cmd = check ] && { grep -q "^note: .*the kernel host did not exit within 1 s of being stopped" "$TMP/out" || p+="no note on the host; "; }
  check "dtor_hang: $cmd ends (exit 0) although the library's destructor never returns" "$p"
done
started=$(date +%s)
timeout 30 bash -c '"$1" check --golden "$2" --kernel "$3" 2>&1 | cat >/dev/null' _ "$BIN" "$TMP/G" "$DIR/bad_plugin_fork_child.so"
RC=$?
p=""
[ "$RC" -eq 0 ] || p+="exit code $RC; "
[ $(($(date +%s) - started)) -lt 10 ] || p+="the pipe stayed open $(($(date +%s) - started)) s (the forked child outlived ropecheck); "
pgrep -f "bad_plugin_fork_child" >/dev/null && p+="a forked child is still running; "
check "fork_child: processes the kernel forked end with its host (a pipe on ropecheck's output closes)" "$p"
rm -f "$TMP/r.json"
run check --golden "$TMP/G" --kernel "$DIR/bad_plugin_late_write.so" --report "$TMP/r.json"
p=""
[ "$RC" -eq 1 ] || p+="exit code $RC (want 1); "
grep -Eq "^KERNEL FAILURE: .*ropecheck_rope_cos_sin wrote to its output (cos|sin) after returning \(cos.f32 / sin.f32: " "$TMP/out" ||
  p+="no KERNEL FAILURE naming the late write: $(grep -m1 KERNEL "$TMP/out"); "
[ -f "$TMP/r.json" ] && p+=$(json_has "$TMP/r.json" 'd["pass"] is False and any("sin.f32" in f["outputs"] for f in d["candidate_source"]["failures"])')
check "late_write: an output overwritten after the call returned fails check (exit 1)" "$p"
rm -rf "$TMP/D"
run drift --preset llama-3.1-8b --compare "hf,plugin:$DIR/bad_plugin_late_write.so" --dtype f32 --max-pos 64 --no-plots \
  --no-uniqueness --out "$TMP/D"
p=""
[ "$RC" -eq 1 ] || p+="exit code $RC (want 1); "
grep -Eq "^KERNEL FAILURE: .* wrote to its output (out|cos|sin) after returning" "$TMP/out" ||
  p+="no KERNEL FAILURE naming the late write: $(grep -m1 KERNEL "$TMP/out"); "
check "late_write: drift --compare fails (exit 1) on an output overwritten after the call returned" "$p"
run check --golden "$TMP/G" --kernel "$DIR/bad_plugin_truncate_arena.so"
p=""
[ "$RC" -eq 0 ] || p+="check exit code $RC (want 0: the arena is sealed, the outputs right); "
run props --kernel "$DIR/bad_plugin_truncate_arena.so" --preset llama-3.1-8b --only norm --cases 2
[ "$RC" -eq 0 ] || p+="props exit code $RC; "
check "truncate_arena: a kernel truncating the shared memory does not end ropecheck (check, props pass)" "$p"

# Signals. Each run is started in a session of its own (setsid: ropecheck is its process group's
# leader, so a group signal reaches what a terminal's would); the env plugin creates $BAD_PLUGIN_MARK
# when a call starts and waits for $BAD_PLUGIN_WAIT, so a signal lands during the call every time.
ENVLIB="$DIR/bad_plugin_env.so"
export BAD_PLUGIN_MARK="$TMP/mark" BAD_PLUGIN_WAIT="$TMP/go"
start_env_run() {  # start_env_run IGNORED_SIGNAL|- ARGS...: runs ropecheck in the background, sets PID
  local ign=$1
  shift
  rm -f "$TMP/mark" "$TMP/go"
  if [ "$ign" = - ]; then
    setsid "$BIN" "$@" >"$TMP/out" 2>"$TMP/err" &
  else
    (trap '' "$ign"; exec setsid "$BIN" "$@" >"$TMP/out" 2>"$TMP/err") &
  fi
  PID=$!
}
wait_mark() {  # until a call has started (10 s at most)
  local i
  for ((i = 0; i < 1000; i++)); do [ -e "$TMP/mark" ] && return 0; sleep 0.01; done
  return 1
}
host_of() { pgrep -P "$1" -f ropecheck-kernel-host | head -n 1; }
finish_env_run() {
  touch "$TMP/go"
  wait "$PID"
  RC=$?
}
env_check=(check --golden "$TMP/G" --kernel "$ENVLIB" --kernel-timeout 5)

# nohup (SIGHUP ignored) and a script's background job (SIGINT ignored): the signal to the group ends
# neither ropecheck nor the host, and the check passes.
for sig in HUP INT; do
  start_env_run "$sig" "${env_check[@]}"
  p=""
  wait_mark || p+="no call started; "
  kill -"$sig" -- -"$PID" 2>/dev/null
  sleep 0.1
  finish_env_run
  [ "$RC" -eq 0 ] || p+="exit code $RC (want 0): $(grep -m1 KERNEL "$TMP/out"); "
  check "SIG$sig ignored by ropecheck and sent to its group: the host ignores it too (check passes)" "$p"
done
# A termination signal from another process to the host is not the kernel's failure: the call is made
# again on a fresh host (check and props pass); the third such death in one call ends the run (exit 2).
for cmd in check props; do
  if [ $cmd = check ]; then args=("${env_check[@]}"); else
    args=(props --kernel "$ENVLIB" --preset llama-3.1-8b --only norm --cases 2 --kernel-timeout 5); fi
  start_env_run - "${args[@]}"
  p=""
  wait_mark || p+="no call started; "
  h=$(host_of "$PID")
  [ -n "$h" ] && kill -TERM "$h"
  finish_env_run
  [ "$RC" -eq 0 ] || p+="exit code $RC (want 0): $(grep -m1 -i 'KERNEL FAILURE\|counterexample' "$TMP/out") $(head -c 300 "$TMP/err"); "
  check "$cmd: a host killed by another process's SIGTERM is started again, the run passes" "$p"
done
start_env_run - "${env_check[@]}"
p=""
for k in 1 2 3; do
  wait_mark || p+="call $k did not start; "
  h=$(host_of "$PID")
  rm -f "$TMP/mark"
  [ -n "$h" ] && kill -TERM "$h"
done
finish_env_run
[ "$RC" -eq 2 ] || p+="exit code $RC (want 2); "
grep -q "^ropecheck: error: .*the kernel host was killed by SIGTERM sent by process [0-9]* inside ropecheck_rope_apply, 3 times: not the kernel's doing" "$TMP/err" ||
  p+="stderr: $(head -c 300 "$TMP/err"); "
check "a host killed by others three times in one call: exit 2, not the kernel's failure" "$p"

# A job stopped longer than --kernel-timeout (Ctrl-Z, a frozen CI runner): both stopped 1.5 s during a
# call with a 1 s timeout; ropecheck resumes first and the kernel 0.3 s later. The stopped time is not
# the kernel's, so the call does not time out.
start_env_run - check --golden "$TMP/G" --kernel "$ENVLIB" --kernel-timeout 1
p=""
wait_mark || p+="no call started; "
h=$(host_of "$PID")
kill -STOP "$PID" $h
sleep 1.5
kill -CONT "$PID"
sleep 0.3
touch "$TMP/go"
[ -n "$h" ] && kill -CONT "$h"
finish_env_run
[ "$RC" -eq 0 ] || p+="exit code $RC (want 0): $(grep -m1 KERNEL "$TMP/out"); "
check "a job stopped longer than --kernel-timeout during a call does not time the kernel out" "$p"
unset BAD_PLUGIN_MARK BAD_PLUGIN_WAIT

# A kernel that failed in one shard only (a flaky runner): the parts merge into a failed run (exit 1)
# that keeps the failing part's KERNEL FAILURE list.
rm -f "$TMP"/s1.json "$TMP"/s2.json "$TMP/merged.json"
run check --golden "$TMP/G" --kernel "$ENVLIB" --shard 1/2 --report "$TMP/s1.json"
BAD_PLUGIN_CRASH=1 run check --golden "$TMP/G" --kernel "$ENVLIB" --shard 2/2 --report "$TMP/s2.json"
run merge "$TMP/s1.json" "$TMP/s2.json" --out "$TMP/merged.json"
p=""
[ "$RC" -eq 1 ] || p+="exit code $RC (want 1): $(head -c 300 "$TMP/err"); "
[ -f "$TMP/merged.json" ] && p+=$(json_has "$TMP/merged.json" 'd["pass"] is False and len(d["candidate_source"]["failures"]) > 0 and all("killed by SIGSEGV" in f["message"] for f in d["candidate_source"]["failures"])')
[ -f "$TMP/merged.json" ] || p+="no merged report; "
check "merge: a kernel failure in one check part only is merged (exit 1), its KERNEL FAILURE list kept" "$p"

# The kernel host itself unusable (a packaging error, a host of another build): exit 2 naming the host,
# never the kernel's failure.
printf '#!/bin/sh\nexec sleep 30\n' >"$TMP/host_hangs"
printf '#!/bin/sh\nprintf "garbage-garbage-" >&3\nsleep 1\n' >"$TMP/host_foreign"
chmod +x "$TMP/host_hangs" "$TMP/host_foreign"
for h in /bin/true "$TMP/host_hangs" "$TMP/host_foreign" "$TMP/no_such_host"; do
  rm -f "$TMP/h.json"
  ROPECHECK_KERNEL_HOST=$h run check --golden "$TMP/G" --kernel "$DIR/bad_plugin_good.so" --kernel-timeout 1 --report "$TMP/h.json"
  p=""
  [ "$RC" -eq 2 ] || p+="exit code $RC (want 2); "
  grep -q "^ropecheck: error: .*kernel host $h" "$TMP/err" || p+="stderr does not name the host: $(head -c 300 "$TMP/err"); "
  [ -e "$TMP/h.json" ] && p+="a report was written; "
  check "ROPECHECK_KERNEL_HOST=$(basename "$h"): exit 2 naming the host" "$p"
done

# Declared capabilities: negative positions let `inverse` run for a plugin.
run props --kernel "$DIR/bad_plugin_good.so" --preset llama-3.1-8b --max-pos 1000000 --only inverse --cases 5
p=""
[ "$RC" -eq 0 ] || p+="exit code $RC; "
grep -Eq '^inverse +cases +5 \(skipped +0\)' "$TMP/out" || p+="inverse did not run: $(grep -m1 '^inverse' "$TMP/out"); "
check "a plugin declaring ROPECHECK_CAP_NEGATIVE_POSITIONS runs the inverse property" "$p"

# Declared output dtypes: bf16 is not declared, so it is skipped without a call, with a note, and the
# asked-for bf16 outputs are not tested (exit 3, never 0).
"$BIN" golden --preset llama-3.1-8b --positions 0:8 --dtypes bf16 --out "$TMP/Gb" --quiet >/dev/null 2>&1
run check --golden "$TMP/Gb" --kernel "$DIR/bad_plugin_good.so" --report "$TMP/r.json"
p=""
[ "$RC" -eq 3 ] || p+="exit code $RC (want 3: bf16 not tested); "
grep -q "^note: q_rot.bf16, k_rot.bf16 skipped: .*ropecheck_kernel_capabilities" "$TMP/out" || p+="no note on bf16; "
[ -f "$TMP/r.json" ] && p+=$(json_has "$TMP/r.json" 'd["candidate_source"]["capabilities"] == 1 + 256 + 512')
check "a plugin declaring f64 and f32 output only: bf16 skipped with a note, capabilities in the report" "$p"

# Options.
run check --golden "$TMP/G" --kernel "$DIR/bad_plugin_good.so" --kernel-timeout 0
check "--kernel-timeout 0 is refused (exit 2)" "$([ "$RC" -eq 2 ] || echo "exit code $RC")"

echo
echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
