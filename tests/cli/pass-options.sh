#!/usr/bin/env bash
# The pass options on train, grad, bench, eval and check (docs/ir.md, "The
# pipeline and its options"), revnet as every command's default strategy,
# and the train summary's memory line: what was planned and what store
# would need, checked against revc mem's arena.
# Usage: pass-options.sh REVC ROOT
set -u
revc=$(realpath "$1") root=$2 fail=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$root" || exit 1
tiny=(--set units=1,1,1 --set batch=4)
b4=tests/data/fashion-b4
grad=(grad models/fashion.rev --params $b4/params --input $b4/x.npy --labels $b4/y.npy --out "$tmp/g")
declare -A cmd=(
  [train]="train models/fashion.rev ${tiny[*]} --data synthetic --steps 1"
  [bench]="bench models/fashion.rev ${tiny[*]} --steps 1"
  [eval]="eval models/fashion.rev ${tiny[*]} --params $tmp/nonexistent"
  [check]="check models/fashion.rev ${tiny[*]} --samples 1"
)

bad() { echo "FAIL: $*"; fail=$((fail + 1)); }

run() { # run NAME EXTRA...: the command NAME with EXTRA options; out, err, rc
  local name=$1; shift
  if [ "$name" = grad ]; then "$revc" "${grad[@]}" "$@" >"$tmp/out" 2>"$tmp/err"
  else read -r -a c <<<"${cmd[$name]}"; "$revc" "${c[@]}" "$@" >"$tmp/out" 2>"$tmp/err"; fi
  rc=$?
}

# Each command takes each option; --stop-after builds, dumps and exits 0
# having run nothing (no summary, no gradients written, no data read).
for name in train grad bench eval check; do
  run "$name" --print-passes
  [ $rc -eq 0 ] && [ "$(wc -l <"$tmp/out")" -eq 10 ] && head -1 "$tmp/out" | grep -q '^shape ' ||
    bad "$name --print-passes (exit $rc)"
  run "$name" --dump-after schedule --stop-after schedule --verify-each
  head=$([ "$name" = eval ] && echo "eval: after" || echo "after")
  if [ $rc -ne 0 ] || [ -s "$tmp/out" ] || ! grep -q "^# ---- $head schedule ----" "$tmp/err" ||
     ! grep -q "$name: stopped after pass 'schedule' (--stop-after); nothing run" "$tmp/err" ||
     grep -q 'error:' "$tmp/err" || [ -e "$tmp/g" ]; then
    bad "$name --dump-after schedule --stop-after schedule (exit $rc)"; head -5 "$tmp/err"
  fi
  # The step (all but eval) is scheduled under revnet, the default: its
  # reconstructions wait on ordering edges.
  if [ "$name" != eval ] && ! grep -qE 'recompute sub\(.* after\(%' "$tmp/err"; then
    bad "$name: the dumped step has no ordering edges"
  fi
  run "$name" --passes shape,autodiff --dump-after all
  want=$([ "$name" = eval ] && echo "# ---- eval: after shape ----" || echo "# ---- after autodiff ----")
  [ $rc -eq 0 ] && grep -q "^$want" "$tmp/err" && grep -q "(--passes); nothing run" "$tmp/err" ||
    bad "$name --passes shape,autodiff (exit $rc)"
done

# The quick start's step under --stop-after: IR with ordering edges, no training.
"$revc" train models/fashion.rev --dump-after schedule --stop-after schedule >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] && [ ! -s "$tmp/out" ] && grep -qE 'recompute sub\(.* after\(%' "$tmp/err" && ! grep -q 'steps of' "$tmp/err" ||
  bad "train models/fashion.rev --dump-after schedule --stop-after schedule (exit $rc)"
"$revc" train models/fashion.rev --strategy store --dump-after schedule --stop-after schedule 2>"$tmp/err"
grep -qE 'recompute sub\(.* after\(%' "$tmp/err" && bad "store has ordering edges"

# --dump-dir: the step's dumps and the eval graph's, told apart; they parse back.
run train --dump-after all --dump-dir "$tmp/d" --stop-after plan
files=$(cd "$tmp/d" 2>/dev/null && ls | tr '\n' ' ')
[ "$files" = "01-shape.ir 02-autodiff.ir 03-revbwd.ir 04-checkpoint.ir 05-optim.ir 06-dce.ir 07-schedule.ir \
08-fuse.ir 09-liveness.ir 10-plan.ir eval-01-shape.ir eval-02-dce.ir eval-03-schedule.ir eval-04-fuse.ir \
eval-05-liveness.ir eval-06-plan.ir " ] || bad "train --dump-dir wrote: $files"
for f in 10-plan.ir eval-06-plan.ir; do
  "$revc" dump "$tmp/d/$f" >/dev/null 2>&1 || bad "$f does not parse back"
done
rm -rf "$tmp/d"
# The eval pipeline stops at --stop-after's place in the list too.
run eval --dump-after all --dump-dir "$tmp/d" --stop-after optim
files=$(cd "$tmp/d" 2>/dev/null && ls | tr '\n' ' ')
[ "$files" = "eval-01-shape.ir " ] || bad "eval --stop-after optim dumped: $files"
rm -rf "$tmp/d"

# Without --stop-after the run goes on: dumps, then the work.
run train --dump-after plan --verify-each
[ $rc -eq 0 ] && grep -q '^# ---- after plan ----' "$tmp/err" && grep -q '^# ---- eval: after plan ----' "$tmp/err" &&
  grep -q '^  test ' "$tmp/out" || bad "train --dump-after plan did not train (exit $rc)"
run check --verify-each
[ $rc -eq 0 ] && grep -q 'strategy revnet' "$tmp/out" && grep -q 'revc check: 41 of 41 tensors' "$tmp/out" ||
  bad "check --verify-each under the default strategy (exit $rc)"

# revnet is every command's default, and every help says so.
for c in train grad check bench compile mem dump; do
  "$revc" $c --help | grep -- '--strategy' | grep -q '(default revnet)' || bad "$c --help: default not revnet"
  "$revc" $c --help | grep -q 'default store' && bad "$c --help still says default store"
done
"$revc" "${grad[@]}" --dtype f64 >/dev/null 2>&1 && cp -r "$tmp/g" "$tmp/g-default" && rm -rf "$tmp/g"
"$revc" "${grad[@]}" --dtype f64 --strategy revnet >/dev/null 2>&1
cmp -s "$tmp/g-default/s1.u0.f.conv0.w.npy" "$tmp/g/s1.u0.f.conv0.w.npy" || bad "grad's default is not revnet"
"$revc" bench models/fashion.rev "${tiny[@]}" --steps 1 | grep -q 'strategy revnet,' || bad "bench's default"

# The summary's memory line, against revc mem (both with the interpreter's
# workspace): planned under revnet, and what store would need.
arena() { "$revc" mem models/fashion.rev "${tiny[@]}" --strategy "$1" --json |
  sed -n 's/.*"arena_bytes":\([0-9]*\).*/\1/p'; }
rev=$(arena revnet) st=$(arena store)
read -r -a c <<<"${cmd[train]}"
out=$("$revc" "${c[@]}" --engine interp --json 2>/dev/null | tail -1)
grep -q "\"planned_bytes\":$rev,\"store_planned_bytes\":$st," <<<"$out" ||
  bad "train --json: want planned $rev, store $st: $out"
out=$("$revc" "${c[@]}" --engine interp 2>/dev/null)
grep -qE "^  memory +[0-9.]+ MiB planned under revnet; store would need [0-9.]+ MiB \(1\.[0-9]+x\)$" <<<"$out" ||
  bad "train summary: $out"
out=$("$revc" "${c[@]}" --engine interp --strategy store --json 2>/dev/null | tail -1)
grep -q "\"planned_bytes\":$st,\"store_planned_bytes\":$st," <<<"$out" || bad "train --strategy store --json: $out"

[ $fail -eq 0 ] && echo "pass-options: ok"
exit $fail
