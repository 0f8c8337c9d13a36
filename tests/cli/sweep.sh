#!/usr/bin/env bash
# revc mem --sweep, --plot and --max-batch (issue 14), on small models:
# - dominance: at each fixed strategy's own total (store, revnet,
#   checkpoint), the frontier's fastest point that fits costs no more than
#   the strategy (recomputed here from the points, not read from the flag);
# - the frontier is a frontier: totals strictly down, FLOPs strictly up,
#   from store's total to the minimum, and each point's total and FLOPs are
#   what `revc mem --strategy auto --decisions D` plans for its letters;
# - --plot writes an SVG that parses, with a dot a point and the three
#   strategies labelled, and nothing else in the directory;
# - --max-batch: each strategy's batch fits the size and the next does not
#   (revc mem --set batch=B --budget), for auto, store and revnet.
# Usage: sweep.sh REVC ROOT
set -u
revc=$(realpath "$1") root=$2 fail=0
cd "$root" || exit 1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
py=python3

# Two small models: fashion's preset at a small batch, and a CIFAR-shaped
# one with three stages of two units.
cat > "$tmp/small.rev" <<'EOF'
model small
input = 3,32,32
classes = 10
init_filters = 16
units = 2,2,2
filters = 16,32,64
strides = 1,2,2
block = basic
batch = 8
dataset = synthetic
EOF
models=("models/fashion.rev --set batch=16" "$tmp/small.rev")

for spec in "${models[@]}"; do
  # shellcheck disable=SC2086
  "$revc" mem $spec --sweep --json --points 12 > "$tmp/sweep.json" 2> "$tmp/err" ||
    { echo "FAIL: mem $spec --sweep"; cat "$tmp/err"; fail=1; continue; }
  [ -s "$tmp/err" ] && { echo "FAIL: mem $spec --sweep wrote on stderr (not a terminal)"; cat "$tmp/err"; fail=1; }
  $py - "$tmp/sweep.json" "$spec" <<'PY' > "$tmp/points" || fail=1
import json, sys
d = json.load(open(sys.argv[1])); spec = sys.argv[2]
f, fixed = d['frontier'], {s['strategy']: s for s in d['fixed']}
bad = 0
def fail(msg):
    global bad
    print('FAIL: %s: %s' % (spec, msg), file=sys.stderr); bad = 1
if len(f) < 3:
    fail('only %d frontier points' % len(f))
for a, b in zip(f, f[1:]):
    if not (a['total_bytes'] > b['total_bytes'] and a['flops'] < b['flops']):
        fail('not a frontier: %s then %s' % (a['decisions'], b['decisions']))
if f[0]['total_bytes'] != fixed['store']['total_bytes'] or f[0]['flops'] != fixed['store']['flops']:
    fail('the first point is not store')
if f[-1]['total_bytes'] != d['minimum_bytes']:
    fail('the last point %d is not the minimum %d' % (f[-1]['total_bytes'], d['minimum_bytes']))
for s in ('store', 'revnet', 'checkpoint'):
    p = fixed[s]
    fit = [q for q in f if q['total_bytes'] <= p['total_bytes']]
    if not fit:
        fail('nothing on the frontier fits %s\'s total' % s); continue
    best = min(q['flops'] for q in fit)
    if best > p['flops']:
        fail('within %s\'s %d bytes the frontier costs %.0f FLOPs, more than %s\'s %.0f'
             % (s, p['total_bytes'], best, s, p['flops']))
    if p['auto_flops'] != best or not p['auto_dominates']:
        fail('%s: auto_flops %s, want %.0f' % (s, p['auto_flops'], best))
    print('dominance: %s: %s within %d bytes: auto %.0f FLOPs, %s %.0f' % (spec, s, p['total_bytes'], best, s,
          p['flops']), file=sys.stderr)
for q in f:
    print(q['decisions'], q['total_bytes'], '%.0f' % q['recompute_flops'])
sys.exit(bad)
PY
  # Each point as the planner plans its letters.
  while read -r d total rflops; do
    # shellcheck disable=SC2086
    got=$("$revc" mem $spec --strategy auto --decisions "$d" --json) || { echo "FAIL: --decisions $d"; fail=1; continue; }
    gt=$(grep -o '"total_bytes":[0-9]*' <<<"$got" | cut -d: -f2)
    [ "$gt" = "$total" ] || { echo "FAIL: $spec: $d plans $gt bytes, the sweep said $total"; fail=1; }
  done < "$tmp/points"
done

# --plot: an SVG with a dot a point, the strategies labelled, written alone.
mkdir "$tmp/plot"
"$revc" mem "$tmp/small.rev" --sweep --points 12 --plot "$tmp/plot/f.svg" > "$tmp/out" ||
  { echo "FAIL: --plot"; fail=1; }
[ "$(ls "$tmp/plot")" = f.svg ] || { echo "FAIL: --plot left $(ls "$tmp/plot")"; fail=1; }
n=$(grep -c '^  auto ' "$tmp/out")
$py - "$tmp/plot/f.svg" "$n" <<'PY' || fail=1
import sys, xml.etree.ElementTree as ET
ns = '{http://www.w3.org/2000/svg}'
root = ET.parse(sys.argv[1]).getroot()
dots = [c for c in root.iter(ns + 'circle') if c.get('class') == 'auto']
squares = [r for r in root.iter(ns + 'rect') if r.get('class') == 'fixed']
texts = [t.text for t in root.iter(ns + 'text')]
ok = len(dots) == int(sys.argv[2]) and len(squares) == 3 and all(s in texts for s in ('store', 'revnet', 'checkpoint'))
ok = ok and any('MiB' in (t or '') for t in texts) and 's a step' in texts
if not ok:
    print('FAIL: plot: %d dots (want %s), %d squares, texts %s' % (len(dots), sys.argv[2], len(squares), texts[:8]))
sys.exit(0 if ok else 1)
PY

# --max-batch: B fits, B+1 does not, for each strategy.
size=24MiB
"$revc" mem models/fashion.rev --max-batch $size --json > "$tmp/mb.json" || { echo "FAIL: --max-batch"; fail=1; }
for s in auto store revnet; do
  b=$(grep -o "\"strategy\":\"$s\",\"max_batch\":[0-9]*" "$tmp/mb.json" | cut -d: -f3)
  [ -n "$b" ] && [ "$b" -gt 0 ] || { echo "FAIL: --max-batch: no batch for $s"; fail=1; continue; }
  "$revc" mem models/fashion.rev --set batch=$b --strategy $s --budget $size > /dev/null 2>&1 ||
    { echo "FAIL: --max-batch: $s at batch $b does not fit $size"; fail=1; }
  "$revc" mem models/fashion.rev --set batch=$((b + 1)) --strategy $s --budget $size > /dev/null 2>&1
  [ $? -eq 3 ] || { echo "FAIL: --max-batch: $s at batch $((b + 1)) fits $size too"; fail=1; }
  echo "max batch: fashion within $size: $s $b"
done

[ $fail -eq 0 ] && echo "sweep: OK"
exit $fail
