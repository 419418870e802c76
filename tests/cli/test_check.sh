#!/usr/bin/env bash
# `ropecheck check` as a user meets it: candidate files (.safetensors, .npz, .npy), kernel plugins
# (abi/KERNEL_ABI.md), --map, the criteria, exit codes 0 / 1 / 2, one-line errors, and the
# --report JSON (valid when the check ran, absent when it did not).
#
#   bash tests/cli/test_check.sh ROPECHECK HF_PLUGIN.so BROKEN_PLUGIN.so TEST_PLUGIN_DIR
#
# HF_PLUGIN: examples/plugin_hf_fp32 (Hugging Face Llama RoPE in float32, expected class fp32-angle);
# BROKEN_PLUGIN: examples/plugin_broken_bf16_invfreq (inverse frequencies rounded to bf16);
# TEST_PLUGIN_DIR: the test_plugin_<mode>.so built from tests/plugins/test_plugin.cpp.
# Prints PASS/FAIL per check and a final "N passed, M failed"; exits 0 only if every check passed.
# Candidate files are made with the Python standard library only (no numpy needed).
set -u

if [ $# -ne 4 ]; then
  echo "usage: $0 ROPECHECK HF_PLUGIN.so BROKEN_PLUGIN.so TEST_PLUGIN_DIR" >&2
  exit 2
fi
abspath() { case "$1" in /*) printf '%s\n' "$1" ;; *) printf '%s\n' "$PWD/$1" ;; esac; }
BIN=$(abspath "$1")
HF=$(abspath "$2")
BROKEN=$(abspath "$3")
TPD=$(abspath "$4")
for f in "$BIN" "$HF" "$BROKEN"; do [ -f "$f" ] || { echo "no such file: $f" >&2; exit 2; }; done
[ -d "$TPD" ] || { echo "no such directory: $TPD" >&2; exit 2; }
command -v python3 >/dev/null 2>&1 || { echo "python3 is required" >&2; exit 2; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/ropecheck_check.XXXXXX") || exit 2
trap 'rm -rf "$TMP"' EXIT
cd "$TMP" || exit 2
OUT="$TMP/stdout"
ERR="$TMP/stderr"
REPORT="$TMP/reports/report.json"
mkdir -p "$TMP/reports"

PASS=0
FAIL=0
pass() { PASS=$((PASS + 1)); printf 'PASS  %s\n' "$1"; }
fail() {
  FAIL=$((FAIL + 1))
  printf 'FAIL  %s\n' "$1"
  if [ $# -gt 1 ] && [ -n "$2" ]; then printf '        %s\n' "$2"; fi
  if [ -s "$ERR" ]; then printf '        stderr: %s\n' "$(head -c 400 "$ERR" | tr '\n' '|')"; fi
}
check() { if [ -z "$2" ]; then pass "$1"; else fail "$1" "$2"; fi; }

TIMEOUT=""
command -v timeout >/dev/null 2>&1 && TIMEOUT="timeout 120"
run() {
  $TIMEOUT "$BIN" "$@" >"$OUT" 2>"$ERR"
  RC=$?
}
lines() { awk 'END { print NR }' "$1"; }

# Nothing but the report itself may be left in the reports folder (no temporary files).
reports_clean() {
  local extra
  extra=$(cd "$TMP/reports" && ls -A | grep -v '^report\.json$')
  [ -z "$extra" ] || echo "left in the report folder: $extra; "
}

# expect_rc DESCRIPTION WANT ARGS...: exit WANT (0, 1 or 3), empty stderr, the summary on stdout, a
# valid report (when --report was given), nothing else written.
expect_rc() {
  local desc=$1 want=$2
  shift 2
  rm -f "$REPORT"
  run "$@"
  local p=""
  [ "$RC" -eq "$want" ] || p+="exit code $RC (want $want); "
  [ ! -s "$ERR" ] || p+="stderr not empty; "
  grep -q '^ropecheck check: golden ' "$OUT" || p+="no summary header on stdout; "
  if [ "$want" -eq 0 ]; then grep -q '^PASS: ' "$OUT" || p+="no PASS verdict line; "; fi
  if [ "$want" -eq 1 ]; then grep -q '^FAIL: ' "$OUT" || p+="no FAIL verdict line; "; fi
  if [ "$want" -eq 3 ]; then grep -q '^NOT TESTED: ' "$OUT" || p+="no NOT TESTED verdict line; "; fi
  # A run that does not pass prints no PASS line, except the class verdict beside a baseline regression
  # (the criterion held, the errors grew: both are said, and the run's last line is the FAIL).
  if [ "$want" -ne 0 ] && ! grep -q '^FAIL: regression against the baseline' "$OUT"; then
    ! grep -q '^PASS: ' "$OUT" || p+="a PASS verdict line; "
  fi
  case " $* " in *" --report "*) [ -f "$REPORT" ] || p+="no report written; " ;; esac
  p+=$(reports_clean)
  check "$desc" "$p"
}

# expect_input_error DESCRIPTION NEEDLE ARGS...: exit 2, nothing on stdout, exactly one stderr line
# "ropecheck: error: ..." containing NEEDLE; every run passes --report, which must not appear.
expect_input_error() {
  local desc=$1 needle=$2
  shift 2
  rm -f "$REPORT"
  run "$@" --report "$REPORT"
  local p="" n
  n=$(lines "$ERR")
  [ "$RC" -eq 2 ] || p+="exit code $RC (want 2); "
  [ ! -s "$OUT" ] || p+="stdout not empty ($(lines "$OUT") lines); "
  [ "$n" -eq 1 ] || p+="stderr has $n lines (want 1); "
  head -n 1 "$ERR" | grep -q '^ropecheck: error: ' || p+="stderr does not start with 'ropecheck: error: '; "
  grep -qiF -- "$needle" "$ERR" || p+="stderr does not name '$needle'; "
  [ ! -e "$REPORT" ] || p+="a report was written; "
  p+=$(reports_clean)
  check "$desc" "$p"
}

# report_check DESCRIPTION PYTHON_BODY: runs PYTHON_BODY with d = the --report JSON (strict: no
# NaN / Infinity literals); the body appends to `problems`.
report_check() {
  local desc=$1 body=$2 msg
  msg=$(python3 - "$REPORT" <<PY 2>&1
import json, sys
problems = []
def no_constants(s):
    raise ValueError("non-standard JSON constant " + s)
try:
    with open(sys.argv[1]) as f:
        d = json.load(f, parse_constant=no_constants)
except Exception as e:
    print("report is not valid JSON: %s" % e)
    sys.exit(0)
by = {t["golden"]: t for t in d.get("tensors", [])}
$body
print("; ".join(problems))
PY
)
  check "$desc" "$msg"
}

# ---------------------------------------------------------------------------------------------
echo "== golden set"

G="$TMP/g"
run golden --preset llama-3.1-8b --positions log:131071:4 --heads 2 --dtypes f32,bf16 --out "$G"
check "golden --preset llama-3.1-8b --positions log:131071:4 --heads 2 --dtypes f32,bf16" \
  "$([ "$RC" -eq 0 ] && [ -f "$G/manifest.json" ] || echo "exit code $RC, manifest missing")"
[ -f "$G/manifest.json" ] || { echo "cannot continue without a golden set"; exit 1; }
TOKENS=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["positions"]["tokens"])' "$G/manifest.json")

# Candidate files, made from the golden set's own outputs with the standard library.
python3 - "$G" "$TMP" <<'PY' || { echo "cannot make candidate files"; exit 1; }
import json, os, struct, sys, zipfile
g, tmp = sys.argv[1], sys.argv[2]

def read_st(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    h.pop("__metadata__", None)
    data = b[8 + n:]
    return {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]]) for k, v in h.items()}

def write_st(path, tensors):
    header, blob = {}, b""
    for name, (dt, shape, raw) in tensors.items():
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [len(blob), len(blob) + len(raw)]}
        blob += raw
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + blob)

DESCR = {"F32": "<f4", "F64": "<f8", "F16": "<f2", "BF16": "<u2", "I64": "<i8"}
def npy(dt, shape, raw):
    shp = "(" + "".join("%d, " % s for s in shape).rstrip(" ") + ")" if len(shape) != 1 else "(%d,)" % shape[0]
    head = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (DESCR[dt], shp)
    pad = 64 - (10 + len(head) + 1) % 64
    head = head + " " * (pad % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head.encode() + raw

out32 = read_st(os.path.join(g, "outputs_f32.safetensors"))
out16 = read_st(os.path.join(g, "outputs_bf16.safetensors"))
inputs = read_st(os.path.join(g, "inputs.safetensors"))

# Renamed tensors: a base name ("cos" as bf16 -> cos.bf16), a --map target, an extra input (ignored).
write_st(os.path.join(tmp, "renamed.safetensors"),
         {"cos": out16["cos.bf16"], "query_out": out16["q_rot.bf16"], "positions": inputs["positions"]})
# .npz of the f32 rotated tensors, and one .npy.
with zipfile.ZipFile(os.path.join(tmp, "cand.npz"), "w", zipfile.ZIP_STORED) as z:
    for name in ("q_rot.f32", "k_rot.f32", "sin.bf16"):
        src = out32 if name.endswith("f32") else out16
        z.writestr(name + ".npy", npy(*src[name]))
open(os.path.join(tmp, "q_rot.f32.npy"), "wb").write(npy(*out32["q_rot.f32"]))
# One wrong element: token 40, head 1, channel 5 of q_rot.f32 (+1.0).
dt, shape, raw = out32["q_rot.f32"]
i = (40 * shape[1] + 1) * shape[2] + 5
v = struct.unpack_from("<f", raw, 4 * i)[0] + 1.0
raw2 = raw[:4 * i] + struct.pack("<f", v) + raw[4 * i + 4:]
write_st(os.path.join(tmp, "one_wrong.safetensors"), {"q_rot.f32": (dt, shape, raw2)})
# Shape mismatch: the first 64 channels only.
rows = shape[0] * shape[1]
half = b"".join(raw[4 * r * shape[2]: 4 * (r * shape[2] + 64)] for r in range(rows))
write_st(os.path.join(tmp, "bad_shape.safetensors"), {"q_rot.f32": (dt, [shape[0], shape[1], 64], half)})
# Dtype mismatch: bf16 data named like an f32 output.
write_st(os.path.join(tmp, "bad_dtype.safetensors"), {"q_rot.f32": out16["q_rot.bf16"]})
# A table-only kernel's output: cos and sin in f32.
write_st(os.path.join(tmp, "tables.safetensors"), {"cos.f32": out32["cos.f32"], "sin.f32": out32["sin.f32"]})
# The position of token 40, for the report check.
p = inputs["positions"]
open(os.path.join(tmp, "pos40"), "w").write(str(struct.unpack_from("<q", p[2], 8 * 40)[0]))
PY
POS40=$(cat "$TMP/pos40")

# ---------------------------------------------------------------------------------------------
echo "== kernel plugins (examples/)"

expect_rc "check --kernel plugin_hf_fp32 --class fp32-angle passes (exit 0)" 0 \
  check --golden "$G" --kernel "$HF" --class fp32-angle --report "$REPORT"
p=""
grep -q "^kernel 'hf-llama-fp32' " "$OUT" || p+="no kernel line naming hf-llama-fp32; "
grep -q '^note: q_rot.f64, k_rot.f64 skipped: .*UNSUPPORTED' "$OUT" || p+="no note that f64 was skipped; "
grep -q '^PASS: class fp32-angle holds .*classes satisfied: fp32-angle, f16-table, bf16-table' "$OUT" ||
  p+="verdict line is '$(grep -E '^(PASS|FAIL)' "$OUT")'; "
check "the HF fp32 kernel lands in class fp32-angle (and not fp64-angle), f64 skipped with a note" "$p"
report_check "HF kernel report: valid JSON, pass, best class fp32-angle, 8 tensors, kernel source" '
if d.get("format") != "ropecheck-check-report": problems.append("format %r" % d.get("format"))
if d.get("pass") is not True: problems.append("pass is %r" % d.get("pass"))
if d.get("criterion") != {"kind": "class", "class": "fp32-angle"}: problems.append("criterion %r" % d.get("criterion"))
if d.get("satisfied_classes", [None])[0] != "fp32-angle": problems.append("satisfied %r" % d.get("satisfied_classes"))
want = {n + "." + t for n in ("cos", "sin", "q_rot", "k_rot") for t in ("f32", "bf16")}
if set(by) != want: problems.append("tensors %r" % sorted(by))
if set(d.get("unchecked_golden", [])) != {n + ".f64" for n in ("cos", "sin", "q_rot", "k_rot")}:
    problems.append("unchecked_golden %r" % d.get("unchecked_golden"))
for n, t in by.items():
    if t["best_class"] != "fp32-angle" and not (t["dtype"] == "bf16" and t["best_class"] in ("fp64-angle", "f32-reduced")):
        problems.append("%s best class %r" % (n, t["best_class"]))
    if t["metrics"]["nan"] or t["metrics"]["inf"]: problems.append("%s has NaN / Inf" % n)
src = d.get("candidate_source", {})
if src.get("kind") != "kernel" or src.get("name") != "hf-llama-fp32" or src.get("abi_version") != 1:
    problems.append("candidate_source %r" % src)
if not any("f64" in n for n in src.get("notes", [])): problems.append("notes %r" % src.get("notes"))
'

# A set with an attention block and a kernel without the fused entry point (ropecheck_rope_attention):
# its rotations pass, its attention outputs are not tested (exit 3), never passed.
run golden --preset llama-3.1-8b --positions 0:4 --heads 2 --dtypes f32 --attention causal:0:8 --out "$TMP/GA"
expect_rc "check --kernel plugin_hf_fp32 on a set with an attention block: outputs not tested (exit 3)" 3 \
  check --golden "$TMP/GA" --kernel "$HF" --report "$REPORT"
report_check "no fused entry: attention_out.f32 asked for and not tested, no attention result, verdict not-tested" '
if d.get("verdict") != "not-tested" or d.get("pass") is not False: problems.append("verdict %r pass %r" % (d.get("verdict"), d.get("pass")))
if "attention_out.f32" not in d.get("not_tested", []): problems.append("not_tested %r" % d.get("not_tested"))
if d.get("attention"): problems.append("attention %r" % d.get("attention"))
'

expect_rc "check --kernel plugin_hf_fp32 with the default criterion passes" 0 check --golden "$G" --kernel "$HF"
grep -q 'criterion class fp32-angle' "$OUT"
check "the default criterion is class fp32-angle" "$([ $? -eq 0 ] || echo "header: $(head -n 5 "$OUT" | tr '\n' '|')")"

expect_rc "check --kernel plugin_hf_fp32 --class fp64-angle fails (exit 1)" 1 \
  check --golden "$G" --kernel "$HF" --class fp64-angle

expect_rc "check --kernel plugin_broken_bf16_invfreq fails (exit 1)" 1 \
  check --golden "$G" --kernel "$BROKEN" --report "$REPORT" --worst 5
report_check "broken kernel report: fails, names violating positions per tensor" '
if d.get("pass") is not False: problems.append("pass is %r" % d.get("pass"))
if len(by) != 8: problems.append("%d tensors" % len(by))
for n, t in by.items():
    v = t["verdict"]
    if v["pass"] or v["violations"] <= 0: problems.append("%s verdict %r" % (n, v))
    if not isinstance(v["first_violating_position"], int): problems.append("%s first_violating_position %r" % (n, v["first_violating_position"]))
    w = t["worst"]
    if not (1 <= len(w) <= 5): problems.append("%s: %d worst elements (want 1..5)" % (n, len(w)))
    for e in w:
        if not (isinstance(e["position"], list) and len(e["position"]) == 3 and e["score"] is not None and e["score"] > 1):
            problems.append("%s worst element %r" % (n, e)); break
    if not any(b["violations"] > 0 for b in t["position_bins"]): problems.append("%s: no bin with violations" % n)
    fp = [c for c in t["classes"] if c["class"] == "fp32-angle"][0]
    if fp["satisfied"] or fp["first_violating_position"] is None: problems.append("%s fp32-angle %r" % (n, fp))
if d.get("satisfied_classes"): problems.append("satisfied %r" % d.get("satisfied_classes"))
'
grep -q '^FAIL: class fp32-angle violated by ' "$OUT"
check "broken kernel: the verdict line says fp32-angle is violated" "$([ $? -eq 0 ] || echo "$(grep -E '^(PASS|FAIL)' "$OUT")")"

# ---------------------------------------------------------------------------------------------
echo "== built-in kernels (--kernel builtin:RECIPE)"

expect_rc "check --kernel builtin:accurate --class f32-reduced passes (exit 0)" 0 \
  check --golden "$G" --kernel builtin:accurate --class f32-reduced --report "$REPORT"
p=""
grep -q "^kernel 'builtin:accurate (\(avx512\|portable\))': ropecheck's fast CPU kernel" "$OUT" || p+="no kernel line naming builtin:accurate; "
grep -q '^PASS: class f32-reduced holds .*classes satisfied: f32-reduced, fp32-angle' "$OUT" ||
  p+="verdict line is '$(grep -E '^(PASS|FAIL)' "$OUT")'; "
check "builtin:accurate lands in f32-reduced (f32, bf16 and f64 outputs all checked)" "$p"
report_check "builtin:accurate report: best classes per dtype, candidate source" '
if d.get("satisfied_classes", [None])[0] != "f32-reduced": problems.append("satisfied %r" % d.get("satisfied_classes"))
want = {n + "." + t for n in ("cos", "sin", "q_rot", "k_rot") for t in ("f64", "f32", "bf16")}
if set(by) != want: problems.append("tensors %r" % sorted(by))
for n, t in by.items():
    ok = ("f32-reduced",) if t["dtype"] == "f32" else ("fp64-angle", "exact")
    if t["best_class"] not in ok: problems.append("%s best class %r (want %s)" % (n, t["best_class"], " or ".join(ok)))
src = d.get("candidate_source", {})
if src.get("kind") != "builtin" or src.get("name") != "builtin:accurate" or src.get("recipe") != "accurate":
    problems.append("candidate_source %r" % src)
if src.get("cpu_path") not in ("avx512", "portable"): problems.append("cpu_path %r" % src.get("cpu_path"))
'
expect_rc "check --kernel builtin:accurate --class fp64-angle fails (exit 1): its f32 sin/cos" 1 \
  check --golden "$G" --kernel builtin:accurate --class fp64-angle
expect_rc "check --kernel builtin:hf fails the default fp32-angle (exit 1): bf16 outputs rotate in bf16" 1 \
  check --golden "$G" --kernel builtin:hf
expect_rc "check --kernel builtin:hf --class bf16-table passes (exit 0)" 0 \
  check --golden "$G" --kernel builtin:hf --class bf16-table
expect_rc "check --kernel builtin:meta passes fp32-angle (exit 0)" 0 check --golden "$G" --kernel builtin:meta
expect_rc "check --kernel builtin:bf16-inv-freq fails (exit 1)" 1 \
  check --golden "$G" --kernel builtin:bf16-inv-freq --class bf16-table
expect_input_error "an unknown built-in recipe lists the known ones" "accurate, hf, meta" \
  check --golden "$G" --kernel builtin:fastest
expect_input_error "builtin: with no recipe" "unknown built-in recipe" check --golden "$G" --kernel builtin:

# DeepSeek MLA (core/SPEC_FORMAT.md "MLA"): the rotary slice at 128 of a 192-channel head, one k_pe a token.
GM="$TMP/g-mla"
run golden --preset deepseek-v3-mla --positions 0:8,131071 --heads 2 --dtypes f32,bf16 --out "$GM"
expect_rc "MLA set: check --kernel builtin:accurate --class f32-reduced passes (exit 0)" 0 \
  check --golden "$GM" --kernel builtin:accurate --class f32-reduced --report "$REPORT"
report_check "MLA report: q_rot and k_pe_rot checked, q_nope bit-exact" '
want = {n + "." + t for n in ("cos", "sin", "q_rot", "k_pe_rot") for t in ("f64", "f32", "bf16")}
if set(by) != want: problems.append("tensors %r" % sorted(by))
for n, t in by.items():
    pt = t.get("passthrough")
    if n.startswith("q_rot"):
        if not pt or pt["elements"] != 9 * 2 * 128 or pt["differing"] != 0 or not pt["bit_exact"]:
            problems.append("%s passthrough %r" % (n, pt))
    elif pt is not None: problems.append("%s has a passthrough record" % n)
'

# ---------------------------------------------------------------------------------------------
echo "== candidate files"

# the f32 outputs alone used to pass although the bf16 ones were never checked.
expect_rc "the golden set's own f32 outputs alone: not tested (exit 3), the bf16 outputs had no candidate" 3 \
  check --golden "$G" --candidate "$G/outputs_f32.safetensors" --class exact --report "$REPORT"
report_check "partial candidate report: verdict not-tested, the bf16 outputs listed, every tensor checked passes" '
if d.get("pass") is not False: problems.append("pass %r" % d.get("pass"))
if d.get("verdict") != "not-tested": problems.append("verdict %r" % d.get("verdict"))
if sorted(d.get("not_tested", [])) != sorted(n + ".bf16" for n in ("cos", "sin", "q_rot", "k_rot")):
    problems.append("not_tested %r" % d.get("not_tested"))
if "--only" not in d.get("reason", ""): problems.append("reason %r" % d.get("reason"))
for n, t in by.items():
    if t["verdict"]["state"] != "pass" or t["verdict"]["pass"] is not True: problems.append("%s verdict %r" % (n, t["verdict"]))
'
expect_rc "the golden set's own f32 outputs pass --class exact with --only naming them" 0 \
  check --golden "$G" --candidate "$G/outputs_f32.safetensors" --class exact --only cos.f32,sin.f32,q_rot.f32,k_rot.f32 \
  --report "$REPORT"
report_check "exact report: pass, best class exact, file source" '
if d.get("verdict") != "pass" or d.get("reason") != "": problems.append("verdict %r reason %r" % (d.get("verdict"), d.get("reason")))
if d.get("pass") is not True: problems.append("pass %r" % d.get("pass"))
if d.get("satisfied_classes", [None])[0] != "exact": problems.append("satisfied %r" % d.get("satisfied_classes"))
if len(by) != 4: problems.append("%d tensors" % len(by))
if d.get("candidate_source", {}).get("kind") != "file": problems.append("candidate_source %r" % d.get("candidate_source"))
'
expect_rc "the golden set's own bf16 outputs pass --max-ulp 0.5" 0 \
  check --golden "$G" --candidate "$G/outputs_bf16.safetensors" --max-ulp 0.5 --only cos.bf16,sin.bf16,q_rot.bf16,k_rot.bf16
expect_rc "the golden set's own f32 outputs pass --atol 1e-6 --rtol 1e-6" 0 \
  check --golden "$G" --candidate "$G/outputs_f32.safetensors" --atol 1e-6 --rtol 1e-6 --only cos.f32,sin.f32,q_rot.f32,k_rot.f32
# A table-only kernel is checked honestly with --only: a pass for what it makes, not for q_rot / k_rot.
expect_rc "a table-only candidate without --only is not tested (exit 3)" 3 \
  check --golden "$G" --candidate tables.safetensors
grep -q 'q_rot.f32' "$OUT"
check "the not-tested outputs are named" "$([ $? -eq 0 ] || echo "$(grep -E '^NOT TESTED' "$OUT")")"
expect_rc "a table-only candidate with --only cos.f32,sin.f32 passes" 0 \
  check --golden "$G" --candidate tables.safetensors --only cos.f32,sin.f32
expect_rc "--only cos,sin (bases: every dtype of the set) still asks for the bf16 tables: exit 3" 3 \
  check --golden "$G" --candidate tables.safetensors --only cos,sin
expect_input_error "--only naming no output or base of the set" "--only qrot" \
  check --golden "$G" --candidate tables.safetensors --only cos,qrot

expect_rc "a safetensors candidate with a base name, --map and an extra tensor passes --class exact" 0 \
  check --golden "$G" --candidate renamed.safetensors --map q_rot.bf16=query_out --class exact --only cos.bf16,q_rot.bf16 \
  --report "$REPORT"
report_check "--map and base names resolve; the extra tensor is listed as ignored" '
if set(by) != {"cos.bf16", "q_rot.bf16"}: problems.append("tensors %r" % sorted(by))
elif by["q_rot.bf16"]["candidate"] != "query_out" or by["cos.bf16"]["candidate"] != "cos":
    problems.append("candidates %r %r" % (by["q_rot.bf16"]["candidate"], by["cos.bf16"]["candidate"]))
if d.get("ignored_candidate") != ["positions"]: problems.append("ignored %r" % d.get("ignored_candidate"))
'
expect_input_error "--map to a candidate tensor that does not exist is refused" \
  "query_missing" check --golden "$G" --candidate renamed.safetensors --map q_rot.bf16=query_missing

expect_rc "an .npz candidate (f32 and bf16 members) passes --class exact" 0 \
  check --golden "$G" --candidate cand.npz --class exact --only q_rot.f32,k_rot.f32,sin.bf16 --report "$REPORT"
report_check ".npz candidate: three tensors checked" '
if set(by) != {"q_rot.f32", "k_rot.f32", "sin.bf16"}: problems.append("tensors %r" % sorted(by))
'
expect_rc "an .npy candidate (named after the file stem) passes --class exact" 0 \
  check --golden "$G" --candidate q_rot.f32.npy --class exact --only q_rot.f32
expect_rc "an .npy candidate with --only q_rot (its f32 and bf16 dtypes): bf16 not tested (exit 3)" 3 \
  check --golden "$G" --candidate q_rot.f32.npy --class exact --only q_rot

expect_rc "one wrong element fails --class exact (exit 1)" 1 \
  check --golden "$G" --candidate one_wrong.safetensors --class exact --report "$REPORT"
report_check "the report names the wrong element: token 40, its position, head 1, channel 5" "
t = by.get('q_rot.f32')
if not t: problems.append('no q_rot.f32')
else:
    if t['verdict']['violations'] != 1: problems.append('violations %r' % t['verdict']['violations'])
    if t['verdict']['first_violating_position'] != $POS40: problems.append('first position %r (want $POS40)' % t['verdict']['first_violating_position'])
    w = t['worst'][0] if t['worst'] else {}
    if (w.get('token'), w.get('head'), w.get('channel')) != (40, 1, 5): problems.append('worst %r' % w)
"

# ---------------------------------------------------------------------------------------------
echo "== baseline (--baseline OLD_REPORT.json --max-growth F)"

# An f32-only set: builtin:hf then passes fp32-angle on every output (its bf16 rotation is not involved).
GB="$TMP/gb"
run golden --preset llama-3.1-8b --positions log:131071:4 --heads 2 --dtypes f32 --out "$GB"
check "golden --dtypes f32 for the baseline checks" "$([ "$RC" -eq 0 ] || echo "exit code $RC")"
BASE="$TMP/base_accurate.json"
expect_rc "builtin:accurate writes the baseline (exit 0)" 0 check --golden "$GB" --kernel builtin:accurate --report "$REPORT"
cp "$REPORT" "$BASE"
report_check "the report has error statistics per tensor and bin, and the golden fingerprint" '
if len(d.get("golden_fingerprint", "")) != 64: problems.append("golden_fingerprint %r" % d.get("golden_fingerprint"))
for n, t in by.items():
    st = t.get("error_stats", {})
    if st.get("elements") != t["elements"]: problems.append("%s error_stats %r" % (n, st))
    for u in ("bound", "u_dt"):
        m = st.get(u, {})
        if not (0 <= m.get("mean", -1) <= m.get("rms", -1) <= m.get("max", -1)): problems.append("%s %s %r" % (n, u, m))
    if any("error_stats" not in b for b in t["position_bins"]): problems.append("%s: a bin without error_stats" % n)
'
grep -q '^  vs bound   max .* in u: max ' "$OUT"
check "the text report shows max / mean / RMS per tensor" "$([ $? -eq 0 ] || echo "no 'vs bound' line")"

expect_rc "builtin:hf passes fp32-angle on the f32 set without a baseline (exit 0)" 0 \
  check --golden "$GB" --kernel builtin:hf --report "$REPORT"
cp "$REPORT" "$TMP/hf.json"
expect_rc "builtin:hf against builtin:accurate's baseline: its errors grew, exit 1" 1 \
  check --golden "$GB" --kernel builtin:hf --baseline "$BASE" --report "$REPORT"
p=""
grep -q '^PASS: class fp32-angle holds' "$OUT" || p+="the class verdict is not PASS; "
grep -q '^FAIL: regression against the baseline: .* grew more than 2x (first: [a-z_]*\.f[0-9]* ' "$OUT" || p+="no FAIL line naming a tensor; "
grep -q '^  grew .*x: [a-z_]*\.f[0-9]* positions \[[0-9]*, [0-9]*) \(max\|rms\) ' "$OUT" || p+="no line naming a tensor and a bin; "
check "the regression is named by tensor and position bin, the class verdict still holds" "$p"
report_check "the report records the comparison" '
b = d.get("baseline", {})
if d.get("pass") is not True: problems.append("criterion pass %r" % d.get("pass"))
if b.get("pass") is not False or b.get("max_growth") != 2: problems.append("baseline %r" % {k: b.get(k) for k in ("pass", "max_growth")})
r = b.get("regressions", [])
if not r or not any(x["bin"] is not None and x["tensor"] == "q_rot.f32" for x in r): problems.append("regressions %r" % r[:2])
if not all(x["growth"] > 2 for x in r): problems.append("a regression with growth <= 2")
'
expect_rc "builtin:accurate against its own baseline: no growth, exit 0" 0 \
  check --golden "$GB" --kernel builtin:accurate --baseline "$BASE" --report "$REPORT"
grep -q '^PASS: no regression against the baseline' "$OUT"
check "the same kernel says no regression" "$([ $? -eq 0 ] || echo "$(tail -n 2 "$OUT" | tr '\n' '|')")"
report_check "same kernel: baseline passes, largest growth at most 1" '
b = d.get("baseline", {})
if b.get("pass") is not True or b.get("regressions") != [] or b["largest_growth"]["growth"] > 1: problems.append("baseline %r" % b)
'

# A baseline whose every max / RMS error of at least 2 u is exactly half of builtin:hf's.
python3 - "$TMP/hf.json" "$TMP/half.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
def halve(st):
    for m in ("max", "rms"):
        if st["u_dt"][m] is not None and st["u_dt"][m] >= 2: st["u_dt"][m] /= 2
for t in d["tensors"]:
    halve(t["error_stats"])
    for b in t["position_bins"]: halve(b["error_stats"])
json.dump(d, open(sys.argv[2], "w"))
PY
expect_rc "growth exactly at the limit passes (--max-growth 2, errors exactly 2x)" 0 \
  check --golden "$GB" --kernel builtin:hf --baseline "$TMP/half.json" --max-growth 2
expect_rc "growth just over the limit fails (--max-growth 1.99)" 1 \
  check --golden "$GB" --kernel builtin:hf --baseline "$TMP/half.json" --max-growth 1.99

expect_input_error "a baseline of another golden set" "another golden set" \
  check --golden "$G" --kernel builtin:accurate --baseline "$BASE"
expect_input_error "a baseline of another criterion" "criterion" \
  check --golden "$GB" --kernel builtin:accurate --class f32-reduced --baseline "$BASE"
expect_input_error "a baseline with other tensors" "cos.f64" \
  check --golden "$GB" --candidate "$GB/outputs_f32.safetensors" --baseline "$BASE"
printf '{"format": "ropecheck-check-report", ' >"$TMP/trunc.json"
expect_input_error "a truncated baseline" "not JSON" check --golden "$GB" --kernel builtin:accurate --baseline "$TMP/trunc.json"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); [t.pop("error_stats") for t in d["tensors"]]; json.dump(d, open(sys.argv[2], "w"))' \
  "$BASE" "$TMP/old.json"
expect_input_error "a baseline without error statistics (older report)" "error_stats" \
  check --golden "$GB" --kernel builtin:accurate --baseline "$TMP/old.json"
expect_input_error "a golden manifest as baseline" "not a check report" \
  check --golden "$GB" --kernel builtin:accurate --baseline "$GB/manifest.json"
expect_input_error "a missing baseline" "no such file" check --golden "$GB" --kernel builtin:accurate --baseline "$TMP/nope.json"
expect_input_error "--max-growth below 1" "max-growth" check --golden "$GB" --kernel builtin:accurate --baseline "$BASE" --max-growth 0.5
expect_input_error "--max-growth without --baseline" "baseline" check --golden "$GB" --kernel builtin:accurate --max-growth 3

# ---------------------------------------------------------------------------------------------
echo "== unusable input (exit 2, one line, no report)"

expect_input_error "shape mismatch names both shapes" "[$TOKENS, 2, 64]" \
  check --golden "$G" --candidate bad_shape.safetensors
grep -qF "[$TOKENS, 2, 128]" "$ERR"
check "shape mismatch message names the golden shape too" "$([ $? -eq 0 ] || echo "missing [$TOKENS, 2, 128]")"
expect_input_error "dtype mismatch names both dtypes" "bf16" check --golden "$G" --candidate bad_dtype.safetensors

cp -r "$G" "$TMP/tampered"
python3 - "$TMP/tampered/outputs_f32.safetensors" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[-3] ^= 0x01
open(p, "wb").write(bytes(b))
PY
expect_input_error "a tampered golden file is refused (hash mismatch)" "hash mismatch" \
  check --golden "$TMP/tampered" --kernel "$HF"
expect_input_error "a folder that is not a golden set is refused" "manifest" check --golden "$TMP/reports" --kernel "$HF"

# reliability-2 defect 16: the hashes do not cover manifest.json; an edited spec must not pass
# (--candidate) nor blame the kernel (--kernel exit 1). The reader recomputes a sample from the spec.
tamper_manifest() {  # tamper_manifest SRC DST PYTHON_EXPR_ON_m
  cp -r "$1" "$2"
  python3 - "$2/manifest.json" "$3" <<'PY'
import json, sys
p = sys.argv[1]
m = json.load(open(p))
exec(sys.argv[2])
json.dump(m, open(p, "w"), indent=2)
PY
}
tamper_manifest "$G" "$TMP/tampered_base" 'm["spec"]["rope"]["base"] = 10000.0'
expect_input_error "manifest base 500000 -> 10000: --candidate is refused (data and spec disagree)" \
  "does not match its spec" check --golden "$TMP/tampered_base" --candidate "$G/outputs_f32.safetensors"
expect_input_error "manifest base 500000 -> 10000: --kernel is refused, not blamed on the kernel" \
  "does not match its spec" check --golden "$TMP/tampered_base" --kernel "$HF"
tamper_manifest "$G" "$TMP/tampered_factor" 'm["spec"]["rope"]["scaling"]["factor"] = 16.0'
expect_input_error "manifest llama3 factor 8 -> 16 is refused" "does not match its spec" \
  check --golden "$TMP/tampered_factor" --candidate "$G/outputs_f32.safetensors"
tamper_manifest "$G" "$TMP/tampered_att" 'm["attention_factor"] = "1.100000000000000000000000000000000000000e+00"'
expect_input_error "manifest attention_factor edited is refused" "attention_factor" \
  check --golden "$TMP/tampered_att" --kernel "$HF"
tamper_manifest "$G" "$TMP/tampered_name" 'm["spec"]["notes"] = "edited notes only"'
run check --golden "$TMP/tampered_name" --candidate "$G/outputs_f32.safetensors" --only cos.f32,sin.f32,q_rot.f32,k_rot.f32
check "an edit that does not change the mathematics (spec notes) is still accepted" "$([ "$RC" -eq 0 ] || echo "exit $RC")"

expect_input_error "--kernel to a missing file" "no such file" check --golden "$G" --kernel "$TMP/nope.so"
expect_input_error "--kernel to a file that is not a shared library" "shared library" \
  check --golden "$G" --kernel "$G/manifest.json"
expect_input_error "--kernel without ropecheck_kernel_abi_version" "ropecheck_kernel_abi_version" \
  check --golden "$G" --kernel "$TPD/test_plugin_no_version.so"
expect_input_error "--kernel with the wrong ABI version" "ABI version 99" \
  check --golden "$G" --kernel "$TPD/test_plugin_wrong_abi.so"
expect_input_error "--kernel exporting no entry point" "exports none of" \
  check --golden "$G" --kernel "$TPD/test_plugin_no_entry.so"
# A kernel that breaks its buffers or returns an unknown code fails the check (exit 1, report
# written); tests/cli/test_isolation.sh covers every kind of misbehaviour.
expect_rc "--kernel writing past the end of its output fails (exit 1)" 1 \
  check --golden "$G" --kernel "$TPD/test_plugin_overrun.so" --report "$REPORT"
check "the overrun is named" "$(grep -q "^KERNEL FAILURE: .*ropecheck_rope_apply wrote past the end of its output" "$OUT" || echo "no KERNEL FAILURE line")"
expect_rc "--kernel failing with code 7 and a two-line message (first line kept) fails (exit 1)" 1 \
  check --golden "$G" --kernel "$TPD/test_plugin_fail.so"
check "the code and the first line of the message are named" "$(grep -q "^KERNEL FAILURE: .*returned 7, .*(device lost)" "$OUT" || echo "no KERNEL FAILURE line")"
# A kernel that declines every output is not tested (exit 3, with its reason), as props and drift
# --compare judge it; never unusable input.
expect_rc "--kernel supporting nothing: not tested (exit 3)" 3 \
  check --golden "$G" --kernel "$TPD/test_plugin_unsupported_all.so" --report "$REPORT"
check "the declined run says why, with the kernel's reason" "$(grep -q '^NOT TESTED: .*the kernel declined every output asked for .*nothing implemented' "$OUT" || echo "no reason in: $(grep '^NOT TESTED' "$OUT")")"
report_check "declined report: no tensor, every asked-for output not tested, the reason" '
if d.get("verdict") != "not-tested" or d.get("pass") is not False: problems.append("verdict %r" % d.get("verdict"))
if d.get("tensors") != []: problems.append("tensors %r" % d.get("tensors"))
if "nothing implemented" not in (d.get("declined") or ""): problems.append("declined %r" % d.get("declined"))
if not d.get("not_tested") or d.get("satisfied_classes") != []: problems.append("not_tested %r satisfied %r" % (d.get("not_tested"), d.get("satisfied_classes")))
if "nothing implemented" not in d.get("reason", ""): problems.append("reason %r" % d.get("reason"))
'

# A sinusoidal golden set and the sinusoidal entry point.
GS="$TMP/gs"
run golden --preset transformer-base --positions 0:64,1000,65535 --dtypes f32 --out "$GS"
check "golden --preset transformer-base" "$([ "$RC" -eq 0 ] || echo "exit code $RC")"
expect_rc "a binary64 sinusoidal kernel passes --class fp64-angle" 0 \
  check --golden "$GS" --kernel "$TPD/test_plugin_sinusoidal.so" --class fp64-angle --report "$REPORT"
report_check "sinusoidal kernel report: pe.f64 and pe.f32 checked" '
if set(by) != {"pe.f64", "pe.f32"}: problems.append("tensors %r" % sorted(by))
if d.get("pass") is not True: problems.append("pass %r" % d.get("pass"))
'
expect_rc "a RoPE kernel on a sinusoidal golden set: not tested (exit 3)" 3 \
  check --golden "$GS" --kernel "$HF"
check "  ... naming the entry point it lacks" "$(grep -q '^NOT TESTED: .*ropecheck_sinusoidal' "$OUT" || echo "$(grep '^NOT TESTED' "$OUT")")"
expect_rc "a sinusoidal kernel on a RoPE golden set: not tested (exit 3)" 3 \
  check --golden "$G" --kernel "$TPD/test_plugin_sinusoidal.so"
check "  ... naming the entry points it lacks" "$(grep -q '^NOT TESTED: .*neither ropecheck_rope_apply' "$OUT" || echo "$(grep '^NOT TESTED' "$OUT")")"

# at position 2^24 - 1 the fp32-angle bound of Llama-3.1-8B's highest-frequency pairs
# reaches the pairs' magnitude (an all-zero output would pass): those elements are not tested, the
# verdict is NOT TESTED (exit 3) with the advice; f32-reduced still discriminates there.
GL="$TMP/glong"
run golden --preset llama-3.1-8b --positions 0:4,16777215 --heads 1 --dtypes f32 --out "$GL"
check "golden --preset llama-3.1-8b --positions 0:4,16777215" "$([ "$RC" -eq 0 ] || echo "exit code $RC")"
expect_rc "the HF fp32 kernel at position 2^24 - 1 under fp32-angle: not tested (exit 3)" 3 \
  check --golden "$GL" --kernel "$HF" --report "$REPORT"
grep -q 'use a stricter class (f32-reduced, fp64-angle) here' "$OUT"
check "saturated bounds: the advice is printed" "$([ $? -eq 0 ] || echo "$(grep -E '^(NOT TESTED|PASS|FAIL)' "$OUT")")"
report_check "saturated report: counts per tensor and per bin, first position 16777215" '
if d.get("verdict") != "not-tested": problems.append("verdict %r" % d.get("verdict"))
for n, t in by.items():
    v = t["verdict"]
    if v["state"] != "not-tested" or v["pass"] is not False: problems.append("%s verdict %r" % (n, v))
    if v["first_saturated_position"] != 16777215: problems.append("%s first saturated %r" % (n, v["first_saturated_position"]))
    want = 18 if n.startswith(("cos", "sin")) else 36
    if v["saturated"] != want: problems.append("%s saturated %r (want %d)" % (n, v["saturated"], want))
    if t["position_bins"][-1]["saturated"] != want or any(b["saturated"] for b in t["position_bins"][:-1]):
        problems.append("%s bins %r" % (n, t["position_bins"]))
    # A class with saturated elements and no violation is not tested, never satisfied.
    c = {x["class"]: x for x in t["classes"]}
    if c["fp32-angle"]["state"] != "not-tested" or c["fp32-angle"]["satisfied"] is not False:
        problems.append("%s fp32-angle %r" % (n, c["fp32-angle"]))
    if c["fp32-angle"]["first_saturated_position"] != 16777215: problems.append("%s fp32-angle first saturated" % n)
    if t["best_class"] in ("fp32-angle", "f16-table", "bf16-table"): problems.append("%s best class %r" % (n, t["best_class"]))
    if not t["worst"] or not t["worst"][0]["saturated"]: problems.append("%s worst element not marked saturated" % n)
if set(d.get("satisfied_classes", [])) & {"fp32-angle", "f16-table", "bf16-table"}: problems.append("satisfied %r" % d.get("satisfied_classes"))
if d.get("not_tested_classes") != ["fp32-angle", "f16-table", "bf16-table"]: problems.append("not tested %r" % d.get("not_tested_classes"))
if d.get("format_version") != 2: problems.append("format_version %r" % d.get("format_version"))
'
last=$(grep '^NOT TESTED: ' "$OUT")
case "$last" in
  *"classes satisfied: (none); classes not tested (saturated): fp32-angle, f16-table, bf16-table") p="" ;;
  *) p="verdict line: $last" ;;
esac
grep -q '^  fp32-angle   n/t .*not tested: saturated from position 16777215' "$OUT" || p+="; no n/t row for fp32-angle"
grep -q 'SATURATED: not tested' "$OUT" || p+="; saturated worst elements not marked"
check "saturated text: fp32-angle n/t in the class table, named apart on the verdict line, worst marked" "$p"
expect_rc "builtin:accurate at position 2^24 - 1 passes f32-reduced (exit 0)" 0 \
  check --golden "$GL" --kernel builtin:accurate --class f32-reduced
expect_rc "the HF fp32 kernel at position 2^24 - 1 fails f32-reduced (exit 1)" 1 \
  check --golden "$GL" --kernel "$HF" --class f32-reduced

expect_rc "a kernel that leaves its output unwritten (NaN) fails (exit 1)" 1 \
  check --golden "$G" --kernel "$TPD/test_plugin_nan.so" --report "$REPORT"
report_check "NaN outputs are counted and fail every class" '
for n, t in by.items():
    if t["metrics"]["nan"] != t["elements"]: problems.append("%s: %r NaN of %r" % (n, t["metrics"]["nan"], t["elements"]))
    if t["verdict"]["pass"]: problems.append("%s passes" % n)
    if t.get("best_class") is not None: problems.append("%s best class %r" % (n, t.get("best_class")))
if not by: problems.append("no tensors")
'
grep -q 'NaN' "$OUT"
check "the NaN kernel's summary mentions NaN" "$([ $? -eq 0 ] || echo "no NaN on stdout")"

expect_input_error "--class with --max-ulp" "excludes" check --golden "$G" --kernel "$HF" --class exact --max-ulp 1
expect_input_error "--max-ulp with --atol" "excludes" check --golden "$G" --kernel "$HF" --max-ulp 1 --atol 0 --rtol 0
expect_input_error "--atol without --rtol" "requires" check --golden "$G" --kernel "$HF" --atol 1e-6
expect_input_error "--candidate with --kernel" "excludes" check --golden "$G" --kernel "$HF" --candidate cand.npz
expect_input_error "neither --candidate nor --kernel" "--candidate" check --golden "$G"
expect_input_error "an unknown class lists the known ones" "fp32-angle" check --golden "$G" --kernel "$HF" --class fp16
expect_input_error "a negative --max-ulp" "max-ulp" check --golden "$G" --kernel "$HF" --max-ulp -1
expect_input_error "--map without '='" "GOLDEN_NAME=CANDIDATE_NAME" check --golden "$G" --candidate cand.npz --map q_rot.f32
expect_input_error "--map naming a golden tensor that is not an output" "q" check --golden "$G" --candidate cand.npz --map q=q_rot.f32
expect_input_error "a candidate with an unknown extension" "expected .safetensors, .npy or .npz" \
  check --golden "$G" --candidate "$G/manifest.json"
expect_input_error "a missing candidate file" "no such file" check --golden "$G" --candidate "$TMP/missing.safetensors"
printf 'not a safetensors file' >"$TMP/garbage.safetensors"
expect_input_error "a malformed candidate file" "garbage.safetensors" check --golden "$G" --candidate "$TMP/garbage.safetensors"
rm -f "$REPORT"
run check --golden "$G" --kernel "$HF" --report "$TMP/no/such/dir/r.json"
check "--report into a missing folder: exit 2 before any work, no file" \
  "$([ "$RC" -eq 2 ] && [ ! -s "$OUT" ] && [ ! -e "$TMP/no" ] && grep -q 'no such directory' "$ERR" || echo "exit $RC")"

run check --help
p=""
[ "$RC" -eq 0 ] || p+="exit code $RC; "
for o in --golden --candidate --kernel --map --class --max-ulp --atol --rtol --report --baseline --max-growth --worst; do
  grep -q -- "$o" "$OUT" || p+="option $o not listed; "
done
check "check --help lists every option" "$p"

echo
echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
