#!/usr/bin/env bash
# The command line as a user meets it: outputs, exit codes, one-line errors.
#
#   bash tests/cli/test_cli.sh PATH_TO_ropecheck PATH_TO_tests/cli
#
# Prints PASS/FAIL per check and a final "N passed, M failed"; exits 0 only if every check passed.
# Independent of the current directory: both arguments are made absolute and every command runs
# from a fresh temporary directory.
set -u

if [ $# -ne 2 ]; then
  echo "usage: $0 PATH_TO_ropecheck PATH_TO_tests/cli" >&2
  exit 2
fi

abspath() { case "$1" in /*) printf '%s\n' "$1" ;; *) printf '%s\n' "$PWD/$1" ;; esac; }
BIN=$(abspath "$1")
FIX=$(cd "$2" 2>/dev/null && pwd) || { echo "no such fixture directory: $2" >&2; exit 2; }
PRESETS_DIR=$(cd "$FIX/../../reference/presets" 2>/dev/null && pwd) || PRESETS_DIR=""
if [ ! -x "$BIN" ]; then
  echo "not an executable: $BIN" >&2
  exit 2
fi
command -v python3 >/dev/null 2>&1 || { echo "python3 is required" >&2; exit 2; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/ropecheck_cli.XXXXXX") || exit 2
trap 'rm -rf "$TMP"' EXIT
cd "$TMP" || exit 2
OUT="$TMP/stdout"
ERR="$TMP/stderr"

PASS=0
FAIL=0
pass() { PASS=$((PASS + 1)); printf 'PASS  %s\n' "$1"; }
fail() {
  FAIL=$((FAIL + 1))
  printf 'FAIL  %s\n' "$1"
  if [ $# -gt 1 ] && [ -n "$2" ]; then printf '        %s\n' "$2"; fi
  if [ -s "$ERR" ]; then printf '        stderr: %s\n' "$(head -c 400 "$ERR" | tr '\n' '|')"; fi
}

TIMEOUT=""
command -v timeout >/dev/null 2>&1 && TIMEOUT="timeout 120"

# run ARGS...: runs the binary, sets RC; stdout in $OUT, stderr in $ERR.
run() {
  $TIMEOUT "$BIN" "$@" >"$OUT" 2>"$ERR"
  RC=$?
}

lines() { awk 'END { print NR }' "$1"; }  # counts a last line without '\n' too

# check DESCRIPTION PROBLEMS: passes when PROBLEMS is empty.
check() { if [ -z "$2" ]; then pass "$1"; else fail "$1" "$2"; fi; }

# expect_ok DESCRIPTION ARGS...: exit 0, empty stderr, non-empty stdout.
expect_ok() {
  local desc=$1
  shift
  run "$@"
  local p=""
  [ "$RC" -eq 0 ] || p+="exit code $RC (want 0); "
  [ -s "$OUT" ] || p+="empty stdout; "
  [ ! -s "$ERR" ] || p+="stderr not empty; "
  check "$desc" "$p"
}

# expect_input_error DESCRIPTION NEEDLE ARGS...: exit 2, nothing on stdout, exactly one stderr line
# starting "ropecheck: error:" that contains NEEDLE (case-insensitive, fixed string).
expect_input_error() {
  local desc=$1 needle=$2
  shift 2
  run "$@"
  local p="" n
  n=$(lines "$ERR")
  [ "$RC" -eq 2 ] || p+="exit code $RC (want 2); "
  [ ! -s "$OUT" ] || p+="stdout not empty ($(lines "$OUT") lines); "
  [ "$n" -eq 1 ] || p+="stderr has $n lines (want 1); "
  head -n 1 "$ERR" | grep -q '^ropecheck: error: ' || p+="stderr does not start with 'ropecheck: error: '; "
  grep -qiF -- "$needle" "$ERR" || p+="stderr does not name '$needle'; "
  check "$desc" "$p"
}

# json_check DESCRIPTION PYTHON_BODY: runs PYTHON_BODY with d = json.load(stdout file); the body
# sets `problems` (a list of strings) for anything wrong.
json_check() {
  local desc=$1 body=$2 msg
  msg=$(python3 - "$OUT" <<PY 2>&1
import json, re, sys
problems = []
try:
    with open(sys.argv[1]) as f:
        d = json.load(f)
except Exception as e:
    print("stdout is not JSON: %s" % e)
    sys.exit(0)
digits40 = re.compile(r"^-?[0-9]\.[0-9]{39,}e[+-][0-9]+$")
$body
print("; ".join(problems))
PY
)
  check "$desc" "$msg"
}

# ---------------------------------------------------------------------------------------------
echo "== version and help"

run --version
p=""
[ "$RC" -eq 0 ] || p+="exit code $RC; "
grep -qx 'ropecheck 0.1.0' "$OUT" || p+="stdout is '$(head -c 100 "$OUT")', want 'ropecheck 0.1.0'; "
check "--version prints 'ropecheck 0.1.0'" "$p"

for sub in "" presets spec; do
  # shellcheck disable=SC2086
  run $sub --help
  p=""
  [ "$RC" -eq 0 ] || p+="exit code $RC; "
  grep -q 'Usage:' "$OUT" || p+="no 'Usage:' on stdout; "
  case "$sub" in
    "") grep -q 'presets' "$OUT" && grep -q 'spec' "$OUT" || p+="subcommands not listed; " ;;
    spec) for o in --preset --hf-config --spec --seq-len --digits --json; do
            grep -q -- "$o" "$OUT" || p+="option $o not listed; "
          done ;;
    presets) grep -q -- '--json' "$OUT" || p+="option --json not listed; " ;;
  esac
  check "${sub:-app} --help exits 0 with usage" "$p"
done

# ---------------------------------------------------------------------------------------------
echo "== presets"

run presets
p=""
[ "$RC" -eq 0 ] || p+="exit code $RC; "
[ ! -s "$ERR" ] || p+="stderr not empty; "
header=$(head -n 1 "$OUT")
echo "$header" | grep -Eq '^name +family +head_dim +rotary_dim +base +scaling +layout *$' ||
  p+="header is '$header'; "
nrows=$(($(lines "$OUT") - 1))
[ "$nrows" -eq 22 ] || p+="$nrows preset rows (want 22); "
check "presets lists 22 presets under name/family/head_dim/rotary_dim/base/scaling/layout" "$p"
PRESET_NAMES=$(tail -n +2 "$OUT" | awk '{ print $1 }')

p=""
while read -r name family hd rd base scaling layout _; do
  [ -n "$name" ] || continue
  case "$scaling" in none | linear | dynamic | yarn | llama3 | longrope | proportional | -) ;;
    *) p+="$name: scaling '$scaling'; " ;; esac
  case "$family" in
    rope) [[ "$hd" =~ ^[0-9]+$ && "$rd" =~ ^[0-9]+$ ]] || p+="$name: head_dim/rotary_dim '$hd' '$rd'; "
          case "$layout" in half_split | interleaved) ;; *) p+="$name: layout '$layout'; " ;; esac ;;
    sinusoidal) [[ "$hd" =~ ^[0-9]+$ ]] || p+="$name: d_model '$hd'; " ;;
    *) p+="$name: family '$family'; " ;;
  esac
  [[ "$base" =~ ^[0-9.e+]+$ ]] || p+="$name: base '$base'; "
done < <(tail -n +2 "$OUT")
check "every presets row has 7 well-formed columns" "$p"

p=""
row() { grep -E "^$1 " "$OUT" | tr -s ' '; }
[ "$(row 'llama-3\.1-8b')" = "llama-3.1-8b rope 128 128 500000 llama3 half_split" ] ||
  p+="llama-3.1-8b row is '$(row 'llama-3\.1-8b')'; "
[ "$(row 'phi-2')" = "phi-2 rope 80 32 10000 none half_split" ] || p+="phi-2 row is '$(row 'phi-2')'; "
[ "$(row 'gpt-j-6b')" = "gpt-j-6b rope 256 64 10000 none interleaved" ] || p+="gpt-j-6b row is '$(row 'gpt-j-6b')'; "
[ "$(row 'deepseek-v3')" = "deepseek-v3 rope 64 64 10000 yarn interleaved" ] ||
  p+="deepseek-v3 row is '$(row 'deepseek-v3')'; "
[ "$(row 'deepseek-v3-mla')" = "deepseek-v3-mla rope 192 64 10000 yarn interleaved + slice at 128 + k_pe key" ] ||
  p+="deepseek-v3-mla row is '$(row 'deepseek-v3-mla')'; "
[ "$(row 'qwen3-vl-8b')" = "qwen3-vl-8b rope 128 128 5e+06 none half_split + mrope interleaved" ] ||
  p+="qwen3-vl-8b row is '$(row 'qwen3-vl-8b')'; "
[ "$(row 'transformer-base')" = "transformer-base sinusoidal 512 - 10000 - interleaved (vaswani)" ] ||
  p+="transformer-base row is '$(row 'transformer-base')'; "
check "presets rows carry the right values (spot checks)" "$p"

if [ -n "$PRESETS_DIR" ]; then
  want=$(cd "$PRESETS_DIR" && ls -1 -- *.json | sed 's/\.json$//' | LC_ALL=C sort)
  got=$(printf '%s\n' "$PRESET_NAMES" | LC_ALL=C sort)
  check "presets lists exactly the files in reference/presets" \
    "$([ "$want" = "$got" ] || echo "differs: $(diff <(echo "$want") <(echo "$got") | tr '\n' ' ')")"
fi

run presets --json
json_check "presets --json is a list of 22 spec objects" '
if not isinstance(d, list) or len(d) != 22:
    problems.append("not a list of 22")
else:
    for s in d:
        if not isinstance(s, dict) or "name" not in s or s.get("family") not in ("rope", "sinusoidal"):
            problems.append("bad entry %r" % (str(s)[:60],))
'

# ---------------------------------------------------------------------------------------------
echo "== spec --preset llama-3.1-8b (text)"

run spec --preset llama-3.1-8b
p=""
[ "$RC" -eq 0 ] || p+="exit code $RC; "
[ ! -s "$ERR" ] || p+="stderr not empty; "
check "spec --preset llama-3.1-8b exits 0" "$p"

nfreq=$(grep -cE '^ +[0-9]+ +-?[0-9]\.[0-9]+e[+-][0-9]+$' "$OUT")
n40=$(grep -cE '^ +[0-9]+ +-?[0-9]\.[0-9]{39,}e[+-][0-9]+$' "$OUT")
check "prints 64 inverse frequencies" "$([ "$nfreq" -eq 64 ] || echo "found $nfreq")"
check "every inverse frequency has >= 40 significant digits" "$([ "$n40" -eq 64 ] || echo "$n40 of 64")"
check "inverse frequencies are indexed 0..63" \
  "$(grep -E '^ +[0-9]+ +-?[0-9]\.' "$OUT" | awk '{ if ($1 != NR - 1) { print "row " NR " has index " $1; exit } }')"
check "pair 0 inverse frequency is exactly 1" \
  "$(grep -qE '^ +0 +1\.0{39,}e\+00$' "$OUT" || echo "pair 0 line: $(grep -E '^ +0 ' "$OUT")")"
check "prints the attention factor (1, >= 40 digits)" \
  "$(grep -qE '^attention factor: 1\.0{39,}e\+00$' "$OUT" || echo "line: $(grep -i 'attention' "$OUT")")"
check "prints '29 kept, 6 smoothed, 29 divided'" \
  "$(grep -q '29 kept, 6 smoothed, 29 divided' "$OUT" || echo "line: $(grep -i 'kept' "$OUT")")"
# Independent values from Python's decimal module (70 digits): kept band j <= 28, smoothed 29..34,
# divided by 8 for j >= 35 (variants.md 1.6); printed values must agree to 1e-40 relative.
check "inverse frequencies of pairs 1, 28, 30, 34, 35, 63 agree with an independent decimal computation" \
  "$(python3 - "$OUT" <<'PY'
import re, sys
from decimal import Decimal, getcontext
getcontext().prec = 70
PI = Decimal("3.141592653589793238462643383279502884197169399375105820974944592307816")
printed = {}
for line in open(sys.argv[1]):
    m = re.match(r"^ +([0-9]+) +(-?[0-9]\.[0-9]+e[+-][0-9]+)$", line)
    if m:
        printed[int(m.group(1))] = Decimal(m.group(2))
ln_base = Decimal(500000).ln()
def exact(j):
    inv = (Decimal(-2 * j) / 128 * ln_base).exp()
    wl = 2 * PI / inv
    if wl < Decimal(8192) / 4:
        return inv
    if wl > Decimal(8192) / 1:
        return inv / 8
    smooth = (Decimal(8192) / wl - 1) / 3
    return (1 - smooth) * inv / 8 + smooth * inv
for j in (1, 28, 30, 34, 35, 63):
    if j not in printed:
        print("pair %d not printed" % j)
        continue
    e = exact(j)
    if abs(printed[j] - e) / e > Decimal("1e-40"):
        print("pair %d: printed %s, exact %s" % (j, printed[j], +e))
PY
)"

# --digits N: every value has exactly N significant digits (the header and JSON say N).
p=""
for nd in 40 60; do
  run spec --preset llama-3.1-8b --digits "$nd"
  [ "$RC" -eq 0 ] || p+="--digits $nd: exit code $RC; "
  counts=$(awk '/^ +[0-9]+ +-?[0-9]\.[0-9]+e[+-][0-9]+$/ { m = $2; sub(/e.*/, "", m); gsub(/[.-]/, "", m); print length(m) }' "$OUT" | sort -u | tr '\n' ' ')
  [ "$counts" = "$nd " ] || p+="--digits $nd: values have ${counts}significant digits; "
  grep -q "^reference: MPFR at [0-9]* bits, $nd significant digits$" "$OUT" || p+="--digits $nd: header does not say $nd; "
done
check "--digits N prints exactly N significant digits (N = 40, 60)" "$p"

echo "== spec --json"

run spec --preset llama-3.1-8b --json
check "spec --preset llama-3.1-8b --json exits 0" "$([ "$RC" -eq 0 ] || echo "exit code $RC")"
json_check "spec --json: 64 inverse_frequencies with >= 40 digits, attention_factor" '
inv = d.get("inverse_frequencies")
if not isinstance(inv, list) or len(inv) != 64:
    problems.append("inverse_frequencies is not a list of 64")
else:
    bad = [x for x in inv if not (isinstance(x, str) and digits40.match(x))]
    if bad:
        problems.append("%d entries with < 40 digits, e.g. %r" % (len(bad), bad[0]))
    vals = [float(x) for x in inv]
    if vals[0] != 1.0 or any(b >= a for a, b in zip(vals, vals[1:])):
        problems.append("inverse frequencies are not 1, then strictly decreasing")
att = d.get("attention_factor")
if not (isinstance(att, str) and digits40.match(att) and float(att) == 1.0):
    problems.append("attention_factor is %r" % (att,))
'

# ---------------------------------------------------------------------------------------------
echo "== every preset resolves"

p=""
for name in $PRESET_NAMES; do
  run spec --preset "$name" --json
  if [ "$RC" -ne 0 ]; then
    p+="$name: exit code $RC; "
    continue
  fi
  python3 -c 'import json, sys; d = json.load(sys.stdin); assert d["inverse_frequencies"] if "inverse_frequencies" in d else d' \
    <"$OUT" >/dev/null 2>&1 || p+="$name: output is not JSON; "
done
check "spec --preset NAME --json exits 0 with JSON for all $(echo "$PRESET_NAMES" | wc -w) presets" "$p"

# ---------------------------------------------------------------------------------------------
echo "== spec --hf-config and --spec"

run spec --hf-config "$FIX/hf_phi35_mini_config.json" --json
check "spec --hf-config (Phi-3.5-mini) exits 0" "$([ "$RC" -eq 0 ] || echo "exit code $RC")"
json_check "hf-config Phi-3.5: 48 pairs, short factors by default, attention 1.1902380714" '
inv = d.get("inverse_frequencies") or []
if len(inv) != 48: problems.append("%d inverse frequencies (want 48)" % len(inv))
if d.get("longrope_factors") != "short": problems.append("longrope_factors %r (want short)" % d.get("longrope_factors"))
att = d.get("attention_factor", "")
if not str(att).startswith("1.1902380714"): problems.append("attention_factor %r" % att)
if d.get("effective_factor") != 32.0: problems.append("effective_factor %r (want 32)" % d.get("effective_factor"))
'
cp "$OUT" "$TMP/phi_default.json"

run spec --hf-config "$FIX/hf_phi35_mini_config.json" --json --seq-len 4096
cp "$OUT" "$TMP/phi_4096.json"
json_check "--seq-len 4096 (= original) keeps the short factors" '
if d.get("longrope_factors") != "short": problems.append("longrope_factors %r" % d.get("longrope_factors"))
if d.get("seq_len") != 4096: problems.append("seq_len %r" % d.get("seq_len"))
'
run spec --hf-config "$FIX/hf_phi35_mini_config.json" --json --seq-len 4097
cp "$OUT" "$TMP/phi_4097.json"
json_check "--seq-len 4097 (> original) switches to the long factors" '
if d.get("longrope_factors") != "long": problems.append("longrope_factors %r" % d.get("longrope_factors"))
'
check "short and long factors give the expected pair-0 frequencies (1 and 1/1.0800000429153442)" \
  "$(python3 - "$TMP/phi_4096.json" "$TMP/phi_4097.json" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))["inverse_frequencies"]
b = json.load(open(sys.argv[2]))["inverse_frequencies"]
# short_factor[0] = 1.0 -> inv 1; long_factor[0] = 1.0800000429153442 -> inv 1/1.08...
if float(a[0]) != 1.0: print("short pair 0 is %s (want 1)" % a[0])
if abs(float(b[0]) - 1 / 1.0800000429153442) > 1e-15: print("long pair 0 is %s (want 1/1.0800000429153442)" % b[0])
if a == b: print("identical lists")
PY
)"

run spec --hf-config "$FIX/hf_phi35_mini_config.json"
check "hf-config text output says 'longrope factors: short'" \
  "$([ "$RC" -eq 0 ] && grep -q '^longrope factors: short$' "$OUT" || echo "rc $RC")"

# Phi-3.5-MoE: rope_scaling.short_mscale / long_mscale are the attention factor (HF, vLLM), not sqrt(17/12).
expect_ok "spec --hf-config (Phi-3.5-MoE) exits 0, no warning" spec --hf-config "$FIX/hf_phimoe_config.json" --json
json_check "hf-config Phi-3.5-MoE: 64 pairs, attention 1.243163121016122 (short_mscale), not 1.1902" '
if len(d.get("inverse_frequencies") or []) != 64: problems.append("%d inverse frequencies" % len(d.get("inverse_frequencies") or []))
att = d.get("attention_factor", "")
if abs(float(att) - 1.243163121016122) > 1e-30: problems.append("attention_factor %r" % att)
if d.get("spec", {}).get("rope", {}).get("scaling", {}).get("short_mscale") != 1.243163121016122: problems.append("short_mscale not in the spec")
'
run spec --hf-config "$FIX/hf_phimoe_config.json" --json --seq-len 8192
json_check "hf-config Phi-3.5-MoE --seq-len 8192: long factors, attention 1.243163121016122 (long_mscale)" '
if d.get("longrope_factors") != "long": problems.append("longrope_factors %r" % d.get("longrope_factors"))
if abs(float(d.get("attention_factor", 0)) - 1.243163121016122) > 1e-30: problems.append("attention_factor %r" % d.get("attention_factor"))
'

# Keys the importer does not use: one warning line each on stderr (exit 0); --strict: exit 2.
run spec --hf-config "$FIX/hf_unknown_keys_config.json" --json
p=""
[ "$RC" -eq 0 ] || p+="exit code $RC (want 0); "
[ "$(lines "$ERR")" -eq 2 ] || p+="stderr has $(lines "$ERR") lines (want 2); "
grep -q "^ropecheck: warning: .*'rope_scaling.magic_mscale': not understood" "$ERR" || p+="rope_scaling.magic_mscale not named; "
grep -q "^ropecheck: warning: .*'rope_ratio': not understood" "$ERR" || p+="rope_ratio not named; "
python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$OUT" 2>/dev/null || p+="stdout is not JSON; "
check "hf-config with unknown RoPE keys: one warning per key on stderr, exit 0" "$p"
expect_input_error "spec --strict: an unknown RoPE key is exit 2" "'rope_ratio': not understood by ropecheck (and 1 more)" \
  spec --hf-config "$FIX/hf_unknown_keys_config.json" --strict
expect_input_error "golden --strict: an unknown RoPE key is exit 2" "--strict" \
  golden --hf-config "$FIX/hf_unknown_keys_config.json" --strict --positions 0:4 --out "$TMP/g_strict"
check "golden --strict wrote nothing" "$([ ! -e "$TMP/g_strict" ] || echo "$TMP/g_strict exists")"
expect_input_error "props --strict: an unknown RoPE key is exit 2" "--strict" \
  props --target reference --hf-config "$FIX/hf_unknown_keys_config.json" --strict
expect_input_error "drift --strict: an unknown RoPE key is exit 2" "--strict" \
  drift --hf-config "$FIX/hf_unknown_keys_config.json" --strict --recipes builtin:hf --out "$TMP/d_strict"
check "drift --strict wrote nothing" "$([ ! -e "$TMP/d_strict" ] || echo "$TMP/d_strict exists")"
expect_ok "spec --strict on a config without unused keys exits 0" spec --hf-config "$FIX/hf_phimoe_config.json" --strict
# reliability-2 defect 9: 64-bit integers were narrowed to int silently (2^32 + 64 read as 64).
expect_input_error "hf-config rotary_dim 2^32+64 is exit 2" "rotary_dim" spec --hf-config "$FIX/bad_hf_rotary_dim_2p32.json"
expect_input_error "hf-config mrope_section [2^32+16, 24, 24] is exit 2" "mrope_section[0]" \
  spec --hf-config "$FIX/bad_hf_mrope_2p32.json"

run spec --hf-config "$FIX/hf_llama31_8b_config.json" --json
json_check "hf-config Llama-3.1-8B: 64 pairs, llama3 8, bands 29/6/29" '
if len(d.get("inverse_frequencies") or []) != 64: problems.append("%d inverse frequencies" % len(d.get("inverse_frequencies") or []))
if d.get("effective_factor") != 8.0: problems.append("effective_factor %r" % d.get("effective_factor"))
if d.get("spec", {}).get("rope", {}).get("scaling", {}).get("type") != "llama3": problems.append("scaling type")
if d.get("llama3_bands") != {"kept": 29, "smoothed": 6, "divided": 29}: problems.append("llama3_bands %r" % d.get("llama3_bands"))
'
cp "$OUT" "$TMP/hf_llama.json"
run spec --preset llama-3.1-8b --json
check "hf-config Llama-3.1-8B gives the same frequencies and attention factor as the preset" \
  "$(python3 - "$TMP/hf_llama.json" "$OUT" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))
b = json.load(open(sys.argv[2]))
for k in ("inverse_frequencies", "attention_factor", "effective_factor"):
    if a.get(k) != b.get(k): print("%s differs" % k)
PY
)"

run spec --hf-config "$FIX/hf_gemma3_v5_config.json" --json
json_check "hf-config Gemma 3 (v5 nested) defaults to full_attention: linear 8, base 1e6" '
spec = d.get("spec", {}).get("rope", {})
if spec.get("base") != 1000000.0: problems.append("base %r" % spec.get("base"))
if spec.get("scaling", {}).get("type") != "linear": problems.append("scaling %r" % spec.get("scaling"))
if d.get("effective_factor") != 8.0: problems.append("effective_factor %r" % d.get("effective_factor"))
'
run spec --hf-config "$FIX/hf_gemma3_v5_config.json" --layer-type sliding_attention --json
json_check "--layer-type sliding_attention: default, base 1e4" '
spec = d.get("spec", {}).get("rope", {})
if spec.get("base") != 10000.0: problems.append("base %r" % spec.get("base"))
if spec.get("scaling", {}).get("type") != "none": problems.append("scaling %r" % spec.get("scaling"))
'
run spec --hf-config "$FIX/hf_llama31_8b_config.json" --layout interleaved --json
json_check "--layout interleaved overrides the inferred layout" '
if d.get("spec", {}).get("rope", {}).get("layout") != "interleaved": problems.append("layout not overridden")
'

run spec --spec "$FIX/good_spec.json" --json
json_check "spec --spec FILE: 16 pairs (rotary_dim 32), name from the file" '
if len(d.get("inverse_frequencies") or []) != 16: problems.append("%d frequencies" % len(d.get("inverse_frequencies") or []))
if d.get("spec", {}).get("name") != "good": problems.append("name %r" % d.get("spec", {}).get("name"))
'

# The JSON that spec --json prints for a preset is itself a valid --spec file.
run spec --preset qwen3-vl-8b --json
python3 -c 'import json, sys; json.dump(json.load(sys.stdin)["spec"], open(sys.argv[1], "w"))' "$TMP/q3.json" <"$OUT" 2>/dev/null
run spec --spec "$TMP/q3.json" --json
json_check "the spec object of spec --json loads back with --spec (qwen3-vl-8b)" '
r = d.get("spec", {}).get("rope", {})
if r.get("mrope") != {"section": [24, 20, 20], "interleaved": True}: problems.append("mrope %r" % r.get("mrope"))
if len(d.get("inverse_frequencies") or []) != 64: problems.append("frequency count")
'

# ---------------------------------------------------------------------------------------------
echo "== unusable input: exit 2, one line on stderr, nothing on stdout"

expect_input_error "unknown preset" "no-such-model" spec --preset no-such-model
expect_input_error "nonexistent spec file" "does-not-exist.json" spec --spec "$TMP/does-not-exist.json"
expect_input_error "nonexistent hf config" "nope-config.json" spec --hf-config "$TMP/nope-config.json"
expect_input_error "malformed (truncated) JSON spec file" "bad_truncated.json" spec --spec "$FIX/bad_truncated.json"
expect_input_error "number out of binary64 range (1e999)" "bad_huge_number.json" spec --spec "$FIX/bad_huge_number.json"
expect_input_error "odd head_dim" "rope.head_dim' = 63" spec --spec "$FIX/bad_odd_head_dim.json"
expect_input_error "rotary_dim > head_dim" "rope.rotary_dim' = 128" spec --spec "$FIX/bad_rotary_gt_head.json"
expect_input_error "base 1" "rope.base' = 1:" spec --spec "$FIX/bad_base_one.json"
expect_input_error "unknown rope type" "ntk-by-parts" spec --spec "$FIX/bad_unknown_type.json"
expect_input_error "missing required key (base)" "rope.base': missing" spec --spec "$FIX/bad_missing_key.json"
expect_input_error "unknown key (typo 'factr')" "rope.scaling.factr': unknown key" spec --spec "$FIX/bad_unknown_key.json"
expect_input_error "wrong JSON type (string base)" "rope.base': must be a number" spec --spec "$FIX/bad_wrong_type.json"
expect_input_error "longrope list of the wrong length" "rope.scaling.long_factor" spec --spec "$FIX/bad_longrope_length.json"
expect_input_error "mrope sections with the wrong sum" "rope.mrope.section" spec --spec "$FIX/bad_mrope_sum.json"
expect_input_error "both --preset and --spec" "exactly one" spec --preset llama-3-8b --spec "$FIX/good_spec.json"
expect_input_error "no spec source" "exactly one" spec
expect_input_error "unknown option" "--frobnicate" spec --preset llama-3-8b --frobnicate
expect_input_error "--digits 10 (below 40)" "--digits" spec --preset llama-3-8b --digits 10
expect_input_error "--digits not a number" "--digits" spec --preset llama-3-8b --digits many
expect_input_error "negative --seq-len" "--seq-len" spec --preset phi-3.5-mini --seq-len -5
expect_input_error "--layout without --hf-config" "--layout" spec --preset llama-3-8b --layout interleaved
expect_input_error "--layout with a bad value" "sideways" spec --hf-config "$FIX/hf_llama31_8b_config.json" --layout sideways
expect_input_error "--layer-type missing from a nested config" "chunked_attention" \
  spec --hf-config "$FIX/hf_gemma3_v5_config.json" --layer-type chunked_attention
expect_input_error "no subcommand" "subcommand"
# CLI11 reports an unknown subcommand as "A subcommand is required" (it does not name 'frob').
expect_input_error "unknown subcommand" "subcommand" frob

# ---------------------------------------------------------------------------------------------
# golden: bad input stops before anything is written
mkdir -p "$TMP/existing"
expect_input_error "golden: empty range" "'5:3'" golden --preset llama-3.1-8b --positions 5:3 --out "$TMP/g1"
expect_input_error "golden: output exists" "already exists" golden --preset llama-3.1-8b --positions 0:4 --out "$TMP/existing"
expect_input_error "golden: unknown dtype" "f8" golden --preset llama-3.1-8b --positions 0:4 --dtypes f8 --out "$TMP/g2"
expect_input_error "golden: triples need mrope" "multimodal" golden --preset llama-3.1-8b --positions 1/2/3 --out "$TMP/g3"
expect_input_error "golden: bad format" "--format" golden --preset llama-3.1-8b --positions 0:4 --format csv --out "$TMP/g4"
expect_input_error "golden: missing --out" "--out" golden --preset llama-3.1-8b --positions 0:4
check "golden: nothing written on bad input" "$(ls -A "$TMP" | grep -E '^(g[0-9]|\.g)' || true)"

# ---------------------------------------------------------------------------------------------
echo "== golden --hf-config: the same bytes whatever path reaches the config"
mkdir -p "$TMP/cfgdir"
cp "$FIX/hf_phi35_mini_config.json" "$TMP/cfgdir/config.json"
p=""
run golden --hf-config cfgdir/config.json --positions 0:4 --dtypes f32 --out "$TMP/g_rel" --quiet
[ "$RC" -eq 0 ] || p+="relative path: exit $RC; "
run golden --hf-config "$TMP/cfgdir/config.json" --positions 0:4 --dtypes f32 --out "$TMP/g_abs" --quiet
[ "$RC" -eq 0 ] || p+="absolute path: exit $RC; "
run golden --hf-config ./cfgdir/../cfgdir/config.json --positions 0:4 --dtypes f32 --out "$TMP/g_dots" --quiet
[ "$RC" -eq 0 ] || p+="path with ..: exit $RC; "
if [ -z "$p" ]; then
  h_rel=$(cd "$TMP/g_rel" && sha256sum -- * | sort)
  h_abs=$(cd "$TMP/g_abs" && sha256sum -- * | sort)
  h_dots=$(cd "$TMP/g_dots" && sha256sum -- * | sort)
  [ "$h_rel" = "$h_abs" ] || p+="relative and absolute path give different file hashes; "
  [ "$h_rel" = "$h_dots" ] || p+="relative and ./x/../x path give different file hashes; "
  ! grep -qF -- "$TMP" "$TMP/g_abs/manifest.json" || p+="the manifest holds the local path $TMP; "
  ! grep -qF -- "cfgdir" "$TMP/g_rel/manifest.json" || p+="the manifest holds the typed path cfgdir/...; "
  want=$(sha256sum "$TMP/cfgdir/config.json" | cut -c1-64)
  grep -q "config.json with sha256 $want" "$TMP/g_abs/manifest.json" || p+="the manifest does not record config.json with its sha256 $want; "
  python3 -c 'import json,sys; n=json.load(open(sys.argv[1]))["spec"]["name"]; sys.exit(n != "config.json")' \
    "$TMP/g_rel/manifest.json" || p+="spec.name is not the file name config.json; "
fi
check "golden --hf-config: relative, absolute and ../ paths give byte-identical sets naming config.json + sha256" "$p"

echo
echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
