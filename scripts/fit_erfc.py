#!/usr/bin/python3
"""fit_erfc.py [DEGREE]: the coefficients of codegen/vmath.c's erfc_F
(DEGREE 20, the default) and erfc_F12 (12: relative error 1.7e-9).

erfc(z) = t*exp(-z^2)*F(t) for z >= 0 with t = 2/(2 + z) in (0, 1]: F is
smooth on [0, 1] (F(0) = 1/(2*sqrt(pi))), so a polynomial of degree 20 fitted
by least squares in 2000 Chebyshev nodes is within 4e-14 relative of it
(evaluated in double by Estrin's scheme, as the generated code does).
Needs Debian's python3 with numpy and mpmath; prints the coefficients,
lowest degree first, and the worst relative error on a dense grid."""
import sys

import mpmath as mp
import numpy as np

mp.mp.dps = 40
DEGREE = int(sys.argv[1]) if len(sys.argv) > 1 else 20


def F(t):
    t = mp.mpf(t)
    if t == 0:
        return 1 / (2 * mp.sqrt(mp.pi))
    z = 2 / t - 2
    return mp.erfc(z) * mp.exp(z * z) / t


nodes = (np.cos(np.pi * (np.arange(2000) + 0.5) / 2000) + 1) / 2
values = np.array([float(F(t)) for t in nodes])
fit = np.polynomial.chebyshev.Chebyshev.fit(nodes, values, DEGREE, domain=[0, 1])
coef = fit.convert(kind=np.polynomial.Polynomial, domain=[0, 1], window=[0, 1]).coef
for c in coef:
    print("%.17g," % c)


def estrin(c, x):
    t, p = [np.full_like(x, v) for v in c], x
    while len(t) > 1:
        t = [t[i] + t[i + 1] * p if i + 1 < len(t) else t[i] for i in range(0, len(t), 2)]
        p = p * p
    return t[0]


grid = np.linspace(0, 1, 2001)
h = estrin(coef, grid)
print("worst relative error: %.2g" % max(abs(h[i] / float(F(grid[i])) - 1) for i in range(len(grid))))
