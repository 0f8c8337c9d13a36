#!/usr/bin/env bash
# revc grad on small configurations no preset has (odd init kernels, stages
# of one unit, stride-2 and stride-3 stages, max pooling, a bottleneck),
# through the command line as a user runs it: under every engine and
# strategy each must succeed, and in f64 every gradient must be within
# 1e-10 (max|a-b| / max|b|) of store on the interpreter.
# Usage: small-configs.sh REVC ROOT
set -u
revc=$(realpath "$1") root=$2 fail=0
cd "$root" || exit 1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

configs=(
  "input=3,8,8 init_filters=8 init_kernel=5 units=1,2 filters=8,16 strides=1,2"
  "input=1,12,12 init_filters=4 init_kernel=7 init_stride=2 init_max_pool=true units=2,1 filters=4,8 strides=1,3"
  "input=3,8,8 init_filters=8 init_kernel=5 units=1,2 filters=8,16 strides=1,2 block=bottleneck"
)
for c in "${!configs[@]}"; do
  sets=(--set batch=2)
  for kv in ${configs[$c]}; do sets+=(--set "$kv"); done
  dir=$tmp/$c
  mkdir -p "$dir"
  chw=$(sed -n 's/.*input=\([0-9,]*\).*/\1/p' <<<"${configs[$c]}")
  "$revc" init models/fashion.rev "${sets[@]}" --out "$dir/p" >/dev/null || { echo "FAIL: init ${configs[$c]}"; fail=1; continue; }
  # The batch: float64 [2,C,H,W] and int32 labels, as .npy files.
  python3 - "$dir" "$chw" <<'PY' || { echo "FAIL: cannot write the batch"; exit 1; }
import random, struct, sys
d, chw = sys.argv[1], [int(v) for v in sys.argv[2].split(',')]
def npy(path, descr, shape, fmt, values):
    h = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, ''.join('%d, ' % s for s in shape))
    h += ' ' * (-(len(h) + 11) % 64) + '\n'
    with open(path, 'wb') as f:
        f.write(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(h)) + h.encode() + struct.pack('<%d%s' % (len(values), fmt), *values))
r = random.Random(5)
n = 2 * chw[0] * chw[1] * chw[2]
npy(d + '/x.npy', '<f8', [2] + chw, 'd', [r.uniform(-1, 1) for _ in range(n)])
npy(d + '/y.npy', '<i4', [2], 'i', [3, 7])
PY
  for engine in interp jit; do
    for s in store revnet checkpoint; do
      if ! "$revc" grad models/fashion.rev "${sets[@]}" --params "$dir/p" --input "$dir/x.npy" --labels "$dir/y.npy" \
           --out "$dir/g-$engine-$s" --strategy "$s" --engine "$engine" --dtype f64 >"$dir/out" 2>&1; then
        echo "FAIL: ${configs[$c]}: grad --engine $engine --strategy $s"; cat "$dir/out"; fail=1
      fi
    done
  done
  python3 - "$dir" <<'PY' || { echo "FAIL: ${configs[$c]}: gradients differ"; fail=1; }
import ast, os, struct, sys
d = sys.argv[1]
def load(path):
    b = open(path, 'rb').read()
    n = struct.unpack('<H', b[8:10])[0]
    h = ast.literal_eval(b[10:10 + n].decode())
    assert h['descr'] == '<f8', (path, h)
    k = 1
    for s in h['shape']:
        k *= s
    return struct.unpack('<%dd' % k, b[10 + n:10 + n + 8 * k])
ref = d + '/g-interp-store'
bad = 0
for run in sorted(x for x in os.listdir(d) if x.startswith('g-')):
    for f in sorted(x for x in os.listdir(ref) if x.endswith('.npy')):
        a, b = load(os.path.join(d, run, f)), load(os.path.join(ref, f))
        err = max(abs(x - y) for x, y in zip(a, b)) / max(max(abs(y) for y in b), 1e-300)
        if not err <= 1e-10:
            print('%s %s: %g' % (run, f, err))
            bad += 1
sys.exit(1 if bad else 0)
PY
done
[ $fail -eq 0 ] && echo "small-configs: ok"
exit $fail
