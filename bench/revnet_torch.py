#!/usr/bin/python3
"""docs/model.md's RevNet in PyTorch (Debian's python3-torch 1.13), ordinary
autograd: the reference revc is compared against in bench/vs_pytorch.

    revnet_torch.py train SPEC [--epochs E] [--steps N] [--threads T] [--seed S]
    revnet_torch.py bench SPEC [--steps K] [--batch B] [--threads T] [--json]

The spec file is read for the keys this script needs (the same language as
revc's, docs/spec.md); it never depends on revc's code.  TensorFlow's SAME
padding is applied explicitly, batch norm uses eps 1e-3 and running
statistics updated with 0.99/0.01 (PyTorch momentum 0.01, unbiased variance),
weights are Glorot-uniform, and momentum SGD adds weight decay to conv and
dense weights only.
"""
import argparse
import gzip
import json
import math
import os
import resource
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def read_spec(path, sets=()):
    spec = {"init_kernel": "3", "init_stride": "1", "init_max_pool": "false", "lr": "0.1",
            "momentum": "0.9", "weight_decay": "2e-4", "epochs": "1", "steps": "0", "seed": "0"}
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if "=" in line:
                k, v = (s.strip() for s in line.split("=", 1))
                spec[k] = v
    for s in sets:
        k, v = s.split("=", 1)
        spec[k] = v
    ints = lambda k: [int(x) for x in spec[k].split(",")]
    return {
        "input": ints("input"), "classes": int(spec["classes"]),
        "init_filters": int(spec["init_filters"]), "init_kernel": int(spec["init_kernel"]),
        "init_stride": int(spec["init_stride"]), "init_max_pool": spec["init_max_pool"] == "true",
        "units": ints("units"), "filters": ints("filters"), "strides": ints("strides"),
        "block": spec["block"], "batch": int(spec["batch"]),
        "lr": float(spec.get("lr_list", spec["lr"]).split(",")[0]),
        "momentum": float(spec["momentum"]), "weight_decay": float(spec["weight_decay"]),
        "epochs": int(spec["epochs"]), "steps": int(spec["steps"]), "seed": int(spec["seed"]),
    }


def same_pad(x, k, s):
    """TensorFlow SAME: total max((ceil(H/s)-1)*s + k - H, 0), half before."""
    h, w = x.shape[2], x.shape[3]
    ph = max((math.ceil(h / s) - 1) * s + k - h, 0)
    pw = max((math.ceil(w / s) - 1) * s + k - w, 0)
    return F.pad(x, (pw // 2, pw - pw // 2, ph // 2, ph - ph // 2))


class Conv(nn.Module):
    def __init__(self, cin, cout, k, s):
        super().__init__()
        self.k, self.s = k, s
        self.conv = nn.Conv2d(cin, cout, k, s, padding=0, bias=False)
        nn.init.xavier_uniform_(self.conv.weight)

    def forward(self, x):
        return self.conv(same_pad(x, self.k, self.s))


def bn(c):
    return nn.BatchNorm2d(c, eps=1e-3, momentum=0.01)


class Residual(nn.Module):
    """[BN -> ReLU] -> conv ... as in docs/model.md, basic or bottleneck."""

    def __init__(self, cin, cout, stride, preact, bottleneck):
        super().__init__()
        layers = []
        if bottleneck:
            w = cout // 4
            convs = [(cin, w, 1, stride), (w, w, 3, 1), (w, cout, 1, 1)]
        else:
            convs = [(cin, cout, 3, stride), (cout, cout, 3, 1)]
        for i, (a, b, k, s) in enumerate(convs):
            if i > 0 or preact:
                layers += [bn(a), nn.ReLU()]
            layers.append(Conv(a, b, k, s))
        self.body = nn.Sequential(*layers)

    def forward(self, x):
        return self.body(x)


def downsample(x, cout, stride):
    if stride > 1:
        x = F.avg_pool2d(x, stride, stride)
    cin = x.shape[1]
    if cout > cin:
        lo = (cout - cin) // 2
        x = F.pad(x, (0, 0, 0, 0, lo, cout - cin - lo))
    return x


class Unit(nn.Module):
    def __init__(self, cin, cout, stride, first_of_net, bottleneck):
        super().__init__()
        self.cout, self.stride = cout, stride
        self.f = Residual(cin, cout, stride, not first_of_net, bottleneck)
        self.g = Residual(cout, cout, 1, True, bottleneck)

    def forward(self, x1, x2):
        y1 = downsample(x1, self.cout, self.stride) + self.f(x2)
        y2 = downsample(x2, self.cout, self.stride) + self.g(y1)
        return y1, y2


class RevNet(nn.Module):
    def __init__(self, s):
        super().__init__()
        c = s["input"][0]
        self.init_conv = Conv(c, s["init_filters"], s["init_kernel"], s["init_stride"])
        self.init_bn = bn(s["init_filters"])
        self.max_pool = s["init_max_pool"]
        units, half = [], s["init_filters"] // 2
        for st, (n, f, stride) in enumerate(zip(s["units"], s["filters"], s["strides"])):
            for u in range(n):
                units.append(Unit(half, f // 2, stride if u == 0 else 1, st == 0 and u == 0,
                                  s["block"] == "bottleneck"))
                half = f // 2
        self.units = nn.ModuleList(units)
        self.final_bn = bn(2 * half)
        self.dense = nn.Linear(2 * half, s["classes"])
        nn.init.xavier_uniform_(self.dense.weight)
        nn.init.zeros_(self.dense.bias)

    def forward(self, x):
        x = F.relu(self.init_bn(self.init_conv(x)))
        if self.max_pool:
            x = F.max_pool2d(same_pad(x, 3, 2), 3, 2)
        x1, x2 = torch.chunk(x, 2, dim=1)
        for u in self.units:
            x1, x2 = u(x1, x2)
        x = F.relu(self.final_bn(torch.cat([x1, x2], dim=1)))
        return self.dense(x.mean(dim=(2, 3)))


def optimizer(model, s):
    weights = [p for n, p in model.named_parameters() if p.dim() > 1]
    others = [p for n, p in model.named_parameters() if p.dim() <= 1]
    return torch.optim.SGD([{"params": weights, "weight_decay": s["weight_decay"]},
                            {"params": others, "weight_decay": 0.0}],
                           lr=s["lr"], momentum=s["momentum"])


def load_idx(directory, split):
    def read(name):
        path = os.path.join(directory, name)
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rb") as f:
            return f.read()
    prefix = "train" if split == "train" else "t10k"
    img = np.frombuffer(read(prefix + "-images-idx3-ubyte.gz"), np.uint8, offset=16)
    lab = np.frombuffer(read(prefix + "-labels-idx1-ubyte.gz"), np.uint8, offset=8)
    return (img.reshape(-1, 1, 28, 28).astype(np.float32) / 255.0), lab.astype(np.int64)


def rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def cmd_train(a):
    s = read_spec(a.spec, a.set)
    torch.manual_seed(a.seed if a.seed is not None else s["seed"])
    d = "/usr/share/datasets/fashion-mnist"
    xtr, ytr = load_idx(d, "train")
    xte, yte = load_idx(d, "test")
    model = RevNet(s)
    opt = optimizer(model, s)
    b = s["batch"]
    spe = len(xtr) // b
    steps = a.steps or (a.epochs or s["epochs"]) * spe
    rng = np.random.default_rng(a.seed if a.seed is not None else s["seed"])
    t0 = time.time()
    model.train()
    for step in range(steps):
        if step % spe == 0:
            perm = rng.permutation(len(xtr))
        idx = perm[(step % spe) * b:(step % spe + 1) * b]
        x, y = torch.from_numpy(xtr[idx]), torch.from_numpy(ytr[idx])
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if (step + 1) % 50 == 0:
            print(f"step {step + 1}/{steps} loss {loss.item():.4f}", file=sys.stderr, flush=True)
    wall = time.time() - t0
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(xte), b):
            out = model(torch.from_numpy(xte[i:i + b]))
            correct += (out.argmax(1).numpy() == yte[i:i + b]).sum()
    print(json.dumps({"steps": steps, "test_accuracy": correct / len(xte), "wall_seconds": wall,
                      "images_per_sec": steps * b / wall}))


def time_steps(model, opt, x, y, steps, base):
    """One warm-up training step on (x, y), then `steps` timed ones: the
    median and minimum step time and the RSS increase over `base` (MiB)."""
    times = []
    for i in range(steps + 1):
        t = time.perf_counter()
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if i > 0:  # the first step warms up
            times.append(time.perf_counter() - t)
    times.sort()
    b = x.shape[0]
    return {"engine": "pytorch", "torch": torch.__version__, "threads": torch.get_num_threads(),
            "batch": b, "steps": steps, "median_step_seconds": times[len(times) // 2],
            "min_step_seconds": times[0], "images_per_sec": b / times[len(times) // 2],
            "rss_increase_mib": rss_mib() - base, "loss": loss.item()}


def cmd_bench(a):
    s = read_spec(a.spec, a.set)
    torch.manual_seed(0)
    base = rss_mib()  # after importing torch, before the model exists
    model = RevNet(s)
    opt = optimizer(model, s)
    b = a.batch or s["batch"]
    c, h, w = s["input"]
    x = torch.rand(b, c, h, w)
    y = torch.randint(0, s["classes"], (b,))
    r = time_steps(model, opt, x, y, a.steps, base)
    print(json.dumps(r) if a.json else
          "pytorch: median %.4f s/step, min %.4f s, %.1f images/s, RSS +%.0f MiB" %
          (r["median_step_seconds"], r["min_step_seconds"], r["images_per_sec"], r["rss_increase_mib"]))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("train", "bench"):
        q = sub.add_parser(name)
        q.add_argument("spec")
        q.add_argument("--set", action="append", default=[])
        q.add_argument("--threads", type=int, default=2)
        q.add_argument("--steps", type=int, default=0 if name == "train" else 5)
        q.add_argument("--seed", type=int)
        q.add_argument("--epochs", type=int)
        q.add_argument("--batch", type=int)
        q.add_argument("--json", action="store_true")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    (cmd_train if a.cmd == "train" else cmd_bench)(a)


if __name__ == "__main__":
    main()
