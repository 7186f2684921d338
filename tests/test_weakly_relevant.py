"""Sakamoto & Sato's own setting (docs/science.md §15, "Sakamoto & Sato's own setting"):
the generator weakly_relevant regenerated from the docs' text, their model and update
reimplemented independently and compared with attnsvm's KQ training, the Bayes error (15.9)
against Monte Carlo, the rules, and signal_noise's data unchanged."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attnsvm.config.cell import Cell
from attnsvm.config.errors import CellError
from attnsvm.gd import weakly_relevant as WR
from attnsvm.gd.data import make_dataset, make_init, make_test_dataset
from attnsvm.tasks import generalization as G
from attnsvm.tasks import run_cells


def _cell(**kw) -> Cell:
    base = dict(generator="weakly_relevant", n=10, T=5, d=12, signal_norm=3.0, rho=0.25,
                label_flip=0.2)  # fmt: skip
    return Cell(**{**base, **kw})


def _docs_draw(seed: int, stream: int, n: int, T: int, d: int, norm: float, rho: float,
               share: float) -> tuple[np.ndarray, ...]:  # fmt: skip
    """eq. (15.4)-(15.7) of docs/science.md §15, written from the text alone."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, stream]))
    xi = rng.standard_normal((n, T, d))
    e1, e2 = np.eye(d)[0], np.eye(d)[1]
    y = np.array([1.0 if i < n // 2 else -1.0 for i in range(n)])
    X = xi.copy()
    for i in range(n):
        mu_y, mu_other = (norm * e1, norm * e2) if y[i] > 0 else (norm * e2, norm * e1)
        X[i, 0] = xi[i, 0] + mu_y
        X[i, 1] = xi[i, 1] + rho * mu_y
        X[i, 2] = xi[i, 2] + rho * mu_other
    k = math.ceil(n * share)
    noisy = [i for i in range(n) if i < k // 2 or n // 2 <= i < n // 2 + k // 2]
    Y = y.copy()
    Y[noisy] = -y[noisy]
    nu = (e1 - e2) / np.sqrt(2) / norm
    return X, Y, nu, e1, np.isin(np.arange(n), noisy)


@pytest.mark.parametrize("n, T, share", [(10, 5, 0.2), (20, 8, 0.2), (9, 3, 0.3), (7, 4, 0.0)])
def test_generator_is_the_docs_equations(n, T, share):
    cell = _cell(n=n, T=T, label_flip=share, n_test=31, seed=4)
    ds = make_dataset(cell)
    X, Y, nu, z, noisy = _docs_draw(4, 0, n, T, 12, 3.0, 0.25, share)
    assert np.array_equal(ds.X, X) and np.array_equal(ds.Y, Y)
    assert np.array_equal(ds.flipped, noisy)
    np.testing.assert_allclose(ds.v, nu, rtol=1e-15, atol=0)
    assert np.array_equal(ds.Z, np.tile(z, (n, 1)))
    # the test sample: stream 2 of the seed, clean labels (eq. (15.6) with no noisy example)
    test = make_test_dataset(cell, ds)
    Xt, Yt, _, _, none = _docs_draw(4, 2, 31, T, 12, 3.0, 0.25, 0.0)
    assert np.array_equal(test.X, Xt) and np.array_equal(test.Y, Yt) and not none.any()
    assert not test.flipped.any() and np.array_equal(test.v, ds.v)


def test_flip_count_follows_their_code():
    """k = ceil(n share) noisy examples, floor(k / 2) per class: 2 of each at n = 20, 0.2
    (their default), and none at all where k = 1."""
    assert WR.flip_mask(20, 0.2).sum() == 4
    assert WR.flip_mask(20, 0.2)[[0, 1, 10, 11]].all()
    assert WR.flip_mask(10, 0.1).sum() == 0
    assert WR.flip_mask(21, 0.2).sum() == 4  # k = 5: two per class, as in their code


def test_kaiming_q0_init_is_torch_kaiming_uniform_scale_and_q_zero():
    cell = _cell(param="KQ", init="kaiming_q0", d=50, seed=2)
    init = make_init(cell)
    assert not init["Q"].any()
    K = init["K"]
    bound = 1 / math.sqrt(50)  # torch's kaiming_uniform_(a=sqrt(5)) bound, computed below
    w = torch.empty(50, 50, dtype=torch.float64)
    torch.nn.init.kaiming_uniform_(w, a=math.sqrt(5))
    assert abs(w).max() <= bound and abs(w).max() > 0.9 * bound
    assert abs(K).max() <= bound and abs(K).max() > 0.9 * bound
    # uniform on (-b, b): mean 0, variance b^2 / 3, within 5 standard errors
    assert abs(K.mean()) < 5 * bound / math.sqrt(3 * K.size)
    assert abs(K.var() - bound**2 / 3) < 5 * bound**2 * math.sqrt(4 / 45 / K.size)


class _TheirAttention(torch.nn.Module):
    """Their ``Attention`` of main.py: ``f(X) = nu^T X^T softmax(X W p)``, float64 here."""

    def __init__(self, W0: np.ndarray, nu: np.ndarray) -> None:
        super().__init__()
        self.W = torch.nn.Parameter(torch.tensor(W0))
        self.p = torch.nn.Parameter(torch.zeros(W0.shape[0], 1, dtype=torch.float64))
        self.nu = torch.tensor(nu).view(-1, 1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        scores = torch.softmax((x @ self.W @ self.p).squeeze(-1), dim=-1)
        return (scores * (x @ self.nu).squeeze(-1)).sum(1), scores


def _their_run(ds, W0: np.ndarray, lr: float, steps: int) -> tuple[list, list, list]:
    model = _TheirAttention(W0, ds.v)
    opt = torch.optim.SGD([model.W, model.p], lr=lr)
    x, y = torch.tensor(ds.X), torch.tensor(ds.Y)
    Wp, losses, soft = [], [], []
    for _ in range(steps + 1):
        out, s = model(x)
        loss = torch.log(1.0 + torch.exp(-y * out)).mean()
        Wp.append((model.W @ model.p).detach().numpy().ravel().copy())
        losses.append(float(loss.detach()))
        soft.append(s.detach().numpy().copy())
        opt.zero_grad()
        loss.backward()
        opt.step()
    return Wp, losses, soft


@pytest.mark.parametrize("signal_norm", [0.5, 4.0])
def test_kq_training_is_their_gd_on_w_and_p(signal_norm):
    """GD on (K, Q) from (Kaiming-uniform, 0) with every query e_1 is their SGD on (W, p):
    the stored W(k) = K Q^T is their W p in column 1 and 0 elsewhere, at every checkpoint, and
    the losses and softmax agree to rounding (docs/science.md §15, eq. (15.8))."""
    lr, steps = 0.3, 12
    cell = _cell(param="KQ", init="kaiming_q0", optimizer="plain", lr=lr, iterations=steps,
                 checkpoint_spacing="linear", checkpoint_count=steps + 1, ridge=0.0, n_test=5,
                 signal_norm=signal_norm, seed=1)  # fmt: skip
    (res,) = run_cells([cell], device="cpu")
    assert res.status == "ok", res.message
    ds = make_dataset(cell)
    Wp, losses, soft = _their_run(ds, make_init(cell)["K"], lr, steps)
    its = list(res.iterations)
    assert its[-1] == steps and len(its) >= 6
    assert np.abs(np.asarray(Wp)[-1]).max() > 1e-2  # the score vector moved
    for c, k in enumerate(its):
        W = res.W[c]
        assert not W[:, 1:].any()  # Q's rows but the first stay exactly 0
        np.testing.assert_allclose(W[:, 0], Wp[k], rtol=0, atol=1e-13 * max(1, abs(Wp[k]).max()))
        np.testing.assert_allclose(res.loss[c], losses[k], rtol=1e-13)
        np.testing.assert_allclose(res.softmax[c], soft[k], rtol=0, atol=1e-13)


def test_bayes_error_formula_against_monte_carlo():
    """(15.9): the statistic's sign errs with Phi(-||mu|| sqrt((1 + 2 rho^2) / 2)) on clean
    labels, within 5 standard errors; an estimate of the best linear rule of
    the three tokens (fit on a separate sample) does not beat it."""
    norm, rho, m = 1.2, 0.4, 100_000
    cell = _cell(n=4, T=4, d=3, signal_norm=norm, rho=rho, n_test=m, seed=9)
    test = make_test_dataset(cell, make_dataset(cell))
    p = WR.bayes_error(norm, rho)
    err = G.errors(G.bayes_predictions(test, "weakly_relevant", rho), test.Y)
    assert abs(err - p) < 5 * math.sqrt(p * (1 - p) / m)
    # by hand: sign of <x_1 + rho x_2 - rho x_3, e_1 - e_2>
    r = test.X[:, 0] + rho * (test.X[:, 1] - test.X[:, 2])
    assert np.array_equal(np.where(r[:, 0] - r[:, 1] >= 0, 1.0, -1.0),
                          G.bayes_predictions(test, "weakly_relevant", rho))  # fmt: skip
    other = make_test_dataset(_cell(n=4, T=4, d=3, signal_norm=norm, rho=rho, n_test=m,
                                    seed=10), make_dataset(cell))  # fmt: skip
    F = other.X.reshape(m, -1)
    w = np.linalg.lstsq(np.c_[F, np.ones(m)], other.Y, rcond=None)[0]
    lin = np.mean(np.sign(np.c_[test.X.reshape(m, -1), np.ones(m)] @ w) != test.Y)
    assert lin >= err - 5 * math.sqrt(p * (1 - p) / m)


def test_stored_baselines_of_a_cell():
    cell = _cell(param="KQ", init="kaiming_q0", optimizer="plain", lr=0.05, iterations=20,
                 checkpoint_count=4, ridge=0.0, n_test=200, seed=3)  # fmt: skip
    (res,) = run_cells([cell], device="cpu")
    assert res.status == "ok", res.message
    sc = res.scalars
    assert sc["bayes_err"] == WR.bayes_error(3.0, 0.25)
    assert sc["test_flip_share"] == 0.0 and sc["flip_share"] == 0.2
    test = make_test_dataset(cell, make_dataset(cell))
    stat = WR.bayes_statistic(test.X, 0.25)
    assert sc["test_err_bayes"] == np.mean(np.where(stat >= 0, 1.0, -1.0) != test.Y)
    # the overfitting point: the first checkpoint with training error 0, else the last one
    tr, te = res.curves["train_err"], res.curves["test_err"]
    zero = [k for k in range(len(tr)) if tr[k] == 0]
    k = zero[0] if zero else len(tr) - 1
    assert sc["overfit_iteration"] == res.iterations[k]
    assert sc["test_err_at_overfit"] == te[k]


def test_first_overfit_is_the_first_zero_training_error_else_the_last_checkpoint():
    assert G.first_overfit(np.array([0.2, 0.1, 0.0, 0.05, 0.0])) == 2
    assert G.first_overfit(np.array([0.2, 0.1, 0.1])) == 2
    assert G.first_overfit(np.array([0.0, 0.1])) == 0


def test_overfit_scalars_only_for_weakly_relevant():
    from attnsvm.tasks import task_for

    wr = _cell(param="KQ", init="kaiming_q0", n_test=10)
    sn = Cell(generator="signal_noise", n=6, T=4, d=10, label_flip=0.2, n_test=10)
    assert set(G.OVERFIT_SCALARS) <= set(task_for(wr).scalars(wr))
    assert not set(G.OVERFIT_SCALARS) & set(task_for(sn).scalars(sn))


@pytest.mark.parametrize(
    "values, match",
    [
        ({"T": 2}, "T >= 3"),
        ({"head": "relu"}, "weakly_relevant"),
        ({"init": "kaiming_q0"}, "needs param 'KQ'"),
        ({"rho": 0.0}, "rho must be"),
        ({"signal_norm": -1.0}, "signal_norm must be"),
    ],
)
def test_bad_combinations_are_refused(values, match):
    with pytest.raises((CellError, ValueError), match=match):
        _cell(**values)


def test_new_fields_leave_other_generators_alone():
    """signal_norm and rho reset to their defaults off weakly_relevant, so a signal_noise cell
    keeps its description (and digest, block store); its data and Bayes baselines come from
    the same code as before (eq. (15.1)-(15.3))."""
    a = Cell(generator="signal_noise", n=6, T=4, d=10, snr=0.7, label_flip=0.2)
    b = Cell(generator="signal_noise", n=6, T=4, d=10, snr=0.7, label_flip=0.2,
             signal_norm=3.0, rho=0.4)  # fmt: skip
    assert a == b and a.digest() == b.digest()
    assert (b.signal_norm, b.rho) == (20.0, 0.1)


def test_phase_diagram_figure_draws_the_grid_means(tmp_path):
    """The figure sakamoto_sato from a tiny pipeline: passes the figure checks, its caption
    counts the cells, and each heat map cell is the mean over seeds of the stored final
    training / test loss at that (d, ||mu||)."""
    import matplotlib.pyplot as plt
    from docutils.core import publish_parts

    from attnsvm.report.draw import make_figure
    from attnsvm.report.figure_check import assert_figure_ok
    from attnsvm.report.figures import figure_module
    from tests.workflow_helpers import tiny_sweep

    fixed = {"generator": "weakly_relevant", "n": 6, "T": 4, "rho": 0.1, "label_flip": 0.2,
             "n_test": 40, "param": "KQ", "init": "kaiming_q0", "optimizer": "plain",
             "lr": 0.05, "ridge": 0.0, "iterations": 20, "checkpoint_count": 3}  # fmt: skip
    grid = {"d": [6, 10], "signal_norm": [0.5, 4.0, 16.0]}
    raw = {"fixed": fixed, "grid": grid, "seeds": 2, "figures": ["sakamoto_sato"]}
    sweep, summary = tiny_sweep(tmp_path, "t_sakamoto_sato", raw)
    pdf, png, caption = (tmp_path / f"f.{ext}" for ext in ("pdf", "png", "caption.rst"))
    make_figure("sakamoto_sato", sweep, summary, pdf, png, caption)
    assert pdf.stat().st_size > 1000 and png.stat().st_size > 1000
    text = caption.read_text()
    assert "12 ok, 0 nonfinite, 0 failed, 0 missing" in text
    publish_parts(text, writer="html", settings_overrides={"halt_level": 2})
    module = figure_module("sakamoto_sato")
    plotted = module.plot(sweep, summary)
    assert_figure_ok(plotted, "sakamoto_sato")
    panels = [ax for ax in plotted.axes if ax.images]
    for name, ax in zip(("loss", "test_loss"), panels, strict=True):
        shown = ax.images[0].get_array()
        for i, d in enumerate(grid["d"]):
            for j, norm in enumerate(grid["signal_norm"]):
                values = sweep[name].sel(d=d, signal_norm=norm).values
                assert shown[i, j] == pytest.approx(np.mean(values), rel=1e-12)
    # one panel of curves per chosen signal norm (no curve of one norm drawn over another's)
    curves = [ax for ax in plotted.axes if "SNR" in ax.get_title(loc="left")]
    assert len(curves) == 3
    for ax, norm in zip(curves, (0.5, 4.0, 16.0), strict=True):
        assert f"SNR {norm / np.sqrt(10):.2g}" in ax.get_title(loc="left")
        assert len(ax.lines) == len(module.CURVES)
    plt.close(plotted)


@pytest.mark.parametrize("norms", [[1.0, 4.0], [2.0]])
def test_phase_diagram_has_one_curve_panel_per_signal_norm_and_no_empty_panel(tmp_path, norms):
    """With fewer than three signal norms (the Quickstart's b17 has two) the curve panels
    share the row: one per norm, every axis of the figure drawn, and the notes name them."""
    import matplotlib.pyplot as plt

    from attnsvm.report.figure_check import assert_figure_ok
    from attnsvm.report.figures import figure_module
    from attnsvm.report.style import caption_notes
    from tests.workflow_helpers import tiny_sweep

    fixed = {"generator": "weakly_relevant", "n": 6, "T": 4, "rho": 0.1, "label_flip": 0.2,
             "n_test": 20, "param": "KQ", "init": "kaiming_q0", "optimizer": "plain",
             "lr": 0.05, "ridge": 0.0, "iterations": 10, "checkpoint_count": 3}  # fmt: skip
    raw = {"fixed": fixed, "grid": {"d": [6], "signal_norm": norms}, "seeds": 2,
           "figures": ["sakamoto_sato"]}  # fmt: skip
    sweep, summary = tiny_sweep(tmp_path, "t_sakamoto_sato_few", raw)
    plotted = figure_module("sakamoto_sato").plot(sweep, summary)
    assert_figure_ok(plotted, "sakamoto_sato")
    curves = [ax for ax in plotted.axes if "SNR" in ax.get_title(loc="left")]
    assert len(curves) == len(norms)
    for ax, norm in zip(curves, norms, strict=True):
        assert f"SNR {norm / np.sqrt(6):.2g}" in ax.get_title(loc="left")
    assert all(ax.axison for ax in plotted.axes)  # no panel left blank
    notes = " ".join(caption_notes(plotted))
    assert {1: "(c) line", 2: "(c, d) line"}[len(norms)] in notes
    plt.close(plotted)


LOW, THEIRS, HIGH = 0.7905694150420949, 6.324555320336759, 50.59644256269407


def _b17_claims(experiment: str = "b17_sakamoto_sato_snr") -> dict:
    import yaml
    from pydantic import TypeAdapter

    from attnsvm.config.claims import Claim

    raw = yaml.safe_load(open("config/beyond.yaml"))["experiments"][experiment]
    return {c.name: c for c in TypeAdapter(list[Claim]).validate_python(raw["claims"])}


def _b17_sweep(means: dict, seeds: int = 8):
    """Per-seed values along signal_norm: ``flip_fit`` in {0, .25, .5, .75, 1} (4 flipped
    labels) near ``means["flip_fit"][norm]``, ``test_err_at_overfit`` / ``test_err`` /
    ``loss`` / ``test_loss`` ~ N(mean, 0.004): a known truth."""
    import xarray as xr

    rng = np.random.default_rng(2)
    norms = [LOW, THEIRS, HIGH]
    cols = {}
    for name, mean in means.items():
        if name == "flip_fit":
            cols[name] = np.stack([np.clip(np.round(4 * rng.normal(mean[s], 0.05, seeds)) / 4,
                                           0, 1) for s in norms])  # fmt: skip
        else:
            cols[name] = np.stack([rng.normal(mean[s], 0.004, seeds) for s in norms])
    dims = ("signal_norm", "seed")
    return xr.Dataset(
        {"status": (dims, np.zeros((3, seeds), np.int8)),
         **{k: (dims, v) for k, v in cols.items()}},
        coords={"signal_norm": norms, "seed": np.arange(seeds)},
        attrs={"axes": ["signal_norm"]},
    )  # fmt: skip


@pytest.mark.parametrize(
    ("means", "verdicts"),
    [
        # Sakamoto & Sato's picture: noise memorized at low SNR and at theirs, where the test
        # error then falls by 0.1; nothing fit at high SNR; test loss falls, training loss rises
        ({"flip_fit": {LOW: 1.0, THEIRS: 1.0, HIGH: 0.0},
          "test_err_at_overfit": {LOW: 0.45, THEIRS: 0.15, HIGH: 0.0},
          "test_err": {LOW: 0.45, THEIRS: 0.05, HIGH: 0.0},
          "test_loss": {LOW: 0.7, THEIRS: 0.5, HIGH: 0.4},
          "loss": {LOW: 0.2, THEIRS: 0.3, HIGH: 0.55}},
         {"memorizes_at_low_snr": "PASS", "no_overfitting_at_high_snr": "PASS",
          "memorizes_at_their_snr": "PASS", "delayed_generalization_at_their_snr": "PASS",
          "test_loss_falls_with_snr": "PASS", "training_loss_rises_with_snr": "PASS"}),
        # the opposite: memorized only at high SNR, test error rising after the overfitting,
        # test loss rising and training loss falling with the SNR
        ({"flip_fit": {LOW: 0.0, THEIRS: 0.0, HIGH: 1.0},
          "test_err_at_overfit": {LOW: 0.3, THEIRS: 0.05, HIGH: 0.0},
          "test_err": {LOW: 0.4, THEIRS: 0.1, HIGH: 0.05},
          "test_loss": {LOW: 0.4, THEIRS: 0.5, HIGH: 0.7},
          "loss": {LOW: 0.55, THEIRS: 0.3, HIGH: 0.2}},
         {"memorizes_at_low_snr": "FAIL", "no_overfitting_at_high_snr": "FAIL",
          "memorizes_at_their_snr": "FAIL", "delayed_generalization_at_their_snr": "FAIL",
          "test_loss_falls_with_snr": "FAIL", "training_loss_rises_with_snr": "FAIL"}),
    ],
)  # fmt: skip
def test_the_claims_of_b17_give_the_known_verdicts(means, verdicts):
    """The claims of b17_sakamoto_sato_snr and b17_sakamoto_sato_step (the same statements
    at their own step, on the grid points they share) on known truths; where a claim PASSes
    its baseline does not."""
    from attnsvm.claims.evaluate import evaluate_claim

    sweep = _b17_sweep(means)
    snr, step = _b17_claims(), _b17_claims("b17_sakamoto_sato_step")
    assert set(snr) == set(verdicts) and set(step) < set(verdicts)
    for experiment, cl in (("b17_sakamoto_sato_snr", snr), ("b17_sakamoto_sato_step", step)):
        for name, claim in cl.items():
            entry = evaluate_claim(sweep, claim, experiment)
            assert entry["verdict"] == verdicts[name], (experiment, name, entry)
            if verdicts[name] == "PASS":
                assert not entry["control"]["passes"], (experiment, name)
