#!/usr/bin/env bash
# REVC_CONV (codegen/k_conv_choice.c): an unknown value is an error naming
# the accepted ones, in every command that compiles (it used to fall back
# to the cost model silently); the accepted values and an empty one work.
# REVC_OBJECT_CACHE (codegen/objcache.c) likewise; a second bench in a
# fresh cache home loads every object from it, none with REVC_OBJECT_CACHE=0.
# Usage: conv-env.sh REVC ROOT
set -u
revc=$(realpath "$1") root=$2 fail=0 n=0 here=$(dirname "$(realpath "$0")")
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$root" || exit 1
tiny=(models/fashion.rev --set units=1,1,1 --set batch=4)

source "$here/expect.sh"

want="REVC_CONV must be direct, winograd2, winograd4 or blas \(or unset\), not 'winograd3'"
REVC_CONV=winograd3 expect "^revc train: error: $want\$" "$revc" train "${tiny[@]}" --steps 1 --save "$tmp/save"
REVC_CONV=winograd3 expect "^revc bench: error: $want\$" "$revc" bench "${tiny[@]}" --steps 1
REVC_CONV=Direct expect "not 'Direct'" "$revc" bench "${tiny[@]}" --steps 1

for v in direct winograd2 winograd4 blas ""; do
  n=$((n + 1))
  if ! REVC_CONV=$v "$revc" bench "${tiny[@]}" --steps 1 --kernels >"$tmp/out" 2>"$tmp/err"; then
    echo "FAIL: REVC_CONV='$v' revc bench"; cat "$tmp/err"; fail=$((fail + 1))
  elif [ -n "$v" ] && ! grep -q "REVC_CONV=$v" "$tmp/out"; then
    echo "FAIL: REVC_CONV='$v': no convolution says so"; cat "$tmp/out"; fail=$((fail + 1))
  fi
done

want="REVC_OBJECT_CACHE must be 0 or 1 \(or unset\), not 'yes'"
REVC_OBJECT_CACHE=yes expect "^revc train: error: $want\$" "$revc" train "${tiny[@]}" --steps 1 --save "$tmp/save"
REVC_OBJECT_CACHE=yes expect "^revc bench: error: $want\$" "$revc" bench "${tiny[@]}" --steps 1

# cached HOME [ENV...]: "OBJECTS CACHED" from bench --json with XDG_CACHE_HOME=HOME.
cached() {
  local home=$1; shift
  env XDG_CACHE_HOME="$home" "$@" "$revc" bench "${tiny[@]}" --steps 1 --json |
    sed -n 's/.*"objects":\([0-9]*\),"objects_cached":\([0-9]*\).*/\1 \2/p'
}
for run in cold warm off; do
  n=$((n + 1))
  case $run in
    cold) got=$(cached "$tmp/home") ;;
    warm) got=$(cached "$tmp/home") ;;
    off) got=$(cached "$tmp/home" REVC_OBJECT_CACHE=0) ;;
  esac
  objects=${got% *} hits=${got#* }
  case $run in warm) want=$objects ;; *) want=0 ;; esac
  if [ -z "$got" ] || [ "$objects" -lt 2 ] || [ "$hits" != "$want" ]; then
    echo "FAIL: $run bench: objects and cached '$got', want $want cached"; fail=$((fail + 1))
  fi
done

echo "conv-env: $n cases, $fail failed"
[ "$fail" -eq 0 ]
