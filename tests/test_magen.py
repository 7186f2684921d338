"""Magen et al.'s own setting (docs/science.md §15, "Magen et al.'s own setting"): the token
model regenerated from the docs' text alone, its Bayes error, the min-norm interpolator, the
boundary estimator on synthetic boundaries of known slope, and the signal_noise data
unchanged."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from attnsvm.claims import boundary as B
from attnsvm.config.cell import Cell
from attnsvm.gd import magen
from attnsvm.gd.data import make_dataset, make_test_dataset
from attnsvm.svm import minnorm


def _docs_draw(n: int, d: int, snr: float, p: float, seed: int, stream: int):
    """eq. (15.10)-(15.11) of docs/science.md §15, written from the text only: the stream is
    numpy's default_rng(SeedSequence([seed, stream])); n uniforms give y = +1 where < 1/2;
    an (n, d) standard normal over sqrt(d) with coordinates 1, 2 zeroed is the noise token;
    the signal token is snr e_1 (y = +1) or snr e_2 (y = -1); n uniforms < p flip labels."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, stream]))
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    g = rng.standard_normal((n, d)) / np.sqrt(d)
    g[:, 0] = 0.0
    g[:, 1] = 0.0
    sig = np.zeros((n, d))
    sig[y > 0, 0] = snr
    sig[y < 0, 1] = snr
    flip = rng.random(n) < p
    return np.stack([sig, g], axis=1), np.where(flip, -y, y), flip


def _cell(**kw) -> Cell:
    base = dict(generator="magen", T=2, d=30, n=12, snr=0.7, label_flip=0.2, n_test=50,
                optimizer="plain", lr=10.0, init="zero", iterations=2, checkpoint_count=2,
                train_head=True, seed=3)  # fmt: skip
    return Cell(**{**base, **kw})


def test_generator_is_the_docs_equations() -> None:
    cell = _cell()
    ds = make_dataset(cell)
    X, Y, flip = _docs_draw(12, 30, 0.7, 0.2, seed=3, stream=0)
    assert np.array_equal(ds.X, X) and np.array_equal(ds.Y, Y) and np.array_equal(ds.flipped, flip)
    assert np.array_equal(ds.v, np.zeros(30))  # Magen et al.: v starts at zero
    assert np.array_equal(ds.Z, np.tile(np.eye(30)[0], (12, 1)))
    test = make_test_dataset(cell, ds)
    Xt, Yt, _ = _docs_draw(50, 30, 0.7, 0.2, seed=3, stream=2)
    assert np.array_equal(test.X, Xt) and np.array_equal(test.Y, Yt)


def test_noise_is_orthogonal_to_the_signals_and_bayes_is_the_flip_rate() -> None:
    rng = np.random.default_rng(0)
    X, Y, _, _, flipped = magen.draw(20000, 8, 0.3, 0.2, rng)
    assert np.all(X[:, 1, :2] == 0)  # the noise token has no component along mu_+, mu_-
    cov = np.cov(X[:, 1].T) * 8
    assert np.allclose(cov, np.diag([0, 0, 1, 1, 1, 1, 1, 1]), atol=0.05)
    clean = np.where(flipped, -Y, Y)
    assert np.array_equal(magen.bayes_labels(X), clean)  # the tokens determine y exactly
    err = np.mean(magen.bayes_labels(X) != Y)
    assert magen.bayes_error(0.2) == 0.2
    assert abs(err - 0.2) < 4 * np.sqrt(0.2 * 0.8 / 20000)


def _brute_force_min_norm(X, Y, Z):
    """min ||v_mm(alpha)|| over every realizable selection (2^n of them)."""
    from attnsvm.svm.constraints import att_svm_constraints
    from attnsvm.svm.frobenius import solve_frobenius
    from attnsvm.svm.head import head_svm

    best = np.inf
    for k in range(2 ** len(Y)):
        alpha = np.array([(k >> i) & 1 for i in range(len(Y))])
        v, _ = head_svm(X, Y, alpha)
        if v is None or not solve_frobenius(att_svm_constraints(X, Z, alpha)).solved:
            continue
        best = min(best, float(np.linalg.norm(v)))
    return best


@pytest.mark.parametrize("snr", [0.2, 0.6, 1.5])
def test_min_norm_interpolator_is_the_minimum_over_all_selections(snr: float) -> None:
    X, Y, Z, _, _ = magen.draw(8, 20, snr, 0.25, np.random.default_rng(int(snr * 10)))
    best = minnorm.min_norm_interpolator(X, Y, Z)
    assert best is not None
    assert best["vnorm"] == pytest.approx(_brute_force_min_norm(X, Y, Z), rel=1e-6)
    assert np.all(Y * (X[np.arange(8), best["alpha"]] @ best["v"]) >= 1 - 1e-7)


def test_min_norm_selection_switches_at_the_predicted_snr() -> None:
    """Signal cost 2 / snr^2 against about one unit per flipped example's noise token: the
    benign selection wins far above snr = sqrt(2 / (n (1 - p))), the all-noise one far below."""
    n, p = 40, 0.2
    star = np.sqrt(2 / (n * (1 - p)))
    for snr, benign in ((star / 4, False), (star * 4, True)):
        X, Y, Z, _, _ = magen.draw(n, 400, snr, p, np.random.default_rng(7))
        assert (minnorm.min_norm_interpolator(X, Y, Z)["roles"] == ("clean", "clean")) == benign


def test_crossing_is_exact_on_a_log_linear_curve() -> None:
    c = np.geomspace(0.1, 10, 9)
    curve = 0.3 - 0.1 * np.log(c)  # falls through 0.2 at c = e
    assert B.crossing(c, curve, 0.2, decreasing=True) == pytest.approx(np.e)
    assert np.isnan(B.crossing(c, curve, -5.0, decreasing=True))  # never crosses
    assert np.isnan(B.crossing(c, curve, 0.9, decreasing=True))  # past the level already


def _synthetic(slope: float, seeds: int = 30, noise: float = 0.02, seed: int = 0):
    """Excess errors that fall through 0.15 at c*(n) = 2 n^slope, with seed noise."""
    n = np.array([10.0, 20, 40, 80])
    c = np.geomspace(0.01, 4.0, 20)
    star = 2.0 * n**slope
    mean = 0.15 - 0.05 * np.log(c[None, :] / star[:, None])  # 0.15 exactly at c = c*
    rng = np.random.default_rng(seed)
    per_seed = rng.normal(0, noise, (seeds, 1, 1))  # a seed's offset shared across points
    return n, c, mean[None] + per_seed + rng.normal(0, noise, (seeds, len(n), len(c))), star


@pytest.mark.parametrize("slope,passes", [(-0.5, True), (0.0, False), (-1.0, False)])
def test_boundary_slope_recovers_the_truth(slope: float, passes: bool) -> None:
    n, c, values, star = _synthetic(slope)
    fit = B.boundary_fit(n, c, values, 0.15, True, 0.95, seed=1, resamples=500)
    assert abs(fit["slope"] - slope) < 0.15  # about 4 standard errors of this design
    assert np.allclose(fit["bounds"], star, rtol=0.25)
    from attnsvm.claims.stats import verdict

    v = verdict(fit["slope_lo"], fit["slope_hi"], "between", [-0.75, -0.25])
    assert (v == "PASS") == passes


def test_boundary_interval_covers_the_truth() -> None:
    """The slope's 0.95 bootstrap interval covers the true slope in most of 40 replicates
    (0.95 nominal; >= 0.85 fails with probability below 1e-2 at 0.95 coverage)."""
    covered = 0
    for r in range(40):
        n, c, values, _ = _synthetic(-0.5, seed=100 + r)
        fit = B.boundary_fit(n, c, values, 0.15, True, 0.95, seed=r, resamples=300)
        covered += fit["slope_lo"] <= -0.5 <= fit["slope_hi"]
    assert covered >= 34


def _boundary_entry(n: np.ndarray, c: np.ndarray, values: np.ndarray) -> dict:
    """The ledger entry of a boundary claim (slope in [-0.75, -0.25] at level 0.15, baseline:
    the values shuffled across n) on ``values`` (seeds, n, snr) as a sweep."""
    import xarray as xr

    from attnsvm.claims.evaluate import evaluate_claim
    from attnsvm.config.claims import BoundaryClaim

    vals = values.transpose(1, 2, 0)  # (n, snr, seed)
    sweep = xr.Dataset(
        {"excess": (("n", "snr", "seed"), vals),
         "status": (("n", "snr", "seed"), np.zeros(vals.shape, dtype=np.int8))},
        coords={"n": n.astype(int), "snr": c, "seed": np.arange(vals.shape[2])},
        attrs={"axes": ["n", "snr"]},
    )  # fmt: skip
    claim = BoundaryClaim(
        kind="boundary", name="b", statement="s", theory="t", variable="excess", along="n",
        across="snr", level=0.15, op="between", threshold=[-0.75, -0.25], margin=0.1,
        source={"type": "conjecture", "cite": "a synthetic boundary of known slope"},
        baseline={"name": "no n dependence", "null_model": "shuffle"},
    )  # fmt: skip
    return evaluate_claim(sweep, claim, "exp")


def test_boundary_claim_in_the_ledger_passes_and_its_shuffled_baseline_fails() -> None:
    entry = _boundary_entry(*_synthetic(-0.5)[:3])
    assert entry["verdict"] == "PASS"
    assert entry["control"]["verdict"] != "PASS"


def test_boundary_claim_below_its_calibrated_seeds_is_inconclusive() -> None:
    """Fewer seeds than the calibration table calibrates the boundary's interval at: no
    interval, INCONCLUSIVE with the reason, although the estimate is the true slope's."""
    from attnsvm.claims import table

    seeds = table.boundary_n_min(0.95) - 1
    entry = _boundary_entry(*_synthetic(-0.5, seeds=seeds)[:3])
    assert entry["verdict"] == "INCONCLUSIVE"
    head = entry["rows"][-1]
    assert "no calibrated boundary interval at 0.95 below" in head["method"], head
    assert abs(head["estimate"] - (-0.5)) < 0.2


def test_signal_noise_data_unchanged() -> None:
    """The signal_noise generator's draws are bit for bit those of before the magen
    generator (digest of one cell's training and test data)."""
    cell = Cell(generator="signal_noise", T=3, d=20, n=10, snr=0.5, label_flip=0.2,
                n_test=30, optimizer="plain", init="zero", iterations=2, seed=4)  # fmt: skip
    ds = make_dataset(cell)
    test = make_test_dataset(cell, ds)
    h = hashlib.sha256()
    for a in (ds.X, ds.Y, ds.Z, ds.v, test.X, test.Y):
        h.update(np.ascontiguousarray(a).tobytes())
    assert h.hexdigest() == SIGNAL_NOISE_DIGEST


#: computed at main (eafcd7f), before the magen generator existed
SIGNAL_NOISE_DIGEST = "0c215c3a0126736a2e59505cc9fadf0de7ae02756c85f2e8cd15be106b3ce1a2"


def test_magen_cells_store_the_exact_bayes_error_and_a_trained_head() -> None:
    """A magen cell end to end: v starts at 0 and is trained (the first GD step moves v only:
    p's gradient vanishes at v = 0), the Bayes error is the flip rate, the Bayes classifier
    fits no flipped label, the min-norm interpolator interpolates."""
    from attnsvm.tasks import run_cells

    (res,) = run_cells([_cell(n=16, snr=1.5, n_test=200)], device="cpu")
    assert res.status == "ok", res.message
    assert res.scalars["bayes_err"] == 0.2
    assert not res.scalars["flip_fit_bayes"] > 0  # 0, or NaN where no label is flipped
    assert res.scalars["train_err_minnorm"] == 0.0
    assert np.any(res.head[0] != 0)  # v moved at step 1
    assert np.all(res.W[0] == 0)  # W (p) did not: its gradient is proportional to v = 0


def test_magen_plane_figure_draws_the_located_boundary(tmp_path) -> None:
    import matplotlib.pyplot as plt

    from attnsvm.report.draw import make_figure
    from attnsvm.report.figure_check import assert_figure_ok
    from attnsvm.report.figures import figure_module
    from attnsvm.report.figures.magen_plane import located
    from tests.workflow_helpers import tiny_sweep

    fixed = {"generator": "magen", "T": 2, "d": 40, "label_flip": 0.2, "n_test": 100,
             "param": "W", "train_head": True, "optimizer": "plain", "lr": 100.0,
             "init": "zero", "iterations": 2, "checkpoint_count": 2}  # fmt: skip
    raw = {"fixed": fixed, "grid": {"n": [8, 16], "snr": [0.1, 0.4, 1.6, 6.4]}, "seeds": 2,
           "figures": ["magen_plane"]}  # fmt: skip
    sweep, summary = tiny_sweep(tmp_path, "t_magen", raw)
    files = (tmp_path / f"magen_plane.{x}" for x in ("pdf", "png", "caption.rst"))
    make_figure("magen_plane", sweep, summary, *files)
    fig = figure_module("magen_plane").plot(sweep, summary)
    assert_figure_ok(fig, "magen_plane")
    # panel (b): the cells are the seeds' mean of test_err_minnorm - test_err_bayes
    diff = (sweep["test_err_minnorm"] - sweep["test_err_bayes"]).transpose("seed", "n", "snr")
    panel_b = next(ax for ax in fig.axes if "interpolator" in ax.get_title(loc="left"))
    np.testing.assert_allclose(panel_b.images[0].get_array(), diff.values.mean(axis=0))
    # its dots are the located boundary of the same values
    want = located(diff.values, np.array([8.0, 16.0]), np.array([0.1, 0.4, 1.6, 6.4]))
    (dots,) = [c for c in panel_b.containers if c.get_label().startswith("SNR*")]
    got = dots.lines[0].get_xdata()
    x = np.interp(np.log(want["bounds"]), np.log([0.1, 0.4, 1.6, 6.4]), np.arange(4), np.nan,
                  np.nan)  # fmt: skip
    np.testing.assert_allclose(got, x)
    plt.close(fig)
    # the caption states the boundary the panel draws (from the summary's means), not a
    # number per grid point
    from attnsvm.report.captions import fmt

    caption = (tmp_path / "magen_plane.caption.rst").read_text()
    (line,) = [ln for ln in caption.splitlines() if "min-norm interpolator: SNR" in ln]
    for n, b in zip((8, 16), want["bounds"], strict=True):
        assert f"n = {n}: {fmt(b)}" in line, line
    assert "snr = 0.1, n = 8" not in caption
