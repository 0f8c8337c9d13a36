# expect.sh: sourced by the command-line tests.
# expect WANT-REGEX CMD... runs CMD and counts a failure unless it exits 1
# with exactly one "error:" line on stderr, matching WANT-REGEX, no crash,
# and nothing saved: no $tmp/save* and no temporary directory (save* is
# then removed).  CMD's stdout is left in $tmp/out.  Uses $tmp; counts in
# $n and $fail.
expect() {
  local want=$1; shift
  n=$((n + 1))
  "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [ $rc -ne 1 ] || [ "$(grep -c 'error:' "$tmp/err")" -ne 1 ] || ! grep -qE "$want" "$tmp/err" ||
     grep -qE 'Sanitizer|runtime error' "$tmp/err" || ls "$tmp"/save* "$tmp"/*.tmp.* >/dev/null 2>&1; then
    echo "FAIL ($rc): $*"; cat "$tmp/err"; ls "$tmp"; fail=$((fail + 1))
  fi
  rm -rf "$tmp"/save*
}
