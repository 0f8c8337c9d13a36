#!/usr/bin/env bash
# Every command that takes a spec takes the forward IR `revc dump SPEC`
# prints (its couplings marked, its training settings in a train { ... }
# block) and gives the same figures: revc mem byte for byte in the JSON
# report under every strategy; revc dump the same IR after the last pass
# and the same dot; revc grad the same .npy files; revc train the same
# losses and, after 20 steps, the same checkpoint bit for bit (f32 and
# f64, store and revnet); revc eval the same loss and accuracy; revc check
# the same report (f64); revc compile a library that trains the same.  An IR file already through autodiff cannot be
# planned under another strategy; one without settings cannot train; both
# say so.
# Usage: ir-input.sh REVC ROOT
set -u
revc=$(realpath "$1") root=$(realpath "$2")
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
  # The IR after every pass (the file has been through shape already).
  rm -rf "$tmp/d1" "$tmp/d2"
  "$revc" dump "$spec" "${sets[@]}" --after plan --dump-after all --dump-dir "$tmp/d1" >/dev/null || fail "dump $spec --dump-after all"
  "$revc" dump "$tmp/fwd.ir" --after plan --dump-after all --dump-dir "$tmp/d2" >/dev/null || fail "dump the IR of $spec --dump-after all"
  local n=0 f p
  for f in "$tmp"/d2/*.ir; do
    p=${f##*/}; p=${p#*-}
    cmp -s "$f" "$tmp"/d1/*-"$p" || fail "$spec: the IR after $p differs"
    n=$((n + 1))
  done
  [ $n = 9 ] || fail "$spec: $n dumps of the IR, not 9"
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
# (Fashion-MNIST and the JIT once; the machine is shared, so synthetic data
# and the interpreter for the rest.)
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
trains f32 store --data synthetic --engine interp
trains f64 revnet --data synthetic --engine interp
trains f64 store --data synthetic --engine interp


# eval: the derived evaluation graph gives the spec's loss and accuracy.
small=(models/fashion.rev --set units=1,1,1 --set batch=10)
"$revc" dump "${small[@]}" -o "$tmp/e.ir" || fail "dump for eval"
"$revc" train "${small[@]}" --steps 3 --data synthetic --engine interp --save "$tmp/ek" >/dev/null 2>&1 || fail "train for eval"
a=$("$revc" eval "${small[@]}" --params "$tmp/ek" --data synthetic --json) || fail "eval the spec"
b=$("$revc" eval "$tmp/e.ir" --params "$tmp/ek" --data synthetic --json) || fail "eval the IR"
[ "$a" = "$b" ] || fail "eval: the IR gives $b, the spec $a"

# check: an f64 forward graph checks as its spec does; an f32 one says why not.
"$revc" dump models/fashion.rev --set units=1,1,1 --set batch=4 --dtype f64 -o "$tmp/c64.ir" || fail "dump --dtype f64"
"$revc" check models/fashion.rev --set units=1,1,1 --set batch=4 --samples 2 --engine interp > "$tmp/c1.txt" || fail "check the spec"
"$revc" check "$tmp/c64.ir" --samples 2 --engine interp > "$tmp/c2.txt" || fail "check the IR"
cmp -s "$tmp/c1.txt" "$tmp/c2.txt" || { diff "$tmp/c1.txt" "$tmp/c2.txt" | head; fail "check: the IR's report differs"; }
out=$("$revc" check "$tmp/e.ir" --samples 1 2>&1); status=$?
[ "$status" = 2 ] && grep -q "needs an f64 graph, and .*e.ir is f32: dump the spec with --dtype f64" <<<"$out" ||
  fail "check of an f32 graph: exit $status: $out"

# compile: the library from the IR trains as the spec's does (the same
# losses and tensors after three steps).
aot=(models/fashion.rev --set units=1,1,1 --set batch=4)
"$revc" dump "${aot[@]}" -o "$tmp/aot.ir" || fail "dump for compile"
for w in spec ir; do
  mkdir -p "$tmp/$w"
  src=("${aot[@]}"); [ $w = ir ] && src=("$tmp/aot.ir")
  "$revc" compile "${src[@]}" -o "$tmp/$w/libtiny.so" --header "$tmp/$w/tiny.h" --name tiny || fail "compile the $w"
  (cd "$tmp/$w" && cc -O2 -I. "$root/tests/aot/main.c" -L. -ltiny -lopenblas -lm -Wl,-rpath,"$tmp/$w" -o main) || fail "building against the $w's library"
done
(cd "$tmp/spec" && ./main 3 - -) || fail "writing the batch"
cp "$tmp/spec/x.npy" "$tmp/spec/y.npy" "$tmp/ir/"
"$revc" init "${aot[@]}" --seed 3 --out "$tmp/init" >/dev/null 2>&1 || fail "init for compile"
# (the JIT without the conv tune: the libraries have the cost model's lowerings)
REVC_CONV_TUNE=0 "$revc" grad "${aot[@]}" --params "$tmp/init" --input "$tmp/spec/x.npy" --labels "$tmp/spec/y.npy" \
  --train-steps 3 --lr 0.1 --params-out "$tmp/jit" > /dev/null || fail "grad --train-steps"
for w in spec ir; do
  (cd "$tmp/$w" && ./main 3 "$tmp/jit" "$tmp/$w/out" > lib.txt) || fail "the $w's library"
done
cmp -s "$tmp/spec/lib.txt" "$tmp/ir/lib.txt" || fail "the libraries' losses differ"
diff -r "$tmp/spec/out" "$tmp/ir/out" >/dev/null || fail "the libraries' tensors differ"

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
