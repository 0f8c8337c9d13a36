#!/usr/bin/python3
"""docs/model.md's reversible vision transformer (RevViT) in PyTorch (Debian's
python3-torch 1.13): the reference revc is compared against in
bench/vs_pytorch for the RevViT presets.  Two variants of one network:

  autograd    ordinary autograd, every activation stored;
  reversible  the units run as one torch.autograd.Function that keeps only
              the last unit's outputs and, going backward, rebuilds each
              unit's inputs from its outputs (x2 = y2 - G(y1), x1 = y1 - F(x2))
              while recomputing F and G for their gradients.

    revvit_torch.py check DIR [--variant V]
    revvit_torch.py bench SPEC [--set KEY=VALUE] [--variant V] [--steps K]
                               [--batch B] [--threads T] [--json]

check: DIR is a fixture in tests/data/revvit-b4's layout (params/, x.npy,
y.npy, grad_f64/, step_f64/, adam_f64/).  In float64, from those
parameters, the loss and the 55 gradients must match grad_f64, and one AdamW
step (lr 1e-3, wd 0.05 on conv and dense weights) step_f64 and adam_f64,
each tensor to max|a-b| <= 1e-9 max|b|, for both variants (or V).  Exits 0
when they do, 1 when not, 77 when torch or numpy is missing.

bench: one warm-up step, then K timed training steps (forward, loss,
backward, optimiser) on random data of the spec's shape; prints the median
and minimum step time and the peak RSS increase over the process's baseline
(after importing torch), as bench/revnet_torch.py does.

The spec file is read for the keys this script needs (input, classes, patch,
width, heads, units, mlp_ratio, batch, optimizer, lr, weight_decay, beta1,
beta2, eps, momentum; the language is revc's, docs/spec.md), skipping any
block or network definitions; it never depends on revc's code.  The network
follows docs/model.md exactly: patch embedding by a p x p stride-p conv with
bias, learned positional embedding, duplicated streams, units
y1 = x1 + Attn(LN(x2)), y2 = x2 + MLP(LN(y1)) with LN eps 1e-5, qkv columns
q | k | v and head j at columns j*d.., exact (erf) GELU, final
LN((x1 + x2)/2), mean over tokens, dense, mean cross-entropy.  AdamW is
torch.optim.AdamW with weight decay on conv and dense weights only.

Step times measured with `bench --steps 5` (2 threads, a 2-core AMD EPYC,
Zen 4 with AVX-512, shared with other jobs at a 1-minute load average of 8
to 9, so far from idle; median step s of each run, fastest step s):
  revvit-fashion (batch 100): autograd 0.43, 2.68 (0.19); reversible 4.83, 4.20 (2.31)
  revvit-cifar (batch 64):    autograd 11.2, 13.2 (5.3); reversible 20.4 (17.8)
The reversible variant's peak RSS increase is 0.6x autograd's on
revvit-fashion (about 120 against 195 MiB) and 0.23x on revvit-cifar (340
against 1490 MiB).
"""
import argparse
import json
import math
import os
import sys

try:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:  # the test that runs `check` skips without them
    print(f"revvit_torch.py: {e}: skipped", file=sys.stderr)
    sys.exit(77)

from revnet_torch import rss_mib, time_steps  # bench/, beside this file


def read_spec(path, sets=()):
    """The key = value lines of a spec outside any { } body, then --set."""
    spec = {"lr": "0.1", "momentum": "0.9", "weight_decay": "2e-4", "optimizer": "momentum",
            "beta1": "0.9", "beta2": "0.999", "eps": "1e-8"}
    depth = 0
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line.endswith("{"):
                depth += 1
            elif line.startswith("}"):
                depth -= 1
                if line.endswith("{"):  # } else {
                    depth += 1
            elif depth == 0 and "=" in line:
                k, v = (s.strip() for s in line.split("=", 1))
                spec[k] = v
    for s in sets:
        k, v = s.split("=", 1)
        spec[k.strip()] = v.strip()
    need = [k for k in ("input", "classes", "patch", "width", "heads", "units", "mlp_ratio", "batch")
            if k not in spec]
    if need:
        sys.exit(f"revvit_torch.py: error: {path} is not a RevViT spec: no {', '.join(need)}")
    return {
        "input": [int(x) for x in spec["input"].split(",")], "classes": int(spec["classes"]),
        "patch": int(spec["patch"]), "width": int(spec["width"]), "heads": int(spec["heads"]),
        "units": int(spec["units"]), "mlp_ratio": int(spec["mlp_ratio"]), "batch": int(spec["batch"]),
        "optimizer": spec["optimizer"], "lr": float(spec.get("lr_list", spec["lr"]).split(",")[0]),
        "weight_decay": float(spec["weight_decay"]), "momentum": float(spec["momentum"]),
        "betas": (float(spec["beta1"]), float(spec["beta2"])), "eps": float(spec["eps"]),
    }


def glorot(w, fan_in, fan_out):
    a = math.sqrt(6.0 / (fan_in + fan_out))
    nn.init.uniform_(w, -a, a)


def dense(n_in, n_out):
    """A dense layer of docs/model.md: Glorot weight [n_out, n_in], bias 0."""
    d = nn.Linear(n_in, n_out)
    glorot(d.weight, n_in, n_out)
    nn.init.zeros_(d.bias)
    return d


class Embed(nn.Module):
    """p x p stride-p VALID conv with bias -> tokens [N, T, D] -> + pos."""

    def __init__(self, c, h, w, p, d):
        super().__init__()
        self.conv = nn.Conv2d(c, d, p, p)
        glorot(self.conv.weight, c * p * p, d * p * p)
        nn.init.zeros_(self.conv.bias)
        self.pos = nn.Parameter(torch.empty((h // p) * (w // p), d).uniform_(-0.02, 0.02))

    def forward(self, x):
        # [N, D, H/p, W/p] -> [N, T, D] with t = i*(W/p) + j
        return self.conv(x).flatten(2).transpose(1, 2) + self.pos


class Attn(nn.Module):
    """F: LN, then multi-head attention; qkv's columns are q | k | v."""

    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln = nn.LayerNorm(d, eps=1e-5)
        self.qkv = dense(d, 3 * d)
        self.proj = dense(d, d)

    def forward(self, z):
        n, t, d = z.shape
        h = self.heads
        qkv = self.qkv(self.ln(z))
        # column c*D + j*(D/h) + e: part c (q, k, v), head j, element e
        q, k, v = qkv.reshape(n, t, 3, h, d // h).permute(2, 0, 3, 1, 4)
        p = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d // h), dim=-1)
        o = (p @ v).transpose(1, 2).reshape(n, t, d)
        return self.proj(o)


class MLP(nn.Module):
    """G: LN, dense to m*D, exact GELU, dense back to D."""

    def __init__(self, d, m):
        super().__init__()
        self.ln = nn.LayerNorm(d, eps=1e-5)
        self.fc1 = dense(d, m * d)
        self.fc2 = dense(m * d, d)

    def forward(self, z):
        return self.fc2(F.gelu(self.fc1(self.ln(z)), approximate="none"))


class Unit(nn.Module):
    def __init__(self, d, heads, m):
        super().__init__()
        self.f = Attn(d, heads)
        self.g = MLP(d, m)

    def forward(self, x1, x2):
        y1 = x1 + self.f(x2)
        y2 = x2 + self.g(y1)
        return y1, y2


class RevUnits(torch.autograd.Function):
    """All units of the stage with O(1) saved activations: forward keeps no
    graph and saves only the last outputs; backward walks the units in
    reverse, rebuilding each one's inputs and backpropagating through F and
    G recomputed from them (their parameters' gradients accumulate in .grad,
    as they would under ordinary autograd)."""

    @staticmethod
    def forward(ctx, x1, x2, units):
        with torch.no_grad():
            for u in units:
                x1, x2 = u(x1, x2)
        ctx.units = units
        ctx.save_for_backward(x1, x2)
        return x1, x2

    @staticmethod
    def backward(ctx, dy1, dy2):
        y1, y2 = ctx.saved_tensors
        for u in reversed(ctx.units):
            with torch.enable_grad():
                y1 = y1.detach().requires_grad_()
                g = u.g(y1)
                g.backward(dy2)
            with torch.no_grad():
                x2 = y2 - g
                dy1 = dy1 + y1.grad
            with torch.enable_grad():
                x2 = x2.detach().requires_grad_()
                f = u.f(x2)
                f.backward(dy1)
            with torch.no_grad():
                x1 = y1 - f
                dy2 = dy2 + x2.grad
            y1, y2 = x1.detach(), x2.detach()
        return dy1, dy2, None


class RevViT(nn.Module):
    def __init__(self, s, reversible):
        super().__init__()
        c, h, w = s["input"]
        d = s["width"]
        self.reversible = reversible
        self.embed = Embed(c, h, w, s["patch"], d)
        self.s0 = nn.Module()
        for u in range(s["units"]):
            self.s0.add_module(f"u{u}", Unit(d, s["heads"], s["mlp_ratio"]))
        self.final = nn.Module()
        self.final.ln = nn.LayerNorm(d, eps=1e-5)
        self.final.dense = dense(d, s["classes"])

    def forward(self, x):
        x1 = x2 = self.embed(x)  # duplicated: the tokens' gradient is dx1 + dx2
        units = list(self.s0.children())
        if self.reversible:
            x1, x2 = RevUnits.apply(x1, x2, units)
        else:
            for u in units:
                x1, x2 = u(x1, x2)
        z = self.final.ln((x1 + x2) / 2)
        return self.final.dense(z.mean(dim=1))


def model_names(model):
    """docs/model.md's name of each parameter: {name: parameter}."""
    out = {}
    for name, p in model.named_parameters():
        mod, leaf = name.rsplit(".", 1)
        if isinstance(model.get_submodule(mod), nn.LayerNorm):
            leaf = {"weight": "gamma", "bias": "beta"}[leaf]
        elif leaf != "pos":
            leaf = {"weight": "w", "bias": "b"}[leaf]
        out[mod + "." + leaf] = p
    return out


def decays(name):
    """Weight decay applies to conv and dense weights only."""
    return name.endswith(".w")


def optimizer(model, s):
    named = model_names(model)
    groups = [{"params": [p for n, p in named.items() if decays(n)], "weight_decay": s["weight_decay"]},
              {"params": [p for n, p in named.items() if not decays(n)], "weight_decay": 0.0}]
    if s["optimizer"] == "adamw":
        return torch.optim.AdamW(groups, lr=s["lr"], betas=s["betas"], eps=s["eps"])
    return torch.optim.SGD(groups, lr=s["lr"], momentum=s["momentum"])


# The fixture's network: revvit-fashion (docs/model.md's table) at batch 4,
# and the AdamW step its step_f64 took.
FIXTURE = {"input": [1, 28, 28], "classes": 10, "patch": 4, "width": 64, "heads": 4, "units": 4,
           "mlp_ratio": 2, "batch": 4, "optimizer": "adamw", "lr": 1e-3, "weight_decay": 0.05,
           "betas": (0.9, 0.999), "eps": 1e-8, "momentum": 0.0}


def compare(what, got, want, tol=1e-9):
    """max|a-b| / max|b| for one tensor; prints a line when over tol."""
    want = np.asarray(want, np.float64)
    got = got.detach().numpy()
    if got.shape != want.shape:
        print(f"  {what}: shape {got.shape}, expected {want.shape}")
        return math.inf
    scale = np.abs(want).max()
    err = np.abs(got - want).max() / (scale if scale > 0 else 1.0)
    if not err <= tol:
        print(f"  {what}: max|a-b|/max|b| = {err:.3e} > {tol:g}")
    return err


def check_variant(d, reversible):
    torch.manual_seed(0)
    model = RevViT(FIXTURE, reversible).double()
    named = model_names(model)
    files = sorted(f[:-4] for f in os.listdir(os.path.join(d, "params")) if f.endswith(".npy"))
    if files != sorted(named):
        print(f"  parameter names differ from {d}/params: "
              f"missing {sorted(set(named) - set(files))}, extra {sorted(set(files) - set(named))}")
        return False
    with torch.no_grad():
        for n, p in named.items():
            w = np.load(os.path.join(d, "params", n + ".npy"))
            if w.shape != tuple(p.shape):
                print(f"  {n}: shape {w.shape} in {d}/params, the network has {tuple(p.shape)}")
                return False
            p.copy_(torch.from_numpy(w.astype(np.float64)))
    x = torch.from_numpy(np.load(os.path.join(d, "x.npy")).astype(np.float64))
    y = torch.from_numpy(np.load(os.path.join(d, "y.npy")).astype(np.int64))
    opt = optimizer(model, FIXTURE)
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    errs = {"loss": compare("loss", loss, np.load(os.path.join(d, "grad_f64", "loss.npy")))}
    for n, p in named.items():
        errs["grad " + n] = compare("grad " + n, p.grad, np.load(os.path.join(d, "grad_f64", n + ".npy")))
    opt.step()
    for n, p in named.items():
        errs["step " + n] = compare("step " + n, p, np.load(os.path.join(d, "step_f64", n + ".npy")))
        st = opt.state[p]
        errs["m " + n] = compare("m " + n, st["exp_avg"], np.load(os.path.join(d, "adam_f64", n + ".m.npy")))
        errs["v " + n] = compare("v " + n, st["exp_avg_sq"], np.load(os.path.join(d, "adam_f64", n + ".v.npy")))
    worst = {k: max((e for n, e in errs.items() if n.startswith(k)), default=0.0)
             for k in ("loss", "grad", "step", "m", "v")}
    ok = all(e <= 1e-9 for e in errs.values())
    print(f"{'reversible' if reversible else 'autograd':10s} f64: worst max|a-b|/max|b|: "
          + ", ".join(f"{k} {e:.1e}" for k, e in worst.items()) + (": ok" if ok else ": FAILED"))
    return ok


def cmd_check(a):
    torch.set_num_threads(a.threads)
    variants = {"autograd": [False], "reversible": [True], "both": [False, True]}[a.variant]
    ok = True
    for rev in variants:
        ok = check_variant(a.dir, rev) and ok
    return 0 if ok else 1


def cmd_bench(a):
    torch.set_num_threads(a.threads)
    s = read_spec(a.spec, a.set)
    torch.manual_seed(0)
    base = rss_mib()  # after importing torch, before the model exists
    model = RevViT(s, a.variant == "reversible")
    opt = optimizer(model, s)
    b = a.batch or s["batch"]
    c, h, w = s["input"]
    x = torch.rand(b, c, h, w)
    y = torch.randint(0, s["classes"], (b,))
    r = {"variant": a.variant, **time_steps(model, opt, x, y, a.steps, base)}
    print(json.dumps(r) if a.json else
          "pytorch (%s): median %.4f s/step, min %.4f s, %.1f images/s, RSS +%.0f MiB" %
          (a.variant, r["median_step_seconds"], r["min_step_seconds"], r["images_per_sec"],
           r["rss_increase_mib"]))
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    q = sub.add_parser("check", help="float64 loss, gradients and one AdamW step against a fixture")
    q.add_argument("dir")
    q.add_argument("--variant", choices=("autograd", "reversible", "both"), default="both")
    q.add_argument("--threads", type=int, default=2)
    q = sub.add_parser("bench", help="time training steps of a spec's network")
    q.add_argument("spec")
    q.add_argument("--set", action="append", default=[])
    q.add_argument("--variant", choices=("autograd", "reversible"), default="autograd")
    q.add_argument("--threads", type=int, default=2)
    q.add_argument("--steps", type=int, default=5)
    q.add_argument("--batch", type=int)
    q.add_argument("--json", action="store_true")
    a = p.parse_args()
    return (cmd_check if a.cmd == "check" else cmd_bench)(a)


if __name__ == "__main__":
    sys.exit(main())
