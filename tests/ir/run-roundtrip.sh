#!/usr/bin/env bash
# Round trip of every golden file: printed IR (.expected) must read back and
# print byte for byte the same; hand-written inputs (.ir) must reach a fixed
# point after one print.  Graphviz output must be produced for each.  The
# dump after every pass of a spec's pipeline (--dump-dir, which revc
# creates) must round-trip too.
# Usage: run-roundtrip.sh REVC DIR
set -u
revc=$1 dir=$2 fail=0 n=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
while IFS= read -r -d '' f; do
  n=$((n + 1))
  if ! "$revc" dump "$f" -o "$tmp/once.ir" 2>"$tmp/err"; then
    echo "FAIL $f: does not read back"; cat "$tmp/err"; fail=$((fail + 1)); continue
  fi
  "$revc" dump "$tmp/once.ir" -o "$tmp/twice.ir"
  case "$f" in
    *.expected) want=$f ;;
    *) want=$tmp/once.ir ;;
  esac
  if ! cmp -s "$want" "$tmp/twice.ir" || { [ "$want" = "$f" ] && ! cmp -s "$f" "$tmp/once.ir"; }; then
    echo "FAIL $f: print(parse(text)) differs"; diff -u "$want" "$tmp/twice.ir"; fail=$((fail + 1))
  fi
  if ! "$revc" dump "$f" --format dot -o "$tmp/g.dot" || ! grep -q '^digraph' "$tmp/g.dot"; then
    echo "FAIL $f: no Graphviz output"; fail=$((fail + 1))
  fi
done < <(find "$dir" -path "$dir/bad" -prune -o \( -name '*.ir' -o -name '*.expected' \) -print0 | sort -z)
spec=$dir/../../models/fashion.rev
if ! "$revc" dump "$spec" --set units=1,1,1 --after plan --dump-after=all --dump-dir "$tmp/passes" >/dev/null; then
  echo "FAIL: --dump-dir"; fail=$((fail + 1))
fi
dumps=$(find "$tmp/passes" -name '[0-9][0-9]-*.ir' 2>/dev/null | wc -l)
[ "$dumps" -ge 10 ] || { echo "FAIL: --dump-dir wrote $dumps dumps"; fail=$((fail + 1)); }
for f in "$tmp"/passes/*.ir; do
  n=$((n + 1))
  "$revc" dump "$f" -o "$tmp/once.ir" 2>"$tmp/err" && cmp -s "$f" "$tmp/once.ir" \
    || { echo "FAIL $f: print(parse(text)) differs"; cat "$tmp/err"; fail=$((fail + 1)); }
done
echo "roundtrip: $n files, $fail failed"
[ "$n" -gt 0 ] && [ "$fail" -eq 0 ]
