#!/usr/bin/env bash
# Memory of the reversible transformers (docs/model.md's RevViT presets):
# 1. exact accounting: one step in the interpreter's tracking mode reaches a
#    high-water mark equal to the planned peak, to the byte, for both presets
#    under every strategy;
# 2. flat in depth: revvit-cifar's revnet saved + transient peak grows less
#    than 2% from 12 to 48 units, while store's grows with the depth (more
#    than 3x from 12 to 48).
# Usage: revvit.sh REVC ROOT
set -u
revc=$(realpath "$1") root=$2 fail=0
cd "$root" || exit 1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# field JSON STRATEGY KEY: KEY's integer in STRATEGY's object of revc mem --json.
field() {
  sed 's/{"strategy":/\n/g' "$1" | grep "^\"$2\"" | grep -o "\"$3\":[0-9]*" | head -1 | cut -d: -f2
}

for preset in revvit-fashion revvit-cifar; do
  j=$tmp/$preset.json
  "$revc" mem models/$preset.rev --strategy all --engine interp --measure --json > "$j" ||
    { echo "FAIL: revc mem $preset --measure"; fail=1; continue; }
  for s in store revnet checkpoint; do
    planned=$(field "$j" $s peak_bytes) measured=$(field "$j" $s measured_peak_bytes)
    if [ -z "$planned" ] || [ "$planned" != "$measured" ]; then
      echo "FAIL: $preset $s: measured high-water mark '$measured' bytes, planned peak '$planned'"; fail=1
    else
      echo "ok: $preset $s: measured = planned = $planned bytes"
    fi
  done
done

for L in 12 48; do
  "$revc" mem models/revvit-cifar.rev --set units=$L --strategy all --json > "$tmp/L$L.json" ||
    { echo "FAIL: revc mem revvit-cifar units=$L"; fail=1; }
done
r12=$(field "$tmp/L12.json" revnet saved_transient_peak_bytes) r48=$(field "$tmp/L48.json" revnet saved_transient_peak_bytes)
s12=$(field "$tmp/L12.json" store saved_transient_peak_bytes) s48=$(field "$tmp/L48.json" store saved_transient_peak_bytes)
if [ -n "$r12" ] && [ -n "$r48" ] && awk -v a="$r12" -v b="$r48" 'BEGIN { exit !(b < 1.02 * a) }'; then
  echo "ok: revnet saved + transient $r12 bytes at 12 units, $r48 at 48"
else
  echo "FAIL: revnet saved + transient grows from '$r12' bytes at 12 units to '$r48' at 48 (limit 2%)"; fail=1
fi
if [ -n "$s12" ] && [ -n "$s48" ] && awk -v a="$s12" -v b="$s48" 'BEGIN { exit !(b > 3 * a) }'; then
  echo "ok: store saved + transient $s12 bytes at 12 units, $s48 at 48"
else
  echo "FAIL: store saved + transient '$s12' bytes at 12 units, '$s48' at 48: expected growth with depth"; fail=1
fi
echo "mem-revvit: $([ $fail -eq 0 ] && echo ok || echo FAILED)"
exit $fail
