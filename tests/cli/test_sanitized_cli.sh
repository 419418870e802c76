#!/usr/bin/env bash
# The instrumented CLI (ASan + UBSan, tests/CMakeLists.txt cli_asan_commands) against the release binary:
# one short end-to-end run per command (presets, spec, golden, check with a builtin kernel, with a plugin
# isolated in the instrumented kernel host and in process, check parts and merge, props, drift, drift
# --compare), each run by both binaries with the same arguments in twin folders. Asserts for each:
# the same exit code (the expected one), no sanitizer report (exit 86, "Sanitizer" or "runtime error:" in
# stderr), the same stderr, and the same outputs (golden sets byte for byte; JSON reports equal apart from
# timings and the folder names).
# Usage: test_sanitized_cli.sh ROPECHECK_RELEASE ROPECHECK_INSTRUMENTED PLUGIN.so
set -u
rel="$1"
asan="$2"
plugin="$3"
. "$(dirname "$0")/harness.sh" sanitized_cli
mkdir rel asan

# both EXPECTED_RC NAME ARGS...: runs ARGS with each binary in its folder; rc, stderr and stdout kept.
both() {
  local want="$1" name="$2"
  shift 2
  local problems="" r a
  (cd rel && "$rel" "$@" >"../$name.rel.out" 2>"../$name.rel.err")
  r=$?
  (cd asan && "$asan" "$@" >"../$name.asan.out" 2>"../$name.asan.err")
  a=$?
  [ "$a" -eq 86 ] && problems+=" sanitizer exit 86;"
  grep -qE 'Sanitizer|runtime error:' "$name.asan.err" && problems+=" sanitizer report: $(head -c 1500 "$name.asan.err");"
  [ "$r" -eq "$want" ] || problems+=" release exit $r, expected $want: $(head -c 300 "$name.rel.err");"
  [ "$a" -eq "$r" ] || problems+=" instrumented exit $a, release $r;"
  cmp -s "$name.rel.err" "$name.asan.err" || problems+=" stderr differs: $(diff "$name.rel.err" "$name.asan.err" | head -c 600);"
  check "$name: exit $want, same stderr, no sanitizer report" "$problems"
}

# same_tree NAME PATH: the two runs' PATH (a folder or a file) hold the same bytes.
same_tree() {
  local h1 h2
  h1=$(cd "rel/$2" 2>/dev/null && find . -type f -print0 | sort -z | xargs -0 sha256sum)
  h2=$(cd "asan/$2" 2>/dev/null && find . -type f -print0 | sort -z | xargs -0 sha256sum)
  local problems=""
  [ -n "$h1" ] || problems="rel/$2 is empty or missing"
  [ "$h1" = "$h2" ] || problems+=" differ: $(diff <(echo "$h1") <(echo "$h2") | head -c 600)"
  check "$1: identical $2" "$problems"
}

# same_json NAME FILE: the two reports are equal apart from timings and the run folder.
same_json() {
  check "$1: same report $2" "$(python3 - "rel/$2" "asan/$2" "$TMP" <<'EOF'
import json, re, sys
VARYING = re.compile(r"time|seconds|elapsed|duration|date|host|version", re.I)
def norm(v, root):
    if isinstance(v, dict):
        return {k: norm(x, root) for k, x in v.items() if not VARYING.search(k)}
    if isinstance(v, list):
        return [norm(x, root) for x in v]
    if isinstance(v, str):
        return v.replace(root + "/rel", "ROOT").replace(root + "/asan", "ROOT")
    return v
def first_diff(a, b, path="$"):
    if type(a) is not type(b):
        return f"{path}: {a!r:.80} vs {b!r:.80}"
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return f"{path}.{k} only in one"
            d = first_diff(a[k], b[k], f"{path}.{k}")
            if d:
                return d
        return ""
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} vs {len(b)} items"
        for i, (x, y) in enumerate(zip(a, b)):
            d = first_diff(x, y, f"{path}[{i}]")
            if d:
                return d
        return ""
    return "" if a == b else f"{path}: {a!r:.80} vs {b!r:.80}"
try:
    a, b = (norm(json.load(open(p)), sys.argv[3]) for p in sys.argv[1:3])
except (OSError, ValueError) as e:
    print(e)
    sys.exit(0)
print(first_diff(a, b))
EOF
)"
}

both 0 presets presets
both 0 spec spec --preset qwen2.5-7b-yarn
both 2 spec-bad spec --preset no-such-model
both 0 golden golden --preset llama-3.1-8b --positions 0:40,255:259,4095,70001 --dtypes f32,bf16 --heads 2 --out G --quiet
same_tree golden G
both 0 golden-mrope golden --preset qwen2-vl-7b --positions 0:8,grid:30:2:3 --dtypes bf16 --format npy --out GM --quiet
same_tree golden-mrope GM
both 0 check-builtin check --golden G --kernel builtin:accurate --report builtin.json
same_json check-builtin builtin.json
both 1 check-builtin-fails check --golden G --kernel builtin:bf16-positions --report bad.json
same_json check-builtin-fails bad.json
both 0 check-plugin check --golden G --kernel "$plugin" --class fp32-angle --report plugin.json
same_json check-plugin plugin.json
both 0 check-plugin-in-process check --golden G --kernel "$plugin" --class fp32-angle --in-process --report inproc.json
same_json check-plugin-in-process inproc.json
both 0 check-part1 check --golden G --kernel builtin:accurate --shard 1/2 --report part1.json
both 0 check-part2 check --golden G --kernel builtin:accurate --shard 2/2 --report part2.json
both 0 merge merge part1.json part2.json --out merged.json
same_json merge merged.json
# Positions below 10^6, where fp32-angle still discriminates (past it a verdict is not-tested, exit 3).
both 0 props props --target hf-fp32 --preset llama-3.1-8b --cases 3 --max-pos 1000000 --report props.json
same_json props props.json
# The example plugin takes no negative positions and no mrope / yarn specs: those properties are not
# tested (exit 3).
both 3 props-plugin props --kernel "$plugin" --class fp32-angle --preset llama-3.1-8b --cases 2 --max-pos 1000000 \
  --report pp.json
same_json props-plugin pp.json
both 0 drift drift --preset llama-3.1-8b --max-pos 512 --heads 1 --no-plots --quiet --out D
same_json drift D/drift.json
both 0 drift-compare drift --preset llama-3.1-8b --max-pos 512 --heads 1 --no-plots --quiet --compare "hf,plugin:$plugin" \
  --out DC
same_json drift-compare DC/compare.json
finish
