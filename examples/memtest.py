# memtest.py: a peak-memory regression test for your model, for pytest.
#
# Copy it into your test suite, point SPEC at your spec, and set EXPECTED
# from a run you trust (revc mem --json prints the same figures).  Both a
# regression and an unexplained win fail: a win means EXPECTED should be
# lowered on purpose.  The figures are the planner's, so they are the same
# on every run on one machine; the JIT's workspace can differ between CPUs
# (AVX-512 or AVX2 kernels), which TOLERANCE absorbs.
#   PYTHONPATH=build/python python3 -m pytest examples/memtest.py
import pathlib

import pytest

import revc

SPEC = pathlib.Path(__file__).resolve().parents[1] / "models" / "fashion.rev"
SETTINGS = {"batch": 32}
# Fragmentation-free peak bytes of one training step, per strategy.
EXPECTED = {"revnet": 10959912, "store": 29130760}  # AMD EPYC (Zen 4), revc 0.2.0
TOLERANCE = 0.02


@pytest.mark.parametrize("strategy", sorted(EXPECTED))
def test_peak_memory(strategy):
    peak = revc.memory(SPEC, set=SETTINGS, strategy=strategy).peak_bytes
    want = EXPECTED[strategy]
    assert want * (1 - TOLERANCE) <= peak <= want * (1 + TOLERANCE), \
        f"{strategy}: peak {peak} bytes, expected {want} within {TOLERANCE:.0%}"


def test_revnet_saves_memory():
    r = revc.memory(SPEC, set=SETTINGS, strategy="revnet")
    s = revc.memory(SPEC, set=SETTINGS, strategy="store")
    assert r.at_peak.saved < s.at_peak.saved
