#!/usr/bin/env bash
# Ahead-of-time compilation end to end: revc compile makes libtiny.so and
# tiny.h; a C program built against only those and OpenBLAS trains three
# steps and must match revc's JIT doing the same (losses within 1e-5
# relative, logits of the two models within 1e-4); the .o form links too,
# and --dump-llvm creates its directory with the module before and after
# optimisation.  --cpu: a library for x86-64-v3 (what Zen 3 runs) matches
# the JIT's x86-64-v3 code too, its header names the CPU, and its machine
# code has no 512-bit registers even on an AVX-512 host, while an object for
# x86-64-v4 has them even where it cannot run (cross-compiling).
# Usage: run.sh REVC ROOT
set -u
# The library's code takes the cost model's lowerings (revc compile does not
# time its convolutions: it may be for another machine); the JIT's are
# compared with it lowering for lowering, so without the conv tune.
export REVC_CONV_TUNE=0
revc=$(realpath "$1") root=$(realpath "$2")
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
spec=(models/fashion.rev --set units=1,1,1 --set batch=4)
fail() { echo "FAIL: $*"; exit 1; }
(cd "$root" && "$revc" compile "${spec[@]}" -o "$tmp/libtiny.so" --header "$tmp/tiny.h" --name tiny) || fail "revc compile"
cc -O2 -I. "$root/tests/aot/main.c" -L. -ltiny -lopenblas -lm -Wl,-rpath,"$tmp" -o main || fail "building against the library"
./main 3 - - || fail "writing the batch"
(cd "$root" && "$revc" init "${spec[@]}" --seed 3 --out "$tmp/init") 2>/dev/null || fail "revc init"
(cd "$root" && "$revc" grad "${spec[@]}" --params "$tmp/init" --input "$tmp/x.npy" --labels "$tmp/y.npy" \
  --train-steps 3 --lr 0.1 --params-out "$tmp/jit") > jit.txt || fail "revc grad --train-steps"
./main 3 "$tmp/jit" "$tmp/lib" > lib.txt || fail "the library's training does not match the JIT's"
paste jit.txt lib.txt | awk '{ d = $4 - $8; if (d < 0) d = -d; if (d > 1e-5 * ($4 < 0 ? -$4 : $4)) bad = 1 } END { exit bad }' \
  || { paste jit.txt lib.txt; fail "losses differ"; }
[ -f lib/s0.u0.f.conv0.w.npy ] && [ -f lib/s0.u0.f.conv0.w.mom.npy ] || fail "the library did not save its tensors"
# Its load reads parameters and checkpoints only, not gradients.
(cd "$root" && "$revc" grad "${spec[@]}" --params "$tmp/init" --input "$tmp/x.npy" --labels "$tmp/y.npy" \
  --out "$tmp/grads") || fail "revc grad --out"
./main 3 "$tmp/grads" "$tmp/lib3" > /dev/null 2> load.err && fail "the library loaded gradients as parameters"
grep -qx "load: '.*/grads' holds gradients (revc grad --out), not parameters" load.err ||
  { cat load.err; fail "loading gradients: not the error expected"; }
# The object form: one relocatable object with everything but BLAS.
(cd "$root" && "$revc" compile "${spec[@]}" -o "$tmp/tiny.o" --name tiny --dump-llvm "$tmp/ll") || fail "revc compile -o tiny.o"
[ -s ll/tiny.ll ] && [ -s ll/tiny.opt.ll ] || fail "--dump-llvm did not write the module before and after optimisation"
cc -O2 -I. "$root/tests/aot/main.c" tiny.o -lopenblas -lm -o main_o || fail "linking the object"
./main_o 3 "$tmp/jit" "$tmp/lib2" > lib2.txt || fail "the object's training does not match"
cmp -s lib.txt lib2.txt || fail "library and object disagree"
if [ "$(uname -m)" = x86_64 ]; then
  mkdir v3 && cd v3 || exit 1
  (cd "$root" && "$revc" compile "${spec[@]}" --cpu x86-64-v3 -o "$tmp/v3/libtiny.so" --header "$tmp/v3/tiny.h" --name tiny) \
    || fail "revc compile --cpu x86-64-v3"
  grep -q "for CPU x86-64-v3" tiny.h || fail "the header does not name the CPU"
  ! objdump -d libtiny.so | grep -q zmm || fail "x86-64-v3 code uses 512-bit registers"
  if grep -qw avx2 /proc/cpuinfo; then
    cc -O2 -I. "$root/tests/aot/main.c" -L. -ltiny -lopenblas -lm -Wl,-rpath,"$tmp/v3" -o main || fail "building against the x86-64-v3 library"
    cp ../x.npy ../y.npy .
    (cd "$root" && "$revc" grad "${spec[@]}" --cpu x86-64-v3 --params "$tmp/init" --input "$tmp/x.npy" --labels "$tmp/y.npy" \
      --train-steps 3 --lr 0.1 --params-out "$tmp/v3/jit") > jit.txt || fail "revc grad --cpu x86-64-v3"
    ./main 3 "$tmp/v3/jit" "$tmp/v3/lib" > lib.txt || fail "the x86-64-v3 library's training does not match the JIT's"
  fi
  cd "$tmp" || exit 1
  (cd "$root" && "$revc" compile "${spec[@]}" --cpu x86-64-v4 -o "$tmp/v4.o" --name tiny) || fail "revc compile --cpu x86-64-v4"
  objdump -d v4.o | grep -q zmm || fail "x86-64-v4 code has no 512-bit registers"
fi
# AdamW: the library's steps match the JIT's, and it saves m, v and t.
mkdir "$tmp/aw" && cd "$tmp/aw" || exit 1
aw=("${spec[@]}" --set optimizer=adamw)
(cd "$root" && "$revc" compile "${aw[@]}" -o "$tmp/aw/libtiny.so" --header "$tmp/aw/tiny.h" --name tiny) || fail "revc compile, AdamW"
cc -O2 -I. "$root/tests/aot/main.c" -L. -ltiny -lopenblas -lm -Wl,-rpath,"$tmp/aw" -o main || fail "building against the AdamW library"
(cd "$root" && "$revc" init "${aw[@]}" --seed 3 --out "$tmp/aw/init") 2>/dev/null || fail "revc init, AdamW"
(cd "$root" && "$revc" grad "${aw[@]}" --params "$tmp/aw/init" --input "$tmp/x.npy" --labels "$tmp/y.npy" \
  --train-steps 3 --lr 0.1 --params-out "$tmp/aw/jit") > jit.txt || fail "revc grad --train-steps, AdamW"
./main 3 "$tmp/aw/jit" "$tmp/aw/lib" > lib.txt || fail "the AdamW library's training does not match the JIT's"
paste jit.txt lib.txt | awk '{ d = $4 - $8; if (d < 0) d = -d; if (d > 1e-5 * ($4 < 0 ? -$4 : $4)) bad = 1 } END { exit bad }' \
  || { paste jit.txt lib.txt; fail "AdamW losses differ"; }
[ -f lib/adamw.t.npy ] && [ -f lib/s0.u0.f.conv0.w.m.npy ] && [ -f lib/s0.u0.f.conv0.w.v.npy ] || fail "the AdamW library did not save m, v and t"
cd "$tmp" || exit 1
echo "aot: library and object match the JIT: $(tr '\n' ' ' < lib.txt)"
