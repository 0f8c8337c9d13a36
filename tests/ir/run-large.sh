#!/usr/bin/env bash
# Large generated IR files through `revc dump`: parsing and verifying take
# time linear in the graph (no timing is asserted: meson's timeout is the
# bound), every violation is collected, and the command line prints at most
# 20 diagnostics and then a count of the rest.
#   reversed.ir   a 200,000-node chain written last node first: 199,999
#                 "comes later" errors
#   chain.ir      the same chain in order: verifies and prints back the same
#   updates.ir    40,000 in-place updates, each ordered after its parameter's
#                 reader only through a chain, every 1000th not at all
#   chained.ir    the same updates, all after the end of one chain through
#                 every reader (each update's ancestors are the whole graph)
#   overlaps.ir   100,000 buffers at one offset, all live at once
# Usage: run-large.sh REVC
set -u
revc=$1 fail=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

python3 - "$tmp" <<'PY' || { echo "large: cannot generate the inputs"; exit 1; }
import sys
d = sys.argv[1]
n = 200000
chain = ['  %0 = input {name="x"} : f32[2,4]']
chain += ['  %%%d = relu(%%%d) : f32[2,4]' % (i, i - 1) for i in range(1, n - 1)]
chain.append('  %%%d = output(%%%d) {name="y"} : f32[2,4]' % (n - 1, n - 2))
with open(d + '/chain.ir', 'w') as f:
    f.write('graph @chain {\n' + '\n'.join(chain) + '\n}\n')
with open(d + '/reversed.ir', 'w') as f:
    f.write('graph @chain {\n' + '\n'.join(reversed(chain)) + '\n}\n')
# Parameters, then their readers, then chains from the readers, then the
# updates at the end: each update's search spans the whole graph.
m = 40000
lines = ['  %0 = input {name="lr"} : f32[]']
w = lambda i: 1 + i
v = lambda i: 1 + m + i
r = lambda i: 1 + 2 * m + i
c = lambda i: 1 + 3 * m + i
lines += ['  $w%d = param : f32[4]' % i for i in range(m)]
lines += ['  $v%d = state : f32[4]' % i for i in range(m)]
lines += ['  %%%d = relu($w%d) : f32[4]' % (r(i), i) for i in range(m)]
lines += ['  %%%d = scale(%%%d) {factor=2} : f32[4]' % (c(i), r(i)) for i in range(m)]
lines += ['  %%%d = sgd($w%d, $v%d, %%0) : f32[4]%s' % (1 + 4 * m + i, i, i, '' if i % 1000 == 999 else ' after(%%%d)' % c(i))
          for i in range(m)]
with open(d + '/updates.ir', 'w') as f:
    f.write('graph @updates {\n' + '\n'.join(lines) + '\n}\n')
# The same updates all after the end of one chain through every reader.
lines = lines[:1 + 3 * m]
lines.append('  %%%d = scale(%%%d) {factor=1} : f32[4]' % (c(0), r(0)))
lines += ['  %%%d = add(%%%d, %%%d) : f32[4]' % (c(i), c(i - 1), r(i)) for i in range(1, m)]
lines += ['  %%%d = sgd($w%d, $v%d, %%0) : f32[4] after(%%%d)' % (1 + 4 * m + i, i, i, c(m - 1)) for i in range(m)]
with open(d + '/chained.ir', 'w') as f:
    f.write('graph @chained {\n' + '\n'.join(lines) + '\n}\n')
k = 100000
lines = ['  %%0 = input {name="x"} : f32[4] mem(0, 16) live(0, %d)' % k]
lines += ['  %%%d = relu(%%0) : f32[4] mem(0, 16) live(%d, %d)' % (i, i, k) for i in range(1, k + 1)]
with open(d + '/overlaps.ir', 'w') as f:
    f.write('graph @overlaps {\n' + '\n'.join(lines) + '\n}\n')
PY

# expect FILE STATUS FIRST-LINE LAST-LINE: revc dump's exit status, its
# first and last line on stderr, and at most 20 diagnostics of 3 lines.
expect() {
  local file=$tmp/$1 status=$2 first=$3 last=$4
  "$revc" dump "$file" -o "$tmp/out.ir" 2>"$tmp/err"
  local rc=$?
  if [ $rc -ne "$status" ]; then
    echo "FAIL $1: exit $rc, want $status"; head -5 "$tmp/err"; fail=1; return
  fi
  if [ "$(wc -l <"$tmp/err")" -gt 61 ] || [ "$(grep -c 'error:' "$tmp/err")" -gt 20 ]; then
    echo "FAIL $1: more than 20 diagnostics printed"; fail=1
  fi
  if [ "$(head -n1 "$tmp/err")" != "$first" ] || [ "$(tail -n1 "$tmp/err")" != "$last" ]; then
    printf 'FAIL %s:\n  got:  %s\n        %s\n  want: %s\n        %s\n' "$1" "$(head -n1 "$tmp/err")" \
      "$(tail -n1 "$tmp/err")" "$first" "$last"; fail=1
  fi
}

expect reversed.ir 1 "$tmp/reversed.ir:2:3: error: %199999 (output): uses %199998, which comes later in the graph" \
  "... and 199979 more errors"
expect updates.ir 1 "$tmp/updates.ir:161002:3: error: %161000 (sgd): updates \$w999 in place but is not ordered after %81000, which reads it" \
  "... and 20 more errors"
expect overlaps.ir 1 "$tmp/overlaps.ir:3:3: error: %1 (relu): buffer [0, 16) overlaps the buffer of %0 [0, 16) while both are live" \
  "... and 99980 more errors"
"$revc" dump "$tmp/chain.ir" -o "$tmp/out.ir" 2>"$tmp/err" && cmp -s "$tmp/chain.ir" "$tmp/out.ir" ||
  { echo "FAIL chain.ir: does not print back as it was read"; head -3 "$tmp/err"; fail=1; }
"$revc" dump "$tmp/chained.ir" -o "$tmp/out.ir" 2>"$tmp/err" ||
  { echo "FAIL chained.ir: does not verify"; head -3 "$tmp/err"; fail=1; }
[ $fail -eq 0 ] && echo "large: ok"
exit $fail
