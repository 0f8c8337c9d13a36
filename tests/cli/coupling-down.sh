#!/usr/bin/env bash
# A downsampling coupling on tokens (a RevViT spec's `coupling ... down`):
# one error at the spec's line and column of `down`, saying that it needs
# image (NCHW) streams, then the source line and a caret under `down`.
# Usage: coupling-down.sh REVC ROOT
set -u
revc=$(realpath "$1") root=$2 fail=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$root" || exit 1
spec=tests/spec/bad/vit-coupling-down.rev

bad() { echo "FAIL: $*"; fail=$((fail + 1)); }

"$revc" dump "$spec" >"$tmp/out" 2>"$tmp/err"; rc=$?
[ $rc -eq 1 ] || bad "exit $rc"
[ "$(wc -l <"$tmp/err")" -eq 3 ] || bad "$(wc -l <"$tmp/err") lines on stderr"
head -1 "$tmp/err" | grep -qx "$spec:14:62: error: a downsampling coupling needs image (NCHW) streams, but x1 is \[2,4,64\] (tokens): leave out down" ||
	bad "error line: $(head -1 "$tmp/err")"
[ "$(sed -n 2p "$tmp/err")" = "  $(sed -n 14p "$spec")" ] || bad "source line: $(sed -n 2p "$tmp/err")"
caret=$(sed -n 3p "$tmp/err")
at=$(( ${#caret} - 1 ))
[ "${caret:$at}" = "^" ] && [ "$(sed -n 2p "$tmp/err" | cut -c$((at + 1))-)" = "down" ] || bad "caret: '$caret'"
grep -qi "pool" "$tmp/err" && bad "it speaks of pooling: $(cat "$tmp/err")"

[ $fail -eq 0 ] && echo "coupling-down: OK" || echo "coupling-down: $fail failed"
[ $fail -eq 0 ]
