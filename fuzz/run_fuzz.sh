#!/usr/bin/env bash
# Builds the libFuzzer targets for the parsers of untrusted input (io/: safetensors, .npy, .npz;
# core/: spec and Hugging Face JSON) with AddressSanitizer + UndefinedBehaviorSanitizer and runs
# each one for a while, from a fresh copy of the seed corpus in fuzz/corpus/<target>/. With
# ROPECHECK_FUZZ_PREBUILT=1 the binaries already in BUILD_DIR are run as they are: the CMake build makes
# them (fuzz/CMakeLists.txt, target ropecheck_fuzzers) and tracks their staleness.
#
#   fuzz/run_fuzz.sh BUILD_DIR [SECONDS_PER_TARGET=20]
#
# Environment: CLANGXX (default clang++), ROPECHECK_FUZZ_SEED (default 1; libFuzzer -seed),
# ROPECHECK_FUZZ_JOBS (targets run at once; default: all three, since -max_total_time is
# wall-clock time). Prints the executions each target reached; exits 1 on any crash, sanitizer
# report, leak, timeout or out-of-memory (the reproducer is left in BUILD_DIR/artifacts/), and 77
# (skip) when clang++ cannot link a libFuzzer target (no libclang-rt-dev).
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
build="${1:?usage: run_fuzz.sh BUILD_DIR [SECONDS_PER_TARGET]}"
secs="${2:-20}"
cxx="${CLANGXX:-clang++}"
seed="${ROPECHECK_FUZZ_SEED:-1}"
targets=(fuzz_safetensors fuzz_npy fuzz_npz fuzz_spec_json)
jobs="${ROPECHECK_FUZZ_JOBS:-${#targets[@]}}"

mkdir -p "$build/obj" "$build/artifacts"
build="$(cd "$build" && pwd)"
fail=0

if [ "${ROPECHECK_FUZZ_PREBUILT:-0}" != 1 ]; then

san=(-fsanitize=address,undefined -fno-sanitize-recover=undefined)
common=(-std=c++20 -g -O1 "${san[@]}" -I"$root/io/include" -I"$root/core/include")
zip_libs="$(pkg-config --libs libzip 2>/dev/null || echo -lzip) -lz"

# Can this clang link a fuzzer at all?
probe="$build/obj/probe"
if ! printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' |
    "$cxx" -x c++ -fsanitize=fuzzer,address -o "$probe" - >"$build/probe.log" 2>&1; then
  echo "run_fuzz: $cxx cannot link a libFuzzer target (is libclang-rt-dev installed?); skipping" >&2
  cat "$build/probe.log" >&2
  exit 77
fi

# Rebuilds an output when it is missing or older than any input or header.
headers=("$root"/io/include/ropecheck/io/*.hpp "$root"/io/include/ropecheck/io/detail/*.hpp
         "$root"/core/include/ropecheck/core/*.hpp "$0")
stale() {
  local out="$1"; shift
  [ -f "$out" ] || return 0
  local f
  for f in "$@" "${headers[@]}"; do [ "$f" -nt "$out" ] && return 0; done
  return 1
}

lib_sources=(io/src/tensor io/src/safetensors io/src/npy io/src/npz io/src/zip_stored core/src/one_line core/src/dtype
             core/src/spec core/src/spec_json core/src/hf_config)
pids=()
for s in "${lib_sources[@]}"; do
  src="$root/$s.cpp" obj="$build/obj/${s//\//_}.o"
  if stale "$obj" "$src"; then
    "$cxx" "${common[@]}" -fsanitize=fuzzer-no-link -c "$src" -o "$obj" 2>"$build/obj/${s//\//_}.log" &
    pids+=("$!:${s//\//_}")
  fi
done
for t in "${targets[@]}"; do
  src="$here/$t.cpp" obj="$build/obj/$t.o"
  if stale "$obj" "$src"; then
    "$cxx" "${common[@]}" -fsanitize=fuzzer-no-link -c "$src" -o "$obj" 2>"$build/obj/$t.log" &
    pids+=("$!:$t")
  fi
done
for p in "${pids[@]}"; do
  if ! wait "${p%%:*}"; then
    echo "run_fuzz: compiling ${p#*:} failed:" >&2
    cat "$build/obj/${p#*:}.log" >&2
    fail=1
  fi
done
[ "$fail" -eq 0 ] || exit 1
for t in "${targets[@]}"; do
  objs=("$build/obj/$t.o")
  if [ "$t" = fuzz_spec_json ]; then
    for s in dtype spec spec_json hf_config one_line; do objs+=("$build/obj/core_src_$s.o"); done
    libs=""
  else
    for s in tensor safetensors npy npz zip_stored; do objs+=("$build/obj/io_src_$s.o"); done
    objs+=("$build/obj/core_src_one_line.o")
    libs="$zip_libs"
  fi
  if stale "$build/$t" "${objs[@]}"; then
    # shellcheck disable=SC2086
    "$cxx" "${common[@]}" -fsanitize=fuzzer "${objs[@]}" $libs -o "$build/$t" || { echo "run_fuzz: linking $t failed" >&2; exit 1; }
  fi
done
fi  # not prebuilt
for t in "${targets[@]}"; do
  [ -x "$build/$t" ] || { echo "run_fuzz: $build/$t missing (build the ropecheck_fuzzers target)" >&2; exit 1; }
done

dict_for() {
  case "$1" in
    fuzz_safetensors) echo "$here/safetensors.dict" ;;
    fuzz_spec_json) echo "$here/json.dict" ;;
    *) echo "$here/npy.dict" ;;
  esac
}

run_one() {
  local t="$1" corpus="$build/corpus/$1" log="$build/$1.log"
  rm -rf "$corpus" && mkdir -p "$corpus" && cp "$here/corpus/$t/"* "$corpus/"
  ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=0" UBSAN_OPTIONS="print_stacktrace=1" \
    "$build/$t" "$corpus" -max_total_time="$secs" -seed="$seed" -print_final_stats=1 -error_exitcode=1 -timeout=10 \
      -rss_limit_mb=2048 -malloc_limit_mb=512 -dict="$(dict_for "$t")" -artifact_prefix="$build/artifacts/$t-" \
      >"$log" 2>&1
  echo "$?" >"$build/$t.rc"
}

running=0
for t in "${targets[@]}"; do
  rm -f "$build/$t.rc"
  run_one "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then wait -n; running=$((running - 1)); fi
done
wait

for t in "${targets[@]}"; do
  log="$build/$t.log"
  execs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)"
  corpus_n="$(find "$build/corpus/$t" -type f | wc -l)"
  rc="$(cat "$build/$t.rc" 2>/dev/null || echo 1)"
  echo "fuzz $t: ${execs:-?} executions in ${secs}s (seed $seed, corpus now $corpus_n inputs), exit $rc"
  if [ "$rc" -ne 0 ] ||
      grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|libFuzzer)|runtime error:|==ERROR' "$log"; then
    echo "run_fuzz: $t FAILED; the end of its log ($log):" >&2
    tail -n 60 "$log" >&2
    ls "$build/artifacts/" >&2
    fail=1
  fi
done
exit "$fail"
