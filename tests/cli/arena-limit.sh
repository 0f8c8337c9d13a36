#!/usr/bin/env bash
# Strategy auto near the planner's limit (an arena of at most 2^40 bytes):
# a candidate whose plan would be larger does not fit, so auto still
# chooses (with or without a budget), finds a largest batch no smaller
# than store's or revnet's, and past the limit fails with exit 3 and one
# line naming it, never the plan pass's error.
# Usage: arena-limit.sh REVC ROOT
set -u
revc=$(realpath "$1") root=$2 fail=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$root" || exit 1
small=(models/fashion.rev --set units=1,1,1)

bad() { echo "FAIL: $*"; fail=$((fail + 1)); }

# At batch 4e6 storing everything needs more than 2^40 bytes of arena.
for budget in "" "--budget 1TiB"; do
	# shellcheck disable=SC2086
	"$revc" mem "${small[@]}" --set batch=4000000 --strategy auto $budget --json >"$tmp/out" 2>"$tmp/err" ||
		bad "auto at batch 4000000 ${budget:-without a budget}: $(cat "$tmp/err")"
	total=$(sed -n 's/.*"total_bytes":\([0-9]*\).*/\1/p' "$tmp/out")
	[ -n "$total" ] && [ "$total" -le 1099511627776 ] || bad "auto at batch 4000000 $budget: total '$total'"
done

# The largest batch within 1TiB: auto's is at least the fixed strategies'.
"$revc" mem "${small[@]}" --max-batch 1TiB --json >"$tmp/out" 2>"$tmp/err" || bad "--max-batch 1TiB: $(cat "$tmp/err")"
batch() { sed -n "s/.*{\"strategy\":\"$1\",\"max_batch\":\([0-9]*\).*/\1/p" "$tmp/out"; }
a=$(batch auto) s=$(batch store) r=$(batch revnet)
if [ -z "$a" ] || [ -z "$s" ] || [ -z "$r" ] || [ "$a" -lt "$s" ] || [ "$a" -lt "$r" ]; then
	bad "--max-batch 1TiB: auto $a, store $s, revnet $r"
fi

# Past the limit whatever the decisions: exit 3, one line naming it.
for st in auto min; do
	"$revc" mem "${small[@]}" --set batch=8000000 --strategy "$st" >"$tmp/out" 2>"$tmp/err"; rc=$?
	if [ $rc -ne 3 ] || [ "$(wc -l <"$tmp/err")" -ne 1 ] ||
	   ! grep -q "^revc mem: error: strategy auto: fashion at batch 8000000 needs an arena larger than 2^40 bytes" "$tmp/err"; then
		bad "$st at batch 8000000: exit $rc, $(cat "$tmp/err")"
	fi
done

[ $fail -eq 0 ] && echo "arena-limit: OK" || echo "arena-limit: $fail failed"
[ $fail -eq 0 ]
