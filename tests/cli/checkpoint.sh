#!/usr/bin/env bash
# Checkpoints and output directories are safe: revc replaces only a directory
# it wrote (revc-manifest.txt, nothing else in it) or an empty one, refuses
# any other before the work and touches nothing; a bigger model's checkpoint
# loads into a smaller one, a missing or mis-shaped tensor is named; a FIFO in
# place of a .npy is an error, not a hang; SIGINT and SIGTERM during training
# end with 130/143, one line, the last checkpoint whole and no D.tmp.* left,
# and before training they stop it there;
# the next save removes the temporaries a killed run left, and only those,
# also one killed part way through removing the checkpoint it replaced.
# Usage: checkpoint.sh REVC ROOT KILLUNLINK (tests/cli/killunlink.c, built)
set -u
revc=$(realpath "$1") root=$(realpath "$2") killunlink=$(realpath "$3") fail=0 n=0
tmp=$(mktemp -d) kt=; trap 'kill -9 $pid 2>/dev/null; rm -rf "$tmp" ${kt:+"$kt"}' EXIT
pid=
cd "$root" || exit 1
# Trained with the interpreter: no compile time, the same checkpoints.
small=(models/fashion.rev --data synthetic --set batch=8 --set units=1,1,1)
big=(models/fashion.rev --data synthetic --set batch=8 --set units=2,2,2)

bad() { echo "FAIL: $*"; fail=$((fail + 1)); }
# expect STATUS WANT-REGEX CMD...: exits STATUS, and stderr is exactly one
# line, an error matching WANT-REGEX.
expect() {
  local status=$1 want=$2; shift 2
  n=$((n + 1))
  timeout 60 "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
  local rc=$?
  if [ $rc -ne "$status" ] || [ "$(wc -l < "$tmp/err")" -ne 1 ] || ! grep -qE "error: .*$want" "$tmp/err"; then
    bad "($rc, expected $status): $*"; sed 's/^/  | /' "$tmp/err" | head -5
  fi
}
# The listing and contents of a tree, to see that nothing changed.
snapshot() { (cd "$1" && find . -print0 | sort -z | xargs -0 ls -ld --time-style=+ | awk '{ $6 = ""; print }';
  find . -type f -print0 | sort -z | xargs -0 -r md5sum); }

# ---- a directory that is not a checkpoint is refused and left as it was ----
mkdir -p "$tmp/w/u/sub"; echo x > "$tmp/w/u/thesis.txt"; echo y > "$tmp/w/u/sub/a.txt"
before=$(snapshot "$tmp/w")
expect 1 "--save: '.*w/u' is not empty and is not a directory revc wrote" \
  "$revc" train "${small[@]}" --engine interp --steps 2 --save "$tmp/w/u"
expect 1 "--out: '.*w/u' is not empty and is not a directory revc wrote" \
  "$revc" init models/fashion.rev --out "$tmp/w/u"
expect 1 "'.*w/u' is not empty and is not a directory revc wrote" \
  "$revc" grad models/fashion.rev --params tests/data/fashion-b4/params --input tests/data/fashion-b4/x.npy \
  --labels tests/data/fashion-b4/y.npy --out "$tmp/w/u"
[ "$(snapshot "$tmp/w")" = "$before" ] || { bad "the user's directory changed"; ls -laR "$tmp/w"; }
[ "$(cat "$tmp/w/u/thesis.txt")" = x ] && [ "$(cat "$tmp/w/u/sub/a.txt")" = y ] || bad "thesis.txt or sub/a.txt lost"
# Paths that cannot be renamed: refused before training (one line: no progress).
cd "$tmp/w/u" || exit 1
expect 1 "'\.' cannot be replaced as a whole" "$revc" train "${small[@]/#models/$root/models}" --engine interp --steps 2 --save .
expect 1 "'\.\.' cannot be replaced" "$revc" train "${small[@]/#models/$root/models}" --engine interp --steps 2 --save ..
cd "$root" || exit 1
expect 1 "cannot be replaced as a whole" "$revc" init models/fashion.rev --out "$tmp/w/u/sub/."
expect 1 "cannot be replaced as a whole" "$revc" init models/fashion.rev --out /
[ "$(snapshot "$tmp/w")" = "$before" ] || { bad "refusing '.' changed the directory"; ls -laR "$tmp/w"; }

# ---- replacing what revc wrote works; one foreign file in it stops that ----
"$revc" train "${big[@]}" --engine interp --steps 2 --save "$tmp/ck2" >/dev/null 2>&1 || bad "a first checkpoint"
"$revc" train "${big[@]}" --engine interp --steps 3 --resume "$tmp/ck2" --save "$tmp/ck2" >/dev/null 2>&1 || bad "replacing a checkpoint"
grep -qx 'step 3' "$tmp/ck2/revc-manifest.txt" && grep -qx 'kind checkpoint' "$tmp/ck2/revc-manifest.txt" ||
  bad "the manifest does not say step 3 of a checkpoint"
mkdir "$tmp/empty"
"$revc" init models/fashion.rev --out "$tmp/empty" 2>/dev/null || bad "init into an empty directory"
"$revc" init models/fashion.rev --out "$tmp/empty" --seed 5 2>/dev/null || bad "init over its own output"
for g in 1 2; do
  "$revc" grad models/fashion.rev --params tests/data/fashion-b4/params --input tests/data/fashion-b4/x.npy \
    --labels tests/data/fashion-b4/y.npy --out "$tmp/g" --state-out "$tmp/s" || bad "grad --out, time $g"
done
grep -qx 'kind gradients' "$tmp/g/revc-manifest.txt" && grep -qx 'kind state' "$tmp/s/revc-manifest.txt" ||
  bad "grad's directories are not marked"
# Gradients and running statistics are not parameters: refused by their kind.
expect 1 "'.*/g' holds gradients \(revc grad --out\), not parameters" \
  "$revc" eval models/fashion.rev --data synthetic --params "$tmp/g"
expect 1 "'.*/s' holds running statistics \(revc grad --state-out\), not parameters" \
  "$revc" grad models/fashion.rev --params "$tmp/s" --input tests/data/fashion-b4/x.npy \
  --labels tests/data/fashion-b4/y.npy --out "$tmp/g2"
cp -r "$tmp/ck2" "$tmp/ck2x"; echo notes > "$tmp/ck2x/notes.txt"
expect 1 "--save: '.*ck2x' holds 'notes.txt', which revc did not write there" \
  "$revc" train "${small[@]}" --engine interp --steps 2 --save "$tmp/ck2x"
[ -f "$tmp/ck2x/notes.txt" ] && [ -f "$tmp/ck2x/init.conv.w.npy" ] || bad "the refused checkpoint changed"
ls -d "$tmp"/*.tmp.* "$tmp"/w/*.tmp.* 2>/dev/null && bad "temporary directories left"

# ---- which checkpoints load: the model's tensors, each with its shape ----
expect_ok() { n=$((n + 1)); timeout 120 "$@" >"$tmp/out" 2>"$tmp/err" </dev/null || { bad "$*"; tail -n3 "$tmp/err"; }; }
expect_ok "$revc" eval "${small[@]}" --params "$tmp/ck2"
expect_ok "$revc" train "${small[@]}" --engine interp --steps 5 --resume "$tmp/ck2" --save "$tmp/ck1"
grep -q "error\|warning" "$tmp/err" && bad "loading a bigger checkpoint said something: $(cat "$tmp/err")"
deeper=(models/fashion.rev --data synthetic --set batch=8 --set units=3,3,3)
wider=(models/fashion.rev --data synthetic --set batch=8 --set units=2,2,2 --set filters=16,32,128)
expect 1 "'.*ck2' has no tensor 's0\.u2\.f\.bn0\.gamma', which the model needs" "$revc" eval "${deeper[@]}" --params "$tmp/ck2"
expect 1 "cannot resume: '.*ck2' has no tensor 's0\.u2\.f\.bn0\.gamma'" "$revc" train "${deeper[@]}" --engine interp --steps 5 --resume "$tmp/ck2"
expect 1 "s2\.u0\.f\.conv0\.w\.npy: shape \[32,16,3,3\] does not match the model's f32\[64,16,3,3\] for 's2\.u0\.f\.conv0\.w'" \
  "$revc" eval "${wider[@]}" --params "$tmp/ck2"
expect 1 "cannot resume: .*ck2/s2\.u0\..*: shape \[32.*\] does not match the model's f32\[64.* for 's2\.u0\." \
  "$revc" train "${wider[@]}" --engine interp --steps 5 --resume "$tmp/ck2"
# The manifest's list is checked before any file is read: a tensor missing
# late in the model is named, not a broken file early in it.
cp -r "$tmp/ck2" "$tmp/late"; sed -i '/^tensor final\.dense\.b /d' "$tmp/late/revc-manifest.txt"
head -c 100 "$tmp/ck2/init.conv.w.npy" > "$tmp/late/init.conv.w.npy"
expect 1 "'.*late' has no tensor 'final\.dense\.b', which the model needs" "$revc" eval "${big[@]}" --params "$tmp/late"
# A checkpoint's manifest without its step line says so.
cp -r "$tmp/ck2" "$tmp/nostep"; sed -i '/^step /d' "$tmp/nostep/revc-manifest.txt"
expect 1 "cannot resume: .*nostep/revc-manifest.txt has no step line" \
  "$revc" train "${big[@]}" --engine interp --steps 5 --resume "$tmp/nostep"
# Without a manifest (a directory NumPy wrote) the same rule, file by file.
cp -r "$tmp/ck2" "$tmp/plain"; rm "$tmp/plain/revc-manifest.txt"
expect_ok "$revc" eval "${small[@]}" --params "$tmp/plain"
expect 1 "plain/s0\.u2\.f\.bn0\.gamma\.npy: no such file: the model needs the tensor 's0\.u2\.f\.bn0\.gamma'" \
  "$revc" eval "${deeper[@]}" --params "$tmp/plain"
cp "$tmp/ck2/s1.u0.f.conv0.w.npy" "$tmp/plain/s0.u0.f.conv0.w.npy"
expect 1 "s0\.u0\.f\.conv0\.w\.npy: shape \[16,8,3,3\] does not match the model's f32\[8,8,3,3\]" \
  "$revc" eval "${small[@]}" --params "$tmp/plain"
# A FIFO where a .npy belongs: an error at once, not a wait for a writer.
cp -r "$tmp/ck2" "$tmp/fifo"; rm "$tmp/fifo/init.conv.w.npy"; mkfifo "$tmp/fifo/init.conv.w.npy"
expect 1 "fifo/init\.conv\.w\.npy' is not a regular file" "$revc" eval "${big[@]}" --params "$tmp/fifo"
expect 1 "fifo/init\.conv\.w\.npy' is not a regular file" "$revc" train "${big[@]}" --engine interp --steps 5 --resume "$tmp/fifo"
expect 1 "fifo/init\.conv\.w\.npy' is not a regular file" "$revc" grad "${big[@]:0:1}" --set units=2,2,2 \
  --params "$tmp/fifo" --input tests/data/fashion-b4/x.npy --labels tests/data/fashion-b4/y.npy --out "$tmp/gf"
rm "$tmp/fifo/init.conv.w.npy"; cp "$tmp/ck2/init.conv.w.npy" "$tmp/fifo/"
rm "$tmp/fifo/step.npy"; mkfifo "$tmp/fifo/step.npy"
expect 1 "fifo/step\.npy' is not a regular file" "$revc" train "${big[@]}" --engine interp --steps 5 --resume "$tmp/fifo"
mkfifo "$tmp/x.npy"
expect 1 "x\.npy' is not a regular file" "$revc" grad models/fashion.rev --params tests/data/fashion-b4/params \
  --input "$tmp/x.npy" --labels tests/data/fashion-b4/y.npy --out "$tmp/gx"

# ---- SIGINT and SIGTERM: 130/143, one line, the last checkpoint whole ----
# Checkpoints at every step or every third, so signals land in saves too.
for try in 1 2 3 4 5 6; do
  sig=INT status=130; [ $((try % 2)) -eq 0 ] && sig=TERM status=143
  every=$(( try <= 4 ? 1 : 3 ))
  d=$tmp/sig$try
  "$revc" train "${small[@]}" --engine interp --steps 100000 --save "$d" --save-every $every >"$tmp/sig.out" 2>"$tmp/sig.err" &
  pid=$!
  for _ in $(seq 1 3000); do [ -e "$d/step.npy" ] && break; sleep 0.01; done
  sleep 0.$((RANDOM % 4))
  kill -$sig $pid; wait $pid; rc=$?; pid=
  n=$((n + 1))
  line=$(grep -c 'interrupted' "$tmp/sig.err")
  last=$(tail -n1 "$tmp/sig.err")
  if [ $rc -ne $status ] || [ "$line" -ne 1 ] ||
     ! grep -qE "^revc train: interrupted by SIG$sig after step [0-9]+ of 100000; the last checkpoint \(step [0-9]+\) is in $d\$" <<<"$last"; then
    bad "SIG$sig (try $try): exit $rc, expected $status"; tail -n3 "$tmp/sig.err" | sed 's/^/  | /'; continue
  fi
  ls -d "$d".tmp.* 2>/dev/null && bad "SIG$sig (try $try) left a temporary directory"
  said=$(sed -E 's/.*checkpoint \(step ([0-9]+)\).*/\1/' <<<"$last")
  grep -qx "step $said" "$d/revc-manifest.txt" || bad "SIG$sig (try $try): the checkpoint is not the one named (step $said)"
  "$revc" eval "${small[@]}" --params "$d" >/dev/null 2>&1 || bad "SIG$sig (try $try): the checkpoint does not load"
  rm -rf "$d"
done
# Before training (loading, compiling, reading data): stopped there, not
# after the work is done; one line, nothing written.  The signal goes as
# soon as the handler is in place (SigCgt in /proc), long before the JIT
# has compiled the step.
for sig in INT TERM; do
  status=130; [ $sig = TERM ] && status=143
  d=$tmp/early$sig
  "$revc" train "${big[@]}" --engine jit --steps 100000 --save "$d" >"$tmp/sig.out" 2>"$tmp/sig.err" &
  pid=$!
  for _ in $(seq 1 3000); do
    mask=$(awk '/^SigCgt:/ { print $2 }' /proc/$pid/status 2>/dev/null)
    [ -n "$mask" ] && (( (0x$mask >> 1) & 1 )) && break; sleep 0.01
  done
  kill -$sig $pid; wait $pid; rc=$?; pid=
  n=$((n + 1))
  if [ $rc -ne $status ] || [ "$(wc -l < "$tmp/sig.err")" -ne 1 ] ||
     ! grep -qx "revc train: interrupted by SIG$sig before training started; nothing was written" "$tmp/sig.err"; then
    bad "SIG$sig before training: exit $rc, expected $status"; sed 's/^/  | /' "$tmp/sig.err" | head -3
  fi
  ls -d "$d" "$d".tmp.* 2>/dev/null && bad "SIG$sig before training wrote something"
done
# The interrupted checkpoint continues (once is enough: resume.sh checks bits).
"$revc" train "${small[@]}" --engine interp --steps 3 --save "$tmp/sigr" >/dev/null 2>&1 &&
  "$revc" train "${small[@]}" --engine interp --steps 5 --resume "$tmp/sigr" --save "$tmp/sigr" >/dev/null 2>&1 || bad "resuming"

# ---- stale temporaries: removed if revc made them, kept otherwise ----
# On tmpfs when there is one: it lists a directory newest first, so a kill
# while the old checkpoint is removed catches its manifest gone first unless
# revc removes it last (ext4's hashed order hides that most of the time).
kt=$(mktemp -d -p /dev/shm 2>/dev/null) || kt=$(mktemp -d -p "$tmp")
d=$kt/k
"$revc" train "${small[@]}" --engine interp --steps 2 --save "$d" >/dev/null 2>&1 || bad "a checkpoint to kill runs over"
for try in 1 2 3 4 5; do # real SIGKILLs during saves, which may or may not leave one
  "$revc" train "${small[@]}" --engine interp --steps 100000 --save "$d" --save-every 1 >/dev/null 2>"$tmp/kill.err" &
  pid=$!
  for _ in $(seq 1 3000); do [ "$(grep -c '^checkpoint at' "$tmp/kill.err")" -ge 2 ] && break; sleep 0.01; done
  sleep 0.0$((RANDOM % 10))
  kill -9 $pid; wait $pid 2>/dev/null; pid=
  "$revc" eval "${small[@]}" --params "$d" >/dev/null 2>&1 || bad "SIGKILL (try $try) broke the checkpoint"
done
echo "checkpoint: $(cd "$kt" && ls -d k.tmp.* 2>/dev/null | wc -l) temporaries left by 5 SIGKILLs"
cp -r "$tmp/ck2" "$d.tmp.Sim123"                  # the old directory of a swap, killed before removal
mkdir "$d.tmp.Sim456"; cp "$tmp/ck2/revc-manifest.txt" "$d.tmp.Sim456/"; cp "$tmp/ck2/step.npy" "$d.tmp.Sim456/"
mkdir "$d.tmp.foobar"; echo mine > "$d.tmp.foobar/notes.txt" # the user's, named alike
mkdir "$d.tmp.foo" "$d.tmp.Sim789x"; cp "$tmp/ck2/revc-manifest.txt" "$d.tmp.Sim789x/" # not revc's names
mkdir "$d.tmp.Sub123"; cp "$tmp/ck2/revc-manifest.txt" "$d.tmp.Sub123/"; mkdir "$d.tmp.Sub123/keep"
echo k > "$d.tmp.Sub123/keep/file"                # marked, but holding a directory revc never writes
n=$((n + 1))
"$revc" train "${small[@]}" --engine interp --steps 2 --save "$d" >/dev/null 2>"$tmp/err" || { bad "the save after the kills"; cat "$tmp/err"; }
# (An empty unmarked one, from a kill right after mkdtemp, is kept too.)
left=$(cd "$kt" && for t in k.tmp.*; do [ -d "$t" ] && [ -z "$(ls -A "$t")" ] && [ ${#t} -eq 12 ] || echo "$t"; done | tr '\n' ' ')
[ "$left" = "k.tmp.Sim789x k.tmp.Sub123 k.tmp.foo k.tmp.foobar " ] || bad "after the next save: left $left"
[ "$(cat "$d.tmp.foobar/notes.txt")" = mine ] && [ "$(cat "$d.tmp.Sub123/keep/file")" = k ] || bad "a user's file was removed"
grep -qx 'step 2' "$d/revc-manifest.txt" || bad "the save after the kills did not land"

# ---- a kill part way through removing the checkpoint a save replaced ----
# tests/cli/killunlink.c (preloaded; after ASan's runtime under ASan) kills
# revc right after it unlinks that directory's manifest.  The manifest goes
# last, so the kill leaves an empty directory at most, never unmarked files
# that no later save would remove (CI once found k.tmp.EPkMBt so).
d=$kt/r asan=$(ldd "$revc" | awk '/libasan/ {print $3}')
holding_files() { (cd "$kt" && for t in r.tmp.*; do [ -d "$t" ] && [ -n "$(ls -A "$t")" ] && echo "$t"; done); }
n=$((n + 1))
"$revc" train "${small[@]}" --engine interp --steps 2 --save "$d" >/dev/null 2>&1 || bad "a checkpoint to replace"
LD_PRELOAD=${asan:+$asan:}$killunlink REVC_TEST_KILL_UNLINK=1 \
  "$revc" train "${small[@]}" --engine interp --steps 3 --save "$d" >/dev/null 2>&1
rc=$?
[ $rc -eq 137 ] || bad "the preloaded kill: exit status $rc, expected 137 (SIGKILL)"
grep -qx 'step 3' "$d/revc-manifest.txt" || bad "the killed save did not land before its cleanup"
left=$(holding_files)
[ -z "$left" ] || bad "the kill left files: $left"
"$revc" train "${small[@]}" --engine interp --steps 2 --save "$d" >/dev/null 2>&1 || bad "the save after the kill"
left=$(holding_files)
[ -z "$left" ] && grep -qx 'step 2' "$d/revc-manifest.txt" || bad "after the save after the kill: left '$left'"

# ---- AdamW: m, v and the step count t are saved, and a resume is exact ----
adamw=(models/fashion.rev --data synthetic --set batch=8 --set units=1,1,1 --set optimizer=adamw --set lr=1e-3)
n=$((n + 1))
if "$revc" train "${adamw[@]}" --engine interp --steps 6 --save "$tmp/aw6" >/dev/null 2>"$tmp/err" &&
   "$revc" train "${adamw[@]}" --engine interp --steps 2 --save "$tmp/aw2" >/dev/null 2>>"$tmp/err" &&
   "$revc" train "${adamw[@]}" --engine interp --steps 6 --resume "$tmp/aw2" --save "$tmp/aw2" >/dev/null 2>>"$tmp/err"; then
  for f in "$tmp"/aw6/*.npy; do
    cmp -s "$f" "$tmp/aw2/$(basename "$f")" || bad "AdamW: $(basename "$f") differs after resuming at step 2"
  done
  [ "$(ls "$tmp/aw6" | wc -l)" -eq "$(ls "$tmp/aw2" | wc -l)" ] || bad "AdamW: the resumed checkpoint has other files"
  [ -f "$tmp/aw6/init.conv.w.m.npy" ] && [ -f "$tmp/aw6/init.conv.w.v.npy" ] || bad "AdamW: no moments saved"
  ls "$tmp"/aw6/*.mom.npy >/dev/null 2>&1 && bad "AdamW: momentum buffers saved"
  [ "$(tail -c 4 "$tmp/aw6/adamw.t.npy" | od -An -tf4 | tr -d ' ')" = 6 ] || bad "AdamW: the step count saved is not 6"
else
  bad "AdamW checkpoints"; tail -n3 "$tmp/err"
fi
# A checkpoint without the step count, or a momentum one, does not resume AdamW.
cp -r "$tmp/aw2" "$tmp/awnot"; rm "$tmp/awnot/adamw.t.npy"; sed -i '/^tensor adamw\.t /d' "$tmp/awnot/revc-manifest.txt"
expect 1 "cannot resume: '.*awnot' has no tensor 'adamw\.t', which the model needs" \
  "$revc" train "${adamw[@]}" --engine interp --steps 4 --resume "$tmp/awnot"
expect 1 "cannot resume: '.*ck1' has no tensor 'adamw\.t', which the model needs" \
  "$revc" train "${adamw[@]}" --engine interp --steps 8 --resume "$tmp/ck1"

echo "checkpoint: $n checks, $fail failed"
[ $fail -eq 0 ]
