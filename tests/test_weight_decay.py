"""Weight decay and the factorization (docs/science.md §4, "Weight decay"): known answers for
the penalty, the prox and the stationarity residuals, a trained W checked against a loss
written here from docs/science.md §2 alone, and weight decay 0 as the old code path."""

from __future__ import annotations

import numpy as np
import pytest

from attnsvm.config.cell import Cell
from attnsvm.config.fields import DEFAULTS, PROBE_BASE
from attnsvm.gd import weight_decay as WD
from attnsvm.gd.train import stack_cells, train_batch
from attnsvm.tasks import run_cells
from attnsvm.tasks.measure import stored_scalars

SMALL = {"n": 3, "T": 4, "d": 4}


def _orthogonal(rng, d):
    return np.linalg.qr(rng.standard_normal((d, d)))[0]


def test_balanced_factorization_penalty_is_the_nuclear_norm():
    """(||K||_F^2 + ||Q||_F^2) / 2 over K Q^T = W is smallest at the balanced factorization
    K = U sqrt(S), Q = V sqrt(S), where it equals ||W||_* (the AM-GM bound)."""
    rng = np.random.default_rng(0)
    W = rng.standard_normal((5, 3)) @ rng.standard_normal((3, 5))  # rank 3
    U, s, Vt = np.linalg.svd(W)
    K, Q = U * np.sqrt(s), Vt.T * np.sqrt(s)
    np.testing.assert_allclose(K @ Q.T, W, atol=1e-12)
    penalty = 0.5 * (np.sum(K * K) + np.sum(Q * Q))
    np.testing.assert_allclose(penalty, s.sum(), rtol=1e-12)
    for _ in range(20):  # any other factorization K A, Q A^{-T} pays more
        A = np.eye(5) + 0.3 * rng.standard_normal((5, 5))
        K2, Q2 = K @ A, Q @ np.linalg.inv(A).T
        np.testing.assert_allclose(K2 @ Q2.T, W, atol=1e-9)
        assert 0.5 * (np.sum(K2 * K2) + np.sum(Q2 * Q2)) >= s.sum() - 1e-12


def test_prox_nuclear_soft_thresholds_and_truncates():
    rng = np.random.default_rng(1)
    U, V = _orthogonal(rng, 3), _orthogonal(rng, 3)
    A = U @ np.diag([3.0, 1.5, 0.5]) @ V.T
    np.testing.assert_allclose(WD.prox_nuclear(A, 1.0), U @ np.diag([2.0, 0.5, 0.0]) @ V.T,
                               atol=1e-12)  # fmt: skip
    np.testing.assert_allclose(WD.prox_nuclear(A, 1.0, rank=1),
                               U @ np.diag([2.0, 0.0, 0.0]) @ V.T, atol=1e-12)  # fmt: skip


def test_prox_residuals_vanish_exactly_at_each_problems_stationary_points():
    rng = np.random.default_rng(2)
    lam = 0.3
    U, V = _orthogonal(rng, 4), _orthogonal(rng, 4)
    W = U[:, :2] @ np.diag([2.0, 0.7]) @ V[:, :2].T  # rank 2
    # Frobenius stationarity: -G = lam W
    r = WD.prox_residuals(W, -lam * W, lam, rank=None)
    assert r["prox_residual_fro"] < 1e-14
    assert r["prox_residual_nuc"] > 0.1
    # nuclear stationarity: -G = lam (U V^T + P) with ||P||_op <= 1 on the complement
    P = 0.8 * U[:, 2:3] @ V[:, 2:3].T
    G = -lam * (U[:, :2] @ V[:, :2].T + P)
    r = WD.prox_residuals(W, G, lam, rank=None)
    assert r["prox_residual_nuc"] < 1e-14
    assert r["prox_residual_fro"] > 0.1
    # a complement above 1 is not stationary without a rank bound, and is with rank <= 2
    G = -lam * (U[:, :2] @ V[:, :2].T + 1.5 * U[:, 2:3] @ V[:, 2:3].T)
    assert WD.prox_residuals(W, G, lam, rank=None)["prox_residual_nuc"] > 0.1
    assert WD.prox_residuals(W, G, lam, rank=2)["prox_residual_nuc"] < 1e-14
    # a factorization decayed to W = 0 with ||G||_op <= lam: nuclear-stationary, not Frobenius
    r = WD.prox_residuals(0 * W, 0.5 * G / 1.5, lam, rank=None)
    assert r["prox_residual_nuc"] == 0.0 and r["prox_residual_fro"] == 0.5
    r = WD.prox_residuals(1e-30 * W, 0.5 * G / 1.5, lam, rank=None)
    assert r["prox_residual_nuc"] < 1e-25 and abs(r["prox_residual_fro"] - 0.5) < 1e-25
    assert np.isnan(WD.prox_residuals(0 * W, 0 * G, lam, None)["prox_residual_fro"])
    with pytest.raises(ValueError, match="weight_decay > 0"):
        WD.prox_residuals(W, G, 0.0, None)


def _regularized_loss(W, X, Y, Z, v, lam):
    """docs/science.md §2 and §4 "Weight decay", written here from the text alone:
    (1/n) sum_i log(1 + exp(-Y_i v^T X_i^T softmax(X_i W z_i))) + (lam / 2) ||W||_F^2."""
    total = 0.0
    for Xi, yi, zi in zip(X, Y, Z, strict=True):
        a = Xi @ W @ zi
        s = np.exp(a - a.max())
        s /= s.sum()
        total += np.logaddexp(0.0, -yi * (v @ (Xi.T @ s)))
    return total / len(Y) + 0.5 * lam * np.sum(W * W)


def test_trained_W_is_a_stationary_point_of_the_regularized_loss():
    """Plain GD with weight decay on W ends where the gradient of L + (lam/2)||W||_F^2 (a
    finite difference of the loss above) vanishes; without weight decay it does not."""
    lam = 0.1
    cell = Cell(seed=3, optimizer="plain", lr=1.0, iterations=1500, weight_decay=lam, **SMALL)
    b = stack_cells([cell])
    kw = {"param": "W", "optimizer": "plain", "lr": 1.0, "iterations": 1500,
          "checkpoints": cell.checkpoints(), "device": "cpu"}  # fmt: skip
    args = (b["X"], b["Y"], b["Z"], b["v"], b["V"], b["init"])
    res = train_batch(*args, weight_decay=lam, **kw)
    plain = train_batch(*args, **kw)
    X, Y, Z, v = (np.asarray(b[k][0], float) for k in ("X", "Y", "Z", "v"))

    def fd_grad(W, lam_):
        g, h = np.zeros_like(W), 1e-6
        for idx in np.ndindex(W.shape):
            e = np.zeros_like(W)
            e[idx] = h
            g[idx] = (_regularized_loss(W + e, X, Y, Z, v, lam_)
                      - _regularized_loss(W - e, X, Y, Z, v, lam_)) / (2 * h)  # fmt: skip
        return g

    W = res.W[0, -1]
    assert np.linalg.norm(fd_grad(W, lam)) < 1e-7 * max(1.0, np.linalg.norm(W) * lam)
    assert np.linalg.norm(fd_grad(plain.W[0, -1], lam)) > 1e-3  # the same run without decay
    # the stored loss is the regularized one
    np.testing.assert_allclose(res.loss[0, -1], _regularized_loss(W, X, Y, Z, v, lam), rtol=1e-9)


@pytest.mark.parametrize(("param", "m"), [("W", None), ("KQ", None), ("KQ", 2)])
def test_trained_cells_store_the_residual_of_their_own_problem(param, m):
    """A trained cell's residuals: W runs are stationary for the Frobenius-regularized loss,
    K Q^T runs (m = d, and m < d with its rank bound) for the nuclear-regularized one, and
    each is far from stationary for the other problem."""
    kw = {"m": m} if m else {}
    cell = Cell(seed=1, optimizer="plain", lr=1.0, iterations=1500, param=param,
                weight_decay=0.02, **kw, **SMALL)  # fmt: skip
    (res,) = run_cells([cell], device="cpu")
    assert res.status == "ok", res.message
    s = res.scalars
    own, other = ("fro", "nuc") if param == "W" else ("nuc", "fro")
    assert s[f"prox_residual_{own}"] < 1e-4, s
    assert s[f"prox_residual_{other}"] > 0.05, s


def test_weight_decay_zero_is_the_old_code_path():
    """At the defaults (weight decay 0, initial scale 1) the loop trains the model itself (no
    wrapper, no rescaled init), the cell keeps its description and digest, and it stores no
    residuals: every stored value of an existing config is unchanged."""
    assert DEFAULTS["weight_decay"] == 0.0 and DEFAULTS["init_scale"] == 1.0
    cell = Cell(**PROBE_BASE)
    model = object()
    assert WD.wrap(model, cell.settings("train")) is model
    assert isinstance(WD.wrap(model, cell.replace(weight_decay=0.1).settings("train")),
                      WD.WeightDecay)  # fmt: skip
    for name in ("weight_decay", "init_scale"):
        assert name not in cell.to_dict()
    assert cell.replace(weight_decay=0.0, init_scale=1.0).digest() == cell.digest()
    assert cell.replace(weight_decay=0.1).digest() != cell.digest()
    assert not set(WD.SCALARS) & set(stored_scalars(cell))
    assert set(WD.SCALARS) <= set(stored_scalars(cell.replace(weight_decay=0.1)))


def test_weight_decay_refuses_the_polyak_step():
    with pytest.raises(ValueError, match="polyak"):
        Cell(optimizer="polyak", weight_decay=0.1, **SMALL)


@pytest.mark.parametrize("lowrank", [False, True])
def test_weight_decay_figure_renders_from_a_tiny_pipeline(tmp_path, lowrank):
    """The figure from a real sweep (write_block -> collect_sweep -> summarize): both files,
    a caption with this run's counts, valid RST and the reviewer's checks."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from docutils.core import publish_parts

    from attnsvm.plan import parse_experiment
    from attnsvm.report.draw import make_figure
    from attnsvm.report.figure_check import assert_figure_ok
    from attnsvm.report.figures import figure_module
    from attnsvm.sweep.collect import collect_sweep
    from attnsvm.sweep.summary import summarize
    from attnsvm.sweep.worker import write_block

    fixed = {**SMALL, "optimizer": "plain", "lr": 1.0, "iterations": 200}
    grid = {"weight_decay": [0.01, 0.03], "init_scale": [0.5, 1.0]}
    if lowrank:
        fixed.update(param="KQ", m=2)
    else:
        grid["param"] = ["W", "KQ"]
    raw = {"fixed": fixed, "grid": grid, "seeds": 3, "figures": ["weight_decay"]}
    exp = parse_experiment("t_weight_decay", raw, 64)
    paths = {
        b.name: write_block(
            b.cells, tmp_path / f"{b.name}.zarr", experiment=exp.name, block=b.name, device="cpu"
        )  # fmt: skip
        for b in exp.blocks()
    }
    sweep = collect_sweep(exp, paths)
    summary = summarize(sweep)
    assert "prox_residual_nuc_mean" in summary and "prox_residual_fro_mean" in summary
    pdf, png, caption = (tmp_path / f"f.{ext}" for ext in ("pdf", "png", "caption.rst"))
    make_figure("weight_decay", sweep, summary, pdf, png, caption)
    assert pdf.stat().st_size > 1000 and png.stat().st_size > 1000
    text = caption.read_text()
    n_ok = int(summary["count_status"].sel(status="ok").sum())
    assert f"{n_ok} ok, 0 nonfinite, 0 failed, 0 missing" in text
    publish_parts(text, writer="html", settings_overrides={"halt_level": 2})
    plotted = figure_module("weight_decay").plot(sweep, summary)
    assert plotted.texts == []
    assert_figure_ok(plotted, "weight_decay")
    assert all(ax.get_legend() is None for ax in plotted.axes) and plotted.legends
    # (a): the medians over seeds of the stored residuals, in the order the series are drawn
    module = figure_module("weight_decay")
    params = ["KQ"] if lowrank else ["W", "KQ"]
    drawn = [bars.lines[0].get_ydata() for bars in plotted.axes[0].containers]
    want = []
    for p in params:
        for scale in grid["init_scale"]:
            for kind in (module.OWN[p], module.OTHER[p]):
                values = sweep[f"prox_residual_{kind}"].sel(init_scale=scale)
                if "param" in values.dims:
                    values = values.sel(param=p)
                med = np.median(values.transpose("weight_decay", ...).values, axis=1)
                want.append(np.maximum(med, module.RESIDUAL_FLOOR))
    assert len(drawn) == len(want)
    for got, expected in zip(drawn, want, strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-12)
    plt.close(plotted)
