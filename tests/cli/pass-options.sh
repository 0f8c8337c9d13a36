#!/usr/bin/env bash
# The pass options on train, grad, bench, eval, check and mem (docs/ir.md,
# "The pipeline and its options"), revnet as every command's default
# strategy, and the train summary's memory line: the arena planned and what
# store would need, checked against revc mem's arena for each engine.
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
  [mem]="mem models/fashion.rev ${tiny[*]}"
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
for name in train grad bench eval check mem; do
  run "$name" --print-passes
  [ $rc -eq 0 ] && [ "$(wc -l <"$tmp/out")" -eq 11 ] && head -1 "$tmp/out" | grep -q '^shape ' ||
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

# revc mem --strategy all: each strategy's dumps under its own name, none
# overwritten; a pipeline stopped before plan dumps and exits 0.
run mem --strategy all --dump-after plan --dump-dir "$tmp/d"
files=$(cd "$tmp/d" 2>/dev/null && ls | tr '\n' ' ')
[ $rc -eq 0 ] && [ "$files" = "checkpoint-10-plan.ir revnet-10-plan.ir store-10-plan.ir " ] ||
  bad "mem --strategy all --dump-dir wrote: $files (exit $rc)"
rm -rf "$tmp/d"
run mem --strategy all --stop-after fuse
[ $rc -eq 0 ] && [ ! -s "$tmp/out" ] && grep -q "mem: stopped after pass 'fuse' (--stop-after); nothing run" "$tmp/err" ||
  bad "mem --stop-after fuse (exit $rc)"
run mem --stop-after plan
[ $rc -eq 0 ] && grep -q '^planned arena' "$tmp/out" || bad "mem --stop-after plan gave no report (exit $rc)"

# The summary's memory line, against revc mem with the same engine: the
# arena planned under revnet, and what store would need.  The two engines'
# kernels need different workspace, so their arenas differ.
read -r -a c <<<"${cmd[train]}"
for engine in jit interp; do
  arena() { "$revc" mem models/fashion.rev "${tiny[@]}" --engine $engine --strategy "$1" --json |
    sed -n 's/.*"arena_bytes":\([0-9]*\).*/\1/p'; }
  rev=$(arena revnet) st=$(arena store)
  eval "rev_$engine=$rev"
  out=$("$revc" "${c[@]}" --engine $engine --json 2>/dev/null | tail -1)
  grep -q "\"arena_bytes\":$rev,\"store_arena_bytes\":$st," <<<"$out" ||
    bad "train --engine $engine --json: want arena $rev, store $st: $out"
  out=$("$revc" "${c[@]}" --engine $engine --strategy store --json 2>/dev/null | tail -1)
  grep -q "\"arena_bytes\":$st,\"store_arena_bytes\":$st," <<<"$out" ||
    bad "train --engine $engine --strategy store --json: $out"
done
[ "$rev_jit" != "$rev_interp" ] || bad "mem plans the same arena for both engines: $rev_jit"
out=$("$revc" "${c[@]}" 2>/dev/null)
grep -qE "^  memory +[0-9.]+ MiB arena planned under revnet \(store would need [0-9.]+ MiB, 1\.[0-9]+x\); process RSS [0-9.]+ MiB$" <<<"$out" ||
  bad "train summary: $out"
[ "$(grep -c 'MiB' <<<"$out")" -eq 1 ] || bad "train summary: more than one memory line: $out"
grep -qE "^revc train: .*, engine jit \([a-z0-9-]+\)$" <<<"$out" || bad "train summary does not name the CPU: $out"
out=$("$revc" "${c[@]}" --engine interp --strategy store 2>/dev/null)
grep -qE "^  memory +[0-9.]+ MiB arena planned under store; process RSS [0-9.]+ MiB$" <<<"$out" ||
  bad "train --strategy store summary: $out"
grep -qE "^revc train: .*, engine interp$" <<<"$out" || bad "train --engine interp summary: $out"

# Every summary names the CPU native code is for; the interpreter has none.
out=$("$revc" eval models/fashion.rev --params $b4/params --data synthetic 2>/dev/null)
grep -qE "; engine jit \([a-z0-9-]+\)$" <<<"$out" || bad "eval does not name the CPU: $out"
out=$("$revc" eval models/fashion.rev --params $b4/params --data synthetic --cpu x86-64-v3 --json 2>/dev/null)
grep -q '"engine":"jit","cpu":"x86-64-v3","loss":' <<<"$out" || bad "eval --json --cpu x86-64-v3: $out"
out=$("$revc" eval models/fashion.rev --params $b4/params --data synthetic --engine interp --json 2>/dev/null)
grep -q '"engine":"interp","cpu":null,"loss":' <<<"$out" || bad "eval --engine interp --json: $out"
out=$("$revc" bench models/fashion.rev "${tiny[@]}" --steps 1 --engine interp --json 2>/dev/null)
grep -q '"cpu":null,"cpu_native":null,' <<<"$out" || bad "bench --engine interp --json names a CPU: $out"
out=$("$revc" bench models/fashion.rev "${tiny[@]}" --steps 1 --json 2>/dev/null)
grep -qE '"cpu":"[a-z0-9-]+","cpu_native":true,' <<<"$out" || bad "bench --json: $out"
grep -qE '"round_trip_ns":(\[[0-9]+,[0-9]+\]|null),' <<<"$out" || bad "bench --json has no host probe: $out"

[ $fail -eq 0 ] && echo "pass-options: ok"
exit $fail
