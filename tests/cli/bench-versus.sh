#!/usr/bin/env bash
# revc bench --versus NAME=VALUE (driver/bench_versus.c): the second build
# (B) is built with the variable set, the first (A) without it, whatever
# was in the environment; the figures hang together (pairs, quartiles
# around the median, minimum at most the median); the text form names
# both builds; a setting that is not NAME=VALUE, or --versus with
# --profile, is a usage error.  (No figure of time is asserted.)
# Usage: bench-versus.sh REVC ROOT
set -u
revc=$(realpath "$1") root=$2 fail=0 n=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$root" || exit 1
tiny=(models/fashion.rev --set units=1,1,1 --set batch=4)

# $1: what; $2: "more", "same" or "fewer" (B's kernel calls against A's); the command after.
check_json() {
  local what=$1 want=$2; shift 2
  n=$((n + 1))
  if ! "$@" >"$tmp/out" 2>"$tmp/err"; then
    echo "FAIL: $what: revc bench"; cat "$tmp/err"; fail=$((fail + 1)); return
  fi
  if ! python3 - "$tmp/out" "$want" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); want = sys.argv[2]
a, b = r["a"], r["b"]
assert r["pairs"] == 3, r
for s in (a, b):
    assert 0 < s["min_step_seconds"] <= s["median_step_seconds"], s
    assert s["kernels"] > 0 and s["kernel_calls"] > 0, s
lo, hi = r["ratio_quartiles"]
assert 0 < lo <= r["ratio_median"] <= hi, r
ca, cb = a["kernel_calls"], b["kernel_calls"]
assert {"more": cb > ca, "same": cb == ca and a["kernels"] == b["kernels"], "fewer": cb < ca}[want], (want, ca, cb)
PY
  then
    echo "FAIL: $what"; cat "$tmp/out"; fail=$((fail + 1))
  fi
}

# Epilogues off in B only: more calls.
check_json "B without epilogues" more "$revc" bench "${tiny[@]}" --steps 3 --json --versus REVC_EPILOGUE=0
# A variable nothing reads: the same build twice.
check_json "a variable nothing reads" same "$revc" bench "${tiny[@]}" --steps 3 --json --versus REVC_NOTHING_READS_THIS=1
# Epilogues off in the environment, on in B: A has none, B has them.
check_json "A from the environment" fewer env REVC_EPILOGUE=0 "$revc" bench "${tiny[@]}" --steps 3 --json \
  --versus REVC_EPILOGUE=1

n=$((n + 1))
if ! "$revc" bench "${tiny[@]}" --steps 2 --versus REVC_EPILOGUE=0 >"$tmp/out" 2>"$tmp/err" ||
   ! grep -q "^  versus        A as given, B built with REVC_EPILOGUE=0; 2 pairs of steps, alternated$" "$tmp/out" ||
   ! grep -q "^  B / A         [0-9.]*, the median of the pairs' ratios (quartiles [0-9.]* and [0-9.]*)$" "$tmp/out"; then
  echo "FAIL: text"; cat "$tmp/out" "$tmp/err"; fail=$((fail + 1))
fi

# $1: the options; $2: the message.
usage() {
  n=$((n + 1))
  "$revc" bench "${tiny[@]}" --steps 1 $1 >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [ $rc -ne 2 ] || ! grep -qF "revc bench: error: $2" "$tmp/err" || [ -s "$tmp/out" ]; then
    echo "FAIL ($rc): $1"; cat "$tmp/err"; fail=$((fail + 1))
  fi
}
usage "--versus REVC_EPILOGUE" "--versus takes NAME=VALUE, an environment variable and its value, not 'REVC_EPILOGUE'"
usage "--versus =0" "--versus takes NAME=VALUE, an environment variable and its value, not '=0'"
usage "--versus A-B=0" "--versus takes NAME=VALUE, an environment variable and its value, not 'A-B=0'"
usage "--versus X=1 --profile" "--versus times the two steps alone: not with --profile, --gemm, --kernels or --dump-llvm"

echo "bench-versus: $n cases, $fail failed"
[ "$fail" -eq 0 ]
