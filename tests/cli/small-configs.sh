#!/usr/bin/env bash
# revc grad on small configurations no preset has (odd init kernels, stages
# of one unit, stride-2 and stride-3 stages, max pooling, a bottleneck),
# through the command line as a user runs it: under every engine and
# strategy each must succeed, and in f64 every gradient must be within
# 1e-10 (max|a-b| / max|b|) of store on the interpreter.
# Usage: small-configs.sh REVC ROOT
set -u
revc=$(realpath "$1") root=$2 fail=0
cd "$root" || exit 1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

configs=(
  "input=3,8,8 init_filters=8 init_kernel=5 units=1,2 filters=8,16 strides=1,2"
  "input=1,12,12 init_filters=4 init_kernel=7 init_stride=2 init_max_pool=true units=2,1 filters=4,8 strides=1,3"
  "input=3,8,8 init_filters=8 init_kernel=5 units=1,2 filters=8,16 strides=1,2 block=bottleneck"
)
for c in "${!configs[@]}"; do
  sets=(--set batch=2)
  for kv in ${configs[$c]}; do sets+=(--set "$kv"); done
  dir=$tmp/$c
  mkdir -p "$dir"
  chw=$(sed -n 's/.*input=\([0-9,]*\).*/\1/p' <<<"${configs[$c]}")
  "$revc" init models/fashion.rev "${sets[@]}" --out "$dir/p" >/dev/null || { echo "FAIL: init ${configs[$c]}"; fail=1; continue; }
  # The batch: float64 [2,C,H,W] and int32 labels, as .npy files.
  python3 tests/cli/npy.py batch "$dir" "$chw" 5 || { echo "FAIL: cannot write the batch"; exit 1; }
  for engine in interp jit; do
    for s in store revnet checkpoint; do
      if ! "$revc" grad models/fashion.rev "${sets[@]}" --params "$dir/p" --input "$dir/x.npy" --labels "$dir/y.npy" \
           --out "$dir/g-$engine-$s" --strategy "$s" --engine "$engine" --dtype f64 >"$dir/out" 2>&1; then
        echo "FAIL: ${configs[$c]}: grad --engine $engine --strategy $s"; cat "$dir/out"; fail=1
      fi
    done
  done
  python3 tests/cli/npy.py same "$dir/g-interp-store" "$dir"/g-* >"$dir/same" ||
    { echo "FAIL: ${configs[$c]}: gradients differ"; cat "$dir/same"; fail=1; }
done
[ $fail -eq 0 ] && echo "small-configs: ok"
exit $fail
