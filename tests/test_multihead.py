"""Multi-head attention (docs/science.md §12): H = 1 is the single head bit for bit, the
hand-derived gradient is autograd's, identical heads are one head with a smaller step."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnsvm.config.cell import Cell
from attnsvm.gd.data import head_inits, make_init
from attnsvm.gd.model import Batch, MultiHead
from attnsvm.gd.train import stack_cells, train_arrays, train_batch

E2 = {"n": 6, "T": 8, "d": 10}


def train_multihead(X, Y, Z, v, init, settings=None, **kw):
    """The H-head model through the descent loop (docs/science.md §12)."""
    return train_arrays("multi_head", {"X": X, "Y": Y, "Z": Z, "v": v}, init, settings, **kw)


def _batch(S, H, **kw):
    cells = [Cell(seed=s, **E2, **kw) for s in range(S)]
    b = stack_cells(cells)
    inits = [head_inits(make_init(c), c.seed, H, c.init) for c in cells]
    b["heads"] = {k: np.stack([i[k] for i in inits]) for k in inits[0]}
    return cells, b


@pytest.mark.parametrize("param", ["W", "KQ"])
def test_one_head_is_the_single_head_bit_for_bit(param, monkeypatch):
    # the multi-head model does the torch loop's arithmetic: compare it with the torch loop
    # (the single head's default at this shape is the fused loop, attnsvm.gd.fused)
    monkeypatch.setenv("ATTNSVM_FUSED", "0")
    cells, b = _batch(4, 1, param=param, iterations=300)
    c = cells[0]
    kw = dict(param=param, optimizer="normalized", lr=c.lr, iterations=c.iterations,
              checkpoints=c.checkpoints(), device="cpu")  # fmt: skip
    one = train_batch(b["X"], b["Y"], b["Z"], b["v"], None, b["init"], head="linear", lam=0.0,
                      **kw)  # fmt: skip
    multi = train_multihead(b["X"], b["Y"], b["Z"], b["v"], b["heads"], **kw)
    assert np.array_equal(multi.W[:, :, 0], one.W)
    assert np.array_equal(multi.softmax[:, :, 0], one.softmax)
    assert np.array_equal(multi.loss, one.loss)


@pytest.mark.parametrize("param", ["W", "KQ"])
@pytest.mark.parametrize("H", [2, 3])
def test_gradient_equals_autograd(param, H):
    _, b = _batch(3, H, param=param)
    X, Y, Z, v = (torch.as_tensor(b[k]) for k in ("X", "Y", "Z", "v"))
    params = {k: torch.as_tensor(a) * 3.0 for k, a in b["heads"].items()}  # away from 0
    model = MultiHead(Batch(X, Y, Z, v), heads=H, param=param)
    theta = model.params(params)
    leaves = [theta[0].clone().requires_grad_(True)]
    loss, s = model.loss(leaves)
    (ref,) = torch.autograd.grad(loss.sum(), leaves)
    loss2, s2, _, (G,) = model(theta)
    np.testing.assert_allclose(loss2.numpy(), loss.detach().numpy(), rtol=1e-13)
    np.testing.assert_allclose(s2.numpy(), s.detach().numpy(), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(G.numpy(), ref.numpy(), rtol=1e-10, atol=1e-14)


def test_identical_heads_are_one_head_with_step_over_sqrt_h():
    """H equal heads give the single head's output and each the gradient G / H; the stacked
    normalization then moves each head by lr / sqrt(H) along G / ||G||."""
    H = 4
    cells, b = _batch(2, 1, iterations=200)
    c = cells[0]
    same = {"W": np.repeat(b["heads"]["W"], H, axis=1)}
    kw = dict(optimizer="normalized", iterations=c.iterations, checkpoints=c.checkpoints(),
              device="cpu", param="W")  # fmt: skip
    multi = train_multihead(b["X"], b["Y"], b["Z"], b["v"], same, lr=c.lr, **kw)
    one = train_batch(b["X"], b["Y"], b["Z"], b["v"], None, b["init"], head="linear", lam=0.0,
                      lr=c.lr / np.sqrt(H), **kw)  # fmt: skip
    for h in range(H):
        np.testing.assert_allclose(multi.W[:, :, h], one.W, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(multi.loss, one.loss, rtol=1e-9)


def test_head_inits_keep_head_one_and_draw_distinct_heads():
    c = Cell(seed=3, **E2, param="KQ")
    ini = head_inits(make_init(c), c.seed, 3, c.init)
    assert ini["K"].shape == (3, 10, 10)
    assert np.array_equal(ini["K"][0], make_init(c)["K"])
    assert not np.allclose(ini["K"][1], ini["K"][2])
    again = head_inits(make_init(c), c.seed, 3, c.init)
    assert np.array_equal(ini["Q"], again["Q"])


def test_heads_field_keeps_single_head_digests_and_names_bad_values():
    from attnsvm.config.cell import CellError

    assert "heads" not in Cell().to_dict()
    assert Cell(heads=1).digest() == Cell().digest()
    assert Cell(heads=2).digest() != Cell().digest()
    with pytest.raises(CellError, match="heads must be a positive integer"):
        Cell(heads=0)
    with pytest.raises(CellError, match="heads > 1 needs task 'train', head 'linear'"):
        Cell(heads=2, generator="relu", head="relu")
    with pytest.raises(CellError, match="heads > 1 needs attention"):
        Cell(heads=2, attention="causal")


def test_stacked_corr_and_agreement():
    from attnsvm.tasks.multi_head import agreement, stacked_corr

    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((2, 3, 3)), rng.standard_normal((2, 3, 3))
    assert stacked_corr(np.stack([A, 2 * A]), [A[0], A[1]])[0] == pytest.approx(1.0)
    assert stacked_corr(np.stack([A, 2 * A]), [A[0], A[1]])[1] == pytest.approx(1.0)
    assert np.isnan(stacked_corr(A[None], [A[0], None])).all()
    # heads of unequal norms: each head is aligned, the stack is not (equal margins)
    unequal = np.stack([A[0], 3 * A[1]])[None]
    assert stacked_corr(unequal, [A[0], A[1]])[0] < 1 - 1e-3 or np.allclose(A[0], 0)
    assert stacked_corr(B[None], [B[0], B[1]])[0] == pytest.approx(1.0)
    assert agreement(np.array([[0, 1, 2], [0, 1, 3]])) == pytest.approx(2 / 3)


@pytest.mark.parametrize("param", ["W", "KQ"])
def test_each_head_converges_to_the_svm_of_its_own_selection(param):
    """docs/science.md §12: every head's W_h aligns with the Att-SVM (Frobenius for W, nuclear
    for KQ) of its own final selection, and the stacked heads with the stacked SVM."""
    from attnsvm.sweep.store import cell_dataset
    from attnsvm.tasks import run_cells

    cells = [Cell(seed=s, heads=2, param=param, **E2) for s in range(2)]
    for res in run_cells(cells, device="cpu"):
        assert res.status == "ok", res.message
        assert np.all(res.heads["head_corr"] > 0.98), res.heads["head_corr"]
        assert res.scalars["corr_matching"] > 0.98
        assert res.convergence in ("global", "local")
        ds = cell_dataset(res)
        assert ds["head_corr"].dims == ("attention_head",)
        assert ds["head_alpha"].shape == (2, E2["n"])
        assert ds["head_corr"].attrs["units"] == "1"


def test_ridge_field_reaches_the_multihead_trainer():
    """The cell field ``ridge`` (docs/science.md §3, §12) is the H-head trainer's ridge: the
    settings' ridge trains exactly as the same ridge given as a keyword, and differs from the
    default's."""
    cells, b = _batch(2, 2, param="KQ", iterations=100)
    c = cells[0]
    big = Cell(seed=0, **E2, param="KQ", iterations=100, ridge=0.05)
    data = (b["X"], b["Y"], b["Z"], b["v"], b["heads"])
    by_field = train_multihead(*data, big.settings("train"), device="cpu")
    by_kw = train_multihead(*data, c.settings("train"), device="cpu", ridge=0.05)
    default = train_multihead(*data, c.settings("train"), device="cpu")
    assert np.array_equal(by_field.W, by_kw.W)
    assert not np.array_equal(by_field.W, default.W)
