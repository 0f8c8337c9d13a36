#!/usr/bin/env bash
# Golden IR tests: for every tests/ir/PASS/CASE.ir, `revc dump --passes=PASS`
# must print exactly CASE.expected: IR text in, that one pass, IR text out.
# Each pass's input is small and hand-made, or the previous pass's output
# on the micro RevNet of shape/micro.ir (its passes(...) list says which).
# For a CASE.rev (a model spec: shape/tiny.rev tests the lowering), `revc
# dump CASE.rev --after PASS`.  A line "# revc-args: ..." in the input adds
# arguments.  With REVC_REGEN=1 the expected files are rewritten instead
# (the only way they change): review the new ones by eye, they are the
# oracle.
# Usage: run-golden.sh REVC DIR
set -u
revc=$(realpath "$1") dir=$2 fail=0 n=0
for passdir in "$dir"/*/; do
  pass=$(basename "$passdir")
  [ "$pass" = bad ] && continue
  for in in "$passdir"*.ir "$passdir"*.rev; do
    [ -e "$in" ] || continue
    n=$((n + 1))
    exp=${in%.*}.expected
    read -r -a extra <<<"$(sed -n 's/^# revc-args: *//p' "$in")"
    case "$in" in
      *.rev) args=(--after "$pass") ;;
      *) args=(--passes="$pass") ;;
    esac
    got=$(cd "$dir" && "$revc" dump "${in#"$dir"/}" "${args[@]}" "${extra[@]}" 2>&1; echo "exit=$?")
    if [ "${REVC_REGEN:-0}" = 1 ]; then
      printf '%s\n' "$got" | sed '$d' > "$exp"
      echo "regenerated $exp"
      continue
    fi
    if [ ! -f "$exp" ]; then
      echo "FAIL $in: no $exp (run with REVC_REGEN=1 to create it)"; fail=$((fail + 1)); continue
    fi
    if [ "$(tail -n1 <<<"$got")" != "exit=0" ] || ! diff -u "$exp" <(sed '$d' <<<"$got") >/dev/null; then
      echo "FAIL $in"; diff -u "$exp" <(sed '$d' <<<"$got"); fail=$((fail + 1))
    fi
  done
done
echo "golden: $n cases, $fail failed"
[ "$n" -gt 0 ] && [ "$fail" -eq 0 ]
