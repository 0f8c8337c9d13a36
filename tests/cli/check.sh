#!/usr/bin/env bash
# revc check on a tiny RevNet: every gradient agrees with finite differences
# in f64, under each strategy; and the check can fail: at a tolerance no
# finite difference meets, it must exit 1.
# Usage: check.sh REVC ROOT
set -u
revc=$(realpath "$1") root=$2 fail=0
cd "$root" || exit 1
tiny=(--set units=1,1,1 --set batch=4 --samples 2)
for s in store revnet checkpoint; do
  out=$("$revc" check models/fashion.rev "${tiny[@]}" --strategy "$s" 2>&1)
  rc=$?
  if [ $rc -ne 0 ] || ! grep -q "revc check: 41 of 41 tensors within 1e-06" <<<"$out"; then
    echo "FAIL: check under $s (exit $rc)"; echo "$out"; fail=1
  fi
done
out=$("$revc" check models/fashion.rev "${tiny[@]}" --tolerance 1e-16 2>&1)
rc=$?
if [ $rc -ne 1 ] || ! grep -q FAIL <<<"$out"; then
  echo "FAIL: an impossible tolerance passed (exit $rc)"; echo "$out"; fail=1
fi
[ $fail -eq 0 ] && echo "check: ok"
exit $fail
