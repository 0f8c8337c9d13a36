#!/usr/bin/env bash
# revc mem --ranks K (docs/distributed.md): the bytes one of K processes sums
# each step equal the parameters' bytes counted from the manifest revc init
# writes (gradients: the trainable tensors; batch norm: twice the running
# statistics), the ring's share is 2(K-1)/K of their sum, and the global
# batch is K times the spec's.  Needs no MPI.
# Usage: mpi-mem.sh REVC ROOT
set -u
revc=$(realpath "$1") root=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$root" || exit 1
fail=0
for spec in models/fashion.rev models/revvit-fashion.rev; do
  "$revc" init "$spec" --out "$tmp/p" >/dev/null 2>&1 || { echo "FAIL: init $spec"; exit 1; }
  "$revc" mem "$spec" --ranks 8 --json >"$tmp/m.json" 2>"$tmp/m.err" || { echo "FAIL: mem $spec"; cat "$tmp/m.err"; exit 1; }
  python3 - "$tmp/p/revc-manifest.txt" "$tmp/m.json" "$spec" <<'PY' || fail=1
import json, re, sys
grads = stats = 0
for line in open(sys.argv[1]):
    m = re.match(r'tensor (\S+) f32\[([0-9,]*)\]', line)
    if not m:
        continue
    n = 4
    for d in filter(None, m.group(2).split(',')):
        n *= int(d)
    if m.group(1).endswith(('.mean', '.var')):
        stats += n
    else:
        grads += n
j = json.load(open(sys.argv[2]))
r = j['ranks']
want = {'processes': 8, 'global_batch': 8 * j['batch'], 'gradient_bytes': grads, 'batch_norm_bytes': 2 * stats,
        'ring_bytes': int((grads + 2 * stats) * 2 * 7 / 8)}
bad = {k: (r.get(k), v) for k, v in want.items() if r.get(k) != v}
if bad:
    print(f"FAIL: {sys.argv[3]}: (got, want): {bad}")
    sys.exit(1)
PY
  rm -rf "$tmp/p"
done
# ---- buckets (--bucket SIZE): with one bucket for everything its buffer is
# the bytes of every gradient outside batch norm's (whose gamma and beta are
# summed on their own, where bn_dx needs them), in one sum; with none, a sum
# per such tensor; with 64 KiB buckets, buckets of at most that.
"$revc" init models/fashion.rev --out "$tmp/p" >/dev/null 2>&1 || { echo "FAIL: init fashion"; exit 1; }
for b in 25MiB 0 64KiB; do
  "$revc" mem models/fashion.rev --strategy store --ranks 2 --bucket $b --json >"$tmp/b$b.json" 2>"$tmp/m.err" ||
    { echo "FAIL: mem --bucket $b"; cat "$tmp/m.err"; exit 1; }
done
python3 - "$tmp/p/revc-manifest.txt" "$tmp" <<'PY' || fail=1
import json, re, sys
own = n = 0
for line in open(sys.argv[1]):
    m = re.match(r'tensor (\S+) f32\[([0-9,]*)\]', line)
    if not m or m.group(1).endswith(('.mean', '.var', '.gamma', '.beta')):
        continue
    b = 4
    for d in filter(None, m.group(2).split(',')):
        b *= int(d)
    own += b
    n += 1
r = {k: json.load(open(f"{sys.argv[2]}/b{k}.json"))['ranks'] for k in ('25MiB', '0', '64KiB')}
checks = [
    (r['25MiB']['buckets'], 1), (r['25MiB']['bucket_buffer_bytes'], own), (r['25MiB']['gradient_sums'], 1),
    (r['0']['buckets'], 0), (r['0']['bucket_buffer_bytes'], 0), (r['0']['gradient_sums'], n),
    (r['64KiB']['buckets'] > 1, True), (r['64KiB']['gradient_sums'] < n, True),
    (r['64KiB']['bucket_buffer_bytes'] <= min(own, r['64KiB']['buckets'] * 65536), True),
]
bad = [(i, got, want) for i, (got, want) in enumerate(checks) if got != want]
if bad:
    print(f"FAIL: --bucket (check, got, want): {bad}")
    sys.exit(1)
PY
"$revc" mem models/fashion.rev --ranks 2 --bucket 25MiB | grep -q "1 of them of buckets" ||
  { echo "FAIL: revc mem --bucket does not say its buckets"; fail=1; }
"$revc" mem models/fashion.rev --ranks 2 --bucket -1 >/dev/null 2>&1; [ $? -eq 2 ] || { echo "FAIL: --bucket -1 is not a usage error"; fail=1; }
"$revc" mem models/fashion.rev --ranks 0 >/dev/null 2>&1; [ $? -eq 2 ] || { echo "FAIL: --ranks 0 is not a usage error"; fail=1; }
"$revc" mem models/fashion.rev --json | grep -q '"ranks"' && { echo "FAIL: ranks reported without --ranks"; fail=1; }
[ $fail = 0 ] && echo "OK: revc mem --ranks, --bucket"
exit $fail
