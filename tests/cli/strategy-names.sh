#!/usr/bin/env bash
# --strategy's names: every command that takes it (train, grad, bench, mem,
# compile, check, dump) accepts each name its error for an unknown one
# lists, and its --help lists the same names (cli/args.c's table), min
# among them; mem plans each of them.
# Usage: strategy-names.sh REVC ROOT
set -u
revc=$(realpath "$1") root=$2 fail=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$root" || exit 1

bad() { echo "FAIL: $*"; fail=$((fail + 1)); }

for cmd in train grad bench mem compile check dump; do
	"$revc" "$cmd" --strategy bogus >"$tmp/out" 2>"$tmp/err"; rc=$?
	list=$(sed -n "s/^revc $cmd: error: --strategy must be \(.*\), not 'bogus' (see 'revc $cmd --help')$/\1/p" "$tmp/err")
	if [ $rc -ne 2 ] || [ -z "$list" ]; then bad "$cmd --strategy bogus: exit $rc, $(cat "$tmp/err")"; continue; fi
	names=$(echo "$list" | sed 's/, / /g; s/ or / /')
	want="store revnet checkpoint auto min"
	[ "$cmd" = mem ] && want="$want all"
	[ "$names" = "$want" ] || bad "$cmd's error lists '$list'"
	help=$("$revc" "$cmd" --help | grep -- '--strategy NAME  ')
	for n in $names; do
		# the first --strategy parses, so the error is the second's
		"$revc" "$cmd" --strategy "$n" --strategy bogus 2>"$tmp/err" >/dev/null
		grep -q "not 'bogus'" "$tmp/err" || bad "$cmd --strategy $n: $(cat "$tmp/err")"
		echo "$help" | grep -qw -- "$n" || bad "$cmd --help does not list $n: $help"
	done
	[ "$cmd" = mem ] || echo "$help" | grep -qF -- "$list" || bad "$cmd --help: '$help', not '$list'"
done

# each name plans (mem, on a small fashion)
for n in store revnet checkpoint auto min all; do
	"$revc" mem models/fashion.rev --set units=1,1,1 --set batch=4 --strategy "$n" >"$tmp/out" 2>"$tmp/err" ||
		bad "mem --strategy $n: $(cat "$tmp/err")"
done

# eval runs the forward pass alone: it takes no --strategy
"$revc" eval --strategy revnet 2>"$tmp/err"
grep -q "unknown option '--strategy'" "$tmp/err" || bad "eval --strategy: $(cat "$tmp/err")"

[ $fail -eq 0 ] && echo "strategy-names: OK" || echo "strategy-names: $fail failed"
[ $fail -eq 0 ]
