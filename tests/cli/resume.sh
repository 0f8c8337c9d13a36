#!/usr/bin/env bash
# Crash-safe checkpoints and exact resumption: a run killed with SIGKILL in
# the middle of an epoch, resumed from its last checkpoint, ends with
# parameters, state and momentum bitwise identical to an uninterrupted run,
# and with the same losses from the resume point on.  revc eval of the
# result agrees between engines and CPU targets.
# Usage: resume.sh REVC ROOT
set -u
revc=$(realpath "$1") root=$2
tmp=$(mktemp -d); trap 'kill -9 $pid 2>/dev/null; rm -rf "$tmp"' EXIT
cd "$root" || exit 1
args=(models/fashion.rev --data synthetic --set units=1,1,1 --set batch=10 --steps 100 --json)

"$revc" train "${args[@]}" --save "$tmp/a" >"$tmp/a.log" 2>&1 || { echo "FAIL: uninterrupted run"; cat "$tmp/a.log"; exit 1; }

"$revc" train "${args[@]}" --save "$tmp/b" --save-every 7 >"$tmp/b1.log" 2>&1 &
pid=$!
# Kill it once a checkpoint exists, wherever it is.
for _ in $(seq 1 2000); do
  [ -e "$tmp/b/step.npy" ] && break
  sleep 0.01
done
sleep 0.$((RANDOM % 5))
kill -9 $pid 2>/dev/null
wait $pid 2>/dev/null
grep -q '"event":"summary"' "$tmp/b1.log" && { echo "FAIL: the run finished before it was killed"; exit 1; }
[ -e "$tmp/b/step.npy" ] || { echo "FAIL: no checkpoint survived the kill"; ls -la "$tmp"; exit 1; }
ls "$tmp" | grep -q 'tmp\.' && echo "note: the killed run left a temporary directory (it is never read)"

"$revc" train "${args[@]}" --resume "$tmp/b" --save "$tmp/b" >"$tmp/b2.log" 2>&1 || { echo "FAIL: resume"; cat "$tmp/b2.log"; exit 1; }

fail=0
for f in "$tmp"/a/*.npy; do
  cmp -s "$f" "$tmp/b/$(basename "$f")" || { echo "FAIL: $(basename "$f") differs"; fail=1; }
done
[ "$(ls "$tmp/a" | wc -l)" -eq "$(ls "$tmp/b" | wc -l)" ] || { echo "FAIL: different files"; fail=1; }
# Losses: every step the resumed run reported, the uninterrupted one reported the same.
first=$(grep -o '"step":[0-9]*' "$tmp/b2.log" | head -n1 | cut -d: -f2)
grep '"event":"step"' "$tmp/b2.log" | sed 's/,"window_loss.*//' > "$tmp/b.steps"
grep '"event":"step"' "$tmp/a.log" | sed 's/,"window_loss.*//' | awk -F'"step":' -v f="$first" '{split($2, s, ","); if (s[1] + 0 >= f) print}' > "$tmp/a.steps"
if ! diff -q "$tmp/a.steps" "$tmp/b.steps" >/dev/null || [ ! -s "$tmp/b.steps" ]; then
  echo "FAIL: losses differ after the resume at step $first"; diff "$tmp/a.steps" "$tmp/b.steps" | head; fail=1
fi

# revc eval of the checkpoint: the interpreter and native code (for the host
# and for x86-64-v3) give the same accuracy and nearly the same loss.
for e in "--engine interp" "--engine jit" "--engine jit --cpu x86-64-v3"; do
  # shellcheck disable=SC2086
  "$revc" eval models/fashion.rev --set units=1,1,1 --set batch=10 --data synthetic --params "$tmp/a" $e --json \
    >"$tmp/eval.json" 2>"$tmp/eval.err" || { echo "FAIL: eval $e"; cat "$tmp/eval.err"; fail=1; continue; }
  echo "$e $(cat "$tmp/eval.json")" >> "$tmp/evals"
done
if [ -s "$tmp/evals" ] && ! awk -F'"loss":|,"accuracy":|}' '
    NR == 1 { l = $2; a = $3; next }
    { d = $2 - l; if (d < 0) d = -d; if ($3 != a || d > 1e-4 * (l < 0 ? -l : l)) bad = 1 }
    END { exit bad }' "$tmp/evals"; then
  echo "FAIL: eval differs between engines:"; cat "$tmp/evals"; fail=1
fi
[ $fail -eq 0 ] && echo "resume: killed, resumed from step $((first - 1)) or later, bitwise identical ($(ls "$tmp/a" | wc -l) files)"
exit $fail
