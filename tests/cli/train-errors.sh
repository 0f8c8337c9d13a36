#!/usr/bin/env bash
# Bad input to revc train and revc eval: each gets exactly one error line,
# exit status 1, and leaves no checkpoint or temporary directory behind.
# Usage: train-errors.sh REVC ROOT
set -u
revc=$(realpath "$1") root=$2 fail=0 n=0 here=$(dirname "$(realpath "$0")")
tmp=$(mktemp -d); trap 'chmod -R u+w "$tmp"; rm -rf "$tmp"' EXIT
cd "$root" || exit 1
fm=/usr/share/datasets/fashion-mnist
tiny=(models/fashion.rev --set units=1,1,1 --set batch=10)

source "$here/expect.sh" # expect WANT-REGEX CMD...: exit 1, one error line, nothing saved

mkdir "$tmp/data"
cp $fm/*.gz "$tmp/data/"
# A truncated images file.
mkdir "$tmp/trunc"; cp $fm/*.gz "$tmp/trunc/"
head -c 100000 $fm/train-images-idx3-ubyte.gz > "$tmp/trunc/train-images-idx3-ubyte.gz"
# Wrong magic: labels where images belong.
mkdir "$tmp/magic"; cp $fm/*.gz "$tmp/magic/"
cp $fm/train-labels-idx1-ubyte.gz "$tmp/magic/train-images-idx3-ubyte.gz"
# Mismatched counts: test labels with train images.
mkdir "$tmp/count"; cp $fm/*.gz "$tmp/count/"
cp $fm/t10k-labels-idx1-ubyte.gz "$tmp/count/train-labels-idx1-ubyte.gz"

expect "nonexistent" "$revc" train "${tiny[@]}" --data fashion-mnist:"$tmp/nonexistent" --steps 1 --save "$tmp/save"
expect "truncated" "$revc" train "${tiny[@]}" --data fashion-mnist:"$tmp/trunc" --steps 1 --save "$tmp/save"
expect "magic" "$revc" train "${tiny[@]}" --data fashion-mnist:"$tmp/magic" --steps 1 --save "$tmp/save"
expect "60000 images but 10000 labels" "$revc" train "${tiny[@]}" --data fashion-mnist:"$tmp/count" --steps 1 --save "$tmp/save"
expect "data_batch_1.bin" "$revc" train "${tiny[@]}" --data cifar10:"$tmp/data" --steps 1
expect "unknown data" "$revc" train "${tiny[@]}" --data imagenet --steps 1
# Unwritable --save: beside a file, inside a read-only directory.
touch "$tmp/file"
expect "save" "$revc" train "${tiny[@]}" --data synthetic --steps 1 --save "$tmp/file/ck"
mkdir "$tmp/ro"; chmod a-w "$tmp/ro"
[ "$(id -u)" -ne 0 ] && expect "save" "$revc" train "${tiny[@]}" --data synthetic --steps 1 --save "$tmp/ro/ck"
# A checkpoint of another spec: the mismatch is named.
"$revc" train "${tiny[@]}" --data synthetic --steps 2 --save "$tmp/ck" >/dev/null 2>&1 || { echo "FAIL: making a checkpoint"; fail=1; }
expect "shape .* for 's2.u0" "$revc" train "${tiny[@]}" --set filters=16,32,128 --data synthetic --steps 3 \
  --resume "$tmp/ck"
expect "s0.u1" "$revc" train models/fashion.rev --set batch=10 --data synthetic --steps 3 --resume "$tmp/ck"
expect "at step 2, not before" "$revc" train "${tiny[@]}" --data synthetic --steps 2 --resume "$tmp/ck"
expect "not a directory|cannot open" "$revc" eval "${tiny[@]}" --params "$tmp/file" --data synthetic
expect "cannot open" "$revc" eval "${tiny[@]}" --params "$tmp/nonexistent" --data synthetic
echo "train-errors: $n cases, $fail failed"
[ $fail -eq 0 ]
