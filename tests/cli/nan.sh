#!/usr/bin/env bash
# NaN is never hidden.  The issue's scenario: one NaN in s1.u0.f.conv0.w of
# a checkpoint makes the loss of revc grad NaN on both engines and under
# store and revnet; revc eval reports an error, not an accuracy; revc train
# --resume stops with exit 1 naming the step and saves nothing, and with
# --check-numerics names the tensor.  Also: a NaN in a momentum buffer (a
# finite loss, then a poisoned update) is never saved, nor a state whose
# test logits are not finite, and a run that diverges keeps its last good
# checkpoint.
# Usage: nan.sh REVC ROOT
set -u
revc=$(realpath "$1") root=$2 fail=0 n=0 here=$(dirname "$(realpath "$0")")
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$root" || exit 1
model=(models/fashion.rev --set units=1,1,1 --set batch=10)
tiny=("${model[@]}" --data synthetic)

# .npy files with the standard library alone: a version-1 header, then the
# raw little-endian elements.
npy() {
  python3 - "$@" <<'PY'
import math, os, random, struct, sys

def load(path):
    b = bytearray(open(path, 'rb').read())
    off = 10 + struct.unpack('<H', b[8:10])[0]
    hdr = b[:off].decode('latin1')
    fmt = next(f for d, f in (("'<f4'", 'f'), ("'<f8'", 'd'), ("'<i8'", 'q')) if d in hdr)
    return b, off, fmt

def save(path, descr, shape, fmt, vals):
    h = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        descr, ''.join('%d,' % d for d in shape) if len(shape) == 1 else ', '.join(map(str, shape)))
    h += ' ' * (63 - (len(h) + 10) % 64) + '\n'
    with open(path, 'wb') as f:
        f.write(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(h)) + h.encode('latin1'))
        f.write(struct.pack('<%d%s' % (len(vals), fmt), *vals))

cmd = sys.argv[1]
if cmd == 'poke':                      # poke FILE INDEX VALUE
    b, off, fmt = load(sys.argv[2])
    struct.pack_into('<' + fmt, b, off + int(sys.argv[3]) * struct.calcsize(fmt), float(sys.argv[4]))
    open(sys.argv[2], 'wb').write(bytes(b))
elif cmd == 'first':                   # first FILE: element 0
    b, off, fmt = load(sys.argv[2])
    print(struct.unpack_from('<' + fmt, b, off)[0])
elif cmd == 'finite':                  # finite DIR: every float tensor finite
    for name in sorted(f for f in os.listdir(sys.argv[2]) if f.endswith('.npy')):
        b, off, fmt = load(os.path.join(sys.argv[2], name))
        if fmt != 'q':
            n = (len(b) - off) // struct.calcsize(fmt)
            if not all(map(math.isfinite, struct.unpack_from('<%d%s' % (n, fmt), b, off))):
                sys.exit('%s is not finite' % name)
elif cmd == 'batch':                   # batch DIR N: x.npy, y.npy
    r = random.Random(1)
    n = int(sys.argv[3])
    save(sys.argv[2] + '/x.npy', '<f4', (n, 1, 28, 28), 'f', [r.random() for _ in range(n * 784)])
    save(sys.argv[2] + '/y.npy', '<i4', (n,), 'i', [r.randrange(10) for _ in range(n)])
PY
}

source "$here/expect.sh" # expect WANT-REGEX CMD...: exit 1, one error line, nothing saved

"$revc" train "${tiny[@]}" --steps 3 --save "$tmp/ck" >/dev/null 2>&1 || { echo "FAIL: making a checkpoint"; exit 1; }
cp -r "$tmp/ck" "$tmp/nan"
npy poke "$tmp/nan/s1.u0.f.conv0.w.npy" 5 nan
npy batch "$tmp" 10

# revc grad: NaN on both engines, under store and revnet; finite without the NaN.
for e in interp jit; do
  for s in store revnet; do
    n=$((n + 1))
    for p in ck nan; do
      rm -rf "$tmp/g"
      "$revc" grad "${model[@]}" --params "$tmp/$p" --input "$tmp/x.npy" --labels "$tmp/y.npy" --out "$tmp/g" \
        --engine $e --strategy $s >"$tmp/err" 2>&1 || { echo "FAIL: grad $e $s $p"; cat "$tmp/err"; fail=$((fail + 1)); }
      loss=$(npy first "$tmp/g/loss.npy")
      if { [ $p = nan ] && [ "$loss" != nan ]; } || { [ $p = ck ] && ! [[ $loss =~ ^[0-9.]+$ ]]; }; then
        echo "FAIL: grad $e $s with $p: loss $loss"; fail=$((fail + 1))
      fi
    done
  done
done

# revc eval: no accuracy from NaN logits, nothing on stdout; the tensor is named.
for json in "" --json; do
  expect "the loss is NaN: the logits of 1000 of 1000 images are not finite; s1\.u0\.f\.conv0\.w in .* holds NaN" \
    "$revc" eval "${tiny[@]}" --params "$tmp/nan" $json
  [ -s "$tmp/out" ] && { echo "FAIL: eval $json printed a result"; cat "$tmp/out"; fail=$((fail + 1)); }
done

# revc train --resume: stops at the first step, saves nothing.
for e in interp jit; do
  expect "the loss became NaN at step 4; nothing was saved to $tmp/saved\$" \
    "$revc" train "${tiny[@]}" --steps 8 --resume "$tmp/nan" --save "$tmp/saved" --save-every 1 --engine $e
  expect "the first non-finite value came from \\\$s1\.u0\.f\.conv0\.w \(param in s1\.u0\.f\).*, step 4" \
    "$revc" train "${tiny[@]}" --steps 8 --resume "$tmp/nan" --check-numerics --engine $e
done
# Saving over the checkpoint resumed from leaves it as it was, and says so.
cp -r "$tmp/nan" "$tmp/same"
expect "the loss became NaN at step 4; $tmp/same is unchanged \(step 3\)\$" \
  "$revc" train "${tiny[@]}" --steps 8 --resume "$tmp/same" --save "$tmp/same"
diff -r "$tmp/nan" "$tmp/same" >/dev/null || { echo "FAIL: the resumed checkpoint changed"; fail=$((fail + 1)); }

# A NaN momentum buffer: the loss of step 4 is finite, its update is not;
# the state is checked before it is saved.
cp -r "$tmp/ck" "$tmp/mom"
npy poke "$tmp/mom/s1.u0.f.conv0.w.mom.npy" 5 nan
expect "after step 4, 2 of 108 tensors hold NaN or Inf, s1\.u0\.f\.conv0\.w first; nothing was saved to $tmp/saved\$" \
  "$revc" train "${tiny[@]}" --steps 8 --resume "$tmp/mom" --save "$tmp/saved" --save-every 1

# Finite weights, non-finite logits: a running variance below zero is
# finite and trains (batch statistics) but evaluates to NaN.  At a step
# that both evaluates and saves, the evaluation comes first: not saved.
cp -r "$tmp/ck" "$tmp/var"
npy poke "$tmp/var/init.bn.var.npy" 0 -1e30
expect "after step 4, the test loss is NaN: the logits of 1000 of 1000 images are not finite; nothing was saved to $tmp/saved\$" \
  "$revc" train "${tiny[@]}" --steps 8 --resume "$tmp/var" --save "$tmp/saved" --save-every 1 --eval-every 1

# Divergence: the last checkpoint is the step before the NaN, and finite.
out=$("$revc" train "${tiny[@]}" --steps 30 --set lr=1e30 --save "$tmp/div" --save-every 1 2>&1 >/dev/null)
rc=$? n=$((n + 1))
if [ $rc -ne 1 ] || ! [[ $out =~ the\ loss\ became\ NaN\ at\ step\ ([0-9]+)\;\ the\ last\ checkpoint\ \(step\ ([0-9]+)\)\ is\ in ]] ||
   [ $((BASH_REMATCH[1] - 1)) -ne "${BASH_REMATCH[2]}" ] || ! npy finite "$tmp/div"; then
  echo "FAIL ($rc): divergence"; echo "$out"; fail=$((fail + 1))
fi
echo "nan: $n cases, $fail failed"
[ $fail -eq 0 ]
