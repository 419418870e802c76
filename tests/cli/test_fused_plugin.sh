#!/usr/bin/env bash
# The kernel ABI's revision-3 fused entry points end to end (abi/KERNEL_ABI.md, "Revision 3"), through the
# isolated host: the example plugin tests/plugins/fused_plugin.c (one build; mistakes switched by its
# options) and libropecheck_builtin_kernels.so store a --stores set's FP8 / q8_0 codes and append a
# --kv-cache set's cache, judged by the stores and KV-cache checks; a store or cache mistake fails; a
# revision-2 kernel (bad_plugin_good.so) leaves stores and cache not tested (exit 3, never passed); a
# crash, a hang and a write past the output in either fused entry are the kernel's failure (exit 1, the
# entry point named), never a crash of ropecheck. A Q/K-norm or MLA set is checked on a kernel declaring
# ROPECHECK_CAP_QK_NORM / _MLA and not tested on one that does not.
#
#   bash tests/cli/test_fused_plugin.sh ROPECHECK FUSED_PLUGIN BUILTIN_PLUGIN REVISION2_PLUGIN
set -u
[ $# -eq 4 ] || { echo "usage: $0 ROPECHECK FUSED_PLUGIN BUILTIN_PLUGIN REVISION2_PLUGIN" >&2; exit 2; }
BIN=$1 F=$2 B=$3 R2=$4
TMP=$(mktemp -d "${TMPDIR:-/tmp}/ropecheck_fused.XXXXXX") || exit 2
trap 'rm -rf "$TMP"' EXIT
cd "$TMP" || exit 2
PASS=0 FAIL=0
check() { if [ -z "$2" ]; then PASS=$((PASS + 1)); echo "PASS $1"; else FAIL=$((FAIL + 1)); echo "FAIL $1: $2"; fi; }
run() { timeout 30 "$BIN" "$@" >out 2>err; RC=$?; }
json() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if eval(sys.argv[2]) else 1)' "$@" || echo "report: $2 is false; "; }

"$BIN" golden --preset llama-3.1-8b --positions 0:8 --heads 2 --dtypes f32 --stores e4m3fn,q8_0 --out S --quiet >/dev/null || exit 2
echo '{"sequences": [{"cached": 0, "appended": 5}, {"cached": 6, "appended": 1}], "cache": "paged", "layout": "HND", "page_size": 4}' >b.json
"$BIN" golden --preset llama-3.1-8b --kv-cache b.json --heads 2 --dtypes f32 --out K --quiet >/dev/null || exit 2

# Correct stores: no element or scale fails (the undecidable codes leave them not tested: exit 3).
run check --golden S --kernel "$F" --only q_rot.e4m3fn,k_rot.q8_0 --report r.json
p=""; [ "$RC" -eq 3 ] || p+="exit $RC (want 3); "
p+=$(json r.json 'len(d["stores"]["stores"]) == 2 and all(s["elements"]["failed"] == 0 and s["scale_groups"]["failed"] == 0 for s in d["stores"]["stores"])')
check "fused plugin: its FP8 and q8_0 stores fail nothing" "$p"
run check --golden S --kernel "$F:scale_twice" --only q_rot.e4m3fn --report r.json
p=""; [ "$RC" -eq 1 ] || p+="exit $RC (want 1); "
p+=$(json r.json 'd["stores"]["stores"][0]["verdict"] == "fail"')
check "fused plugin, scale applied twice: the FP8 store fails" "$p"
run check --golden S --kernel "$R2" --report r.json
p=""; [ "$RC" -eq 3 ] || p+="exit $RC (want 3); "
p+=$(json r.json '"stores" not in d and {"q_rot.e4m3fn", "k_rot.q8_0"} <= set(d["not_tested"])')
grep -q "ropecheck_rope_quantize" out || p+="no note naming ropecheck_rope_quantize; "
check "revision-2 kernel: the stores are not tested, never passed" "$p"

# A given FP8 scale (e4m3fn:scale=V): the in-process builtin kernel stores with it; through the ABI (whose
# store params carry derived scales only) the store is not tested, never passed, and the reason is named.
"$BIN" golden --preset llama-3.1-8b --positions 0:8 --heads 2 --dtypes f32 --stores e4m3fn:scale=0.0625 --out GS --quiet >/dev/null || exit 2
run check --golden GS --kernel builtin:hf --only q_rot.e4m3fn --report r.json
p=""; [ "$RC" -eq 0 ] || [ "$RC" -eq 3 ] || p+="exit $RC (want 0 or 3); "
p+=$(json r.json 'd["stores"]["stores"][0]["elements"]["failed"] == 0 and d["stores"]["stores"][0]["elements"]["passed"] > 0')
check "builtin:hf in process: a given-scale store fails nothing" "$p"
run check --golden GS --kernel "$B" --only q_rot.e4m3fn --report r.json
p=""; [ "$RC" -eq 3 ] || p+="exit $RC (want 3); "
p+=$(json r.json '"stores" not in d and "q_rot.e4m3fn" in d["not_tested"]')
grep -q "given FP8 scale" out || p+="no note naming the given scale; "
check "builtin module through the ABI: a given-scale store is not tested, the reason named" "$p"

# The cache.
for k in "$F" "$B"; do
  run check --golden K --kernel "$k" --report r.json
  p=""; [ "$RC" -eq 0 ] || p+="exit $RC (want 0); "
  p+=$(json r.json 'd["kv_cache"]["verdict"] == "pass" and d["kv_cache"]["missing_writes"] == 0')
  check "$(basename "$k"): its paged HND append passes" "$p"
done
run check --golden K --kernel "$F:next_page" --report r.json
p=""; [ "$RC" -eq 1 ] || p+="exit $RC (want 1); "
p+=$(json r.json 'd["kv_cache"]["verdict"] == "fail" and d["kv_cache"]["out_of_slot_writes"] > 0')
check "fused plugin, one page late: the cache fails" "$p"
run check --golden K --kernel "$R2" --report r.json
p=""; [ "$RC" -eq 3 ] || p+="exit $RC (want 3); "
p+=$(json r.json 'd["verdict"] == "not-tested" and not d["pass"] and "kv_cache" in d["not_tested"]')
check "revision-2 kernel: the cache is not tested, never passed" "$p"

# Q/K norm and MLA specs: checked on a kernel that declares them (the builtin module), not tested on one
# that does not (never passed).
"$BIN" golden --preset qwen3-8b --positions 0:4 --heads 2 --dtypes f32 --out N --quiet >/dev/null || exit 2
"$BIN" golden --preset deepseek-v3-mla --positions 0:4 --heads 2 --dtypes f32 --out M --quiet >/dev/null || exit 2
for set in N M; do
  run check --golden "$set" --kernel "$B" --report r.json
  p=""; [ "$RC" -eq 0 ] || p+="exit $RC (want 0); "
  check "builtin module, $set: the norm / MLA spec is checked and passes" "$p"
  run check --golden "$set" --kernel "$R2" --report r.json
  p=""; [ "$RC" -eq 3 ] || p+="exit $RC (want 3); "
  p+=$(json r.json 'not d["pass"] and "q_rot.f32" in d["not_tested"]')
  grep -Eq "ROPECHECK_CAP_(QK_NORM|MLA)" out || p+="no note naming the capability; "
  check "revision-2 kernel, $set: the norm / MLA outputs are not tested" "$p"
done

# Isolation: each misbehaviour is the kernel's failure, named, with the report written.
while IFS='|' read -r opt set entry want; do
  rm -f r.json
  run check --golden "$set" --kernel "$F:$opt" --kernel-timeout 1 --report r.json
  p=""; [ "$RC" -eq 1 ] || p+="exit $RC (want 1); "
  grep -Eq "^KERNEL FAILURE: kernel 'fused-example' .*$want" out || p+="no KERNEL FAILURE matching '$want': $(head -c 300 out); "
  [ -f r.json ] || p+="no report; "
  check "fused plugin, $opt: a failure of $entry" "$p"
done <<'CASES'
crash=quantize|S|ropecheck_rope_quantize|killed by SIGSEGV inside ropecheck_rope_quantize
overrun=quantize|S|ropecheck_rope_quantize|ropecheck_rope_quantize wrote past the end of its output codes
crash=append|K|ropecheck_rope_append_kv|killed by SIGSEGV inside ropecheck_rope_append_kv
hang=append|K|ropecheck_rope_append_kv|no answer after 1 s inside ropecheck_rope_append_kv
overrun=append|K|ropecheck_rope_append_kv|ropecheck_rope_append_kv wrote past the end of its output k_cache
CASES

echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
