#!/usr/bin/env bash
# The conv tune (on by default, codegen/k_conv_tune.c) keeps train --resume
# bit for bit: 12 steps at once and 6 steps resumed to 12 end with the same
# parameters, state and momentum
#  - with a warm cache: the first run measures and writes it, the others
#    read it (bench --kernels: every tuned convolution "cached"), and it is
#    not rewritten;
#  - with an unwritable cache (a file where its directory would be):
#    nothing is measured, every convolution is the cost model's, and the
#    runs are the bits of REVC_CONV_TUNE=0's.
# And the check can fail: a cache choosing the other lowering of every
# shape trains to other bits.
# Usage: tune-resume.sh REVC ROOT
set -u
revc=$(realpath "$1") root=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$root" || exit 1
unset REVC_CONV REVC_CONV_BLAS REVC_CONV_TUNE
net=(models/fashion.rev --set units=1,1,1 --set batch=10 --threads 1)
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# train HOME NAME ARGS...: revc train with XDG_CACHE_HOME=HOME, its output in NAME.log.
train() {
  local home=$1 name=$2; shift 2
  XDG_CACHE_HOME=$home "$revc" train "${net[@]}" --data synthetic "$@" >"$tmp/$name.log" 2>&1 ||
    { bad "train $name"; tail -5 "$tmp/$name.log"; }
}
# same DIR1 DIR2 WHAT: the same .npy files, bitwise.
same() {
  local f ok=0
  for f in "$1"/*.npy; do
    cmp -s "$f" "$2/$(basename "$f")" || { ok=1; echo "  $3: $(basename "$f") differs"; break; }
  done
  [ "$(ls "$1" | wc -l)" -eq "$(ls "$2" | wc -l)" ] || { ok=1; echo "  $3: other files"; }
  return $ok
}
# resumed HOME NAME: 12 steps, and 6 steps resumed to 12, in NAME-a and NAME-b.
resumed() {
  train "$1" "$2-a" --steps 12 --save "$tmp/$2-a"
  train "$1" "$2-b" --steps 6 --save "$tmp/$2-b"
  train "$1" "$2-r" --steps 12 --resume "$tmp/$2-b" --save "$tmp/$2-b"
  same "$tmp/$2-a" "$tmp/$2-b" "$2" || bad "$2: the resumed run is not bitwise the uninterrupted one"
}
# whys HOME: the reason bench --kernels gives for each 3x3 stride-1
# convolution's lowering, its first word ("measured:", "cached:", "cost"), one a line.
whys() {
  XDG_CACHE_HOME=$1 "$revc" bench "${net[@]}" --kernels --steps 1 2>&1 | grep '^  conv ' | grep -v 'Winograd only' |
    sed 's/.* stride=1 pad=\[[0-9,]*\] (\([a-z]*:*\).*/\1/'
}

# ---- a warm cache
warm=$tmp/warm cache=$tmp/warm/revc/conv-tune
train "$warm" cold --steps 1
[ -s "$cache" ] && [ "$(head -n1 "$cache")" = "revc conv-tune 4" ] || bad "the first run wrote no cache"
before=$(md5sum < "$cache")
resumed "$warm" warm
[ "$(md5sum < "$cache")" = "$before" ] || bad "a warm cache was rewritten"
w=$(whys "$warm" | sort | uniq -c)
[ "$(echo "$w" | awk '{print $2}')" = "cached:" ] || { bad "with a warm cache, not every lowering is cached:"; echo "$w"; }

# ---- an unwritable cache: the cost model, nothing measured
ro=$tmp/ro
mkdir "$ro" && : > "$ro/revc"
resumed "$ro" ro
[ -f "$ro/revc" ] && [ ! -s "$ro/revc" ] || bad "the unwritable cache home changed"
w=$(whys "$ro" | sort | uniq -c)
[ "$(echo "$w" | awk '{print $2}')" = "cost" ] || { bad "with an unwritable cache, not every lowering is the cost model's:"; echo "$w"; }
REVC_CONV_TUNE=0 train "$tmp/off" off --steps 12 --save "$tmp/off-a"
same "$tmp/off-a" "$tmp/ro-a" "unwritable" || bad "the unwritable cache's run is not REVC_CONV_TUNE=0's"
[ -e "$tmp/off/revc/conv-tune" ] && bad "REVC_CONV_TUNE=0 made a cache"

# ---- the check can fail: every choice of the warm cache the other way
mkdir -p "$tmp/flip/revc"
awk -F'\t' 'BEGIN { OFS = "\t" } NR > 1 { $2 = $2 == "direct" ? "winograd2" : "direct" } { print }' "$cache" \
  > "$tmp/flip/revc/conv-tune"
train "$tmp/flip" flip --steps 12 --save "$tmp/flip-a"
same "$tmp/warm-a" "$tmp/flip-a" "flipped" >/dev/null && bad "the other lowerings trained to the same bits"

[ $fail -eq 0 ] && echo "tune-resume: bitwise with a warm cache ($(($(wc -l < "$cache") - 1)) shapes) and an unwritable one (the cost model's bits)"
exit $fail
