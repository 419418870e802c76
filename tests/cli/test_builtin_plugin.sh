#!/usr/bin/env bash
# ropecheck's own CPU kernels exported through kernel_abi.h (libropecheck_builtin_kernels.so,
# kut/src/builtin_plugin.cpp) as a plugin of check, props and drift give what the built-in kernels give:
#   check --kernel LIB:RECIPE       the same exit code and the same report, tensor by tensor (every error
#                                   figure, the worst elements), as --kernel builtin:RECIPE
#   props --kernel LIB:RECIPE       the same exit code, per-property verdicts and margins as --kernel
#                                   builtin:RECIPE (given its class and dtype)
#   drift --recipes plugin:LIB:R    the same breakdown positions per class as the recipe R
# and unusable options exit 2 with one line. The plugin runs with `:threads=1` (the same bytes at any
# thread count; OpenMP's idle workers in the kernel host would spin for most of the test's CPU time).
#
#   bash tests/cli/test_builtin_plugin.sh ROPECHECK LIBROPECHECK_BUILTIN_KERNELS
set -u
abspath() { case "$1" in /*) printf '%s\n' "$1" ;; *) printf '%s\n' "$PWD/$1" ;; esac; }
BIN=$(abspath "$1")
LIB=$(abspath "$2")
. "$(dirname "$0")/harness.sh" builtin_plugin

"$BIN" golden --preset llama-3.1-8b --positions log:131071:6 --heads 2 --dtypes f32,bf16,f16 --out g >/dev/null 2>&1 &&
  "$BIN" golden --preset qwen2-vl-7b --positions 0:16 --heads 2 --dtypes f32,bf16 --out gv >/dev/null 2>&1 &&
  "$BIN" golden --preset fairseq-transformer --positions 0:32 --dtypes f32,bf16 --out gs >/dev/null 2>&1 ||
  { echo "golden sets not written"; exit 1; }

# ---- check: the same exit code and report ----------------------------------------------------------
for args in "g hf fp32-angle" "g accurate f32-reduced" "gv hf bf16-table" "gs accurate fp32-angle"; do
  set -- $args
  set_dir=$1 recipe=$2 cls=$3
  "$BIN" check --golden "$set_dir" --kernel "builtin:$recipe" --class "$cls" --report builtin.json >builtin.txt 2>builtin.err; rc_b=$?
  "$BIN" check --golden "$set_dir" --kernel "$LIB:$recipe:threads=1" --class "$cls" --report abi.json >abi.txt 2>abi.err; rc_a=$?
  p=""
  [ "$rc_b" -le 1 ] || p+="builtin exit $rc_b ($(head -c 200 builtin.err)); "
  [ "$rc_a" -eq "$rc_b" ] || p+="exit $rc_a, builtin $rc_b ($(head -c 200 abi.err)); "
  python3 - builtin.json abi.json "$recipe" <<'PY' || p+="reports differ; "
import json, sys
b, a = (json.load(open(f)) for f in sys.argv[1:3])
recipe = sys.argv[3]
src = a.pop("candidate_source")
b.pop("candidate_source")
assert src["kind"] == "kernel" and src["name"].startswith("builtin:" + recipe + " ("), src
def strip(r):  # what names the kernel or the run, not what it computed
    for k in ("created", "command", "elapsed_s", "title"):
        r.pop(k, None)
    return r
if strip(a) != strip(b):
    for k in sorted(set(a) | set(b)):
        if a.get(k) != b.get(k):
            print("differs:", k, str(a.get(k))[:300], "|", str(b.get(k))[:300])
    sys.exit(1)
PY
  check "check $set_dir --kernel LIB:$recipe --class $cls: builtin:$recipe's exit ($rc_b) and report" "$p"
done

# ---- props: the same verdicts and margins ----------------------------------------------------------
# builtin:R claims its recipe's class in the dtype run; the plugin is given that class. Every line but the
# header naming the target (each property's verdict, cases, worst and RMS margins, reasons).
body() { grep -vE '^(target |output )' "$1"; }
for c in "accurate f32-reduced f32" "hf bf16-table bf16"; do
  set -- $c
  "$BIN" props --kernel "builtin:$1" --dtype "$3" --preset llama-3.1-8b --cases 6 --seed 7 >b.txt 2>b.err; rc_b=$?
  "$BIN" props --kernel "$LIB:$1:threads=1" --class "$2" --dtype "$3" --preset llama-3.1-8b --cases 6 --seed 7 >a.txt 2>a.err; rc_a=$?
  p=""
  [ "$rc_a" -eq "$rc_b" ] || p+="exit $rc_a, builtin:$1 $rc_b ($(head -c 200 a.err)); "
  grep -qE '^[a-z_0-9]+ +cases ' a.txt || p+="no property lines; "
  [ "$(body a.txt)" = "$(body b.txt)" ] || p+="output differs: $(diff <(body b.txt) <(body a.txt) | head -5 | tr '\n' ' '); "
  check "props --kernel LIB:$1 --class $2 --dtype $3 --cases 6 --seed 7: builtin:$1's exit ($rc_b), verdicts and margins" "$p"
done

# ---- drift: the same breakdown positions -------------------------------------------------------------
"$BIN" drift --preset llama-3.1-8b --recipes "builtin:hf,plugin:$LIB:hf:threads=1" --dtype f32 --max-pos 1024 --out d >drift.txt 2>drift.err; rc=$?
p=""
[ "$rc" -eq 0 ] || p+="exit $rc ($(head -c 300 drift.err)); "
python3 - d/drift.json <<'PY' || p+="drift.json: plugin:LIB:hf does not break down where hf does; "
import json, sys
d = json.load(open(sys.argv[1]))
a, b = d["candidates"][0], d["candidates"][1]
def first(x):  # class -> the first sampled position where it breaks down (None: held everywhere)
    return {cls: (v or {}).get("position") for cls, v in x["breakdown"].items()}
assert first(a) == first(b), (first(a), first(b))
PY
check "drift --recipes builtin:hf,plugin:LIB:hf: exit 0, the plugin breaks down where hf does" "$p"

# ---- unusable options: exit 2, one line ----------------------------------------------------------------
expect_input_error() {  # DESCRIPTION PATTERN ARGS...
  local what="$1" pattern="$2"; shift 2
  "$BIN" "$@" >out.txt 2>err.txt
  local rc=$? p=""
  [ "$rc" -eq 2 ] || p+="exit $rc, not 2; "
  [ "$(wc -l <err.txt)" -eq 1 ] || p+="stderr has $(wc -l <err.txt) lines; "
  grep -q "^ropecheck: error: .*$pattern" err.txt || p+="stderr '$(head -c 300 err.txt)' lacks '$pattern'; "
  check "$what" "$p"
}
expect_input_error "check --kernel LIB:no-such-recipe" "unknown option 'no-such-recipe'" check --golden g --kernel "$LIB:no-such-recipe"
expect_input_error "props --kernel LIB:hf:threads=x" "threads must be" props --kernel "$LIB:hf:threads=x" --preset llama-3.1-8b --cases 2

finish
