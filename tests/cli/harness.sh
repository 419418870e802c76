# What the command-line shell tests share, sourced after they have read their arguments:
#   . "$(dirname "$0")/harness.sh" NAME
# works in a scratch folder ${TMPDIR:-/tmp}/ropecheck_NAME.XXXXXX (removed on exit) and counts checks:
# `check DESCRIPTION PROBLEMS` passes when PROBLEMS is empty; end with `finish` (exit 1 on any failure).
TMP=$(mktemp -d "${TMPDIR:-/tmp}/ropecheck_$1.XXXXXX") || exit 2
trap 'rm -rf "$TMP"' EXIT
cd "$TMP" || exit 2
PASS=0
FAIL=0
pass() { PASS=$((PASS + 1)); printf 'PASS  %s\n' "$1"; }
fail() { FAIL=$((FAIL + 1)); printf 'FAIL  %s\n' "$1"; }
check() { if [ -z "$2" ]; then pass "$1"; else fail "$1: $2"; fi; }
finish() { echo "$PASS passed, $FAIL failed"; [ "$FAIL" -eq 0 ]; }
