#!/usr/bin/env bash
# `ropecheck props`: a preset against the exact reference passes (exit 0) with one line per property,
# --list-targets, and unusable input exits 2 with one line on stderr.
# Issue 15: kernel plugins with one bug each (tests/plugins/teeth_plugin.cpp) are caught on three presets
# with the default output dtypes, and the correct one is not.
# Usage: test_props.sh ROPECHECK HF_PLUGIN BROKEN_PLUGIN TEETH_PLUGIN_DIR
set -u
rc_bin="$1"
hf_plugin="$2"
broken_plugin="$3"
teeth_dir="$4"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$rc_bin" props --target reference --preset llama-3.1-8b --cases 20 --report "$tmp/r.json" >"$tmp/out" 2>"$tmp/err"
code=$?
[ "$code" -eq 0 ] || { cat "$tmp/out" "$tmp/err"; fail "reference on llama-3.1-8b exited $code"; }
for p in relative_shift attention_shift norm composition matrix_orthogonal uniqueness roformer_decay cosine_sum \
         layout_equivalence mrope_equal_streams linear_scaling yarn_frequencies partial_passthrough; do
  grep -q "^$p .*cases   20" "$tmp/out" || { cat "$tmp/out"; fail "no line for $p"; }
done
grep -q "first turns negative at m = " "$tmp/out" || fail "cosine-sum report missing"
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); assert r['passed'] and len(r['properties'])>=15" "$tmp/r.json" \
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
expect_exit 0 --target hf-fp32 --preset llama-3.1-8b
expect_exit 1 --target mutant:sin-sign-flipped --preset llama-2-7b
grep -q "FAIL" "$tmp/out" || fail "mutant: no failing property line"
expect_exit 0 --kernel "$hf_plugin" --preset llama-3.1-8b
expect_exit 1 --kernel "$broken_plugin" --preset llama-3.1-8b
grep -q "^relative_shift .*FAIL" "$tmp/out" || { cat "$tmp/out"; fail "broken plugin: relative_shift did not fail"; }
# ropecheck's own fast kernels (kernel:<recipe>): accurate passes as f32-reduced, bf16 inverse frequencies fail.
"$rc_bin" props --list-targets >"$tmp/out" 2>&1 || fail "--list-targets exited nonzero"
grep -q "^kernel:accurate .*class f32-reduced" "$tmp/out" || { cat "$tmp/out"; fail "--list-targets: no kernel:accurate (f32-reduced)"; }
grep -q "^kernel:hf-bf16out .*class bf16-table" "$tmp/out" || fail "--list-targets: no kernel:hf-bf16out (bf16-table)"
expect_exit 0 --target kernel:accurate --preset llama-3.1-8b
grep -q "target kernel:accurate (f32-reduced)" "$tmp/out" || { cat "$tmp/out"; fail "kernel:accurate: no header naming its class"; }
expect_exit 1 --target kernel:bf16-inv-freq --preset llama-3.1-8b
grep -q "^relative_shift .*FAIL" "$tmp/out" || { cat "$tmp/out"; fail "kernel:bf16-inv-freq: relative_shift did not fail"; }
# Issue 15's bug kinds through the C ABI, default output dtypes (f32, bf16, f16 here; f64 UNSUPPORTED):
# each caught (exit 1) by the property that states what it breaks, on a preset with attention factor 1
# (llama-3.1-8b, gpt-j-6b, deepseek-v3), and the correct plugin passes those properties. (--only keeps
# the runtime down: a failing property shrinks its counterexample, which costs seconds per property.)
for preset in llama-3.1-8b gpt-j-6b deepseek-v3; do
  expect_exit 0 --kernel "$teeth_dir/teeth_plugin_correct.so" --preset "$preset" \
    --only relative_shift,norm,attention_factor,head_independence,store_rounding
  grep -q "^output bf16:" "$tmp/out" || { cat "$tmp/out"; fail "correct plugin on $preset: bf16 outputs not run by default"; }
  grep -q "output f64: the target answered unsupported" "$tmp/out" || { cat "$tmp/out"; fail "$preset: f64 not reported unsupported"; }
  for bug in k_head_offset:head_independence att_dropped:attention_factor att_twice:attention_factor \
             bf16_truncate:store_rounding; do
    mode="${bug%%:*}"; prop="${bug##*:}"
    expect_exit 1 --kernel "$teeth_dir/teeth_plugin_$mode.so" --preset "$preset" --only "$prop"
    grep -q "^FAIL $prop " "$tmp/out" || { cat "$tmp/out"; fail "teeth plugin $mode on $preset: $prop did not fail"; }
  done
done
# --dtype narrows the run: the truncating store is invisible in f32 alone, and an unknown dtype is exit 2.
expect_exit 0 --kernel "$teeth_dir/teeth_plugin_bf16_truncate.so" --preset llama-3.1-8b --dtype f32 --only store_rounding
expect2 --kernel "$teeth_dir/teeth_plugin_correct.so" --preset llama-3.1-8b --dtype f8
expect2 --target hf-fp32 --preset llama-3.1-8b --dtype bf16
echo "props CLI: ok"
