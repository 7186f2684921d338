"""Joint training of (W or (K, Q), v) and the max-margin head (docs/science.md §11)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnsvm.config.cell import Cell, CellError
from attnsvm.gd.model import Batch, TrainedHead, loss_fn, pack, unpack
from attnsvm.gd.train import stack_cells, train_arrays, train_batch
from attnsvm.svm.head import head_svm
from attnsvm.sweep.store import cell_dataset
from attnsvm.tasks import run_cells
from tests.workflow_helpers import tiny_sweep


def train_joint_batch(X, Y, Z, v, init, settings=None, *, mask=None, **kw):
    """The trained-head model through the descent loop (docs/science.md §11)."""
    return train_arrays("trained_head", {"X": X, "Y": Y, "Z": Z, "v": v, "mask": mask}, init,
                        settings, **kw)  # fmt: skip


def train_stacked(b: dict, c: Cell, **kw):
    """Fixed-head training of a stacked batch with the cell's settings."""
    data = (b["X"], b["Y"], b["Z"], b["v"], b["V"], b["init"])
    return train_batch(*data, c.settings("train"), **kw)


def train_joint_stacked(b: dict, c: Cell, **kw):
    """Joint training of a stacked batch with the cell's settings."""
    return train_joint_batch(b["X"], b["Y"], b["Z"], b["v"], b["init"], c.settings("train"), **kw)


def _batch(param: str, seeds: int = 3, **kw) -> tuple[dict, Cell]:
    cells = [Cell(param=param, seed=s, **kw) for s in range(seeds)]
    return stack_cells(cells), cells[0]


@pytest.mark.parametrize("param", ["W", "KQ"])
def test_frozen_head_is_fixed_head_training_bit_for_bit(param, monkeypatch):
    # the joint trainer does the torch loop's arithmetic: compare it with the torch loop (the
    # fixed head's default at this shape is the fused loop, attnsvm.gd.fused)
    monkeypatch.setenv("ATTNSVM_FUSED", "0")
    b, c = _batch(param, iterations=150)
    fixed = train_stacked(b, c, device="cpu")
    joint = train_joint_stacked(b, c, device="cpu", head_lr=0.0)
    for name in ("W", "softmax", "loss", "wnorm", "finite", "nonfinite_iteration"):
        assert np.array_equal(getattr(fixed, name), getattr(joint, name)), name
    assert np.array_equal(joint.v, np.broadcast_to(b["v"][:, None], joint.v.shape))


def test_frozen_head_with_causal_mask_and_plain_gd_is_bit_for_bit():
    b, c = _batch("W", iterations=60, optimizer="plain", lr=0.5)
    rng = np.random.default_rng(0)
    mask = rng.random(b["X"].shape[:3]) < 0.7
    mask[..., 0] = True
    fixed = train_stacked(b, c, device="cpu", mask=mask)
    joint = train_joint_stacked(b, c, device="cpu", head_lr=0.0, mask=mask)
    assert np.array_equal(fixed.W, joint.W)
    assert np.array_equal(fixed.loss, joint.loss)


@pytest.mark.parametrize("param", ["W", "KQ"])
@pytest.mark.parametrize("stable", [True, False])
def test_joint_gradient_matches_autograd(param, stable):
    b, c = _batch(param, seeds=2, d=5, T=4, n=3)
    t = {k: torch.as_tensor(b[k]) for k in ("X", "Y", "Z", "v")}
    rng = np.random.default_rng(1)
    init = {k: torch.as_tensor(3.0 * rng.standard_normal(a.shape)) for k, a in b["init"].items()}
    v = t["v"] + torch.as_tensor(rng.standard_normal(t["v"].shape))
    opts = {"param": param, "head": "linear", "lam": 0.0, "stable": stable}
    model = TrainedHead(Batch(t["X"], t["Y"], t["Z"], t["v"]), **opts)
    loss, _, _, (G, Gv) = model([pack(init, param), v.unsqueeze(-1)])
    Gv = Gv[..., 0]
    leaves = {k: p.clone().requires_grad_(True) for k, p in init.items()}
    vl = v.clone().requires_grad_(True)
    ref, _ = loss_fn(leaves, t["X"], t["Y"], t["Z"], vl, None, **opts)
    *gs, gv = torch.autograd.grad(ref.sum(), [*leaves.values(), vl])
    torch.testing.assert_close(loss, ref.detach(), rtol=1e-12, atol=0)
    torch.testing.assert_close(Gv, gv, rtol=1e-10, atol=1e-14)
    for k, g in zip(leaves, gs, strict=True):
        torch.testing.assert_close(unpack(G, param)[k], g, rtol=1e-10, atol=1e-14)


def test_joint_training_analytic_and_autograd_agree():
    b, c = _batch("W", seeds=2, iterations=80)
    kw = dict(param="W", optimizer="normalized", lr=0.1, iterations=80, checkpoints=[0, 40, 80])
    args = (b["X"], b["Y"], b["Z"], b["v"], b["init"])
    a = train_joint_batch(*args, device="cpu", **kw)
    g = train_joint_batch(*args, device="cpu", gradient="autograd", **kw)
    np.testing.assert_allclose(a.W, g.W, rtol=0, atol=1e-11)
    np.testing.assert_allclose(a.v, g.v, rtol=0, atol=1e-11)
    # normalized per block: v moves by exactly head_lr = lr per step while its gradient is nonzero
    steps = np.linalg.norm(np.diff(a.v, axis=1), axis=-1)
    assert np.all(steps <= 0.1 * 40 * (1 + 1e-12))
    assert not np.array_equal(a.v[:, -1], b["v"])


def test_joint_training_aligns_w_and_v_with_their_svms():
    """W runs with a trained head (n=6, T=8, d=10): v -> max-margin head of the attended
    tokens, W -> Att-SVM of its final selection (docs/science.md §11)."""
    from attnsvm.svm.constraints import att_svm_constraints
    from attnsvm.svm.frobenius import solve_frobenius

    b, c = _batch("W", seeds=3, iterations=1500)
    r = train_joint_stacked(b, c, device="cpu")
    for s in range(3):
        alpha = r.softmax[s, -1].argmax(-1)
        v_mm, res = head_svm(b["X"][s], b["Y"][s], alpha)
        assert res.solved
        v = r.v[s, -1]
        assert v @ v_mm / (np.linalg.norm(v) * np.linalg.norm(v_mm)) > 0.99
        w = solve_frobenius(att_svm_constraints(b["X"][s], b["Z"][s], alpha))
        W = r.W[s, -1]
        assert np.sum(W * w.W) / (np.linalg.norm(W) * np.linalg.norm(w.W)) > 0.95


def test_head_svm_is_the_max_margin_classifier():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((8, 3, 6))
    Y = np.where(rng.random(8) < 0.5, 1.0, -1.0)
    alpha = rng.integers(0, 3, 8)
    v, res = head_svm(X, Y, alpha)
    assert res.solved
    margins = Y * (X[np.arange(8), alpha] @ v)
    assert margins.min() == pytest.approx(1.0, abs=1e-8)
    assert res.objective == pytest.approx(np.linalg.norm(v), rel=1e-9)
    assert np.abs(res.W[:, 1:]).max() <= 1e-9 * np.abs(v).max()
    # no shorter v separates: the same problem by KKT (v = sum lam_i y_i x_i on the active set)
    active = margins < 1 + 1e-7
    A = (Y[:, None] * X[np.arange(8), alpha])[active]
    lam = np.linalg.lstsq(A.T, v, rcond=None)[0]
    assert np.all(lam >= -1e-8)
    np.testing.assert_allclose(A.T @ lam, v, atol=1e-8)


def test_head_svm_infeasible_when_not_separable():
    X = np.array([[[1.0, 0.0]], [[1.0, 0.0]]])
    v, res = head_svm(X, np.array([1.0, -1.0]), np.array([0, 0]))
    assert v is None and res.status == "infeasible"


def test_cell_train_head_field():
    c = Cell()
    assert "train_head" not in c.to_dict()
    assert Cell(train_head=True).to_dict()["train_head"] is True
    assert Cell(train_head=True).digest() != c.digest()
    with pytest.raises(CellError, match="train_head needs"):
        Cell(train_head=True, generator="relu", head="relu")
    with pytest.raises(CellError, match="train_head must be true or false"):
        Cell(train_head="yes")


def test_run_cells_with_a_trained_head_measures_and_describes_it():
    from attnsvm.gd.data import make_dataset, optimal_tokens
    from attnsvm.variables import UNDESCRIBED

    cells = [Cell(d=6, train_head=True, iterations=400, seed=s) for s in range(2)]
    for r in run_cells(cells, device="cpu"):
        sc, ds0 = r.scalars, make_dataset(r.cell)
        assert r.status == "ok" and r.convergence
        np.testing.assert_array_equal(r.head_init, ds0.v)
        np.testing.assert_array_equal(r.data.v, r.head[-1])  # scores of the final head
        np.testing.assert_array_equal(r.opt, optimal_tokens(r.data))
        assert sc["alpha_is_opt_init"] == float(np.array_equal(r.alpha, optimal_tokens(ds0)))
        v_mm, svm = head_svm(r.data.X, r.data.Y, r.alpha)
        assert sc["vmm_feasible"] == float(svm.solved)
        if svm.solved:
            corr = r.head[-1] @ v_mm / np.linalg.norm(r.head[-1]) / np.linalg.norm(v_mm)
            assert sc["corr_v"] == pytest.approx(corr, rel=1e-12)
            assert sc["vmm_margin"] == pytest.approx(1 / np.linalg.norm(v_mm), rel=1e-9)
        assert sc["vnorm"] == pytest.approx(np.linalg.norm(r.head[-1]))
        xs = cell_dataset(r)
        assert not [k for k in xs.data_vars if xs[k].attrs["description"] == UNDESCRIBED]
        assert "curve_corr_v" in xs and "curve_vnorm" in xs
        from attnsvm.report.text import _fmt, cell_summary

        assert f"corr(v, v_mm)={_fmt(sc['corr_v'])}" in cell_summary(r)


def test_fixed_head_cells_have_no_head_metrics():
    (r,) = run_cells([Cell(d=4, iterations=50)], device="cpu")
    assert r.head is None and "corr_v" not in r.scalars
    from attnsvm.report.text import cell_summary

    assert "corr(v, v_mm)" not in cell_summary(r)


def _tiny_sweep(tmp_path, raw: dict):
    return tiny_sweep(tmp_path, "t_joint", {**raw, "seeds": 2, "figures": ["joint_head"]})


def test_joint_head_figure_and_caption_from_a_tiny_pipeline(tmp_path):
    import matplotlib.pyplot as plt
    from docutils.core import publish_parts

    from attnsvm.report.captions import fmt
    from attnsvm.report.draw import make_figure
    from attnsvm.report.figures import figure_module

    raw = {"fixed": {"n": 3, "T": 4, "iterations": 100},
           "grid": {"d": [2, 4], "param": ["W", "KQ"], "train_head": [False, True]}}  # fmt: skip
    sweep, summary = _tiny_sweep(tmp_path, raw)
    pdf, png, cap = (tmp_path / f"j.{e}" for e in ("pdf", "png", "caption.rst"))
    make_figure("joint_head", sweep, summary, pdf, png, cap)
    assert pdf.stat().st_size > 1000 and png.stat().st_size > 1000
    text = cap.read_text()
    publish_parts(text, writer="html", settings_overrides={"halt_level": 2})
    # the caption's corr(v, v_mm) numbers are the summary's, per d
    want = summary["corr_v_mean"].sel(param="W", train_head=True)
    line = "; ".join(f"d = {d}: {fmt(want.sel(d=d).item())}" for d in (2, 4))
    assert f"trained head, *W* runs, final corr(v, v_mm): {line}; saturated share" in text
    plt.close(figure_module("joint_head").plot(sweep, summary))
    # a sweep without the train_head axis (trained head fixed) draws too
    raw = {"fixed": {"n": 3, "T": 4, "d": 4, "iterations": 50, "train_head": True},
           "grid": {"param": ["W"]}}  # fmt: skip
    sweep, summary = _tiny_sweep(tmp_path / "fixed", raw)
    plt.close(figure_module("joint_head").plot(sweep, summary))
    assert any(
        x.startswith("trained head, *W* runs") for x in figure_module("joint_head").numbers(summary)
    )


def test_kq_joint_training_the_ridge_takes_over_and_without_it_both_align():
    """KQ with a trained head (docs/science.md §11): with the machine-epsilon ridge of §3 the
    loss reaches ~1e-15, the ridge gradient wins and ||K Q^T|| collapses from its peak; with
    ridge 0, K Q^T aligns with the nuclear Att-SVM of its selection and v with v_mm."""
    from attnsvm.svm import solve_nuclear
    from attnsvm.svm.constraints import att_svm_constraints

    b, c = _batch("KQ", seeds=3, d=8, iterations=2000)
    ridged = train_joint_stacked(b, c, device="cpu")
    assert np.all(ridged.wnorm[:, -1] < ridged.wnorm.max(axis=1) / 10)
    free = train_joint_stacked(b, c, device="cpu", ridge=0.0)
    for s in range(3):
        sm = free.softmax[s, -1]
        assert sm.max(-1).min() >= 1 - 1e-3
        alpha = sm.argmax(-1)
        v_mm, _ = head_svm(b["X"][s], b["Y"][s], alpha)
        v = free.v[s, -1]
        assert v @ v_mm / (np.linalg.norm(v) * np.linalg.norm(v_mm)) > 0.99
        nuc = solve_nuclear(att_svm_constraints(b["X"][s], b["Z"][s], alpha))
        W = free.W[s, -1]
        assert np.sum(W * nuc.W) / (np.linalg.norm(W) * np.linalg.norm(nuc.W)) > 0.95


def test_ridge_field_is_the_trainers_ridge():
    """The cell field ``ridge`` (docs/science.md §3, §11) is the ridge every KQ trainer uses:
    a cell at ridge 0 trains exactly as a call with ``ridge=0.0`` (no ridge term at all), the
    default cell exactly as the machine-epsilon ridge, and the two differ."""
    from attnsvm.gd.model import RIDGE

    b, c = _batch("KQ", seeds=2, d=4, iterations=400, train_head=True)
    free = Cell(param="KQ", seed=0, d=4, iterations=400, train_head=True, ridge=0.0)
    assert c.ridge == RIDGE and free.ridge == 0.0
    trainers = {
        "joint": lambda cell, **kw: train_joint_stacked(b, cell, device="cpu", **kw).W,
        "fixed head": lambda cell, **kw: train_stacked(b, cell, device="cpu", **kw).W,
    }
    for name, train in trainers.items():
        W = [train(c), train(c, ridge=RIDGE), train(free), train(c, ridge=0.0)]
        assert np.array_equal(W[0], W[1]), name
        assert np.array_equal(W[2], W[3]), name
        assert not np.array_equal(W[0], W[2]), name


def test_ridge_field_applies_to_kq_only_and_keeps_digests():
    """``ridge`` matters for KQ only (reset elsewhere) and a cell at the default keeps the
    description and digest it had before the field existed."""
    w = Cell(param="W", ridge=0.0)
    assert w.ridge == Cell().ridge and w.digest() == Cell().digest()
    kq = Cell(param="KQ")
    assert "ridge" not in kq.to_dict()
    assert Cell(param="KQ", ridge=0.0).to_dict()["ridge"] == 0.0
    assert Cell(param="KQ", ridge=0.0).digest() != kq.digest()
    with pytest.raises(CellError, match="ridge must be a non-negative finite number"):
        Cell(param="KQ", ridge=-1.0)
