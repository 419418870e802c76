#!/usr/bin/env bash
# The CUDA kernels as a target of check, props and drift (kut/cuda_source.hpp):
#   check --kernel cuda:hf, props --kernel cuda:hf --dtype f32, drift --recipes builtin:hf,cuda:hf.
# Without a GPU they run over the host emulation of the CUDA kernels, switched on by the test-only
# ROPECHECK_CUDA_EMULATION=1, and must give the CPU recipe's verdicts (exit codes and per-output /
# per-property / per-class verdicts); without the switch (and no GPU) each exits 2 with one line on
# stderr. In a build without CUDA each exits 2 saying so.
#
#   bash tests/cli/test_cuda_targets.sh ROPECHECK HAVE_CUDA(ON|OFF)
set -u
abspath() { case "$1" in /*) printf '%s\n' "$1" ;; *) printf '%s\n' "$PWD/$1" ;; esac; }
BIN=$(abspath "$1")
HAVE_CUDA="$2"
. "$(dirname "$0")/harness.sh" cuda

# One line on stderr naming the problem, nothing on stdout, exit 2.
expect_input_error() {  # DESCRIPTION PATTERN ARGS...
  local what="$1" pattern="$2"; shift 2
  env -u ROPECHECK_CUDA_EMULATION "$BIN" "$@" >out.txt 2>err.txt
  local rc=$? p=""
  [ "$rc" -eq 2 ] || p+="exit $rc, not 2; "
  [ "$(wc -l <err.txt)" -eq 1 ] || p+="stderr has $(wc -l <err.txt) lines; "
  grep -q "^ropecheck: error: .*$pattern" err.txt || p+="stderr '$(head -c 300 err.txt)' lacks '$pattern'; "
  [ ! -s out.txt ] || p+="stdout not empty; "
  check "$what" "$p"
}

"$BIN" golden --preset llama-3.1-8b --positions log:131071:4 --heads 2 --dtypes f32,bf16 --out g >/dev/null 2>&1 ||
  { echo "golden set not written"; exit 1; }

if [ "$HAVE_CUDA" != "ON" ]; then
  expect_input_error "check --kernel cuda:hf: built without CUDA" "built without CUDA" check --golden g --kernel cuda:hf
  expect_input_error "props --kernel cuda:hf --dtype f32: built without CUDA" "built without CUDA" props --kernel cuda:hf --dtype f32 --preset llama-3.1-8b --cases 5
  expect_input_error "drift --recipes cuda:hf: built without CUDA" "built without CUDA" drift --preset llama-3.1-8b --recipes cuda:hf --max-pos 64 --out d
  finish
  exit
fi

# ---- without the switch: no GPU here, exit 2 (a machine with a GPU runs the kernels instead) ----------
env -u ROPECHECK_CUDA_EMULATION "$BIN" check --golden g --kernel cuda:hf >/dev/null 2>err.txt
if grep -q "no CUDA device" err.txt; then
  expect_input_error "check --kernel cuda:hf without a GPU" "--kernel cuda:hf: no CUDA device (" \
    check --golden g --kernel cuda:hf
  expect_input_error "props --kernel cuda:hf --dtype f32 without a GPU" "--kernel cuda:hf: no CUDA device (" \
    props --kernel cuda:hf --dtype f32 --preset llama-3.1-8b --cases 5
  expect_input_error "drift --recipes builtin:hf,cuda:hf without a GPU" "--recipes cuda:hf: no CUDA device (" \
    drift --preset llama-3.1-8b --recipes builtin:hf,cuda:hf --max-pos 64 --out d
  [ ! -e d ] || fail "drift without a GPU left an output folder"
else
  echo "SKIP  exit-2 checks: a CUDA device is present (the commands ran the GPU kernels)"
fi
export ROPECHECK_CUDA_EMULATION=1

# ---- check: the same verdicts as builtin:hf, outputs and classes ------------------------------------
# Each output's verdict ("q_rot.f32  <-  candidate ...  PASS"), whether it satisfies each class
# ("  fp32-angle   yes ..." without the numbers), and the final verdict lines.
verdicts() { grep -E '^(PASS|FAIL|NOT TESTED)|^[a-z_]+\.[a-z0-9]+  <-  |^  (exact|fp64-angle|f32-reduced|fp32-angle|f16-table|bf16-table) +(yes|no) ' "$1" |
             awk '/  <-  / {print $1, $NF; next} /^  / {print $1, $2; next} {print}'; }
for cls in bf16-table fp32-angle; do
  "$BIN" check --golden g --kernel builtin:hf --class "$cls" >cpu.txt 2>cpu.err; rc_cpu=$?
  "$BIN" check --golden g --kernel cuda:hf --class "$cls" --report cuda.json >cuda.txt 2>cuda.err; rc_cuda=$?
  p=""
  [ "$rc_cpu" -eq "$rc_cuda" ] || p+="exit $rc_cuda, CPU $rc_cpu; "
  [ -n "$(verdicts cuda.txt)" ] || p+="no verdict lines; "
  [ "$(verdicts cpu.txt)" = "$(verdicts cuda.txt)" ] || p+="verdicts differ: $(diff <(verdicts cpu.txt) <(verdicts cuda.txt) | head -5 | tr '\n' ' '); "
  grep -q "^kernel 'cuda:hf (host emulation)': ropecheck's CUDA kernel run on the host (host emulation, not a GPU run)" cuda.txt ||
    p+="no header naming the host emulation; "
  python3 - cuda.json <<'PY' || p+="report: candidate_source is not the emulated CUDA kernel; "
import json, sys
s = json.load(open(sys.argv[1]))["candidate_source"]
sys.exit(0 if s["kind"] == "cuda" and s["name"] == "cuda:hf" and s["emulated"] is True and s["device"] == "host emulation" else 1)
PY
  check "check --kernel cuda:hf --class $cls (emulated) gives builtin:hf's verdicts (exit $rc_cpu)" "$p"
done
[ "$rc_cpu" -eq 1 ] || fail "builtin:hf was expected to fail fp32-angle (its bf16 outputs rotate in bf16), exit $rc_cpu"

# ---- check of a Q/K-norm set (qwen3-8b) and an MLA set (deepseek-v3-mla): run, not UNSUPPORTED ---------
# cuda:accurate's norm -> rotate and its rotary block at an offset are byte-identical to the CPU's
# (kernels/cuda/README.md, "Fused recipes"): every output judged, builtin:accurate's verdicts, exit 0.
for preset in qwen3-8b deepseek-v3-mla; do
  "$BIN" golden --preset "$preset" --positions log:4095:3 --heads 1 --dtypes bf16 --out "g-$preset" >/dev/null 2>&1 ||
    { fail "golden --preset $preset not written"; continue; }
  "$BIN" check --golden "g-$preset" --kernel builtin:accurate >cpu.txt 2>&1; rc_cpu=$?
  "$BIN" check --golden "g-$preset" --kernel cuda:accurate >cuda.txt 2>&1; rc_cuda=$?
  p=""
  [ "$rc_cuda" -eq 0 ] && [ "$rc_cpu" -eq 0 ] || p+="exit $rc_cuda, CPU $rc_cpu (not 0); "
  ! grep -q UNSUPPORTED cuda.txt || p+="$(grep -m1 UNSUPPORTED cuda.txt); "
  [ "$(verdicts cpu.txt)" = "$(verdicts cuda.txt)" ] || p+="verdicts differ: $(diff <(verdicts cpu.txt) <(verdicts cuda.txt) | head -5 | tr '\n' ' '); "
  check "check --kernel cuda:accurate of a $preset set (emulated): judged, builtin:accurate's verdicts" "$p"
done

# ---- check of a --stores set and a --kv-cache set: the CUDA store / append kernels judged -----------------
# cuda:accurate's stores and paged append are byte-identical to the CPU's: the same report, store by store;
# MLX affine stores have no CUDA kernel: not tested there, never passed.
"$BIN" golden --preset llama-3.1-8b --positions 0:8 --heads 2 --dtypes f32 --stores e4m3fn,q8_0,q4_0,int4g32 --out gs >/dev/null 2>&1 ||
  fail "golden --stores not written"
echo '{"sequences": [{"cached": 0, "appended": 5}, {"cached": 6, "appended": 1}], "layout": "HND", "page_size": 4}' >kv.json
"$BIN" golden --preset llama-3.1-8b --kv-cache kv.json --heads 2 --dtypes f32 --out gk >/dev/null 2>&1 || fail "golden --kv-cache not written"
for set in gs gk; do
  "$BIN" check --golden "$set" --kernel builtin:accurate --report cpu.json >cpu.txt 2>&1; rc_cpu=$?
  "$BIN" check --golden "$set" --kernel cuda:accurate --report cuda.json >cuda.txt 2>&1; rc_cuda=$?
  p=""
  [ "$rc_cuda" -eq "$rc_cpu" ] || p+="exit $rc_cuda, CPU $rc_cpu; "
  python3 - cpu.json cuda.json "$set" <<'PY' || p+="$set: the CUDA report differs from the CPU's; "
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
if sys.argv[3] == "gk":
    assert a["kv_cache"] == b["kv_cache"] and b["kv_cache"]["verdict"] == "pass", b["kv_cache"]
else:
    cuda = {s["golden"]: s for s in b["stores"]["stores"]}
    for s in a["stores"]["stores"]:
        if "int4g32" in s["golden"]:
            assert s["golden"] not in cuda and s["golden"] in b["not_tested"], s["golden"]
        else:
            assert cuda[s["golden"]]["elements"] == s["elements"] and s["elements"]["failed"] == 0, s["golden"]
PY
  check "check --kernel cuda:accurate of the $set set (gs: --stores, gk: --kv-cache; emulated): the CPU's store / cache verdicts" "$p"
done

# ---- props: the same exit code and per-property verdicts as kernel:hf --------------------------------
# "relative_shift  cases 20 (skipped 0)  worst margin ...  rms ...  NOT TESTED" -> "relative_shift NOT TESTED"
prop_verdicts() { grep -E '^[a-z_0-9]+ +cases ' "$1" | sed -E 's/^([a-z_0-9]+) .* rms +[^ ]+ +(.*)$/\1 \2/'; }
"$BIN" props --kernel builtin:hf --dtype f32 --preset llama-3.1-8b --cases 20 --seed 7 >cpu.txt 2>cpu.err; rc_cpu=$?
"$BIN" props --kernel cuda:hf --dtype f32 --preset llama-3.1-8b --cases 20 --seed 7 >cuda.txt 2>cuda.err; rc_cuda=$?
p=""
[ "$rc_cpu" -eq "$rc_cuda" ] || p+="exit $rc_cuda, CPU $rc_cpu; "
[ -n "$(prop_verdicts cuda.txt)" ] || p+="no property lines; "
[ "$(prop_verdicts cpu.txt)" = "$(prop_verdicts cuda.txt)" ] || p+="verdicts differ: $(diff <(prop_verdicts cpu.txt) <(prop_verdicts cuda.txt) | head -5 | tr '\n' ' '); "
grep -q "host emulation, not a GPU run" cuda.txt || p+="the output does not say host emulation; "
check "props --kernel cuda:hf --dtype f32 --preset llama-3.1-8b --cases 20 (emulated) gives builtin:hf's verdicts (exit $rc_cpu)" "$p"

# ---- drift: cuda:hf beside hf, the same breakdown positions per class --------------------------------
"$BIN" drift --preset llama-3.1-8b --recipes builtin:hf,cuda:hf --dtype f32 --max-pos 4096 --out d >drift.txt 2>drift.err; rc=$?
p=""
[ "$rc" -eq 0 ] || p+="exit $rc ($(head -c 300 drift.err)); "
python3 - d/drift.json <<'PY' || p+="drift.json: cuda:hf does not match hf; "
import json, sys
d = json.load(open(sys.argv[1]))
c = {x["name"]: x for x in d["candidates"]}
a, b = c["hf"], c["cuda:hf"]
assert "host emulation" in b["description"], b["description"]
for k in ("table_dtype", "measured"):
    assert a.get(k) == b.get(k), (k, a.get(k), b.get(k))
def first(x):  # class -> the first sampled position where it breaks down (None: held everywhere)
    return {cls: (v or {}).get("position") for cls, v in x["breakdown"].items()}
assert first(a) == first(b), (first(a), first(b))
PY
check "drift --recipes builtin:hf,cuda:hf (emulated): exit 0, cuda:hf breaks down where hf does" "$p"

finish
