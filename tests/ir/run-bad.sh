#!/usr/bin/env bash
# The malformed-IR corpus.  Each line of cases.txt is FILE|LINE:COL: MESSAGE;
# `revc dump FILE -o OUT` must exit 1, print exactly one error line
# "FILE:LINE:COL: error: MESSAGE" (plus, at most, the source line and a
# caret), report no sanitizer finding, and leave no OUT or temporary behind.
# Generated cases (an overlong line) and every truncation of a valid file are
# checked the same way, without a fixed message.
# Usage: run-bad.sh REVC DIR
set -u
revc=$1 dir=$2 fail=0 n=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# check FILE EXPECTED-FIRST-LINE (empty: any single error line)
check() {
  local file=$1 want=$2 out=$tmp/out/result.ir
  rm -rf "$tmp/out"; mkdir -p "$tmp/out"
  n=$((n + 1))
  "$revc" dump "$file" -o "$out" >"$tmp/stdout" 2>"$tmp/stderr"
  local rc=$? first errors
  first=$(head -n1 "$tmp/stderr")
  errors=$(grep -c 'error:' "$tmp/stderr")
  if [ $rc -ne 1 ]; then
    echo "FAIL $file: exit $rc, want 1"; cat "$tmp/stderr"; fail=$((fail + 1)); return
  fi
  if [ -n "$want" ] && [ "$first" != "$want" ]; then
    printf 'FAIL %s:\n  got:  %s\n  want: %s\n' "$file" "$first" "$want"; fail=$((fail + 1)); return
  fi
  if [ "$errors" -ne 1 ] || [ "$(wc -l <"$tmp/stderr")" -gt 3 ] || grep -qE 'Sanitizer|runtime error' "$tmp/stderr"; then
    echo "FAIL $file: want exactly one diagnostic"; cat "$tmp/stderr"; fail=$((fail + 1)); return
  fi
  if [ -n "$(ls -A "$tmp/out")" ] || [ -s "$tmp/stdout" ]; then
    echo "FAIL $file: output was written"; ls -A "$tmp/out"; fail=$((fail + 1)); return
  fi
}

while IFS='|' read -r file msg; do
  case "$file" in ''|\#*) continue ;; esac
  check "$dir/$file" "$dir/$file:$msg"
done < "$dir/cases.txt"

# An overlong line.
{ printf 'graph @g {\n  %%0 = input {name="'; head -c 70000 /dev/zero | tr '\0' x; printf '"} : f32[3]\n}\n'; } > "$tmp/overlong.ir"
check "$tmp/overlong.ir" "$tmp/overlong.ir:2:65537: error: line is longer than 65536 bytes"

# Every truncation of a valid file fails cleanly (or, at the very end, reads).
src=$dir/../dce/ordering.ir
size=$(wc -c <"$src")
for ((i = 0; i < size - 1; i++)); do
  head -c "$i" "$src" > "$tmp/trunc.ir"
  check "$tmp/trunc.ir" ""
done
echo "bad-ir: $n cases, $fail failed"
[ "$fail" -eq 0 ]
