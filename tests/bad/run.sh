#!/usr/bin/env bash
# The bad-input corpus: every line of tests/bad/cases.txt runs one revc
# command on broken input and must fail cleanly.  Fixtures (truncated and
# corrupted copies of tests/data files, IDX and CIFAR files, .npy files,
# checkpoints, a directory named like a file...) are generated here into a
# temporary directory, @DATA@ in the commands; @TMP@ is an empty scratch
# directory per case, where commands put their outputs; @FOREIGN_CPU@ is a
# CPU whose code this host cannot run (cases with it are skipped where
# there is none).
#
# Each case must: exit with the expected status; print exactly one line
# containing "error:" on stderr, first, matching the regex, followed by at
# most the source line and a caret; print nothing that looks like a crash or
# a sanitizer report; and leave nothing behind: @TMP@ still empty, @DATA@
# unchanged, no *.tmp.* file anywhere in them or the repository's inputs.
#
# cases.txt: STATUS|COMMAND|REGEX, '#' comments.  COMMAND is split as the
# shell would (quotes work), runs from the repository root, and starts with
# "revc".  REGEX (extended) is the rest of the line.
# Usage: run.sh REVC ROOT
set -u
# Some cases ask for more memory than there is: under ASan too, malloc must
# then return NULL (revc reports it) rather than end the process.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}allocator_may_return_null=1"
revc=$(realpath "$1") root=$(realpath "$2")
cases=$root/tests/bad/cases.txt
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
data=$work/data tmp=$work/tmp
mkdir -p "$data"
cd "$root" || exit 1

# ---- fixtures ---------------------------------------------------------------

# Specs: the fashion preset cut down, and a CIFAR-shaped one.
cat > "$data/tiny.rev" <<'EOF'
model tiny
input = 1,28,28
classes = 10
init_filters = 16
units = 1,1,1
filters = 16,32,64
strides = 1,2,2
block = basic
batch = 10
dataset = synthetic
EOF
sed -e 's/^model tiny/model tinycifar/' -e 's/^input = .*/input = 3,32,32/' "$data/tiny.rev" > "$data/tinycifar.rev"
: > "$data/empty.rev"
head -c 3000 tests/ir/shape/tiny.expected > "$data/trunc.ir" && [ -s "$data/trunc.ir" ] || { echo "bad-corpus: cannot make trunc.ir"; exit 1; }
printf '\000\001\377\376graph @x {\n' > "$data/junk.ir"
mkdir "$data/dir.rev" "$data/dir.ir" "$data/dir.npy"
printf 'hello\n' > "$data/file"

python3 - "$data" "$root/tests/data/fashion-b4" <<'EOF' || { echo "bad-corpus: cannot make fixtures"; exit 1; }
import gzip, os, shutil, struct, sys
data, b4 = sys.argv[1], sys.argv[2]

def w(path, b):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'wb') as f:
        f.write(b)

def idx(dims, body, magic=None):
    m = magic if magic is not None else 0x800 | len(dims)
    return struct.pack('>I', m) + b''.join(struct.pack('>I', d) for d in dims) + body

def idx_dir(name, n=20, h=28, labels=None):
    d = os.path.join(data, name)
    for p, k in (('train', n), ('t10k', n)):
        w(f'{d}/{p}-images-idx3-ubyte', idx([k, h, h], bytes((i * 7) % 256 for i in range(k * h * h))))
        w(f'{d}/{p}-labels-idx1-ubyte', idx([k], bytes(labels or [i % 10 for i in range(k)])))
    return d

ok = idx_dir('idx-ok')
d = idx_dir('idx-trunc')
img = open(f'{d}/train-images-idx3-ubyte', 'rb').read()
w(f'{d}/train-images-idx3-ubyte', img[:len(img) // 2])
d = idx_dir('idx-magic')
shutil.copy(f'{d}/train-labels-idx1-ubyte', f'{d}/train-images-idx3-ubyte')
d = idx_dir('idx-count')
w(f'{d}/train-labels-idx1-ubyte', idx([19], bytes(19)))
idx_dir('idx-label', labels=[3] * 19 + [200])
d = idx_dir('idx-absurd')
w(f'{d}/train-images-idx3-ubyte', idx([0x7fffffff, 0xffff, 0xffff], b''))
d = idx_dir('idx-trailing')
w(f'{d}/t10k-labels-idx1-ubyte', idx([20], bytes(21)))
d = idx_dir('idx-empty')
w(f'{d}/train-images-idx3-ubyte', b'')
d = idx_dir('idx-header')
w(f'{d}/train-images-idx3-ubyte', struct.pack('>I', 0x803) + b'\0\0\0\x14\0')
d = idx_dir('idx-gz')
os.remove(f'{d}/train-images-idx3-ubyte')
w(f'{d}/train-images-idx3-ubyte.gz', gzip.compress(img)[:200])
d = idx_dir('idx-gzjunk')
os.remove(f'{d}/train-images-idx3-ubyte')
w(f'{d}/train-images-idx3-ubyte.gz', b'\x1f\x8b\x08\x00' + b'\xff' * 64)
d = idx_dir('idx-notest')
os.remove(f'{d}/t10k-images-idx3-ubyte')
d = idx_dir('idx-dirfile')
os.remove(f'{d}/train-images-idx3-ubyte')
os.makedirs(f'{d}/train-images-idx3-ubyte')
idx_dir('idx-32', h=32)

def cifar_dir(name, n=10, label=None, cut=0, files=5):
    d = os.path.join(data, name)
    rec = lambda i: bytes([label if label is not None and i == n - 1 else i % 10]) + bytes((i * 3 + j) % 256 for j in range(3072))
    body = b''.join(rec(i) for i in range(n))
    for k in range(1, files + 1):
        w(f'{d}/data_batch_{k}.bin', body[:len(body) - cut] if k == 1 else body)
    w(f'{d}/test_batch.bin', body)
    return d

cifar_dir('cifar-ok')
cifar_dir('cifar-trunc', cut=100)
cifar_dir('cifar-label', label=12)
cifar_dir('cifar-missing', files=3)
d = cifar_dir('cifar-empty')
w(f'{d}/test_batch.bin', b'')

# .npy files: headers written by hand, so each can be wrong in one way.
def npy(descr, shape, body, fortran=False, version=1, magic=b'\x93NUMPY', hlen=None):
    h = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape)
    h += ' ' * ((64 - (len(h) + 11) % 64) % 64) + '\n'
    n = len(h) if hlen is None else hlen
    return magic + bytes([version, 0]) + struct.pack('<H', n) + h.encode() + body

x = open(f'{b4}/x.npy', 'rb').read()
w(f'{data}/npy/x-trunc.npy', x[:len(x) - 100])
w(f'{data}/npy/x-trailing.npy', x + b'\0\0\0\0')
w(f'{data}/npy/x-magic.npy', b'\x93NUMPX' + x[6:])
w(f'{data}/npy/x-version.npy', x[:6] + b'\x07' + x[7:])
w(f'{data}/npy/x-hlen.npy', x[:8] + struct.pack('<H', 60000) + x[10:])
w(f'{data}/npy/x-empty.npy', b'')
w(f'{data}/npy/x-absurd.npy', npy('<f4', '(1099511627776, 1099511627776, 1, 1)', b''))
w(f'{data}/npy/x-overflow.npy', npy('<f4', '(4, 1, 99999999999999999999999, 28)', b''))
w(f'{data}/npy/x-negative.npy', npy('<f4', '(4, -1, 28, 28)', b''))
w(f'{data}/npy/x-fortran.npy', npy('<f4', '(4, 1, 28, 28)', bytes(4 * 784 * 4), fortran=True))
w(f'{data}/npy/x-bigendian.npy', npy('>f4', '(4, 1, 28, 28)', bytes(4 * 784 * 4)))
w(f'{data}/npy/x-object.npy', npy('|O', '(4, 1, 28, 28)', bytes(4 * 784 * 8)))
w(f'{data}/npy/x-rank3.npy', npy('<f4', '(4, 28, 28)', bytes(4 * 784 * 4)))
w(f'{data}/npy/x-channels.npy', npy('<f4', '(4, 3, 28, 28)', bytes(4 * 3 * 784 * 4)))
w(f'{data}/npy/x-int.npy', npy('<i4', '(4, 1, 28, 28)', bytes(4 * 784 * 4)))
w(f'{data}/npy/x-batch0.npy', npy('<f4', '(0, 1, 28, 28)', b''))
w(f'{data}/npy/x-nan.npy', npy('<f4', '(4, 1, 28, 28)', struct.pack('<f', float('nan')) * (4 * 784)))
w(f'{data}/npy/x-shape-junk.npy', npy('<f4', '(4, 1, 28, 28x)', b''))
w(f'{data}/npy/y-float.npy', npy('<f4', '(4,)', struct.pack('<4f', 1, 2, 3, 4)))
w(f'{data}/npy/y-three.npy', npy('<i8', '(3,)', struct.pack('<3q', 1, 2, 3)))
w(f'{data}/npy/y-range.npy', npy('<i8', '(4,)', struct.pack('<4q', 1, 2, 10, 3)))
w(f'{data}/npy/y-negative.npy', npy('<i8', '(4,)', struct.pack('<4q', 1, -1, 0, 3)))

# Parameter directories: fashion-b4's, with one tensor broken in each.
def params(name, tensor=None, body=None, remove=False):
    d = f'{data}/{name}'
    shutil.copytree(f'{b4}/params', d)
    if remove:
        os.remove(f'{d}/{tensor}.npy')
    elif tensor:
        w(f'{d}/{tensor}.npy', body)
    return d

p = open(f'{b4}/params/init.conv.w.npy', 'rb').read()
params('params-missing', 'init.bn.gamma', remove=True)
params('params-trunc', 'init.conv.w', p[:len(p) // 2])
params('params-shape', 'init.conv.w', npy('<f4', '(16, 1, 3, 2)', bytes(16 * 6 * 4)))
params('params-int', 'init.bn.gamma', npy('<i4', '(16,)', bytes(64)))
params('params-dir', 'final.dense.b', remove=True)
os.makedirs(f'{data}/params-dir/final.dense.b.npy')

# Hostile gzip data: a bomb (20 images promised, 64 MiB of zeros after them,
# in concatenated members), a header promising 200000 images with none
# there, junk after the gzip member, a gzip-compressed CIFAR-10 batch.
zeros = gzip.compress(bytes(1 << 20))
img = open(f'{ok}/train-images-idx3-ubyte', 'rb').read()
for name, body in (('idx-bomb', gzip.compress(img) + zeros * 64),
                   ('idx-promise', gzip.compress(idx([200000, 28, 28], b''))),
                   ('idx-junk', gzip.compress(img) + b'junk')):
    d = idx_dir(name)
    os.remove(f'{d}/train-images-idx3-ubyte')
    w(f'{d}/train-images-idx3-ubyte.gz', body)
os.remove(f'{data}/idx-promise/train-labels-idx1-ubyte')
w(f'{data}/idx-promise/train-labels-idx1-ubyte.gz', gzip.compress(idx([200000], b'')))
d = cifar_dir('cifar-gz')
w(f'{d}/data_batch_2.bin', gzip.compress(open(f'{d}/data_batch_2.bin', 'rb').read()))
EOF

# A checkpoint of the tiny spec after two steps, and broken copies of it.
if ! "$revc" train "$data/tiny.rev" --steps 2 --engine interp --save "$data/ck" >/dev/null 2>&1; then
  echo "bad-corpus: cannot make the checkpoint fixture"; exit 1
fi
ck() { cp -r "$data/ck" "$data/$1"; }
ck ck-nostep; rm "$data/ck-nostep/step.npy"
ck ck-trunc; head -c 100 "$data/ck/s0.u0.f.conv0.w.npy" > "$data/ck-trunc/s0.u0.f.conv0.w.npy"
ck ck-shape; cp "$data/ck/s1.u0.f.conv0.w.npy" "$data/ck-shape/s0.u0.f.conv0.w.npy"
ck ck-nomom; rm "$data/ck-nomom/s2.u0.g.conv1.w.mom.npy"
ck ck-step; cp "$data/ck/init.bn.gamma.npy" "$data/ck-step/step.npy"
ck ck-nan; python3 - "$data/ck-nan/init.conv.w.npy" <<'EOF'
import struct, sys
p = sys.argv[1]
b = bytearray(open(p, 'rb').read())
b[-4:] = struct.pack('<f', float('inf'))
open(p, 'wb').write(bytes(b))
EOF

# Output directories and checkpoints that revc must refuse to replace or load:
# a FIFO for a tensor, a file revc did not write, manifests that are broken,
# lack a tensor or disagree with step.npy; revc init's output (no step);
# FIFOs for a spec, a .npy and an IDX file.
ck ck-fifo; rm "$data/ck-fifo/init.conv.w.npy"; mkfifo "$data/ck-fifo/init.conv.w.npy"
ck ck-extra; echo notes > "$data/ck-extra/notes.txt"
ck ck-badmanifest; sed -i '2s/.*/kind frobnicated/' "$data/ck-badmanifest/revc-manifest.txt"
ck ck-unlisted; sed -i '/^tensor s0.u0.g.conv1.w /d' "$data/ck-unlisted/revc-manifest.txt"
ck ck-mstep; sed -i 's/^step .*/step 7/' "$data/ck-mstep/revc-manifest.txt"
if ! "$revc" init "$data/tiny.rev" --out "$data/ck-init" >/dev/null 2>&1; then
  echo "bad-corpus: cannot make the revc init fixture"; exit 1
fi
mkfifo "$data/fifo.rev" "$data/npy/fifo.npy"
cp -r "$data/idx-ok" "$data/idx-fifo"; rm "$data/idx-fifo/train-images-idx3-ubyte"
mkfifo "$data/idx-fifo/train-images-idx3-ubyte"
# A CPU this host cannot run code for: AVX-512 on an AVX2 host, AMD's
# sse4a on an Intel one, AVX512-FP16 on an AMD one with AVX-512.
flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
foreign=
if [ "$(uname -m)" = x86_64 ]; then
  case "$flags" in
    *" avx512f "*) case "$flags" in
                     *" sse4a "*) case "$flags" in *" avx512_fp16 "*) ;; *) foreign=sapphirerapids ;; esac ;;
                     *) foreign=znver4 ;;
                   esac ;;
    *) foreign=x86-64-v4 ;;
  esac
fi

# ---- running the cases --------------------------------------------------------

listing() { (cd "$work" && find data | sort); }
leftovers() { find "$root/models" "$root/tests/data" -maxdepth 2 -name '*.tmp.*' 2>/dev/null; }
before_root=$(leftovers) snap=$(listing)
n=0 fail=0
while IFS= read -r line; do
  case "$line" in ''|\#*) continue ;; esac
  status=${line%%|*}; rest=${line#*|}
  cmd=${rest%%|*}; want=${rest#*|}
  cmd=${cmd//@DATA@/$data}; cmd=${cmd//@TMP@/$tmp}
  if [[ $cmd == *@FOREIGN_CPU@* ]]; then
    [ -n "$foreign" ] || { echo "bad-corpus: skipped (this host runs every CPU's code we know): $line"; continue; }
    cmd=${cmd//@FOREIGN_CPU@/$foreign}
  fi
  eval "args=($cmd)"
  [ "${args[0]}" = revc ] || { echo "bad-corpus: a command must start with revc: $line"; fail=$((fail + 1)); continue; }
  n=$((n + 1))
  rm -rf "$tmp"; mkdir "$tmp"
  timeout 120 "$revc" "${args[@]:1}" >"$work/stdout" 2>"$work/stderr" </dev/null
  rc=$?
  why=
  errs=$(grep -c 'error:' "$work/stderr")
  lines=$(wc -l < "$work/stderr")
  first=$(head -n1 "$work/stderr")
  if [ "$rc" -ne "$status" ]; then why="exit status $rc, expected $status"
  elif [ "$errs" -ne 1 ]; then why="$errs lines with 'error:'"
  elif ! grep -q 'error:' <<<"$first"; then why="the error is not the first line"
  elif [ "$lines" -gt 3 ] || { [ "$lines" -eq 3 ] && ! tail -n1 "$work/stderr" | grep -qE '^ *\^'; }; then
    why="more than the error, its source line and a caret on stderr"
  elif ! grep -qE -- "$want" <<<"$first"; then why="the error does not match /$want/"
  elif grep -qE 'Sanitizer|runtime error|Segmentation|Aborted|core dumped|assertion' "$work/stderr"; then why="a crash"
  elif [ -n "$(ls -A "$tmp")" ]; then why="left $(ls -A "$tmp" | tr '\n' ' ')in @TMP@"
  elif [ "$(listing)" != "$snap" ]; then why="changed @DATA@"
  elif [ "$(leftovers)" != "$before_root" ]; then why="left a *.tmp.* file in the repository"
  fi
  if [ -n "$why" ]; then
    fail=$((fail + 1))
    printf 'FAIL: %s\n  %s\n' "$line" "$why"
    sed 's/^/  | /' "$work/stderr" | head -n 8
  fi
done < "$cases"
echo "bad-corpus: $n cases, $fail failed"
[ "$n" -ge 60 ] && [ "$fail" -eq 0 ]
