#!/usr/bin/env bash
# REVC_CONV (codegen/k_conv_choice.c): an unknown value is an error naming
# the accepted ones, in every command that compiles (it used to fall back
# to the cost model silently); the accepted values and an empty one work.
# Usage: conv-env.sh REVC ROOT
set -u
revc=$(realpath "$1") root=$2 fail=0 n=0 here=$(dirname "$(realpath "$0")")
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$root" || exit 1
tiny=(models/fashion.rev --set units=1,1,1 --set batch=4)

source "$here/expect.sh"

want="REVC_CONV must be direct, winograd2, winograd4 or blas \(or unset\), not 'winograd3'"
REVC_CONV=winograd3 expect "^revc train: error: $want\$" "$revc" train "${tiny[@]}" --steps 1 --save "$tmp/save"
REVC_CONV=winograd3 expect "^revc bench: error: $want\$" "$revc" bench "${tiny[@]}" --steps 1
REVC_CONV=Direct expect "not 'Direct'" "$revc" bench "${tiny[@]}" --steps 1

for v in direct winograd2 winograd4 blas ""; do
  n=$((n + 1))
  if ! REVC_CONV=$v "$revc" bench "${tiny[@]}" --steps 1 --kernels >"$tmp/out" 2>"$tmp/err"; then
    echo "FAIL: REVC_CONV='$v' revc bench"; cat "$tmp/err"; fail=$((fail + 1))
  elif [ -n "$v" ] && ! grep -q "REVC_CONV=$v" "$tmp/out"; then
    echo "FAIL: REVC_CONV='$v': no convolution says so"; cat "$tmp/out"; fail=$((fail + 1))
  fi
done

echo "conv-env: $n cases, $fail failed"
[ "$fail" -eq 0 ]
