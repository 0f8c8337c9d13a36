#!/usr/bin/env bash
# Every command that takes a spec takes the forward IR `revc dump SPEC`
# prints (its couplings marked, its training settings in a train { ... }
# block) and gives the same figures: revc mem byte for byte in the JSON
# report under every strategy; revc dump the same IR after the last pass
# and the same dot; revc grad the same .npy files; revc train the same
# losses and, after 20 steps, the same checkpoint bit for bit (f32 and
# f64, store and revnet).  An IR file already through autodiff cannot be
# planned under another strategy; one without settings cannot train; both
# say so.
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
  grep -q '^train {$' "$tmp/fwd.ir" || fail "$spec: the forward IR carries no training settings"
  "$revc" mem "$spec" "${sets[@]}" --strategy all --json > "$tmp/spec.json" || fail "mem $spec"
  "$revc" mem "$tmp/fwd.ir" --strategy all --json > "$tmp/ir.json" || fail "mem on the IR of $spec"
  cmp -s "$tmp/spec.json" "$tmp/ir.json" || { diff <(tr , '\n' < "$tmp/spec.json") <(tr , '\n' < "$tmp/ir.json") | head; fail "$spec: the IR's report differs"; }
  for fmt in ir dot; do
    "$revc" dump "$spec" "${sets[@]}" --after plan --format $fmt -o "$tmp/spec.$fmt" || fail "dump $spec --after plan"
    "$revc" dump "$tmp/fwd.ir" --after plan --format $fmt -o "$tmp/ir.$fmt" || fail "dump the IR of $spec --after plan"
    cmp -s "$tmp/spec.$fmt" "$tmp/ir.$fmt" || { diff "$tmp/spec.$fmt" "$tmp/ir.$fmt" | head; fail "$spec: dump --after plan --format $fmt differs"; }
  done
}
check models/fashion.rev
check models/revnet-38.rev units=2,1,1 batch=8
check examples/plain.rev

# grad: the same files, byte for byte (the user-defined block, and fashion).
grads() { # SPEC BATCH SETS...
  local spec=$1 n=$2; shift 2
  local sets=()
  for s in "$@"; do sets+=(--set "$s"); done
  "$revc" dump "$spec" "${sets[@]}" -o "$tmp/g.ir" || fail "dump $spec"
  "$revc" init "$spec" "${sets[@]}" --out "$tmp/params" >/dev/null || fail "init $spec"
  /usr/bin/python3 - "$tmp" "$n" <<'PY' || fail "making a batch"
import sys, numpy as np
tmp, n = sys.argv[1], int(sys.argv[2])
r = np.random.default_rng(3)
np.save(f"{tmp}/x.npy", r.standard_normal((n, 1, 28, 28)).astype(np.float32))
np.save(f"{tmp}/y.npy", r.integers(0, 10, n).astype(np.int32))
PY
  for st in store revnet; do
    rm -rf "$tmp/a" "$tmp/b"
    "$revc" grad "$spec" "${sets[@]}" --params "$tmp/params" --input "$tmp/x.npy" --labels "$tmp/y.npy" --out "$tmp/a" --strategy $st || fail "grad $spec"
    "$revc" grad "$tmp/g.ir" --params "$tmp/params" --input "$tmp/x.npy" --labels "$tmp/y.npy" --out "$tmp/b" --strategy $st || fail "grad on the IR of $spec"
    diff -r "$tmp/a" "$tmp/b" >/dev/null || fail "$spec ($st): the IR's gradients differ"
  done
  # The batch of an IR file is its graph's.
  "$revc" dump "$spec" "${sets[@]}" --set batch=$((n + 1)) -o "$tmp/g1.ir" || fail "dump $spec"
  out=$("$revc" grad "$tmp/g1.ir" --params "$tmp/params" --input "$tmp/x.npy" --labels "$tmp/y.npy" --out "$tmp/c" 2>&1); st=$?
  [ $st = 1 ] && grep -q "takes batches of $((n + 1)), not $n" <<<"$out" || fail "grad with another batch: exit $st: $out"
}
grads examples/plain.rev 8 batch=8
grads models/fashion.rev 10 units=1,1,1 batch=10

# train: the same losses and the same model after 20 steps.
# (Fashion-MNIST once; the machine is shared, so synthetic data for the rest.)
trains() { # DTYPE STRATEGY [--data synthetic]
  local dt=$1 st=$2; shift 2
  "$revc" dump models/fashion.rev --set units=1,1,1 --set batch=10 --dtype $dt -o "$tmp/t.ir" || fail "dump --dtype $dt"
  rm -rf "$tmp/sa" "$tmp/sb"
  "$revc" train models/fashion.rev --set units=1,1,1 --set batch=10 --steps 20 --dtype $dt --strategy $st "$@" --json --save "$tmp/sa" > "$tmp/a.log" 2>&1 || fail "train fashion $dt $st"
  "$revc" train "$tmp/t.ir" --steps 20 --dtype $dt --strategy $st "$@" --json --save "$tmp/sb" > "$tmp/b.log" 2>&1 || { cat "$tmp/b.log"; fail "train on the IR $dt $st"; }
  losses() { grep -o '"loss":[^,]*\|"test_loss":[^,]*' "$1"; }
  [ "$(losses "$tmp/a.log")" = "$(losses "$tmp/b.log")" ] || fail "$dt $st: the IR's losses differ"
  [ "$(losses "$tmp/a.log" | wc -l)" -ge 3 ] || fail "$dt $st: no losses in the log"
  diff -r "$tmp/sa" "$tmp/sb" >/dev/null || fail "$dt $st: the checkpoints after 20 steps differ"
}
trains f32 revnet
trains f32 store --data synthetic
trains f64 revnet --data synthetic
trains f64 store --data synthetic

"$revc" dump models/fashion.rev --set units=1,1,1 --after autodiff -o "$tmp/bwd.ir" || fail "dump --after autodiff"
out=$("$revc" mem "$tmp/bwd.ir" --strategy all 2>&1); status=$?
[ "$status" = 2 ] && grep -q "needs the forward graph, but .*bwd.ir has been through autodiff" <<<"$out" ||
  fail "IR after autodiff under --strategy all: exit $status: $out"
# A file without settings: the error names them, at the graph.
sed '/^train {$/,/^}$/d' "$tmp/t.ir" > "$tmp/bare.ir"
out=$("$revc" train "$tmp/bare.ir" --steps 1 2>&1); status=$?
[ "$status" = 1 ] && grep -q "bare.ir:1:1: error: training needs the training settings, but .* has none" <<<"$out" ||
  fail "train without settings: exit $status: $out"
echo "ir-input: ok"
