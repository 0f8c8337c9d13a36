#!/usr/bin/env bash
# revc check --drift on the fashion preset at batch 4: every invertible unit
# is reported, the reconstruction is exact to rounding (f64 relative error
# below 1e-12, f32 below 1e-4), and the revnet gradients point where the
# store gradients do (f64 angles below 1e-9 degrees, f32 below 1 degree).
# Usage: drift.sh REVC ROOT
set -u
revc=$(realpath "$1") root=$2
cd "$root" || exit 1
json=$("$revc" check models/fashion.rev --set batch=4 --drift --json) || { echo "FAIL: revc check --drift"; exit 1; }
python3 - "$json" <<'PY' || exit 1
import json, math, sys
r = json.loads(sys.argv[1])
units = [u['unit'] for u in r['units']]
assert units == ['s0.u0', 's0.u1', 's1.u1', 's2.u1'], units
for u in r['units']:
    for x in ('x1', 'x2'):
        assert 0 <= u['f64'][x + '_rel'] < 1e-12, u
        assert 0 <= u['f32'][x + '_rel'] < 1e-4, u
        assert u['f32'][x + '_abs'] >= u['f64'][x + '_abs'], u
g = r['gradients']
assert len(g['tensors']) == 77, len(g['tensors'])
assert 0 <= g['f64']['worst_degrees'] < 1e-9, g['f64']
assert 0 < g['f32']['worst_degrees'] < 1, g['f32']
assert g['f32']['median_degrees'] <= g['f32']['worst_degrees']
assert all(math.isfinite(t['f32_degrees']) and math.isfinite(t['f64_degrees']) for t in g['tensors'])
PY
out=$("$revc" check models/fashion.rev --set batch=4 --drift) || { echo "FAIL: text report"; exit 1; }
grep -q "^s2.u1 " <<<"$out" && grep -q "largest gradient angle" <<<"$out" || { echo "FAIL: text report"; echo "$out"; exit 1; }
echo "drift: ok"
