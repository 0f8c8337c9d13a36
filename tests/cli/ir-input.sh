#!/usr/bin/env bash
# revc mem on IR: the forward graph `revc dump SPEC` prints (its couplings
# marked) plans as the spec does, for every strategy, byte for byte in the
# JSON report; an IR file already through autodiff cannot be planned under
# another strategy, and says so.
# Usage: ir-input.sh REVC ROOT
set -u
revc=$(realpath "$1") root=$2
cd "$root" || exit 1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
check() { # SPEC SETS...
  local spec=$1; shift
  local sets=()
  for s in "$@"; do sets+=(--set "$s"); done
  "$revc" dump "$spec" "${sets[@]}" -o "$tmp/fwd.ir" || fail "dump $spec"
  grep -q 'unit(0, y1)' "$tmp/fwd.ir" || fail "$spec: the forward IR marks no coupling"
  "$revc" mem "$spec" "${sets[@]}" --strategy all --json > "$tmp/spec.json" || fail "mem $spec"
  "$revc" mem "$tmp/fwd.ir" --strategy all --json > "$tmp/ir.json" || fail "mem on the IR of $spec"
  cmp -s "$tmp/spec.json" "$tmp/ir.json" || { diff <(tr , '\n' < "$tmp/spec.json") <(tr , '\n' < "$tmp/ir.json") | head; fail "$spec: the IR's report differs"; }
}
check models/fashion.rev
check models/revnet-38.rev units=2,1,1 batch=8
check examples/plain.rev
"$revc" dump models/fashion.rev --set units=1,1,1 --after autodiff -o "$tmp/bwd.ir" || fail "dump --after autodiff"
out=$("$revc" mem "$tmp/bwd.ir" --strategy all 2>&1); status=$?
[ "$status" = 2 ] && grep -q "needs the forward graph, but .*bwd.ir has been through autodiff" <<<"$out" ||
  fail "IR after autodiff under --strategy all: exit $status: $out"
echo "ir-input: ok"
