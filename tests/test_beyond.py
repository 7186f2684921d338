"""Beyond the paper (issue #7): sequence / causal attention, rank-constrained nuclear SVM,
regularization path, new cell fields, and the new figures from real (tiny) sweeps."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnsvm import Cell, run_cells
from attnsvm.config.cell import CellError
from attnsvm.gd.data import make_dataset, optimal_tokens
from attnsvm.gd.model import loss_and_grad, loss_fn
from attnsvm.svm import solve_frobenius, solve_nuclear
from attnsvm.svm.constraints import att_svm_constraints, sequence_constraints
from attnsvm.svm.lowrank import solve_rank_constrained
from attnsvm.svm.sequence import constraints as seq_constraints
from attnsvm.svm.sequence import expand

# ----------------------------------------------------------------------------- cell fields


def test_new_fields_keep_existing_cells_unchanged():
    c = Cell(d=4, seed=3)
    assert "task" not in c.to_dict() and "radius_max" not in c.to_dict()
    assert Cell.from_dict(c.to_dict()) == c
    # radii of a training cell are normalized away (they do not change its identity)
    assert Cell(d=4, radius_max=7.0) == Cell(d=4)
    r = Cell(d=4, task="regpath", radius_max=7.0)
    assert r.to_dict()["task"] == "regpath" and r.to_dict()["radius_max"] == 7.0
    assert Cell.from_dict(r.to_dict()) == r


@pytest.mark.parametrize(
    "kw",
    [
        {"task": "bogus"},
        {"task": "regpath", "train": False},
        {"task": "regpath", "radius_min": 5.0, "radius_max": 1.0},
        {"attention": "causal", "head": "lambda"},
        {"attention": "diagonal"},
    ],
)
def test_invalid_new_values(kw):
    with pytest.raises(CellError):
        Cell(**kw)


# ----------------------------------------------------------------------------- sequence


@pytest.mark.parametrize("causal", [False, True])
def test_expanded_constraints_are_sequence_constraints(causal):
    ds = make_dataset(Cell(n=3, T=4, d=5, seed=1))
    ex, mask = expand(ds, causal)
    rng = np.random.default_rng(0)
    hi = np.arange(4) if causal else np.full(4, 3)
    alpha = np.array([[rng.integers(0, h + 1) for h in hi] for _ in range(3)])
    mine = seq_constraints(ex.X, ex.Z, alpha.reshape(-1), mask)
    ref = sequence_constraints(ds.X, alpha, causal)
    assert mine.n_rows == ref.n_rows
    np.testing.assert_allclose(mine.left, ref.left)
    np.testing.assert_allclose(mine.right, ref.right)


def test_mask_none_is_bit_identical_and_mask_blocks_gradient():
    ds = make_dataset(Cell(n=3, T=4, d=5, seed=2))
    ex, mask = expand(ds, causal=True)
    t = {k: torch.as_tensor(getattr(ex, k))[None] for k in ("X", "Y", "Z", "v")}
    P = {"W": torch.as_tensor(np.random.default_rng(0).standard_normal((1, 5, 5)))}
    a = loss_and_grad(P, t["X"], t["Y"], t["Z"], t["v"], None, param="W", head="linear", lam=0)
    b = loss_and_grad(
        P, t["X"], t["Y"], t["Z"], t["v"], None, param="W", head="linear", lam=0, mask=None
    )
    assert torch.equal(a[2]["W"], b[2]["W"])
    m = torch.as_tensor(mask)[None]
    loss, s, G = loss_and_grad(
        P, t["X"], t["Y"], t["Z"], t["v"], None, param="W", head="linear", lam=0, mask=m
    )
    assert torch.all(s[~m] == 0) and torch.isfinite(G["W"]).all()
    Pa = {"W": P["W"].clone().requires_grad_(True)}
    la, _ = loss_fn(Pa, t["X"], t["Y"], t["Z"], t["v"], None, param="W", head="linear", lam=0,
                    mask=m)  # fmt: skip
    (ga,) = torch.autograd.grad(la.sum(), [Pa["W"]])
    torch.testing.assert_close(ga, G["W"], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("attention", ["self", "sequence", "causal"])
def test_sequence_training_correlation_rises(attention):
    cells = [Cell(n=3, T=4, d=6, attention=attention, iterations=1000, seed=s) for s in (0, 1)]
    for r in run_cells(cells, device="cpu"):
        assert r.status == "ok", r.message
        c = r.curves["corr_fro_alpha"]
        assert c[-1] > 0.97 and c[-1] > c[len(c) // 2] - 1e-3 > c[0]
        if attention != "self":
            assert r.data.n == 12 and r.alpha.shape == (12,)
        if attention == "causal":  # query 0 attends to its own token only
            assert np.all(r.alpha.reshape(3, 4)[:, 0] == 0)


# ----------------------------------------------------------------------------- low rank


def _opt_constraints(seed: int):
    ds = make_dataset(Cell(n=5, T=6, d=8, seed=seed))
    return att_svm_constraints(ds.X, ds.Z, optimal_tokens(ds))


def test_rank_constrained_recovers_convex_when_m_large():
    cons = _opt_constraints(0)
    nuc = solve_nuclear(cons)
    r_true = int(np.sum(np.linalg.svd(nuc.W, compute_uv=False) > 1e-6 * nuc.objective))
    # without the shortcut (no convex start): factored alternation from the Frobenius start
    # with one spare rank gets within 1e-3 of the convex optimum (measured: 3e-4; at m equal
    # to the rank exactly the alternation stalls about 3e-3 above it)
    m = r_true + 1
    res = solve_rank_constrained(cons, m, frobenius=solve_frobenius(cons).W, restarts=3)
    assert res.W is not None
    assert nuc.objective * (1 - 1e-6) <= res.objective <= nuc.objective * (1 + 1e-3)
    assert np.linalg.svd(res.W, compute_uv=False)[m:].sum() < 1e-8 * res.objective
    assert cons.values(res.W).min() >= 1 - 1e-6
    full = solve_rank_constrained(cons, r_true, convex=nuc.W)
    assert full.status == "certified" and full.gap == 0.0


def test_rank_constrained_below_rank_is_feasible_and_above_bound():
    cons = _opt_constraints(2)
    nuc = solve_nuclear(cons)
    res = solve_rank_constrained(cons, 1, convex=nuc.W, frobenius=solve_frobenius(cons).W)
    assert res.status in ("feasible", "certified")
    assert np.linalg.matrix_rank(res.W, tol=1e-8 * np.abs(res.W).max()) == 1
    assert cons.values(res.W).min() >= 1 - 1e-6
    assert res.objective >= nuc.objective * (1 - 1e-6)
    assert 1 <= res.agreeing <= 12


def test_kq_m_below_d_reports_lowrank_metrics():
    r = run_cells([Cell(n=4, T=4, d=6, m=2, param="KQ", iterations=500, seed=0)], "cpu")[0]
    assert r.status == "ok", r.message
    for k in ("objective_lowrank_alpha", "lowrank_gap", "corr_lowrank_alpha"):
        assert np.isfinite(r.scalars[k]), k
    assert r.scalars["lowrank_gap"] >= -1e-6
    assert "corr_lowrank_alpha" in r.curves


# ----------------------------------------------------------------------------- regpath


@pytest.mark.parametrize("param", ["W", "KQ"])
def test_regularization_path_approaches_svm(param):
    cell = Cell(n=3, T=4, d=5, param=param, task="regpath", iterations=400, checkpoint_count=8,
                radius_min=0.3, radius_max=100.0, seed=1)  # fmt: skip
    r = run_cells([cell], device="cpu")[0]
    assert r.status == "ok", r.message
    R = r.curves["radius"]
    np.testing.assert_allclose(R, np.geomspace(0.3, 100.0, 8))
    if param == "W":
        np.testing.assert_allclose(r.wnorm, R, rtol=1e-9)
    key = "corr_fro_opt" if param == "W" else "corr_nuc_opt"
    c = r.curves[key]
    assert c[-1] > 0.99, c
    assert c[-1] > c[0] + 0.1 and np.all(np.diff(c) > -0.02), c


# ----------------------------------------------------------------------------- figures


def test_new_figures_render_from_tiny_pipeline(tmp_path):
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_rgb

    from attnsvm.plan import parse_experiment
    from attnsvm.report.draw import make_figure
    from attnsvm.report.figure_check import assert_figure_ok
    from attnsvm.report.figures import figure_module
    from attnsvm.sweep.collect import collect_sweep
    from attnsvm.sweep.summary import summarize
    from attnsvm.sweep.worker import write_block

    base = {"n": 3, "T": 4, "d": 4, "iterations": 200}
    specs = {
        "phase": {"fixed": {"n": 3, "iterations": 200}, "grid": {"d": [2, 4], "T": [3, 4],
                                                                  "param": ["W", "KQ"]}},
        "rank_gd": {"fixed": {"n": 3, "T": 4, "iterations": 200},
                    "grid": {"d": [2, 4], "param": ["W", "KQ"]}},
        "rank_m": {"fixed": {**base, "param": "KQ"}, "grid": {"m": [1, 2]}},
        "attention": {"fixed": base, "grid": {"attention": ["self", "causal"], "param": ["W"]}},
        "regpath": {"fixed": {**base, "task": "regpath", "iterations": 50,
                              "checkpoint_count": 4, "radius_max": 10.0},
                    "grid": {"param": ["W", "KQ"]}},
        "optimizer": {"fixed": base, "grid": {"param": ["W"], "optimizer": ["normalized",
                                                                           "plain"],
                                              "lr": [0.1, 1.0]}},
    }  # fmt: skip
    for fig, raw in specs.items():
        exp = parse_experiment(f"t_{fig}", {**raw, "seeds": 2, "figures": [fig]}, 64)
        paths = {}
        for b in exp.blocks():
            out = tmp_path / fig / f"{b.name}.zarr"
            paths[b.name] = write_block(
                b.cells, out, experiment=exp.name, block=b.name, device="cpu"
            )
        sweep = collect_sweep(exp, paths)
        summary = summarize(sweep)
        pdf, png = tmp_path / f"{fig}.pdf", tmp_path / f"{fig}.png"
        caption = tmp_path / f"{fig}.caption.rst"
        make_figure(fig, sweep, summary, pdf, png, caption)
        assert pdf.stat().st_size > 1000 and png.stat().st_size > 1000, fig
        # the caption states this run's cell counts and settings, computed from its summary
        text = caption.read_text()
        n_ok = int(summary["count_status"].sel(status="ok").sum())
        assert f"{n_ok} ok, 0 nonfinite, 0 failed, 0 missing" in text, fig
        assert f"iterations = {raw['fixed']['iterations']}" in text, fig
        from docutils.core import publish_parts

        publish_parts(text, writer="html", settings_overrides={"halt_level": 2})  # valid RST
        # nothing of the bookkeeping is drawn (the caption states it), and the figure passes
        # the reviewer's checks; no legend sits on a panel of these figures
        plotted = figure_module(fig).plot(sweep, summary)
        assert plotted.texts == [], fig
        assert_figure_ok(plotted, fig)
        if fig in ("attention", "optimizer", "rank_m"):
            assert all(ax.get_legend() is None for ax in plotted.axes), fig
            assert plotted.legends, fig
        if fig == "optimizer":  # one colour per step size, the same in every panel
            from attnsvm.report.figures.optimizer import setting_colors

            lrs = raw["grid"]["lr"]
            want = {to_rgb(c) for c in setting_colors(["normalized", "plain"], lrs).values()}
            assert len(want) == len(lrs)
            panels = 0
            for ax in plotted.axes:
                drawn = {to_rgb(ln.get_color()) for ln in ax.get_lines() if len(ln.get_xdata())}
                drawn -= {to_rgb("0.6")}  # the reference line at 1
                if drawn:  # (b), the KQ runs, is empty: the grid has W only
                    assert drawn == want, ax.get_title(loc="left")
                    panels += 1
            assert panels == 3
        plt.close(plotted)


def test_phase_line_runs_along_cell_edges():
    from attnsvm.report.figures.phase import threshold_staircase

    # d = 2, 4, 8; thresholds 3 (first cell with d >= 3 is d = 4), 8, 9 (none)
    sx, sy = threshold_staircase([2, 4, 8], [3, 8, 9])
    assert sx == [0.5, 0.5, 1.5, 1.5, 2.5, 2.5]
    assert sy == [-0.5, 0.5, 0.5, 1.5, 1.5, 2.5]
    assert all(x % 1 == 0.5 for x in sx)  # never through a cell centre, where labels are
