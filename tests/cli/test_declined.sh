#!/usr/bin/env bash
# A kernel that declines a spec gets one verdict from every command: not tested (exit 3), with the
# kernel's own reason, never unusable input (exit 2, which stays for input ropecheck cannot use).
# check --kernel, props --kernel and drift --compare on the same spec and the same declining plugin
# (tests/plugins/test_plugin.cpp, mode unsupported_all: UNSUPPORTED "nothing implemented" for every
# call); Python's check() and the conformance command are tested in tests/python/package.
#   test_declined.sh ROPECHECK TEST_PLUGIN_DIR
BIN=$(realpath "$1")
PLUGIN=$(realpath "$2")/test_plugin_unsupported_all.so
. "$(dirname "$0")/harness.sh" declined

# expect3 DESCRIPTION ARGS...: exit 3, nothing on stderr but notes, the kernel's reason on stdout.
expect3() {
  local desc=$1 p=""
  shift
  "$BIN" "$@" >out.txt 2>err.txt
  local rc=$?
  [ "$rc" -eq 3 ] || p+="exit $rc (want 3: $(head -c 300 err.txt)); "
  grep -q 'nothing implemented' out.txt || p+="the kernel's reason is not on stdout; "
  grep -q '^ropecheck: error' err.txt && p+="an error on stderr; "
  check "$desc" "$p"
}

for preset in llama-3.2-1b phi-3.5-mini; do
  "$BIN" golden --preset "$preset" --positions 0:32,4095 --dtypes f32 --out "set-$preset" --quiet >/dev/null ||
    { fail "golden --preset $preset"; continue; }
  expect3 "$preset: check --kernel (declined)" check --golden "set-$preset" --kernel "$PLUGIN" --report r.json --junit j.xml
  grep -q '<skipped type="not-tested" message="the kernel declined it: .*nothing implemented' j.xml
  check "$preset: JUnit skips each asked-for output with the kernel's reason" "$([ $? -eq 0 ] || head -c 300 j.xml)"
  grep -q '^NOT TESTED: ' out.txt
  check "$preset: check's verdict line is NOT TESTED" "$([ $? -eq 0 ] || echo "$(tail -1 out.txt)")"
  python3 - r.json <<'PY' >py.txt
import json, sys
d = json.load(open(sys.argv[1]))
ok = d["verdict"] == "not-tested" and "nothing implemented" in (d["declined"] or "") and d["tensors"] == []
print("" if ok else "report %r %r" % (d["verdict"], d["declined"]))
PY
  check "$preset: check's report: not-tested, declined with the reason" "$(cat py.txt)"
  expect3 "$preset: props --kernel (declined)" props --preset "$preset" --kernel "$PLUGIN" --cases 5 --dtype f32
  expect3 "$preset: drift --compare (declined)" drift --preset "$preset" --compare "builtin:hf,$PLUGIN" --max-pos 512 \
    --dtype f32 --no-plots --out "drift-$preset"
  check "$preset: drift --compare wrote nothing" "$([ ! -e "drift-$preset" ] || echo "drift-$preset exists")"
done

# Unusable input stays exit 2: a plugin that does not exist.
"$BIN" check --golden set-llama-3.2-1b --kernel ./no_such_plugin.so >out.txt 2>err.txt
rc=$?
check "a missing plugin is unusable input (exit 2)" "$([ "$rc" -eq 2 ] || echo "exit $rc")"
finish
