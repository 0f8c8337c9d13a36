#!/usr/bin/env bash
# revc check --drift on the fashion preset at batch 4, on the interpreter
# and on native code (the CPU of REVC_CPU, else this host's) with every
# convolution forced to F(2x2) Winograd and to the direct kernels: every
# invertible unit is reported, the reconstruction is exact to rounding (f64
# relative error below 1e-12, f32 below 1e-4; measured up to 5e-7), and the
# revnet gradients point where the store gradients do (f64 angles below
# 1e-9 degrees, f32 below 1 degree); native code reports its engine and
# each step's convolution lowerings (f64: direct only).
# Usage: drift.sh REVC ROOT
set -u
revc=$(realpath "$1") root=$2
cd "$root" || exit 1
cpu=${REVC_CPU:-native}
check() { # ENGINE LOWERING(or -): the JSON report's checks
  local json
  json=$(REVC_CONV=${2#-} "$revc" check models/fashion.rev --set batch=4 --drift --json --engine "$1" \
    $([ "$1" = jit ] && echo --cpu "$cpu")) || { echo "FAIL: revc check --drift --engine $1 ($2)"; exit 1; }
  python3 - "$json" "$1" "$2" <<'PY' || { echo "FAIL: --engine $1 ($2)"; exit 1; }
import json, math, sys
r = json.loads(sys.argv[1])
engine, lowering = sys.argv[2], sys.argv[3]
units = [u['unit'] for u in r['units']]
assert units == ['s0.u0', 's0.u1', 's1.u1', 's2.u1'], units
for u in r['units']:
    for x in ('x1', 'x2'):
        assert 0 <= u['f64'][x + '_rel'] < 1e-12, u
        assert 0 < u['f32'][x + '_rel'] < 1e-4, u
        assert u['f32'][x + '_abs'] >= u['f64'][x + '_abs'], u
g = r['gradients']
assert len(g['tensors']) == 77, len(g['tensors'])
assert 0 <= g['f64']['worst_degrees'] < 1e-9, g['f64']
assert 0 < g['f32']['worst_degrees'] < 1, g['f32']
assert g['f32']['median_degrees'] <= g['f32']['worst_degrees']
assert all(math.isfinite(t['f32_degrees']) and math.isfinite(t['f64_degrees']) for t in g['tensors'])
c = r['convolutions']
if engine == 'interp':
    assert r['engine'] == 'interp' and not r['jit'], r['engine']
    assert all(c[d][s] == {} for d in ('f32', 'f64') for s in ('revnet', 'store')), c
else:
    assert r['jit'] and r['engine'].startswith('jit ('), r['engine']
    for s in ('revnet', 'store'):
        assert list(c['f64'][s]) == ['direct'], c
        assert sum(c['f32'][s].values()) == c['f64'][s]['direct'], c
    # the revnet step recomputes F and G: more convolutions than store's
    assert c['f64']['revnet']['direct'] > c['f64']['store']['direct'], c
    # fashion's first convolution (1 input plane) and the strided ones stay direct
    assert set(c['f32']['revnet']) == ({'direct'} if lowering == 'direct' else {lowering, 'direct'}), c
PY
}
check interp -
check jit winograd2
check jit direct
out=$("$revc" check models/fashion.rev --set batch=4 --drift --cpu "$cpu") || { echo "FAIL: text report"; exit 1; }
grep -q "^s2.u1 " <<<"$out" && grep -q "largest gradient angle" <<<"$out" &&
  grep -q "engine jit (" <<<"$out" && grep -q "f64 convolutions: revnet step direct x[0-9]*; store step direct x[0-9]* (Winograd is f32 only)" <<<"$out" ||
  { echo "FAIL: text report"; echo "$out"; exit 1; }
echo "drift: ok"
