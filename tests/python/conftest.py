# conftest.py: what the revc module's tests share: the source tree, the revc
# command (REVC, as meson test sets it) and a small fashion model.
import os
import pathlib
import subprocess

import numpy as np
import pytest

ROOT = pathlib.Path(os.environ.get("REVC_SOURCE_ROOT", pathlib.Path(__file__).resolve().parents[2]))
SPEC = str(ROOT / "models" / "fashion.rev")
# Three units of one block: a model that compiles in a moment.
SMALL = {"units": (1, 1, 1), "batch": 4}
FIXTURE = ROOT / "tests" / "data" / "fashion-b4"


def revc_cli(*args, check=True):
    """Runs the revc command; its CompletedProcess (text)."""
    exe = os.environ.get("REVC", str(ROOT / "build" / "revc"))
    return subprocess.run([exe, *args], capture_output=True, text=True, check=check)


def set_args(sets):
    out = []
    for k, v in sets.items():
        out += ["--set", f"{k}={','.join(map(str, v)) if isinstance(v, tuple) else v}"]
    return out


def batch(n=4, seed=0):
    """A synthetic batch of n Fashion-MNIST-shaped images and labels."""
    rng = np.random.default_rng(seed)
    return rng.random((n, 1, 28, 28), dtype=np.float32), rng.integers(0, 10, n)


@pytest.fixture(scope="module")
def small():
    import revc
    return revc.Model(SPEC, set=SMALL)
