#!/usr/bin/env bash
# The malformed-spec corpus through the command line: for every line of
# tests/spec/bad/cases.txt (FILE|SETS|EXPECTED, see there), `revc dump FILE
# --set ...` must exit 1, print exactly one error line equal to the expected
# diagnostic ("FILE:" prefixed unless it comes from --set), and write nothing.
# Usage: run-bad.sh REVC DIR
set -u
revc=$(realpath "$1") dir=$2 fail=0 n=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$dir" || exit 1
while IFS='|' read -r file sets want; do
  case "$file" in ''|\#*) continue ;; esac
  n=$((n + 1))
  args=()
  if [ -n "$sets" ]; then
    IFS=';' read -r -a list <<<"$sets"
    for s in "${list[@]}"; do args+=(--set "$s"); done
  fi
  case "$want" in --set:*) ;; *) want="$file:$want" ;; esac
  "$revc" dump "$file" "${args[@]}" -o "$tmp/out.ir" >"$tmp/stdout" 2>"$tmp/stderr"
  rc=$?
  first=$(head -n1 "$tmp/stderr")
  if [ $rc -ne 1 ] || [ "$first" != "$want" ] || [ "$(grep -c 'error:' "$tmp/stderr")" -ne 1 ] ||
     [ -e "$tmp/out.ir" ] || [ -s "$tmp/stdout" ] || grep -qE 'Sanitizer|runtime error' "$tmp/stderr"; then
    printf 'FAIL %s [%s] (exit %d)\n  got:  %s\n  want: %s\n' "$file" "$sets" "$rc" "$first" "$want"
    fail=$((fail + 1))
  fi
done < cases.txt
echo "bad-spec: $n cases, $fail failed"
[ "$n" -gt 0 ] && [ "$fail" -eq 0 ]
