# test_revc.py: the Python module revc against oracles: revc mem --json for
# memory (byte for byte), the fashion-b4 fixture (an independent PyTorch
# implementation) for the loss, gradients and a training step, and the
# command line for version and diagnostics.
import ctypes
import gc
import json
import re
import sys

import numpy as np
import pytest

import revc
from conftest import FIXTURE, SMALL, SPEC, batch, revc_cli, set_args


def test_version_is_the_commands():
    assert revc.version() == revc_cli("--version").stdout.split()[1]
    assert revc.__version__ == revc.version()


@pytest.mark.parametrize("strategy", ["store", "revnet", "checkpoint"])
def test_memory_equals_revc_mem_json(strategy):
    cli = json.loads(revc_cli("mem", SPEC, *set_args(SMALL), "--strategy", strategy, "--json").stdout)
    want = cli["strategies"][0]
    for r in (revc.memory(SPEC, set=SMALL, strategy=strategy),
              revc.Model(SPEC, set=SMALL, strategy=strategy).memory()):
        got = vars(r)
        assert got["strategy"] == strategy
        for key in ("schedule", "steps", "peak_step", "peak_bytes", "arena_bytes", "saved_transient_peak_bytes", "total_bytes"):
            assert got[key] == want[key], key
        assert vars(r.at_peak) == want["at_peak"]
        assert r.largest == want["largest"]


def cli_strategy_names():
    """The names revc's --strategy takes, from the list its error gives."""
    err = revc_cli("train", "--strategy", "bogus", check=False).stderr
    m = re.search(r"--strategy must be (.*), not 'bogus'", err)
    assert m, err
    return re.split(r", | or ", m.group(1))


def test_strategy_names_are_the_commands():
    names = cli_strategy_names()
    assert "min" in names and "auto" in names
    for name in names:
        cli = json.loads(revc_cli("mem", SPEC, *set_args(SMALL), "--strategy", name, "--json").stdout)
        want = cli["strategies"][0]
        m = revc.Model(SPEC, set=SMALL, strategy=name)
        assert m.strategy == name
        for r in (revc.memory(SPEC, set=SMALL, strategy=name), m.memory(), m.memory(strategy=name)):
            assert r.strategy == want["strategy"], name
            assert (r.peak_bytes, r.total_bytes) == (want["peak_bytes"], want["total_bytes"]), name
    with pytest.raises(revc.UsageError) as e:
        revc.memory(SPEC, set=SMALL, strategy="bogus")
    assert str(e.value) == f"unknown strategy 'bogus' ({', '.join(names)})"


def test_memory_of_another_strategy(small):
    cli = json.loads(revc_cli("mem", SPEC, *set_args(SMALL), "--strategy", "store", "--json").stdout)
    assert small.memory(strategy="store").peak_bytes == cli["strategies"][0]["peak_bytes"]
    assert small.memory().strategy == "revnet"


def test_params_are_views_that_a_step_changes(small):
    name = "s0.u0.f.conv0.w"
    w = small.params[name]
    assert w.dtype == np.float32 and w.flags.c_contiguous and w.base is small
    address = w.__array_interface__["data"][0]
    before = w.copy()
    x, y = batch()
    loss = small.train_step(x, y, 0.1)
    assert np.isfinite(loss) and loss == small.loss
    assert not np.array_equal(w, before), "the view did not see the step"
    assert np.shares_memory(w, small.params[name])
    assert small.params[name].__array_interface__["data"][0] == address


def test_params_in_model_order(small, tmp_path):
    # revc init's manifest lists the tensors in docs/model.md order.
    revc_cli("init", SPEC, *set_args(SMALL), "--out", str(tmp_path / "init"))
    listed = [line.split()[1:] for line in open(tmp_path / "init" / "revc-manifest.txt") if line.startswith("tensor ")]
    names = [n for n, _ in listed]
    assert [n for n in names if n in small.params] == list(small.params)
    assert [n for n in names if n in small.state] == [n for n in small.state if not n.endswith(".mom")]
    assert set(names) <= set(small.params) | set(small.state) and not set(small.params) & set(small.state)
    for n, t in listed:
        a = small.params.get(n, small.state.get(n))
        assert t == f"f32[{','.join(map(str, a.shape))}]", n


def test_a_view_keeps_its_model_alive():
    m = revc.Model(SPEC, set=SMALL, engine="interp")
    refs = sys.getrefcount(m)
    w = m.params["s0.u0.f.conv0.w"]
    assert sys.getrefcount(m) == refs + 1
    total = float(w.sum())
    del m
    gc.collect()
    assert float(w.sum()) == total
    assert isinstance(w.base, revc.Model)


def test_models_free_their_memory():
    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096
    big = dict(SMALL, batch=64)  # an arena of about 20 MB
    arena = revc.memory(SPEC, set=big, engine="interp").arena_bytes
    revc.Model(SPEC, set=big, engine="interp")
    start = rss()
    for _ in range(10):
        m = revc.Model(SPEC, set=big, engine="interp")
        m.train_step(*batch(64))
        del m
    assert rss() - start < 3 * arena, "models are not freed when collected"


def fixture_model(**kw):
    m = revc.Model(SPEC, set={"batch": 4}, dtype="float64", **kw)
    assert m.load(FIXTURE / "params") is None
    return m


def fixture_batch():
    return np.load(FIXTURE / "x.npy"), np.load(FIXTURE / "y.npy")


def close(a, b, tol=1e-9):
    return np.max(np.abs(a - b)) <= tol * np.max(np.abs(b))


def test_gradients_match_the_fixture():
    m = fixture_model()
    g = m.grad(*fixture_batch())
    assert list(g) == list(m.params), "gradients are not in model order"
    assert abs(m.loss - float(np.load(FIXTURE / "grad_f64" / "loss.npy"))) <= 1e-9 * 2.4
    for name, a in g.items():
        want = np.load(FIXTURE / "grad_f64" / f"{name}.npy")
        assert a.shape == want.shape and a.dtype == np.float64
        assert close(a, want), name


def test_a_training_step_matches_the_fixture():
    m = fixture_model()
    m.train_step(*fixture_batch(), 0.1)
    for name, a in m.params.items():
        assert close(a, np.load(FIXTURE / "step_f64" / f"{name}.npy")), name


def test_eval(small):
    x, y = batch(10)
    loss, acc, logits = small.eval(x, y, logits=True)
    assert np.isfinite(loss) and 0 <= acc <= 1
    assert logits.shape == (10, small.classes)
    assert acc == np.mean(np.argmax(logits, axis=1) == y)
    assert small.eval(x, y)[:2] == (loss, acc)


def test_save_and_load(small, tmp_path):
    small.train_step(*batch(), 0.1)  # momentum buffers not zero
    small.save(tmp_path / "ck", step=7)
    other = revc.Model(SPEC, set=dict(SMALL, seed=5))
    assert not np.array_equal(other.params["s0.u0.f.conv0.w"], small.params["s0.u0.f.conv0.w"])
    assert other.load(tmp_path / "ck", checkpoint=True) == 7
    for name, a in {**small.params, **small.state}.items():
        assert np.array_equal(other.params.get(name, other.state.get(name)), a), name
    fresh = revc.Model(SPEC, set=dict(SMALL, seed=5))
    assert fresh.load(tmp_path / "ck") is None  # parameters only: momentum at zero
    for name, a in small.params.items():
        assert np.array_equal(fresh.params[name], a), name
    assert not any(np.any(v) for n, v in fresh.state.items() if n.endswith(".mom"))
    assert any(np.any(v) for n, v in small.state.items() if n.endswith(".mom"))


def test_errors_carry_revcs_diagnostic(tmp_path):
    bad = tmp_path / "bad.rev"
    bad.write_text(open(SPEC).read().replace("classes = 10", "classes = ten"))
    cli = revc_cli("mem", str(bad), check=False)
    with pytest.raises(revc.UserError) as e:
        revc.Model(bad)
    assert str(e.value) + "\n" == cli.stderr
    assert isinstance(e.value, revc.Error)
    with pytest.raises(revc.UserError, match="cannot"):
        revc.Model(tmp_path / "missing.rev")


def test_bad_arguments_raise_usage_errors(small):
    with pytest.raises(revc.UsageError, match="unknown strategy 'fast'"):
        revc.Model(SPEC, strategy="fast")
    with pytest.raises(ValueError):
        revc.Model(SPEC, engine="gpu")
    with pytest.raises(revc.UsageError, match=r"x has shape \(4, 1, 27, 28\)"):
        small.train_step(np.zeros((4, 1, 27, 28), np.float32), np.zeros(4, np.int32))
    with pytest.raises(revc.UsageError, match="labels"):
        small.train_step(*batch()[:1], np.zeros(4, np.float32))
    with pytest.raises(revc.UsageError):
        small.train_step(*batch(5))


def test_labels_out_of_range(small):
    x, _ = batch()
    with pytest.raises(revc.UserError, match="label"):
        small.train_step(x, np.array([0, 1, 2, 10]))


def test_max_memory():
    with pytest.raises(revc.Error, match="max"):
        revc.Model(SPEC, set=SMALL, max_memory=1000)


def test_compile(tmp_path):
    lib, header = tmp_path / "libsmall.so", tmp_path / "small.h"
    try:
        revc.compile(SPEC, lib, header=header, set=SMALL)
    except revc.Error as e:
        if "no revc_emit" in str(e):
            pytest.skip("this librevc has no revc_emit yet")
        raise
    assert "small_train_step" in header.read_text()
    so = ctypes.CDLL(str(lib))
    so.small_new.restype = ctypes.c_void_p
    so.small_free.argtypes = [ctypes.c_void_p]
    m = so.small_new(ctypes.c_uint64(1))
    assert m
    so.small_free(m)
    with pytest.raises(revc.UsageError):
        revc.compile(SPEC, tmp_path / "x.txt")


# ---- the gradient check, and IR models (Model.check_gradients, .ir files)

def test_check_gradients_against_finite_differences():
    m = revc.Model(SPEC, set=SMALL, engine="interp")
    r = m.check_gradients(samples=2)
    assert r["ok"] and r["failed"] == 0 and r["engine"] == "interp" and r["seed"] == 1
    assert list(r["tensors"]) == list(m.params), "not every parameter, or not in model order"
    assert all(t["ok"] and t["samples"] == 2 and t["error"] <= 1e-6 for t in r["tensors"].values())
    assert r["worst"] == max(t["error"] for t in r["tensors"].values())
    # The check can fail: no finite difference meets a tolerance of 1e-16.
    bad = m.check_gradients(samples=1, tolerance=1e-16)
    assert not bad["ok"] and bad["failed"] > 0
    with pytest.raises(revc.UsageError, match="samples >= 1"):
        m.check_gradients(samples=0)


def test_an_ir_model_trains_as_its_spec(tmp_path):
    # The spec's training step written as IR through optim, read back: with
    # the same parameters and batch its loss and update are the spec's.
    ir = tmp_path / "step.ir"
    revc_cli("dump", SPEC, *set_args(SMALL), "--after", "optim", "-o", str(ir))
    m = revc.Model(str(ir))
    assert m.input_shape == (4, 1, 28, 28) and m.classes == 10
    m.save(tmp_path / "p")
    spec = revc.Model(SPEC, set=SMALL)
    spec.load(tmp_path / "p")
    x, y = batch()
    for _ in range(2):
        assert abs(m.train_step(x, y) - spec.train_step(x, y)) <= 1e-6
    for name, a in spec.params.items():
        assert np.allclose(m.params[name], a, rtol=1e-5, atol=1e-7), name
    with pytest.raises(revc.UsageError, match="needs a spec or a forward graph"):
        m.check_gradients()


def test_an_ir_model_uses_the_training_settings_it_carries(tmp_path):
    # The forward IR revc dump writes carries the spec's settings (train { ...
    # }): the seed of the parameters and the optimiser, here AdamW with its
    # keys, are the spec's, and so are the losses, updates and evaluation.
    sets = dict(SMALL, seed=5, optimizer="adamw", beta1=0.8, weight_decay=0.01)
    ir = tmp_path / "fwd.ir"
    revc_cli("dump", SPEC, *set_args(sets), "-o", str(ir))
    assert "  optimizer = adamw\n" in ir.read_text()
    m, spec = revc.Model(str(ir)), revc.Model(SPEC, set=sets)
    assert "adamw.t" in m.state
    for name, a in spec.params.items():
        assert np.array_equal(m.params[name], a), name
    x, y = batch()
    for _ in range(2):
        assert m.train_step(x, y, 0.01) == spec.train_step(x, y, 0.01)
    for name, a in spec.state.items():
        assert np.array_equal(m.state[name], a), name
    assert m.eval(x, y) == spec.eval(x, y)
    # Without the block the optimiser and seed are the defaults: not the spec's.
    bare = tmp_path / "bare.ir"
    text = ir.read_text()
    bare.write_text(text[text.index("graph @"):])
    b = revc.Model(str(bare))
    assert "adamw.t" not in b.state and not np.array_equal(b.params["init.conv.w"], spec.params["init.conv.w"])


def test_an_ir_model_computes_in_its_graphs_dtype(tmp_path):
    ir = tmp_path / "f64.ir"
    revc_cli("dump", SPEC, *set_args(SMALL), "--dtype", "f64", "-o", str(ir))
    m, spec = revc.Model(str(ir), engine="interp"), revc.Model(SPEC, set=SMALL, dtype="float64", engine="interp")
    assert m.dtype == np.float64 and m.params["init.conv.w"].dtype == np.float64
    x, y = batch()
    assert m.train_step(x, y) == spec.train_step(x, y)


def test_an_ir_model_without_an_image_input_says_so(tmp_path):
    ir = tmp_path / "dense.ir"
    ir.write_text("graph @dense {\n"
                  '  %0 = input {name="x"} : f32[2,4]\n'
                  '  %1 = input {name="labels"} : i32[2]\n'
                  "  $fc.w = param : f32[3,4]\n"
                  "  %3 = matmul(%0, $fc.w) {trans_b=1} : f32[2,3]\n"
                  "  %4 = softmax_xent(%3, %1) : f32[]\n"
                  '  %5 = output(%4) {name="loss"} : f32[]\n'
                  "}\n")
    m = revc.Model(str(ir), engine="interp", strategy="store")
    assert m.input_shape == () and m.classes == 3
    with pytest.raises(revc.UsageError, match=r"without an input x of shape \[N, C, H, W\]"):
        m.train_step(np.zeros((2, 4), np.float32), np.zeros(2, np.int32))
