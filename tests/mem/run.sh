#!/usr/bin/env bash
# Memory regression: `revc mem --json --strategy all` for every preset at its
# own batch must give the byte counts in expected.txt, within 1% either way,
# so an unexplained win fails as surely as a regression.  REVC_REGEN=1
# rewrites expected.txt instead.
# Usage: run.sh REVC ROOT
set -u
revc=$(realpath "$1") root=$2 fail=0 n=0
cd "$root" || exit 1
exp=tests/mem/expected.txt
fields="peak_bytes arena_bytes saved_transient_peak_bytes"
new=$(mktemp); trap 'rm -f "$new"' EXIT
echo "# preset strategy $fields   (revc mem --json; checked within 1%)" > "$new"
for preset in fashion revnet-38 revnet-110 revnet-164; do
  json=$("$revc" mem models/$preset.rev --strategy all --json) || { echo "FAIL: revc mem $preset"; fail=1; continue; }
  while IFS= read -r obj; do
    strategy=$(sed -n 's/^"\([a-z]*\)".*/\1/p' <<<"$obj")
    [ -n "$strategy" ] || continue
    line="$preset $strategy"
    for f in $fields; do line="$line $(grep -o "\"$f\":[0-9]*" <<<"$obj" | cut -d: -f2)"; done
    echo "$line" >> "$new"
  done < <(sed 's/{"strategy":/\n/g' <<<"$json")
done
if [ "${REVC_REGEN:-0}" = 1 ]; then cp "$new" "$exp"; echo "regenerated $exp"; exit 0; fi
while read -r preset strategy a b c; do
  case "$preset" in \#*|'') continue ;; esac
  n=$((n + 1))
  got=$(awk -v p="$preset" -v s="$strategy" '$1 == p && $2 == s' "$new")
  [ -n "$got" ] || { echo "FAIL: no figures for $preset $strategy"; fail=1; continue; }
  read -r _ _ ga gb gc <<<"$got"
  for pair in "peak $a $ga" "arena $b $gb" "saved+transient $c $gc"; do
    read -r what want have <<<"$pair"
    if ! awk -v w="$want" -v h="$have" 'BEGIN { d = h - w; if (d < 0) d = -d; exit !(d <= 0.01 * w) }'; then
      echo "FAIL: $preset $strategy $what: $have bytes, expected $want (within 1%)"; fail=1
    fi
  done
done < "$exp"
echo "mem: $n preset/strategy pairs, $([ $fail -eq 0 ] && echo ok || echo FAILED)"
exit $fail
