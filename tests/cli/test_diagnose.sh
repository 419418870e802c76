#!/usr/bin/env bash
# `ropecheck check`'s differential diagnosis as a user meets it (checker/DIAGNOSIS.md): a failing kernel is
# named in the text and JSON reports, a passing one gets no diagnosis (a "nothing to diagnose" line with
# --diagnose), --no-diagnose skips it, shape slips are exit 2 with the remedy, --layout bhsd fixes one; a
# failing `props` counterexample is replayed as a check of the same kernel and diagnosed the same way; the
# teeth plugins' mistakes (another base, an offset, another factor, LongRoPE lists swapped, periods for
# frequencies, wrapped positions) are named, with the fitted value where the hypothesis is a parameter.
#
#   bash tests/cli/test_diagnose.sh ROPECHECK BROKEN_PLUGIN.so PYTHON TEETH_PLUGIN_DIR
#
# BROKEN_PLUGIN: examples/plugin_broken_bf16_invfreq (inverse frequencies rounded to bf16); PYTHON with numpy;
# TEETH_PLUGIN_DIR: tests/plugins/teeth_plugin.cpp's builds.
set -u
if [ $# -ne 4 ]; then
  echo "usage: $0 ROPECHECK BROKEN_PLUGIN.so PYTHON TEETH_PLUGIN_DIR" >&2
  exit 2
fi
abspath() { case "$1" in /*) printf '%s\n' "$1" ;; *) printf '%s\n' "$PWD/$1" ;; esac; }
BIN=$(abspath "$1")
BROKEN=$(abspath "$2")
PY=$3
TEETH=$(abspath "$4")
TMP=$(mktemp -d "${TMPDIR:-/tmp}/ropecheck_diagnose.XXXXXX") || exit 2
trap 'rm -rf "$TMP"' EXIT
cd "$TMP" || exit 2
OUT="$TMP/stdout"
ERR="$TMP/stderr"
PASS=0
FAIL=0
check() {
  if [ -z "$2" ]; then PASS=$((PASS + 1)); printf 'PASS  %s\n' "$1"; else
    FAIL=$((FAIL + 1)); printf 'FAIL  %s\n        %s\n' "$1" "$2"
    [ -s "$ERR" ] && printf '        stderr: %s\n' "$(head -c 400 "$ERR" | tr '\n' '|')"
  fi
}
run() { "$BIN" "$@" >"$OUT" 2>"$ERR"; RC=$?; }
json() { "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$3"; }

"$BIN" golden --preset llama-3.1-8b --positions 0:4,255:260,1000,4095,30000,131071 --heads 1 --dtypes f32 \
  --format npy --out set >/dev/null 2>&1 || { echo "golden failed" >&2; exit 2; }

run check --golden set --kernel "$BROKEN" --report r1.json
e=""
[ "$RC" = 1 ] || e+="exit $RC (want 1); "
grep -q '^diagnosis: matches the truth computed with inverse frequencies rounded to bf16: max error ' "$OUT" || e+="no diagnosis line; "
grep -q '^  1     bf16-inv-freq .*MATCH$' "$OUT" || e+="bf16-inv-freq is not rank 1 with MATCH; "
[ "$(json r1.json 'd["diagnosis"]["match"]' r1.json)" = "bf16-inv-freq" ] || e+="JSON diagnosis.match; "
[ "$(json r1.json 'd["diagnosis"]["ranked"][0]["failing_fraction"]' r1.json)" = "1.0" ] || e+="JSON failing_fraction; "
check "a kernel with bf16 inverse frequencies is diagnosed as that (text and JSON)" "$e"

run check --golden set --kernel "$BROKEN" --no-diagnose --report r2.json
e=""
[ "$RC" = 1 ] || e+="exit $RC (want 1); "
grep -q '^diagnosis' "$OUT" && e+="diagnosis printed; "
[ "$(json r2.json '"diagnosis" in d' r2.json)" = "False" ] || e+="JSON has diagnosis; "
check "--no-diagnose: no diagnosis, same exit" "$e"

run check --golden set --kernel builtin:accurate --report r3.json
e=""
[ "$RC" = 0 ] || e+="exit $RC (want 0); "
grep -q 'diagnosis' "$OUT" && e+="a passing check printed a diagnosis; "
[ "$(json r3.json '"diagnosis" in d' r3.json)" = "False" ] || e+="JSON has diagnosis; "
check "a correct kernel gets no diagnosis" "$e"

run check --golden set --kernel builtin:accurate --diagnose --report r4.json
e=""
[ "$RC" = 0 ] || e+="exit $RC (want 0); "
grep -q '^diagnosis: nothing to diagnose: no element is outside the fp32-angle bound$' "$OUT" || e+="no 'nothing to diagnose'; "
[ "$(json r4.json 'd["diagnosis"]["match"]' r4.json)" = "None" ] || e+="JSON match not null; "
check "--diagnose on a passing check: nothing to diagnose, exit 0" "$e"

run check --golden set --kernel builtin:accurate --layout sbhd
e=""
[ "$RC" = 2 ] || e+="exit $RC (want 2); "
[ "$(wc -l <"$ERR")" = 1 ] || e+="stderr is not one line; "
grep -q "^ropecheck: error: --layout: unknown layout 'sbhd'" "$ERR" || e+="message; "
check "--layout with an unknown layout: exit 2, one line" "$e"

# Candidate files with slips, from the golden set's own values.
"$PY" - <<'PY' || { echo "python failed" >&2; exit 2; }
import numpy as np
o = np.load("set/outputs_f32.npz")
q = o["q_rot.f32"]                     # [T, H, D]
np.savez("bhsd.npz", q_rot=q.transpose(1, 0, 2)[None])          # [1, H, T, D]
np.savez("cattable.npz", cos=np.concatenate([o["cos.f32"], o["cos.f32"]], axis=1))  # [T, 2P]
PY
run check --golden set --candidate bhsd.npz --report r5.json
e=""
[ "$RC" = 2 ] || e+="exit $RC (want 2); "
[ "$(wc -l <"$ERR")" = 1 ] || e+="stderr is not one line; "
grep -q 'looks like \[batch, heads, seq, head_dim\]; pass --layout bhsd (batch 1) or transpose to \[tokens, heads, head_dim\]$' "$ERR" || e+="no remedy; "
[ -e r5.json ] && e+="report written; "
check "q_rot as [1, heads, seq, head_dim]: exit 2 naming the layout and the remedy" "$e"

run check --golden set --candidate bhsd.npz --layout bhsd --only q_rot.f32
e=""
[ "$RC" = 0 ] || e+="exit $RC (want 0); "
check "--layout bhsd: the same tensor passes" "$e"

run check --golden set --candidate cattable.npz
e=""
[ "$RC" = 2 ] || e+="exit $RC (want 2); "
grep -q 'cos with equal halves: a cat(freqs, freqs) table; ropecheck expects \[tokens, pairs\]: pass cos\[..., :64\]$' "$ERR" || e+="no remedy; "
check "cos as cat(freqs, freqs): exit 2 naming the table convention" "$e"

# props: the failing counterexample replayed as a check of the same kernel and diagnosed.
run props --kernel builtin:bf16-positions --dtype f32 --preset llama-3.1-8b --cases 20 --only cosine_sum --report p1.json
e=""
[ "$RC" = 1 ] || e+="exit $RC (want 1); "
grep -q '^  counterexample replayed as a check of its spec at positions log:[0-9]*:2 (same kernel, class fp32-angle): fail$' "$OUT" || e+="no replay line; "
grep -q '^  diagnosis: matches the truth computed with positions rounded to bf16: ' "$OUT" || e+="no diagnosis line; "
[ "$(json p1.json 'd["properties"][0]["diagnosis"]["match"]' p1.json)" = "bf16-positions" ] || e+="JSON diagnosis.match; "
check "props: a failing kernel's counterexample is diagnosed (text and JSON)" "$e"

run props --kernel builtin:bf16-positions --dtype f32 --preset llama-3.1-8b --cases 20 --only cosine_sum --no-diagnose --report p2.json
e=""
[ "$RC" = 1 ] || e+="exit $RC (want 1); "
grep -q 'diagnosis' "$OUT" && e+="diagnosis printed; "
[ "$(json p2.json '"diagnosis" in d["properties"][0]' p2.json)" = "False" ] || e+="JSON has diagnosis; "
check "props --no-diagnose: no diagnosis, same exit" "$e"

# The plugins with one mistake each, diagnosed through the C ABI: rank 1, the conclusion's own words.
teeth() {  # MODE PRESET POSITIONS ID CONCLUSION_START
  "$BIN" golden --preset "$2" --positions "$3" --heads 1 --dtypes f32 --out "t-$1" >/dev/null 2>&1 ||
    { check "golden --preset $2 for $1" "golden failed"; return; }
  run check --golden "t-$1" --kernel "$TEETH/teeth_plugin_$1.so" --only q_rot,k_rot --report "t-$1.json"
  e=""
  [ "$RC" = 1 ] || e+="exit $RC (want 1); "
  [ "$(json "t-$1.json" 'd["diagnosis"]["match"]' "t-$1.json")" = "$4" ] || e+="JSON match $(json "t-$1.json" 'd["diagnosis"]["match"]' "t-$1.json") (want $4); "
  grep -q "^diagnosis: $5" "$OUT" || e+="conclusion: $(grep '^diagnosis' "$OUT"); "
  check "teeth plugin $1 on $2: $4" "$e"
}
T="0:3,255:259,1000,4095,30000,131071"
teeth base_default llama-3-8b "$T" base-default "base 10000 fits every failing element; the spec says 500000 "
teeth offset7 llama-3.1-8b "$T" fit-position-offset "position offset +7 fits every failing element; the spec says 0 "
teeth factor4 gemma-3-4b-global "$T" fit-factor "scaling factor 4 fits every failing element; the spec says 8 "
teeth longrope_swapped phi-3.5-mini "0:3,255:259,1000,4095" longrope-factors-swapped "matches the truth computed with LongRoPE factor lists swapped"
teeth reciprocal llama-2-7b "0:16" inv-freq-reciprocal "matches the truth computed with periods (1 / w) used where inverse frequencies are expected"
teeth int16_positions llama-3.1-8b "0:3,1000,32767,32768,40000,65535,70001" positions-int16 "matches the truth computed with positions wrapped to int16"
teeth int32_positions llama-3.1-8b "0:3,1000,3000000000,4000000000" positions-int32 "matches the truth computed with positions wrapped to int32"
teeth att_dropped qwen2.5-7b-yarn "$T" attention-factor-missing "matches the truth computed with the attention factor not applied"
[ "$(json t-att_dropped.json '[f["parameter"]["value"] for f in d["diagnosis"]["fits"] if f["id"] == "fit-attention-factor"]' t-att_dropped.json)" = "['1']" ]
check "the attention-factor fit recovers 1 for the dropped factor" "$([ $? = 0 ] || echo "fits: $(json t-att_dropped.json 'd["diagnosis"]["fits"]' t-att_dropped.json)")"

echo "$PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]
