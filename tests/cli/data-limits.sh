#!/usr/bin/env bash
# Bounded memory on hostile dataset files, through revc train and eval:
#  - a gzip bomb (an IDX header promising 20 images, then 1 GiB of zeros in
#    a 1 MiB file) fails with "trailing data" at once, and the process's
#    peak RSS (getrusage of the child) stays far below what it inflates to;
#  - an honest header promising 750 MiB of images, all there, is refused
#    under --max-memory 100MiB before anything is inflated or allocated;
#  - a header promising more than the address space allows (ulimit -v) is
#    refused cleanly when the one allocation fails (not under ASan, which
#    needs the address space for its shadow);
#  - --max-memory counts the plan, then each dataset's pixels (one byte
#    each) and labels (four bytes each), two-sided to the byte, for train
#    (training then test set) and eval.
# Usage: data-limits.sh REVC ROOT
set -u
revc=$(realpath "$1") root=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$root" || exit 1
asan=0
ldd "$revc" 2>/dev/null | grep -q libasan && asan=1
python3 - "$revc" "$tmp" "$asan" <<'EOF'
import os, re, struct, subprocess, sys, zlib
revc, tmp, asan = sys.argv[1], sys.argv[2], sys.argv[3] == '1'
MiB = 1 << 20
fail = 0
cases = 0

def gz(data):
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    return c.compress(data) + c.flush()

ZERO_MEMBER = gz(bytes(MiB))

def gz_zeros(n):
    """n zero bytes as concatenated gzip members, about 1 KiB a MiB."""
    return ZERO_MEMBER * (n // MiB) + (gz(bytes(n % MiB)) if n % MiB else b'')

def idx(dims):
    return struct.pack('>I', 0x800 | len(dims)) + b''.join(struct.pack('>I', d) for d in dims)

def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'wb') as f:
        f.write(data)

def idx_dir(name, train_images, train_labels, n_test=20):
    d = os.path.join(tmp, name)
    write(f'{d}/train-images-idx3-ubyte.gz', train_images)
    write(f'{d}/train-labels-idx1-ubyte.gz', train_labels)
    write(f'{d}/t10k-images-idx3-ubyte', idx([n_test, 28, 28]) + bytes((i * 7) % 256 for i in range(n_test * 784)))
    write(f'{d}/t10k-labels-idx1-ubyte', idx([n_test]) + bytes(i % 10 for i in range(n_test)))
    return d

spec = os.path.join(tmp, 'tiny.rev')
write(spec, b'model tiny\ninput = 1,28,28\nclasses = 10\ninit_filters = 16\nunits = 1,1,1\n'
      b'filters = 16,32,64\nstrides = 1,2,2\nblock = basic\nbatch = 10\ndataset = synthetic\n')

labels20 = idx([20]) + bytes(i % 10 for i in range(20))
pixels20 = bytes((i * 7) % 256 for i in range(20 * 784))
bomb = idx_dir('bomb', gz(idx([20, 28, 28]) + pixels20) + gz_zeros(1024 * MiB), gz(labels20))
n_honest = 1000000
honest = idx_dir('honest', gz(idx([n_honest, 28, 28])) + gz_zeros(n_honest * 784),
                 gz(idx([n_honest])) + gz_zeros(n_honest))
n_huge = 2500000
huge = idx_dir('huge', gz(idx([n_huge, 28, 28])), gz(idx([n_huge])))
ok = idx_dir('ok', gz(idx([20, 28, 28]) + pixels20), gz(labels20))

def run(args, limit_as=None):
    """exit status, stderr, peak RSS in MiB of revc ARGS."""
    pre = None
    if limit_as:
        import resource
        pre = lambda: resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))
    p = subprocess.Popen([revc] + args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         preexec_fn=pre)
    err = p.stderr.read().decode()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return p.returncode, err, ru.ru_maxrss / 1024

def expect(what, args, rc_want, regex, max_rss=None, limit_as=None):
    global fail, cases
    cases += 1
    rc, err, rss = run(args, limit_as)
    errs = [l for l in err.splitlines() if 'error:' in l]
    why = None
    if rc != rc_want:
        why = f'exit status {rc}, expected {rc_want}'
    elif rc_want and (len(errs) != 1 or not re.search(regex, errs[0])):
        why = f'the error does not match /{regex}/'
    elif re.search('Sanitizer|runtime error', err):
        why = 'a sanitizer report'
    elif max_rss is not None and rss > max_rss:
        why = f'peak RSS {rss:.1f} MiB, more than {max_rss} MiB'
    print(f'{"FAIL" if why else "ok"}: {what}: exit {rc}, peak RSS {rss:.1f} MiB')
    if why:
        fail += 1
        print(f'  {why}\n  ' + err.replace('\n', '\n  '))

train = ['train', spec, '--steps', '1', '--engine', 'interp']
expect('gzip bomb: 20 images promised, 1 GiB inflated',
       train + ['--data', f'fashion-mnist:{bomb}'], 1,
       r'bomb/train-images-idx3-ubyte.gz: trailing data after the 15680 bytes of images the header '
       r'promises \(read no further\)', max_rss=256)
expect('750 MiB promised and present, --max-memory 100MiB',
       train + ['--data', f'fashion-mnist:{honest}', '--max-memory', '100MiB'], 1,
       r'honest/train-images-idx3-ubyte.gz: 1000000 images of 1x28x28 take 788000000 bytes with '
       r'their labels, more than the [0-9.]+ MiB left of --max-memory 100.00 MiB after the plan '
       r'\([0-9.]+ MiB\)$', max_rss=256)
if not asan:
    expect('1.9 GB promised, 1.5 GiB of address space',
           train + ['--data', f'fashion-mnist:{huge}'], 1,
           r'huge/train-images-idx3-ubyte.gz: out of memory: the dataset \(2500000 images of 1x28x28 '
           r'with their labels\) takes 1970000000 bytes \(1.83 GiB\)$', limit_as=1536 * MiB)

# --max-memory to the byte: the plan, then 20 * (784 + 4) bytes a set.
def plan_bytes(args):
    rc, err, _ = run(args + ['--max-memory', '1'])
    m = re.search(r'the plan needs [^(]* \(([0-9]+) bytes', err)
    if not m:
        print(f'FAIL: no plan size from revc {" ".join(args)}: {err}')
        sys.exit(1)
    return int(m.group(1))

data = ['--data', f'fashion-mnist:{ok}']
plan = plan_bytes(train + data)
expect('train within the plan + both sets', train + data + ['--max-memory', str(plan + 31520),
       '--save', f'{tmp}/ck'], 0, None)
expect('train 1 byte short for the test set', train + data + ['--max-memory', str(plan + 31519)], 1,
       r'ok/t10k-images-idx3-ubyte: 20 images of 1x28x28 take 15760 bytes with their labels, more '
       r'than the 15.4 KiB left of --max-memory .* after the plan \(.*\) and the training set '
       r'\(15.4 KiB\)$')
expect('train 1 byte short for the training set', train + data + ['--max-memory', str(plan + 15759)],
       1, r'ok/train-images-idx3-ubyte.gz: 20 images of 1x28x28 take 15760 bytes')
evaluate = ['eval', spec, '--params', f'{tmp}/ck'] + data
plan = plan_bytes(evaluate)
expect('eval within the plan + the test set', evaluate + ['--max-memory', str(plan + 15760)], 0, None)
expect('eval 1 byte short', evaluate + ['--max-memory', str(plan + 15759)], 1,
       r'ok/t10k-images-idx3-ubyte: 20 images of 1x28x28 take 15760 bytes with their labels, more '
       r'than the 15.4 KiB left')
expect('synthetic data counts too', train + ['--max-memory', str(plan_bytes(train) + 4727999)], 1,
       r'synthetic data: 6000 images of 1x28x28 take 4728000 bytes with their labels')
print(f'data-limits: {cases} cases, {fail} failed')
sys.exit(1 if fail else 0)
EOF
