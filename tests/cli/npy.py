"""npy.py: the .npy files of the CLI tests, with Python's standard library
alone (the python3 on PATH may have no NumPy).

  npy.py batch DIR C,H,W SEED   DIR/x.npy: float64 [2,C,H,W], uniform in
                                [-1, 1) from random.Random(SEED); DIR/y.npy:
                                int32 labels [3, 7]
  npy.py same REF DIR...        every float64 .npy of REF against the file of
                                that name in each DIR: max|a-b| <= 1e-10
                                max|b|; prints each that is not, exit 1 then
                                (or when REF has none)
"""
import ast
import os
import random
import struct
import sys


def save(path, descr, shape, fmt, values):
    h = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, ''.join('%d, ' % s for s in shape))
    h += ' ' * (-(len(h) + 11) % 64) + '\n'
    with open(path, 'wb') as f:
        f.write(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(h)) + h.encode() +
                struct.pack('<%d%s' % (len(values), fmt), *values))


def load_f64(path):
    b = open(path, 'rb').read()
    n = struct.unpack('<H', b[8:10])[0]
    h = ast.literal_eval(b[10:10 + n].decode())
    assert h['descr'] == '<f8', (path, h)
    k = 1
    for s in h['shape']:
        k *= s
    return struct.unpack('<%dd' % k, b[10 + n:10 + n + 8 * k])


def batch(d, chw, seed):
    chw = [int(v) for v in chw.split(',')]
    r = random.Random(int(seed))
    n = 2 * chw[0] * chw[1] * chw[2]
    save(os.path.join(d, 'x.npy'), '<f8', [2] + chw, 'd', [r.uniform(-1, 1) for _ in range(n)])
    save(os.path.join(d, 'y.npy'), '<i4', [2], 'i', [3, 7])
    return 0


def same(ref, dirs):
    names = sorted(x for x in os.listdir(ref) if x.endswith('.npy'))
    bad = 0
    for d in dirs:
        for f in names:
            a, b = load_f64(os.path.join(d, f)), load_f64(os.path.join(ref, f))
            err = max(abs(x - y) for x, y in zip(a, b)) / max(max(abs(y) for y in b), 1e-300)
            if not err <= 1e-10:
                print('%s %s: %g' % (d, f, err))
                bad += 1
    print('%d tensors of %s in %d directories: %d over 1e-10' % (len(names), ref, len(dirs), bad))
    return 1 if bad or not names else 0


if __name__ == '__main__':
    if len(sys.argv) == 5 and sys.argv[1] == 'batch':
        sys.exit(batch(*sys.argv[2:]))
    if len(sys.argv) >= 4 and sys.argv[1] == 'same':
        sys.exit(same(sys.argv[2], sys.argv[3:]))
    sys.exit(__doc__)
