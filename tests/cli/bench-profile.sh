#!/usr/bin/env bash
# revc bench --profile (runtime/pool.c's per-call timing of a step compiled
# with marks, codegen/step.c): every kernel call of the step is timed once
# per step, the kinds' times add up to the calls' time, the threads' busy
# time fits in their wall time (and its split of the idle time, before
# first chunks and waiting for the slowest, in their idle time), the
# chunks' times add up to the parallel calls' busy time and the waiting
# that repeats every step is within the waiting, the convolutions' FLOPs
# are the step's,
# one thread is never idle beside itself, and small elementwise groups
# run serially; --profile-calls lists the longest calls with their nodes.
# --engine interp is a usage error.
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
    # the idle time in parallel calls, before first chunks and after last
    # ones, is part of the kind's idle time
    idle = threads * x["seconds"] - x["busy_seconds"]
    assert 0 <= x["late_seconds"] and 0 <= x["wait_seconds"], ("late, wait", x)
    assert x["late_seconds"] + x["wait_seconds"] <= idle + 1e-7, ("late + wait > idle", x)
    if x["serial_seconds"] == x["seconds"]:
        assert x["late_seconds"] == 0 and x["wait_seconds"] == 0, ("late or wait in serial calls", x)
assert 0 <= p["serial_idle_share"] <= p["idle_share"] < 1, ("idle", p)
assert p["late_idle_share"] + p["wait_idle_share"] <= p["idle_share"] - p["serial_idle_share"] + 1e-6, ("split", p)
if threads == 1:
    assert p["serial_idle_share"] == 0 and p["idle_share"] < 0.05, ("idle with one thread", p)
    assert p["late_idle_share"] == 0 and p["wait_idle_share"] == 0, ("late or wait with one thread", p)
# chunk t of every parallel call: together, the threads' time in parallel
# calls; what repeats of the waiting for the slowest chunk is part of the
# idle time before first chunks and after last ones (runtime/pool.c)
chunks = p["chunk_seconds"]
assert len(chunks) == threads and min(chunks) >= 0, ("chunk_seconds", chunks)
busy = sum(x["busy_seconds"] - x["serial_seconds"] for x in k)
assert abs(sum(chunks) - busy) <= 1e-6 * busy + 1e-8, ("chunks against busy", chunks, busy)
late_wait = sum(x["late_seconds"] + x["wait_seconds"] for x in k)
assert 0 <= p["repeat_wait_seconds"] <= late_wait + 1e-8, ("repeat_wait", p["repeat_wait_seconds"], late_wait)
if threads == 1:
    assert p["repeat_wait_seconds"] == 0, ("repeat_wait with one thread", p)
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
if ! "$revc" bench "${tiny[@]}" --steps 2 --profile >"$tmp/out" 2>&1 \
    || ! grep -q "^  dispatcher .* before a thread's first chunk, .* waiting for the slowest chunk" "$tmp/out" \
    || ! grep -q "^  chunks  *chunk 0 .* ms, chunk 1 .* ms a step .* repeats" "$tmp/out" \
    || ! grep -q "^  conv2d direct " "$tmp/out"; then
  echo "FAIL: the text table"; cat "$tmp/out"; fail=$((fail + 1))
fi

# --profile-calls K: the K longest calls, longest first, each of a kind the
# table has and no longer than it, each naming a node that the dump after
# plan has, with an op of its kind; a call's waiting within its idle time,
# its unevenness a fraction (0 when serial).
n=$((n + 1))
if ! "$revc" bench "${tiny[@]}" --steps 2 --profile-calls 5 --json >"$tmp/out" 2>"$tmp/err" \
    || ! "$revc" dump "${tiny[@]}" --after plan >"$tmp/dump" 2>"$tmp/err" \
    || ! python3 - "$tmp/out" "$tmp/dump" <<'PY'
import json, re, sys
r = json.load(open(sys.argv[1])); p = r["profile"]; calls = p["calls"]
# "  %370 = recompute conv2d(...": the op is the word before the parenthesis
dump = {m.group(1): m.group(2).split()[-1] for m in re.finditer(r"^  (%\d+) = ([^(]*)\(", open(sys.argv[2]).read(), re.M)}
kinds = {k["kind"]: k["seconds"] for k in p["kinds"]}
assert len(calls) == 5, calls
assert all(a["seconds"] >= b["seconds"] for a, b in zip(calls, calls[1:])), ("not longest first", calls)
assert len({c["index"] for c in calls}) == 5, ("a call twice", calls)
for c in calls:
    assert c["kind"] in kinds and c["seconds"] <= kinds[c["kind"]] * (1 + 1e-9), ("kind", c)
    assert 0 <= c["index"] < r["kernel_calls"] and 0 <= c["busy_seconds"], ("index", c)
    idle = 2 * c["seconds"] - c["busy_seconds"]
    assert 0 <= c["late_seconds"] and 0 <= c["wait_seconds"], ("late, wait", c)
    assert c["late_seconds"] + c["wait_seconds"] <= idle + 1e-7, ("late + wait > idle", c)
    assert 0 <= c["uneven"] <= 1 and (c["parallel"] or c["uneven"] == 0), ("uneven", c)
    assert 0 <= c["slowest_chunk"] < 2, ("slowest_chunk", c)
    ref = c["node"].split()[0]
    words = c["kind"].split()
    ops = (words[1] if words[0] == "group" else words[0]).split("+")
    assert ref in dump and dump[ref] in ops, ("node", c, dump.get(ref))
PY
then
  echo "FAIL: --profile-calls"; cat "$tmp/out" "$tmp/err"; fail=$((fail + 1))
fi
n=$((n + 1))
"$revc" bench "${tiny[@]}" --steps 1 --profile-calls 0 >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -ne 2 ] || ! grep -q "^revc bench: error: .*--profile-calls" "$tmp/err"; then
  echo "FAIL ($rc): --profile-calls 0"; cat "$tmp/err"; fail=$((fail + 1))
fi
n=$((n + 1))
if ! "$revc" bench "${tiny[@]}" --steps 1 --profile-calls 3 >"$tmp/out" 2>&1 \
    || [ "$(grep -cE '^  [0-9]+ +%[0-9]+ ' "$tmp/out")" -ne 3 ]; then
  echo "FAIL: --profile-calls text"; cat "$tmp/out"; fail=$((fail + 1))
fi

echo "bench-profile: $n cases, $fail failed"
[ "$fail" -eq 0 ]
