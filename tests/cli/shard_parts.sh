# Sourced by the `--shard I/N` + `ropecheck merge` tests (test_shard_merge.sh, test_shared_shards.sh, test_check_shard.sh,
# test_props_shard.sh, test_drift_shard.sh); they set rc_bin and tmp first.
fail() { echo "FAIL: $*"; exit 1; }

# hashes DIR: every file of a golden set with its SHA-256, in name order (two sets equal byte for byte).
hashes() { (cd "$1" && sha256sum -- * | sort -k2); }

# run_parts NAME N OUT_OPTION EXT ARGS...: `ropecheck ARGS --shard I/N OUT_OPTION $tmp/NAME.N.partI.EXT` for
# I = 1..N as separate processes in parallel; each must write its part and not exit 2 (a part's own
# verdict may be 1 or 3). Leaves the part files, last shard first (merge takes any order), in `parts`.
run_parts() {
  local name="$1" n="$2" opt="$3" ext="$4" i code
  shift 4
  local pids=()
  for ((i = 1; i <= n; i++)); do
    "$rc_bin" "$@" --shard "$i/$n" "$opt" "$tmp/$name.$n.part$i.$ext" >/dev/null 2>"$tmp/err.$i" &
    pids+=($!)
  done
  for ((i = 1; i <= n; i++)); do
    wait "${pids[$((i - 1))]}"
    code=$?
    [ "$code" -ne 2 ] && [ -s "$tmp/$name.$n.part$i.$ext" ] || { cat "$tmp/err.$i"; fail "$name: $1 --shard $i/$n exited $code"; }
  done
  parts=()
  for ((i = n; i >= 1; i--)); do parts+=("$tmp/$name.$n.part$i.$ext"); done
}

# merge_expect NAME N WANT: merges `parts` into $tmp/NAME.N.merged.json, expecting exit code WANT, and
# compares it byte for byte with $tmp/NAME.one.json.
merge_expect() {
  local name="$1" n="$2" want="$3" code
  "$rc_bin" merge "${parts[@]}" --out "$tmp/$name.$n.merged.json" >"$tmp/out" 2>"$tmp/err"
  code=$?
  [ "$code" -eq "$want" ] || { cat "$tmp/err"; fail "$name: merge of $n exited $code, expected $want"; }
  cmp "$tmp/$name.one.json" "$tmp/$name.$n.merged.json" ||
    { diff "$tmp/$name.one.json" "$tmp/$name.$n.merged.json" | head -20; fail "$name: $n parts merged differ from one run"; }
}

# expect2 WHAT OUT ARGS...: exit 2, one stderr line containing WHAT, OUT not created.
expect2() {
  local what="$1" out="$2"; shift 2
  "$rc_bin" "$@" >"$tmp/out" 2>"$tmp/err"
  local code=$?
  [ "$code" -eq 2 ] || { cat "$tmp/err"; fail "$* exited $code, expected 2"; }
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || { cat "$tmp/err"; fail "$*: stderr is not one line"; }
  grep -q -- "$what" "$tmp/err" || { cat "$tmp/err"; fail "$*: stderr does not say '$what'"; }
  [ -z "$out" ] || [ ! -e "$out" ] || fail "$*: left $out behind"
}
