#!/usr/bin/env bash
# RevViT through the command line (models/revvit-fashion.rev and
# models/revvit-cifar.rev, the prelude models/lib/revvit.rev): finite
# differences pass for both presets at batch 2 under every strategy (with
# two units, so revnet reconstructs a unit's inputs and then the duplicated
# tokens of unit 0); revc mem plans both presets under every strategy, the
# revnet peak below store's, and a tracked step's high-water mark equals the
# planned peak to the byte; revc init names the parameters as docs/model.md
# does; and a few training steps lower the loss.
# Usage: revvit.sh REVC ROOT
set -u
revc=$(realpath "$1") root=$2 fail=0
cd "$root" || exit 1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
bad() { echo "FAIL: $*"; fail=1; }
small=(--set batch=2 --set units=2 --set dataset=synthetic)

for s in store revnet checkpoint; do
  out=$("$revc" check models/revvit-fashion.rev "${small[@]}" --samples 2 --strategy "$s" 2>&1)
  grep -q "revc check: 31 of 31 tensors within 1e-06" <<<"$out" || bad "fashion: check under $s: $out"
done
out=$("$revc" check models/revvit-cifar.rev --set batch=2 --set units=1 --set dataset=synthetic --samples 2 2>&1)
grep -q "revc check: 19 of 19 tensors within 1e-06" <<<"$out" || bad "cifar: check: $out"

# Peaks under every strategy: all three planned, revnet's the smallest.
for p in revvit-fashion revvit-cifar; do
  out=$("$revc" mem "models/$p.rev" --strategy all --json 2>&1) || { bad "$p: mem: $out"; continue; }
  /usr/bin/python3 - "$out" "$p" <<'PY' || bad "$p: mem figures: $out"
import json, sys
r = json.loads(sys.argv[1])
s = {x['strategy']: x for x in r['strategies']} if 'strategies' in r else None
def peak(x):
    return x['peak_bytes'] if 'peak_bytes' in x else x['peak']
assert s and set(s) == {'store', 'revnet', 'checkpoint'}, r
assert peak(s['revnet']) < peak(s['checkpoint']) < peak(s['store']), r
PY
done

# Exact accounting: one tracked step's high-water mark is the planned peak,
# to the byte, under every strategy.
for p in "revvit-fashion --set batch=4" "revvit-cifar --set batch=2 --set units=2"; do
  set -- $p
  out=$("$revc" mem "models/$1.rev" "${@:2}" --strategy all --measure --engine interp 2>&1)
  grep -qE '^  equals the peak, to the byte +yes +yes +yes$' <<<"$out" || bad "$1: tracked peak: $out"
done

# Parameter names and count (docs/model.md): 4 per LN pair and dense, per unit 12.
"$revc" init models/revvit-fashion.rev --out "$tmp/p" >/dev/null 2>&1 || bad "init"
n=$(ls "$tmp/p" | grep -c '\.npy$')
[ "$n" -eq 55 ] || bad "init wrote $n tensors, not 55"
for t in embed.conv.w embed.conv.b embed.pos s0.u3.f.ln.gamma s0.u3.f.qkv.w s0.u3.f.proj.b s0.u3.g.fc1.w \
         s0.u3.g.fc2.b final.ln.beta final.dense.w; do
  [ -e "$tmp/p/$t.npy" ] || bad "init wrote no $t"
done

# Training: 8 steps of batch 16 on synthetic data lower the loss.
out=$("$revc" train models/revvit-fashion.rev --set batch=16 --set units=1 --set dataset=synthetic --steps 8 \
  --json 2>/dev/null) || bad "train failed"
/usr/bin/python3 - "$out" <<'PY' || bad "train: the loss did not fall: $out"
import json, sys
steps = [json.loads(l) for l in sys.argv[1].splitlines() if l.startswith('{')]
loss = [s['loss'] for s in steps if 'loss' in s and s.get('event', 'step') == 'step']
assert len(loss) >= 8 and loss[-1] < loss[0], loss
PY

[ "$fail" = 0 ] && echo "revvit: ok"
exit "$fail"
