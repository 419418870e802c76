#!/usr/bin/env bash
# `ropecheck props`: a preset against the exact reference passes (exit 0) with one line per property,
# --list-targets, unusable input exits 2 with one line on stderr, and what was not tested (a kernel
# declining every case, saturated bounds) exits 3, never 0.
# kernel plugins with one bug each (tests/plugins/teeth_plugin.cpp) are caught on three presets
# with the default output dtypes, and the correct one is not.
# Usage: test_props.sh ROPECHECK HF_PLUGIN BROKEN_PLUGIN UNSUPPORTED_ALL_PLUGIN TEETH_PLUGIN_DIR
set -u
rc_bin="$1"
hf_plugin="$2"
broken_plugin="$3"
unsupported_plugin="$4"
teeth_dir="$5"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# (Few cases wherever statistics are not the point: the MPFR reference and shrinking failures are slow.)
"$rc_bin" props --target reference --preset llama-3.1-8b --cases 5 --report "$tmp/r.json" >"$tmp/out" 2>"$tmp/err"
code=$?
[ "$code" -eq 0 ] || { cat "$tmp/out" "$tmp/err"; fail "reference on llama-3.1-8b exited $code"; }
for p in relative_shift attention_shift norm composition matrix_orthogonal uniqueness roformer_decay cosine_sum \
         layout_equivalence mrope_equal_streams linear_scaling yarn_frequencies partial_passthrough \
         score_shift score_decay cached_key_rotation; do
  grep -q "^$p .*cases    5" "$tmp/out" || { cat "$tmp/out"; fail "no line for $p"; }
done
grep -q "first turns negative at m = " "$tmp/out" || fail "cosine-sum report missing"
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); assert r['passed'] and r['verdict']=='pass' and len(r['properties'])>=15" "$tmp/r.json" \
  || fail "bad --report JSON"

"$rc_bin" props --list-targets >"$tmp/out" 2>&1 || fail "--list-targets exited nonzero"
grep -q "^reference " "$tmp/out" || fail "--list-targets does not list reference"

expect2() {
  "$rc_bin" props "$@" >"$tmp/out" 2>"$tmp/err"
  local c=$?
  [ "$c" -eq 2 ] || fail "props $* exited $c, expected 2"
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || { cat "$tmp/err"; fail "props $*: expected one line on stderr"; }
  [ ! -s "$tmp/out" ] || fail "props $*: stdout not empty"
}
expect2 --target no-such-target --preset llama-3.1-8b
expect2 --preset llama-3.1-8b
expect2 --target reference --preset no-such-preset
expect2 --target reference --preset llama-3.1-8b --only no_such_property
expect2 --target reference --preset llama-3.1-8b --cases 0
expect2 --kernel "$tmp/missing.so" --preset llama-3.1-8b
# Targets beyond the reference: the built-in scalar kernel passes, a mutant fails (exit 1);
# kernel plugins through the C ABI: the HF fp32 example passes, the bf16-inverse-frequency one fails.
expect_exit() {
  local want="$1"; shift
  "$rc_bin" props "$@" --cases 10 >"$tmp/out" 2>"$tmp/err"
  local c=$?
  [ "$c" -eq "$want" ] || { cat "$tmp/out" "$tmp/err"; fail "props $* exited $c, expected $want"; }
}
# hf-fp32 is class fp32-angle: positions up to 2^24 (the default) reach its saturated bounds (an
# all-zero output passes there, from ~1.16e6 for the highest frequency), so it is not tested: exit 3;
# below 1e6 the class still discriminates everywhere and the kernel passes.
expect_exit 3 --target hf-fp32 --preset llama-3.1-8b
grep -q "^relative_shift .*NOT TESTED" "$tmp/out" || { cat "$tmp/out"; fail "hf-fp32 to 2^24: relative_shift not NOT TESTED"; }
grep -q "bounds saturated .*use a stricter class (f32-reduced, fp64-angle) here" "$tmp/out" || { cat "$tmp/out"; fail "no saturation reason"; }
grep -q "^NOT TESTED: no property failed.*; class fp32-angle not tested from position [0-9]* (saturated bounds)$" "$tmp/out" ||
  { cat "$tmp/out"; fail "no NOT TESTED verdict line naming where the class stops being tested"; }
"$rc_bin" props --target hf-fp32 --preset llama-3.1-8b --cases 10 --report "$tmp/sat.json" >/dev/null 2>&1
python3 - "$tmp/sat.json" <<'PY' || fail "props report: saturated_from missing or not the smallest saturated position"
import json, sys
d = json.load(open(sys.argv[1]))
firsts = [p["first_saturated_position"] for p in d["properties"] if p["verdict"] == "not-tested" and p["saturated"] > 0]
assert firsts and d["saturated_from"] == min(firsts, key=abs) and d["passed"] is False, (d["saturated_from"], firsts)
PY
expect_exit 0 --target hf-fp32 --preset llama-3.1-8b --max-pos 1000000
grep -q "^all properties hold" "$tmp/out" || fail "hf-fp32 below 1e6: no 'all properties hold'"
expect_exit 1 --target mutant:sin-sign-flipped --preset llama-2-7b --only relative_shift
grep -q "FAIL" "$tmp/out" || fail "mutant: no failing property line"
# Plugins cannot take negative positions (kernel ABI v1), so inverse is not tested for them, and the
# HF example declines the multimodal and YaRN specs the mrope / yarn / attention-factor properties derive:
# exit 3, each name listed once whatever the number of output dtypes run.
expect_exit 3 --kernel "$hf_plugin" --preset llama-3.1-8b --max-pos 1000000
grep -q "^NOT TESTED: no property failed, but these were not tested: attention_factor, inverse, mrope_equal_streams, mrope_streams, yarn_frequencies$" "$tmp/out" ||
  { cat "$tmp/out"; fail "hf plugin: expected inverse and the mrope / yarn properties not tested"; }
grep -q "^sinusoidal_shift .*not applicable" "$tmp/out" || { cat "$tmp/out"; fail "hf plugin: sinusoidal_shift not 'not applicable'"; }
expect_exit 0 --kernel "$hf_plugin" --preset llama-3.1-8b --max-pos 1000000 --only relative_shift,norm,composition
# a kernel that answered UNSUPPORTED for every case used to print "all properties hold", exit 0.
expect_exit 3 --kernel "$hf_plugin" --preset phi-3.5-mini
grep -q "^relative_shift .*NOT TESTED" "$tmp/out" || { cat "$tmp/out"; fail "phi-3.5-mini: relative_shift not NOT TESTED"; }
grep -q "declined every case" "$tmp/out" || { cat "$tmp/out"; fail "phi-3.5-mini: no 'declined every case' reason"; }
grep -q "all properties hold" "$tmp/out" && fail "phi-3.5-mini: 'all properties hold' for a kernel that ran nothing"
expect_exit 3 --kernel "$hf_plugin" --preset llama-3.1-8b --dtype f64
grep -q "declined every case" "$tmp/out" || { cat "$tmp/out"; fail "--dtype f64: no 'declined every case' reason"; }
expect_exit 3 --kernel "$unsupported_plugin" --preset llama-3.1-8b --report "$tmp/u.json"
python3 - "$tmp/u.json" <<'PY' || fail "unsupported_all: bad --report JSON"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["verdict"] == "not-tested" and r["passed"] is False, (r["verdict"], r["passed"])
asked = [p for p in r["properties"] if p["applicable"] and p["name"] != "reference_views"]  # never calls the target
assert asked and all(p["verdict"] == "not-tested" and p["passed"] is False and p["reason"] for p in asked), asked
assert all(p["verdict"] == "not-tested" for p in r["properties"] if p["name"] != "reference_views"), r["properties"]
PY
expect_exit 1 --kernel "$broken_plugin" --preset llama-3.1-8b --only relative_shift --dtype f32
grep -q "^relative_shift .*FAIL" "$tmp/out" || { cat "$tmp/out"; fail "broken plugin: relative_shift did not fail"; }
# The reproduce line names the target and the spec as this run was given them.
grep -qxF "  reproduce: ropecheck props --kernel $broken_plugin --class fp32-angle --preset llama-3.1-8b --only relative_shift --seed 20261121 --cases 10 --dtype f32" "$tmp/out" ||
  { cat "$tmp/out"; fail "broken plugin: no reproduce line for relative_shift with --kernel, --class and --preset"; }
# ropecheck's own fast kernels (builtin:<recipe>, the kernel grammar of check and drift): accurate passes
# as f32-reduced, bf16 inverse frequencies fail. --list-targets lists the registered targets only.
"$rc_bin" props --list-targets >"$tmp/out" 2>&1 || fail "--list-targets exited nonzero"
grep -q "^hf-fp32-bf16out " "$tmp/out" || { cat "$tmp/out"; fail "--list-targets: no hf-fp32-bf16out"; }
! grep -q "^kernel:" "$tmp/out" || { cat "$tmp/out"; fail "--list-targets still lists kernels (they come by --kernel NAME)"; }
expect_exit 0 --kernel builtin:accurate --dtype f32 --preset llama-3.1-8b
grep -q "target builtin:accurate (f32-reduced)" "$tmp/out" || { cat "$tmp/out"; fail "builtin:accurate: no header naming its class"; }
# Each output dtype is judged with the class the recipe claims in it (bf16: hf's rotation in bf16 is bf16-table).
expect_exit 0 --kernel builtin:hf --dtype f32,bf16 --preset llama-3.1-8b --max-pos 1000000 --only norm,relative_shift
grep -q "output bf16: judged with class bf16-table" "$tmp/out" || { cat "$tmp/out"; fail "builtin:hf bf16: not judged with bf16-table"; }
# The old spellings still run, with one note on stderr after the run and the same verdicts.
"$rc_bin" props --target kernel:bf16-inv-freq --preset llama-3.1-8b --only relative_shift >"$tmp/old.out" 2>"$tmp/old.err"
[ $? -eq 1 ] || { cat "$tmp/old.out" "$tmp/old.err"; fail "--target kernel:bf16-inv-freq (old spelling) did not fail"; }
grep -qx "ropecheck: note: --target 'kernel:bf16-inv-freq' is spelled 'builtin:bf16-inv-freq' now (the old spelling goes away in the next release)" "$tmp/old.err" ||
  { cat "$tmp/old.err"; fail "--target kernel:bf16-inv-freq: no deprecation note"; }
[ "$(wc -l <"$tmp/old.err")" -eq 1 ] || { cat "$tmp/old.err"; fail "--target kernel:bf16-inv-freq: more than the note on stderr"; }
expect_exit 1 --kernel builtin:bf16-inv-freq --dtype f32 --preset llama-3.1-8b --only relative_shift
grep -q "^relative_shift .*FAIL" "$tmp/out" || { cat "$tmp/out"; fail "builtin:bf16-inv-freq: relative_shift did not fail"; }
grep -qxF "  reproduce: ropecheck props --kernel builtin:bf16-inv-freq --preset llama-3.1-8b --only relative_shift --seed 20261121 --cases 10 --dtype f32" "$tmp/out" ||
  { cat "$tmp/out"; fail "builtin:bf16-inv-freq: no reproduce line for relative_shift with --kernel and --preset"; }
# --report / --baseline: the same setup again passes, margins grown past --max-growth fail (exit 1), a
# baseline of another setup or a malformed one is exit 2 before anything runs.
"$rc_bin" props --target hf-fp32 --preset llama-3.1-8b --max-pos 1000000 --cases 10 --report "$tmp/base.json" >"$tmp/out" 2>"$tmp/err" ||
  { cat "$tmp/out" "$tmp/err"; fail "props --report for the baseline"; }
grep -q "^norm .*worst margin .* rms 0\.0" "$tmp/out" || { cat "$tmp/out"; fail "no rms margin on the norm line"; }
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); assert r['format']=='ropecheck-props-report' and r['class']=='fp32-angle' and all('rms_margin' in p for p in r['properties'])" \
  "$tmp/base.json" || fail "props report: no format / class / rms_margin"
expect_exit 0 --target hf-fp32 --preset llama-3.1-8b --max-pos 1000000 --baseline "$tmp/base.json"
grep -q "^PASS: no regression against the baseline" "$tmp/out" || { cat "$tmp/out"; fail "same target: no PASS baseline line"; }
# Another target (the HF plugin) against the same baseline: no regression; exit 3 because the plugin leaves
# some properties not tested (inverse, the YaRN / mrope derived specs), never 0.
expect_exit 3 --kernel "$hf_plugin" --preset llama-3.1-8b --max-pos 1000000 --dtype f32 --baseline "$tmp/base.json"
grep -q "^PASS: no regression against the baseline" "$tmp/out" || { cat "$tmp/out"; fail "plugin vs baseline: no PASS baseline line"; }
python3 - "$tmp/base.json" "$tmp/half.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for p in d["properties"]:
    for k in ("worst_margin", "rms_margin"):
        p[k] = p[k] / 2
json.dump(d, open(sys.argv[2], "w"))
PY
expect_exit 0 --target hf-fp32 --preset llama-3.1-8b --max-pos 1000000 --baseline "$tmp/half.json" --max-growth 2
expect_exit 1 --target hf-fp32 --preset llama-3.1-8b --max-pos 1000000 --baseline "$tmp/half.json" --max-growth 1.99 --report "$tmp/r2.json"
grep -q "^FAIL: regression against the baseline: .* grew more than 1.99x (first: relative_shift worst" "$tmp/out" ||
  { cat "$tmp/out"; fail "grown margins: no FAIL baseline line naming the property"; }
python3 -c "import json,sys; b=json.load(open(sys.argv[1]))['baseline']; assert b['pass'] is False and b['regressions'][0]['property']=='relative_shift'" \
  "$tmp/r2.json" || fail "the report does not record the comparison"
expect2 --target hf-fp32 --preset llama-3.1-8b --max-pos 1000000 --cases 11 --baseline "$tmp/base.json"
grep -q "cases 10, this run has 11" "$tmp/err" || { cat "$tmp/err"; fail "other cases: message"; }
expect2 --target hf-fp32 --preset llama-2-7b --max-pos 1000000 --cases 10 --baseline "$tmp/base.json"
expect2 --kernel builtin:accurate --dtype f32 --preset llama-3.1-8b --max-pos 1000000 --cases 10 --baseline "$tmp/base.json"
expect2 --target hf-fp32 --preset llama-3.1-8b --max-pos 1000000 --cases 10 --only norm --baseline "$tmp/base.json"
printf '{"format": ' >"$tmp/trunc.json"
expect2 --target hf-fp32 --preset llama-3.1-8b --max-pos 1000000 --cases 10 --baseline "$tmp/trunc.json"
expect2 --target hf-fp32 --preset llama-3.1-8b --max-pos 1000000 --cases 10 --baseline "$tmp/missing.json"
expect2 --target hf-fp32 --preset llama-3.1-8b --max-pos 1000000 --cases 10 --baseline "$tmp/base.json" --max-growth 0.5
expect2 --target hf-fp32 --preset llama-3.1-8b --cases 10 --max-growth 3
# The bug kinds the suite once missed through the C ABI, default output dtypes (f32, bf16, f16 here; f64 UNSUPPORTED):
# each caught (exit 1) by the property that states what it breaks, on a preset with attention factor 1
# (llama-3.1-8b, gpt-j-6b, deepseek-v3), and the correct plugin passes those properties. (--only keeps
# the runtime down: a failing property shrinks its counterexample, which costs seconds per property.)
for preset in llama-3.1-8b gpt-j-6b deepseek-v3; do
  expect_exit 0 --kernel "$teeth_dir/teeth_plugin_correct.so" --preset "$preset" --max-pos 1000000 \
    --only relative_shift,norm,attention_factor,head_independence,store_rounding
  grep -q "^output bf16:" "$tmp/out" || { cat "$tmp/out"; fail "correct plugin on $preset: bf16 outputs not run by default"; }
  grep -q "output f64: the target answered unsupported" "$tmp/out" || { cat "$tmp/out"; fail "$preset: f64 not reported unsupported"; }
  for bug in k_head_offset:head_independence att_dropped:attention_factor att_twice:attention_factor \
             bf16_truncate:store_rounding; do
    mode="${bug%%:*}"; prop="${bug##*:}"
    expect_exit 1 --kernel "$teeth_dir/teeth_plugin_$mode.so" --preset "$preset" --max-pos 1000000 --only "$prop"
    grep -q "^FAIL $prop " "$tmp/out" || { cat "$tmp/out"; fail "teeth plugin $mode on $preset: $prop did not fail"; }
  done
done
# --dtype narrows the run: f32 alone cannot show the truncating store (store_rounding does not apply to
# f32 outputs), and asking for it there is NOT TESTED (exit 3), never a pass; an unknown dtype is exit 2.
expect_exit 3 --kernel "$teeth_dir/teeth_plugin_bf16_truncate.so" --preset llama-3.1-8b --max-pos 1000000 --dtype f32 --only store_rounding
expect2 --kernel "$teeth_dir/teeth_plugin_correct.so" --preset llama-3.1-8b --dtype f8
expect2 --target hf-fp32 --preset llama-3.1-8b --dtype bf16
echo "props CLI: ok"
