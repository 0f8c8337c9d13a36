#!/usr/bin/env bash
# Strategy auto (issue 14) through the command line:
# - the three strategies are particular decisions: revc mem --strategy auto
#   --decisions with store's, revnet's and checkpoint's letters plans their
#   bytes exactly;
# - --budget below the minimum exits 3 naming it; within a budget between
#   revnet's and store's totals the choice fits, mixes decisions, and costs
#   less recomputation than revnet's;
# - --strategy min (the stem recomputed too) goes below revnet's saved +
#   transient peak, and a stem marked keep(recompute) in the IR plans as
#   its letter R does;
# - revc grad under that budget (f64, decisions mixing store, invert and
#   recompute) and under min gives store's gradients within 1e-10, revc
#   train trains, and compile and check take auto --budget.
# Usage: auto.sh REVC ROOT
set -u
revc=$(realpath "$1") root=$2 fail=0
cd "$root" || exit 1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
field() { grep -o "\"$2\":[^,}]*" <<<"$1" | head -n1 | cut -d: -f2 | tr -d '"'; }

# The strategies as decisions.
all=$("$revc" mem models/fashion.rev --strategy all --json) || { echo "FAIL: mem --strategy all"; exit 1; }
for s in store revnet checkpoint; do
  obj=$(sed 's/{"strategy":/\n/g' <<<"$all" | grep "^\"$s\"")
  d=$(field "$obj" decisions)
  got=$("$revc" mem models/fashion.rev --strategy auto --decisions "$d" --json) || { echo "FAIL: --decisions $d"; fail=1; continue; }
  for f in peak_bytes arena_bytes saved_transient_peak_bytes total_bytes; do
    [ "$(field "$obj" $f)" = "$(field "$got" $f)" ] ||
      { echo "FAIL: $s as decisions $d: $f $(field "$got" $f), want $(field "$obj" $f)"; fail=1; }
  done
done
store_total=$(field "$(sed 's/{"strategy":/\n/g' <<<"$all" | grep '^"store"')" total_bytes)
revnet_total=$(field "$(sed 's/{"strategy":/\n/g' <<<"$all" | grep '^"revnet"')" total_bytes)

# The minimum-memory decisions (--strategy min): the stem recomputed (R),
# below revnet's saved + transient peak; its total is the minimum auto names.
low=$("$revc" mem models/fashion.rev --strategy min --json) || { echo "FAIL: mem --strategy min"; fail=1; }
low_d=$(field "$low" decisions) low_total=$(field "$low" total_bytes)
revnet_st=$(field "$(sed 's/{"strategy":/\n/g' <<<"$all" | grep '^"revnet"')" saved_transient_peak_bytes)
[[ $low_d == R* ]] && [ "$(field "$low" saved_transient_peak_bytes)" -lt "$revnet_st" ] ||
  { echo "FAIL: --strategy min decides $low_d, saved + transient $(field "$low" saved_transient_peak_bytes) (revnet $revnet_st)"; fail=1; }
[ "$("$revc" mem models/fashion.rev --strategy auto --decisions "$low_d" --json | grep -o '"total_bytes":[0-9]*')" = "\"total_bytes\":$low_total" ] ||
  { echo "FAIL: min's decisions $low_d do not plan its total $low_total"; fail=1; }
# The same decision carried by the IR: the stem's nodes marked keep(recompute).
"$revc" dump models/fashion.rev | sed '/= \(param\|state\|bn_running\)/!s/ scope("init")/ keep(recompute) scope("init")/' > "$tmp/stem.ir"
ir_st=$(field "$("$revc" mem "$tmp/stem.ir" --strategy revnet --json)" saved_transient_peak_bytes)
cli_st=$(field "$("$revc" mem models/fashion.rev --strategy auto --decisions "R${low_d:1}" --json)" saved_transient_peak_bytes)
[ -n "$ir_st" ] && [ "$ir_st" = "$cli_st" ] || { echo "FAIL: keep(recompute) on the stem plans $ir_st, --decisions R... $cli_st"; fail=1; }

# Below the minimum: exit 3, the minimum named.
"$revc" mem models/fashion.rev --strategy auto --budget 1MiB >/dev/null 2>"$tmp/err"
rc=$?
{ [ $rc -eq 3 ] && grep -q "below the minimum, .* ($low_total bytes: decisions $low_d)" "$tmp/err"; } ||
  { echo "FAIL: budget below the minimum: exit $rc"; cat "$tmp/err"; fail=1; }
"$revc" mem models/fashion.rev --strategy revnet --decisions iiriri >/dev/null 2>&1
[ $? -eq 2 ] || { echo "FAIL: --decisions without --strategy auto is not a usage error"; fail=1; }

# Halfway between revnet and store.
mid=$(( (store_total + revnet_total) / 2 ))
got=$("$revc" mem models/fashion.rev --strategy auto --budget $mid --json) || { echo "FAIL: auto --budget $mid"; fail=1; }
d=$(field "$got" decisions) total=$(field "$got" total_bytes) flops=$(field "$got" recompute_flops)
[ "$total" -le $mid ] || { echo "FAIL: auto within $mid plans $total"; fail=1; }
grep -q s <<<"$d" && grep -q '[ir]' <<<"$d" || { echo "FAIL: auto within $mid decides $d, not a mix"; fail=1; }
rflops=$(field "$("$revc" mem models/fashion.rev --strategy auto --budget $revnet_total --json)" recompute_flops)
awk -v a="$flops" -v b="$rflops" 'BEGIN { exit !(a < b) }' ||
  { echo "FAIL: auto within $mid recomputes $flops FLOPs, no fewer than at the minimum ($rflops)"; fail=1; }
echo "auto: fashion within $mid bytes (between revnet $revnet_total and store $store_total): $d, $total bytes"

# Gradients under a budget in f64, against store.
sets=(--set batch=2)
"$revc" init models/fashion.rev "${sets[@]}" --out "$tmp/p" >/dev/null || { echo "FAIL: init"; exit 1; }
python3 tests/cli/npy.py batch "$tmp" 1,28,28 7 || { echo "FAIL: cannot write the batch"; exit 1; }
f64=$("$revc" mem models/fashion.rev "${sets[@]}" --dtype f64 --strategy all --json)
s64=$(field "$(sed 's/{"strategy":/\n/g' <<<"$f64" | grep '^"store"')" total_bytes)
r64=$(field "$(sed 's/{"strategy":/\n/g' <<<"$f64" | grep '^"revnet"')" total_bytes)
mid64=$(( (s64 + r64) / 2 ))
d64=$(field "$("$revc" mem models/fashion.rev "${sets[@]}" --dtype f64 --strategy auto --budget $mid64 --json)" decisions)
grep -q s <<<"$d64" && grep -q '[ir]' <<<"$d64" || { echo "FAIL: f64 auto within $mid64 decides $d64, not a mix"; fail=1; }
for s in store auto min; do
  extra=(); [ $s = auto ] && extra=(--budget $mid64)
  "$revc" grad models/fashion.rev "${sets[@]}" --params "$tmp/p" --input "$tmp/x.npy" --labels "$tmp/y.npy" \
    --out "$tmp/g-$s" --strategy $s "${extra[@]}" --engine interp --dtype f64 >"$tmp/out" 2>&1 ||
    { echo "FAIL: grad --strategy $s"; cat "$tmp/out"; fail=1; }
done
python3 tests/cli/npy.py same "$tmp/g-store" "$tmp/g-auto" "$tmp/g-min" >"$tmp/same" ||
  { echo "FAIL: auto's gradients differ from store's"; cat "$tmp/same"; fail=1; }
echo "auto: f64 decisions $d64 within $mid64 bytes"

# Training under a budget.
"$revc" train models/fashion.rev "${sets[@]}" --data synthetic --steps 2 --strategy auto --budget 40MiB >"$tmp/train" 2>&1 &&
  grep -q "strategy auto" "$tmp/train" || { echo "FAIL: train --strategy auto --budget 40MiB"; cat "$tmp/train"; fail=1; }
"$revc" train models/fashion.rev "${sets[@]}" --data synthetic --steps 1 --budget 40MiB >/dev/null 2>&1
[ $? -eq 2 ] || { echo "FAIL: --budget without --strategy auto is not a usage error"; fail=1; }
# compile and check under a budget: what they build fits it; below the
# minimum they exit 3 as mem does.
"$revc" compile models/fashion.rev --strategy auto --budget $mid -o "$tmp/libx.so" 2>"$tmp/err" ||
  { echo "FAIL: compile --strategy auto --budget $mid"; cat "$tmp/err"; fail=1; }
arena=$(sed -n 's/.*(arena \([0-9]*\) bytes).*/\1/p' "$tmp/err")
[ -n "$arena" ] && [ "$arena" -le $mid ] || { echo "FAIL: compile within $mid: arena $arena"; fail=1; }
"$revc" check models/fashion.rev "${sets[@]}" --strategy auto --budget $mid64 --samples 1 --engine interp >"$tmp/out" 2>&1 &&
  grep -q "strategy auto" "$tmp/out" || { echo "FAIL: check --strategy auto --budget $mid64"; cat "$tmp/out"; fail=1; }
for cmd in compile check; do
  extra=(); [ $cmd = compile ] && extra=(-o "$tmp/liby.so")
  "$revc" $cmd models/fashion.rev --strategy auto --budget 1MiB "${extra[@]}" >/dev/null 2>"$tmp/err"
  rc=$?
  { [ $rc -eq 3 ] && grep -q "below the minimum" "$tmp/err"; } || { echo "FAIL: $cmd --budget 1MiB: exit $rc"; cat "$tmp/err"; fail=1; }
done
[ ! -e "$tmp/liby.so" ] || { echo "FAIL: compile below the minimum wrote its output"; fail=1; }
[ $fail -eq 0 ] && echo "auto: ok"
exit $fail
