#!/usr/bin/env bash
# revc train's summary splits its time: the evaluations' seconds are part
# of the wall time (the speed, step_seconds, leaves them out), and the JIT's compile (before the run) is given, 0
# under the interpreter, in the text and in --json.
# Usage: train-times.sh REVC ROOT
set -u
revc=$(realpath "$1") root=$2 fail=0
cd "$root" || exit 1
tiny=(models/fashion.rev --set units=1,1,1 --set batch=10 --data synthetic --steps 2 --eval-every 1)

for engine in jit interp; do
	out=$("$revc" train "${tiny[@]}" --engine "$engine" --json 2>/dev/null | tail -n 1)
	/usr/bin/python3 -c '
import json, sys
s, engine = json.loads(sys.argv[1]), sys.argv[2]
ok = 0 < s["eval_seconds"] <= s["wall_seconds"]
# the speed leaves the evaluations out: steps x step_seconds = wall - eval
ok = ok and abs(s["step_seconds"] * s["steps"] + s["eval_seconds"] - s["wall_seconds"]) < 3e-3  # (printed to the ms)
ok = ok and ((s["compile_seconds"] > 0) if engine == "jit" else s["compile_seconds"] == 0)
sys.exit(0 if ok else 1)' "$out" "$engine" || { echo "FAIL: $engine: $out"; fail=1; }
	text=$("$revc" train "${tiny[@]}" --engine "$engine" 2>/dev/null | grep 'wall time')
	want='^  wall time       [0-9.]+ s \(evaluation [0-9.]+ s\)'
	[ "$engine" = jit ] && want="$want; compiling before it [0-9.]+ s$" || want="$want$"
	[[ $text =~ $want ]] || { echo "FAIL: $engine: '$text'"; fail=1; }
done
exit $fail
