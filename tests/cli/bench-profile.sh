#!/usr/bin/env bash
# revc bench --profile (runtime/pool.c's per-call timing of a step compiled
# with marks, codegen/step.c): every kernel call of the step is timed once
# per step, the kinds' times add up to the calls' time, the threads' busy
# time fits in their wall time, the convolutions' FLOPs are the step's,
# one thread is never idle beside itself, and small elementwise groups
# run serially.  --engine interp is a usage
# error.
# Usage: bench-profile.sh REVC ROOT
set -u
revc=$(realpath "$1") root=$2 fail=0 n=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$root" || exit 1
tiny=(models/fashion.rev --set units=1,1,1 --set batch=4)

n=$((n + 1))
"$revc" bench "${tiny[@]}" --steps 1 --profile --engine interp >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -ne 2 ] || ! grep -q "^revc bench: error: --profile times native kernels: it needs --engine jit" "$tmp/err"; then
  echo "FAIL ($rc): --profile --engine interp"; cat "$tmp/err"; fail=$((fail + 1))
fi

for threads in 1 2; do
  for strategy in store revnet; do
    n=$((n + 1))
    what="--threads $threads --strategy $strategy"
    if ! "$revc" bench "${tiny[@]}" --steps 3 --profile --json --threads $threads --strategy $strategy \
        >"$tmp/out" 2>"$tmp/err"; then
      echo "FAIL: $what: revc bench"; cat "$tmp/err"; fail=$((fail + 1)); continue
    fi
    if ! python3 - "$tmp/out" "$threads" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); threads = int(sys.argv[2]); p = r["profile"]; k = p["kinds"]
calls = sum(x["calls"] for x in k)
assert abs(calls - r["kernel_calls"]) < 1e-9, ("calls per step", calls, r["kernel_calls"])
wall = sum(x["seconds"] for x in k)
assert abs(wall - p["calls_seconds"]) <= 1e-7 * (1 + len(k)), ("kinds' time", wall, p["calls_seconds"])
# The calls are timed inside the steps: their time is part of the same
# steps' mean (not their median: one step the host stalled, once 13 ms of
# a 1 ms step, puts the mean of three far above it).
assert 0 < wall <= p["mean_step_seconds"] * (1 + 1e-6), ("calls' time against the steps'", wall, p["mean_step_seconds"])
for x in k:
    assert 0 <= x["busy_seconds"] <= threads * x["seconds"] * (1 + 1e-9) + 1e-9, ("busy", x)
    assert 0 <= x["serial_seconds"] <= x["seconds"] * (1 + 1e-9), ("serial", x)
assert 0 <= p["serial_idle_share"] <= p["idle_share"] < 1, ("idle", p)
if threads == 1:
    assert p["serial_idle_share"] == 0 and p["idle_share"] < 0.05, ("idle with one thread", p)
conv = sum(x["flops"] for x in k if x["kind"].startswith("conv2d"))
assert abs(conv - 1e9 * r["gflop_per_step"]) <= 1e-3 * conv + 1e6, ("convolution FLOPs", conv, r["gflop_per_step"])
assert any(x["kind"] == "conv2d_dw direct finish" or x["kind"].endswith("finish") for x in k), "no finish kernel"
assert any(x["kind"].startswith("group ") for x in k), "no elementwise group"
# elementwise groups of 128 KiB or less run on the caller (codegen/step.c)
small = [x for x in k if x["kind"].startswith("group ") and x["bytes"] <= 131072]
assert small, "no small group"
for x in small:
    assert x["serial_seconds"] == x["seconds"], ("a small group was split", x)
PY
    then
      echo "FAIL: $what"; cat "$tmp/out"; fail=$((fail + 1))
    fi
  done
done

n=$((n + 1))
if ! "$revc" bench "${tiny[@]}" --steps 2 --profile >"$tmp/out" 2>&1 || ! grep -q "^  dispatcher " "$tmp/out" \
    || ! grep -q "^  conv2d direct " "$tmp/out"; then
  echo "FAIL: the text table"; cat "$tmp/out"; fail=$((fail + 1))
fi

echo "bench-profile: $n cases, $fail failed"
[ "$fail" -eq 0 ]
