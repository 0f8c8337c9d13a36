#!/usr/bin/env bash
# The model language through the command line: examples/plain.rev, a
# user-defined block (conv -> relu -> conv, no batch norm) in the RevNet
# network, is accepted by revc mem, grad, check and train; its gradients,
# and those of examples/mlp-net.rev (a network of its own), under revnet
# and checkpoint agree with store (f64, max|a-b|/max|b| <= 1e-10,
# interpreter and JIT); finite differences pass under each strategy;
# a size limit blames the key; and a spec whose block breaks a coupling's
# shape is refused at the user's line.
# Usage: lang.sh REVC ROOT
set -u
revc=$(realpath "$1") root=$2 fail=0
cd "$root" || exit 1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
spec=examples/plain.rev
bad() { echo "FAIL: $*"; fail=1; }
tiny=(--set units=1,2,1 --set batch=2 --set input=1,8,8 --set dataset=synthetic)

out=$("$revc" mem "$spec" --strategy all 2>&1) || bad "mem: $out"
grep -q 'revnet' <<<"$out" && grep -q 'store' <<<"$out" || bad "mem lists no strategies: $out"

for s in store revnet checkpoint; do
  out=$("$revc" check "$spec" "${tiny[@]}" --samples 2 --strategy "$s" 2>&1)
  grep -q "revc check: 23 of 23 tensors within 1e-06" <<<"$out" || bad "check under $s: $out"
  out=$("$revc" check examples/mlp-net.rev "${tiny[@]}" --samples 2 --strategy "$s" 2>&1)
  grep -q "revc check: 19 of 19 tensors within 1e-06" <<<"$out" || bad "mlp-net: check under $s: $out"
done

# Gradients of both examples (the second, examples/mlp-net.rev, a network
# of its own): float64 [2,1,8,8] inputs and int32 labels, as .npy files.
python3 tests/cli/npy.py batch "$tmp" 1,8,8 7 || { echo "FAIL: cannot write the batch"; exit 1; }
for ex in plain mlp-net; do
  dir=$tmp/$ex
  mkdir -p "$dir"
  "$revc" init "examples/$ex.rev" "${tiny[@]}" --out "$dir/p" >/dev/null 2>&1 || bad "init $ex"
  for engine in interp jit; do
    for s in store revnet checkpoint; do
      "$revc" grad "examples/$ex.rev" "${tiny[@]}" --params "$dir/p" --input "$tmp/x.npy" --labels "$tmp/y.npy" \
        --out "$dir/g-$engine-$s" --strategy "$s" --engine "$engine" --dtype f64 >"$tmp/out" 2>&1 ||
        { bad "$ex: grad --engine $engine --strategy $s"; cat "$tmp/out"; }
    done
  done
  ref=$dir/g-interp-store want=s0.u0.f.conv1.w.npy
  [ "$ex" = plain ] || want=s1.u0.f.out.w.npy
  [ -e "$ref/$want" ] && ! ls "$ref" | grep -qE '\.(f|g)\.bn' || bad "$ex: the gradients are not its own: $(ls "$ref")"
  python3 tests/cli/npy.py same "$ref" "$dir"/g-* >"$tmp/same" ||
    { bad "$ex: gradients differ from store"; cat "$tmp/same"; }
done

out=$("$revc" train "$spec" "${tiny[@]}" --steps 3 --engine interp 2>&1) || bad "train --steps 3: $out"
grep -q 'steps 1\.\.3 of 3' <<<"$out" || bad "train did not report 3 steps: $out"

# Limits and shapes: one error line at the key or the user's def.
"$revc" dump "$spec" --set batch=100000000 -o "$tmp/x.ir" 2>"$tmp/err"
[ $? -eq 1 ] && [ ! -e "$tmp/x.ir" ] &&
  grep -qx -- '--set:1:7: error: batch 100000000 makes the output of init.conv f32\[100000000,16,28,28\] larger than 2^40 bytes' "$tmp/err" ||
  { bad "size limit"; cat "$tmp/err"; }
sed 's/^\tconv 3 c$/\tconv 3 c stride=2/' "$spec" >"$tmp/strided.rev"
"$revc" mem "$tmp/strided.rev" 2>"$tmp/err"
[ $? -eq 1 ] && grep -q "strided.rev:25:5: error: G of unit s0.u0 gives \[50,8,7,7\], but y1 is \[50,8,14,14\]" "$tmp/err" ||
  { bad "a block that breaks the coupling's shape"; cat "$tmp/err"; }

[ $fail -eq 0 ] && echo "lang: ok"
exit $fail
