"""Batched gradient descent (docs/science.md §3): determinism, isolation, checkpoints."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnsvm.config.cell import Cell
from attnsvm.gd import fused
from attnsvm.gd.data import make_init
from attnsvm.gd.model import loss_and_grad, loss_fn
from attnsvm.gd.train import stack_cells, train_batch, train_cells
from attnsvm.tasks.metrics import corr

E2 = {"n": 6, "T": 8, "d": 10}  # the E2 shape of docs/science.md §6


def _cells(S, **kw):
    return [Cell(seed=s, **kw) for s in range(S)]


def _train(b, cell, **overrides):
    kw = {
        "param": cell.param,
        "head": cell.head,
        "lam": cell.lam,
        "optimizer": cell.optimizer,
        "lr": cell.lr,
        "iterations": cell.iterations,
        "checkpoints": cell.checkpoints(),
        "dtype": cell.dtype,
        "device": "cpu",
    }
    kw.update(overrides)
    return train_batch(b["X"], b["Y"], b["Z"], b["v"], b["V"], b["init"], **kw)


def _same(a, b):
    return (
        np.array_equal(a.W, b.W)
        and np.array_equal(a.softmax, b.softmax)
        and np.array_equal(a.loss, b.loss)
    )


@pytest.mark.parametrize(
    "kw",
    [
        {"param": "W"},
        {"param": "KQ"},
        {"param": "W", "dtype": "float32"},
        {"param": "KQ", "dtype": "float32", "m": 4},
        {"param": "W", "generator": "relu", "head": "relu"},
        {"param": "KQ", "generator": "orthonormal", "head": "lambda", "lam": 0.5},
        {"param": "W", "loop": "torch"},
        {"param": "KQ", "loop": "torch"},
    ],
    ids=["W", "KQ", "W-f32", "KQ-f32-m4", "W-relu", "KQ-lambda", "W-torch", "KQ-torch"],
)
def test_bit_identical_alone_batched_and_rerun(kw, monkeypatch):
    """A seed's bits do not depend on its batch, in the fused loop (the default at E2's shape,
    attnsvm.gd.fused) and in the torch loop (``ATTNSVM_FUSED=0``; the other cases)."""
    kw = dict(kw)
    if kw.pop("loop", None) == "torch":
        monkeypatch.setenv("ATTNSVM_FUSED", "0")
    cells = _cells(16, iterations=400, **E2, **kw)
    batch = train_cells(cells, device="cpu")
    again = train_cells(cells, device="cpu")
    assert _same(batch, again)
    for s in (0, 9, 15):
        alone = train_cells([cells[s]], device="cpu")
        assert np.array_equal(alone.W[0], batch.W[s])
        assert np.array_equal(alone.softmax[0], batch.softmax[s])
        assert np.array_equal(alone.loss[0], batch.loss[s])
        assert np.array_equal(alone.wnorm[0], batch.wnorm[s])


@pytest.mark.parametrize("loop", ["default", "torch"])
@pytest.mark.parametrize("param", ["W", "KQ"])
def test_nonfinite_seed_is_frozen_and_isolated(param, loop, monkeypatch):
    if loop == "torch":  # the default is the fused loop here (attnsvm.gd.fused)
        monkeypatch.setenv("ATTNSVM_FUSED", "0")
    cells = _cells(6, param=param, iterations=200, **E2)
    clean = stack_cells(cells)
    ref = _train(clean, cells[0])
    assert ref.finite.all() and (ref.nonfinite_iteration == -1).all()

    bad = stack_cells(cells)
    bad["X"] = bad["X"].copy()
    bad["X"][1, 2, 3, 4] = np.nan  # NaN data in seed 1
    name = "W" if param == "W" else "K"
    bad["init"] = {k: a.copy() for k, a in bad["init"].items()}
    bad["init"][name][4, 0, 0] = np.inf  # seed 4: an infinite parameter
    res = _train(bad, cells[0])
    assert res.finite.tolist() == [True, False, True, True, False, True]
    assert res.nonfinite_iteration[1] == 0 and res.nonfinite_iteration[4] == 0
    assert (res.nonfinite_iteration[[0, 2, 3, 5]] == -1).all()
    good = [0, 2, 3, 5]
    # the other seeds are bit-identical to the clean run
    assert np.array_equal(res.W[good], ref.W[good])
    assert np.array_equal(res.loss[good], ref.loss[good])
    # frozen seeds keep their last finite parameters
    init1 = bad["init"]
    W1 = init1["W"][1] if param == "W" else init1["K"][1] @ init1["Q"][1].T
    assert (res.W[1] == res.W[1, :1]).all()
    np.testing.assert_allclose(res.W[1, -1], W1, rtol=1e-14, atol=1e-16)


def test_nonfinite_mid_run_from_a_huge_step_is_isolated():
    cells = _cells(5, param="KQ", optimizer="plain", iterations=50, **E2)
    b = stack_cells(cells)
    b["init"] = {k: a.copy() for k, a in b["init"].items()}
    b["init"]["K"][3] = 0.0  # seed 3: K = Q = 0 is a stationary point, it never moves
    b["init"]["Q"][3] = 0.0
    res = _train(b, cells[0], lr=1e100, checkpoints=[1, 2, 50])
    assert res.finite.tolist() == [True if s == 3 else False for s in range(5)]
    assert res.nonfinite_iteration.tolist() == [-1 if s == 3 else 2 for s in range(5)]
    # a flagged seed is frozen where it went bad
    bad = [0, 1, 2, 4]
    assert np.isfinite(res.W[bad, 0]).all()  # W(1) is finite, K(2) Q(2)^T overflows
    assert np.array_equal(res.W[bad, 1], res.W[bad, 2], equal_nan=True)
    # each seed is exactly what it would be alone
    for s in range(5):
        one = {k: b[k][s : s + 1] for k in ("X", "Y", "Z", "v")}
        one["V"], one["init"] = None, {k: a[s : s + 1] for k, a in b["init"].items()}
        alone = _train(one, cells[0], lr=1e100, checkpoints=[1, 2, 50])
        assert np.array_equal(alone.W[0], res.W[s], equal_nan=True)
        assert alone.nonfinite_iteration[0] == res.nonfinite_iteration[s]


def test_checkpoints_are_the_state_after_k_steps():
    cell = Cell(iterations=30, lr=0.1, **E2)
    b = stack_cells([cell, cell.replace(seed=1)])
    ks = [0, 1, 2, 7, 30]
    res = _train(b, cell, checkpoints=ks)
    assert res.iterations.tolist() == ks
    assert np.array_equal(res.W[:, 0], b["init"]["W"])  # k = 0 is the initialization
    for c, k in enumerate(ks[1:], start=1):
        alone = _train(b, cell, iterations=k, checkpoints=[k])
        assert np.array_equal(alone.W[:, 0], res.W[:, c])
        assert np.array_equal(alone.loss[:, 0], res.loss[:, c])
    # one step by hand: W(1) = W(0) - lr G / ||G||_F
    t = {k: torch.as_tensor(b[k]) for k in ("X", "Y", "Z", "v")}
    W0 = torch.as_tensor(b["init"]["W"])
    _, _, G = loss_and_grad({"W": W0}, t["X"], t["Y"], t["Z"], t["v"], None,
                            param="W", head="linear", lam=0.0)  # fmt: skip
    G = G["W"].numpy()
    W1 = b["init"]["W"] - 0.1 * G / np.linalg.norm(G, axis=(1, 2), keepdims=True)
    np.testing.assert_allclose(res.W[:, 1], W1, rtol=1e-14, atol=1e-15)
    # recorded loss, softmax and norm are those of the recorded W
    loss, s = loss_fn({"W": torch.as_tensor(res.W[:, 3])}, t["X"], t["Y"], t["Z"], t["v"],
                      None, param="W", head="linear", lam=0.0)  # fmt: skip
    np.testing.assert_allclose(res.loss[:, 3], loss.numpy(), rtol=1e-14)
    np.testing.assert_allclose(res.softmax[:, 3], s.numpy(), rtol=1e-13, atol=1e-300)
    np.testing.assert_allclose(res.wnorm, np.linalg.norm(res.W, axis=(2, 3)), rtol=1e-14)


def test_cell_checkpoints_and_result_shapes():
    cells = _cells(3, param="KQ", m=4, iterations=100, checkpoint_count=10, **E2)
    res = train_cells(cells, device="cpu")
    C = len(cells[0].checkpoints())
    assert res.iterations.tolist() == cells[0].checkpoints() and res.iterations[-1] == 100
    assert res.W.shape == (3, C, 10, 10) and res.softmax.shape == (3, C, 6, 8)
    assert res.loss.shape == res.wnorm.shape == (3, C)
    assert res.W.dtype == res.softmax.dtype == res.loss.dtype == np.float64
    # the fused loop computes these cells where it builds (attnsvm.gd.fused), and says so
    assert res.device == ("cpu, fused loop" if fused.library() else "cpu") and res.seconds > 0
    np.testing.assert_allclose(res.softmax.sum(-1), 1.0, rtol=1e-14)
    assert np.linalg.matrix_rank(res.W[0, -1]) <= 4  # W = K Q^T with m = 4


def test_plain_gd_step():
    cell = Cell(optimizer="plain", lr=0.5, iterations=1, **E2)
    b = stack_cells([cell])
    res = _train(b, cell, checkpoints=[1])
    t = {k: torch.as_tensor(b[k]) for k in ("X", "Y", "Z", "v")}
    _, _, G = loss_and_grad({"W": torch.as_tensor(b["init"]["W"])}, t["X"], t["Y"], t["Z"],
                            t["v"], None, param="W", head="linear", lam=0.0)  # fmt: skip
    np.testing.assert_allclose(res.W[:, 0], b["init"]["W"] - 0.5 * G["W"].numpy(), rtol=1e-15)


@pytest.mark.parametrize("param", ["W", "KQ"])
def test_zero_init_trains(param):
    cells = _cells(4, param=param, init="zero", iterations=300, **E2)
    init = make_init(cells[0])
    if param == "KQ":
        assert not init["Q"].any() and init["K"].any()
    else:
        assert not init["W"].any()
    res = _train(stack_cells(cells), cells[0], checkpoints=[0, 1, 300])
    assert res.finite.all()
    assert (res.wnorm[:, 0] == 0).all() and (res.wnorm[:, -1] > 1).all()
    np.testing.assert_allclose(res.softmax[:, 0], 1 / 8, rtol=1e-15)  # W = 0: uniform
    assert (res.loss[:, -1] < res.loss[:, 0]).all()


@pytest.mark.parametrize("param", ["W", "KQ"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_e2_shape_loss_decreases_and_softmax_saturates(param, dtype):
    cells = _cells(8, param=param, dtype=dtype, iterations=2000, **E2)
    res = train_cells(cells, device="cpu")
    assert res.finite.all()
    assert (res.loss[:, -1] < res.loss[:, 0]).all()
    mass = res.softmax[:, -1].max(-1)  # (S, n)
    assert mass.mean() > 0.999
    assert (res.wnorm[:, -1] > res.wnorm[:, 0]).all()


def test_float32_follows_float64():
    cells = _cells(4, iterations=500, **E2)
    r64 = train_cells(cells, device="cpu")
    r32 = train_cells([c.replace(dtype="float32") for c in cells], device="cpu")
    for s in range(4):
        assert corr(r32.W[s, -1], r64.W[s, -1]) > 0.999
    assert np.array_equal(r32.softmax[:, -1].argmax(-1), r64.softmax[:, -1].argmax(-1))


def test_train_cells_rejects_mixed_shapes_and_bad_arguments():
    with pytest.raises(ValueError, match="shape_key"):
        train_cells([Cell(seed=0), Cell(seed=1, d=4)], device="cpu")
    cell = Cell(iterations=5, **E2)
    b = stack_cells([cell])
    with pytest.raises(ValueError, match="checkpoints"):
        _train(b, cell, checkpoints=[3, 9])
    with pytest.raises(ValueError, match="'rmsprop'"):
        _train(b, cell, optimizer="rmsprop")
    with pytest.raises(ValueError, match="'gpu'"):
        _train(b, cell, device="gpu")


def test_autograd_path_agrees_with_hand_gradient():
    cells = _cells(3, param="KQ", generator="relu", head="relu", iterations=100, **E2)
    b = stack_cells(cells)
    hand = _train(b, cells[0])
    auto = _train(b, cells[0], gradient="autograd")
    np.testing.assert_allclose(auto.W, hand.W, rtol=1e-9, atol=1e-12)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.gpu
@pytest.mark.parametrize("param", ["W", "KQ"])
def test_cpu_and_cuda_agree(param):
    cells = _cells(8, param=param, iterations=300, **E2)
    cpu = train_cells(cells, device="cpu")
    gpu = train_cells(cells, device="cuda")
    assert gpu.device.startswith("cuda")
    assert gpu.finite.all()
    np.testing.assert_allclose(gpu.W, cpu.W, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(gpu.softmax, cpu.softmax, rtol=1e-7, atol=1e-12)
    g32 = train_cells([c.replace(dtype="float32") for c in cells], device="cuda")
    for s in range(8):
        assert corr(g32.W[s, -1], cpu.W[s, -1]) > 0.999


def _svm_direction(X, Z, alpha):
    """W_mm(alpha) of docs/science.md §4 (small dense QP, test-only)."""
    import cvxpy as cp

    n, T, d = X.shape
    rows = [np.outer(X[i, alpha[i]] - X[i, t], Z[i]).ravel()
            for i in range(n) for t in range(T) if t != alpha[i]]  # fmt: skip
    w = cp.Variable(d * d)
    prob = cp.Problem(cp.Minimize(cp.sum_squares(w)), [np.array(rows) @ w >= 1])
    prob.solve(solver=cp.CLARABEL)
    assert prob.status == "optimal"
    return w.value.reshape(d, d)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_correlation_with_svm_does_not_decrease_to_20000(dtype):
    """docs/science.md §3: corr(W(k), W_mm) must not decrease from 2000 to 20000 iterations."""
    cells = _cells(4, dtype=dtype, iterations=20000, **E2)
    b = stack_cells(cells)
    ks = [2000, 5000, 10000, 20000]
    res = _train(b, cells[0], checkpoints=ks)
    assert res.finite.all()
    for s in range(4):
        alpha = res.softmax[s, -1].argmax(-1)
        Wmm = _svm_direction(b["X"][s], b["Z"][s], alpha)
        c = [corr(res.W[s, j], Wmm) for j in range(len(ks))]
        assert all(b2 >= a2 - 1e-9 for a2, b2 in zip(c, c[1:], strict=False)), c
        assert c[-1] > 0.995, c
    # the textbook form drifts away (float64) or collapses (float32)
    text = _train(b, cells[0], checkpoints=ks, stable=False)
    for s in range(4):
        alpha = text.softmax[s, -1].argmax(-1)
        Wmm = _svm_direction(b["X"][s], b["Z"][s], alpha)
        assert corr(text.W[s, -1], Wmm) < 0.95


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_in_place_normalized_step_has_the_bits_of_the_formula(dtype):
    from attnsvm.gd.optimizers import normalized_step

    g = torch.Generator().manual_seed(0)
    G = torch.randn(2, 7, 5, 4, generator=g, dtype=torch.float64).to(dtype)
    G[0, 1] = 0.0  # zero gradient: zero step
    G[1, 2] *= torch.finfo(dtype).tiny  # subnormal entries
    G[0, 3] *= 1e30  # large
    lr, eps = 0.1, float(torch.finfo(dtype).tiny)
    m = G.abs().amax(dim=(-2, -1), keepdim=True).clamp_min(eps)
    Gs = G / m
    want = Gs * (lr / (torch.linalg.vector_norm(Gs, dim=(-2, -1), keepdim=True) + eps / m))
    got = normalized_step(G.clone(), lr, eps)
    assert got.numpy().tobytes() == want.numpy().tobytes()


def test_unfrozen_pass_flags_a_loss_that_is_non_finite_at_one_step_only():
    from attnsvm.gd.train import descend

    S, d = 4, 3
    theta = torch.zeros(S, d, d, dtype=torch.float64)
    calls = []

    class Model:  # a loss that is inf once for seed 1, a non-finite step for seed 2
        seeds = S

        def __call__(self, params, grad):
            k = len(calls)
            calls.append(k)
            loss = torch.ones(S, dtype=torch.float64)
            if k == 3:
                loss[1] = float("inf")  # seed 1: one bad loss, finite again afterwards
            G = torch.ones_like(params[0])
            if k == 5:
                G[2, 0, 0] = float("-inf")  # seed 2: a non-finite step
            return loss, torch.zeros(S, 1, 1, dtype=torch.float64), params[0], [G]

        def extras(self, params):
            return {}

    def rule(p, G, loss):
        return p - 0.1 * G

    for freeze in (False, True):
        calls.clear()
        _, alive, bad_at, _ = descend(Model(), [theta], [rule], [0, 10], 10, freeze=freeze)
        assert alive.tolist() == [True, False, False, True]
        if freeze:
            assert bad_at.tolist() == [-1, 3, 5, -1]
    assert (theta == 0).all()  # the caller's tensor is not updated in place
