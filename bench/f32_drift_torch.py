#!/usr/bin/python3
"""How far f32 training of a RevNet drifts from f64 in PyTorch alone, an
oracle independent of revc (docs/distributed.md, "How close to rounding").

    f32_drift_torch.py [SPEC] [--steps 1,20] [--batch B]

Trains bench/revnet_torch.py's network (docs/model.md) from one f64
initialisation on the same Fashion-MNIST batches three times: in f64, in
f32 on one thread and in f32 on two threads, then prints per step count the
worst and median per-tensor angle (degrees) between the f32 run's tensors
(parameters and running statistics) and the f64 run's, and between the two
f32 runs, which differ only in how PyTorch splits its sums.  Needs Debian's
python3-torch and dataset-fashion-mnist.
"""
import argparse
import copy
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import revnet_torch as rt  # noqa: E402


def train(s, init, data, dtype, steps, threads):
    torch.set_num_threads(threads)
    m = rt.RevNet(s)
    m.load_state_dict({k: v.clone() for k, v in init.items()})
    m = m.to(dtype)
    opt = rt.optimizer(m, s)
    xtr, ytr = data
    perm = np.random.default_rng(0).permutation(len(xtr))
    b = s["batch"]
    m.train()
    for step in range(steps):
        idx = perm[step * b:(step + 1) * b]
        loss = F.cross_entropy(m(torch.from_numpy(xtr[idx]).to(dtype)), torch.from_numpy(ytr[idx]))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return {k: v.double() for k, v in m.state_dict().items() if v.is_floating_point()}


def angles(a, b):
    out = {}
    for k in a:
        x, y = a[k].flatten(), b[k].flatten()
        na, nb = x.norm().item(), y.norm().item()
        out[k] = 0.0 if na * nb == 0 else math.degrees(math.acos(max(-1.0, min(1.0, (x @ y).item() / (na * nb)))))
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("spec", nargs="?", default=os.path.join(here, "..", "models", "fashion.rev"))
    p.add_argument("--steps", default="1,20", help="comma-separated step counts (default 1,20)")
    p.add_argument("--batch", type=int, default=100)
    a = p.parse_args()
    s = rt.read_spec(a.spec, [f"batch={a.batch}"])
    data = rt.load_idx("/usr/share/datasets/fashion-mnist", "train")
    torch.manual_seed(0)
    init = copy.deepcopy(rt.RevNet(s).double().state_dict())
    for steps in (int(x) for x in a.steps.split(",")):
        r64 = train(s, init, data, torch.float64, steps, 1)
        r32 = train(s, init, data, torch.float32, steps, 1)
        r32b = train(s, init, data, torch.float32, steps, 2)
        for what, (x, y) in (("f32 against f64", (r32, r64)), ("f32, 1 thread against 2", (r32, r32b))):
            an = angles(x, y)
            v = sorted(an.values())
            worst = max(an, key=an.get)
            print(f"after {steps} steps, {what}: {len(v)} tensors, worst {an[worst]:.3g} degrees ({worst}), "
                  f"median {v[len(v) // 2]:.3g}, {sum(t > 1 for t in v)} over 1 degree", flush=True)


if __name__ == "__main__":
    main()
