"""Test loss and error, label noise and the max-margin interpolator (docs/science.md §15).

For a cell with a held-out sample (``n_test > 0``), :func:`measure` stores, at every
checkpoint and at the last one, the test loss and test error of the trained attention, the
training error and the share of flipped training labels the model fits; and the test error of
the predictors that attend along an SVM direction at infinite norm (hard selection): the
Frobenius Att-SVM of GD's selection and the max-margin interpolator (the Att-SVM of the optimal
tokens of the stored, possibly flipped, labels).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from attnsvm.gd import magen, weakly_relevant
from attnsvm.gd.data import Dataset
from attnsvm.svm import minnorm as minnorm_svm

#: the per-cell scalars of a cell with a test sample (docs/store.md, docs/science.md §15)
SCALARS = (
    "test_loss", "test_err", "test_flip_share", "test_excess", "train_err", "flip_share",
    "flip_fit", "test_err_svm", "test_err_mm", "test_excess_mm", "gd_mm_gap",
    "fit_iteration", "test_err_at_fit",
)  # fmt: skip
#: the per-cell scalars of Sakamoto & Sato's setting only (generator weakly_relevant,
#: docs/science.md §15, "Sakamoto & Sato's own setting"): the overfitting point and the test
#: error there
OVERFIT_SCALARS = ("overfit_iteration", "test_err_at_overfit")
#: the per-checkpoint curves (stored as ``curve_<name>``)
CURVES = ("test_loss", "test_err", "train_err", "flip_fit")


def outputs(W: np.ndarray, ds: Dataset, settings: Any = None) -> np.ndarray:
    """``f_i(W) = v^T X_i^T softmax(X_i W z_i)`` for every W of ``W`` (C, d, d): (C, n), the
    model's own forward (:func:`attnsvm.gd.model.evaluate`; ``settings``: the cell's training
    settings, so that every field of the model counts)."""
    from attnsvm.gd.model import evaluate  # torch: only where a cell has a test sample

    return evaluate(ds, W, settings)[0]


def hard_outputs(W: np.ndarray, ds: Dataset, settings: Any = None) -> np.ndarray:
    """The limit of ``f_i(R W)`` as R grows: ``v^T x_{i, argmax_t x_it^T W z_i}`` (n,), the
    prediction of attention along the direction W at infinite norm (docs/science.md §15)."""
    from attnsvm.gd.model import evaluate  # torch: only where a cell has a test sample

    return evaluate(ds, W[None], settings)[2][0]


def errors(f: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """Share of examples misclassified, ``mean_i [Y_i f_i <= 0]`` over the last axis."""
    return np.mean(Y * f <= 0, axis=-1)


def flip_fit(f: np.ndarray, ds: Dataset) -> np.ndarray:
    """Share of the flipped training labels that ``f`` fits (``Y_i f_i > 0`` on them); NaN
    where no label is flipped."""
    flipped = np.zeros(ds.n, bool) if ds.flipped is None else ds.flipped
    if not flipped.any():
        return np.full(f.shape[:-1], np.nan)
    return np.mean(ds.Y[flipped] * f[..., flipped] > 0, axis=-1)


def first_fit(train_err: np.ndarray) -> int:
    """Index of the first checkpoint at which the training error reaches its smallest value
    over the run: the point where the model has fit (memorized) the training labels as far as
    it ever does (docs/science.md §15, delayed generalization)."""
    return int(np.flatnonzero(train_err <= train_err.min())[0])


def first_overfit(train_err: np.ndarray) -> int:
    """Index of the first checkpoint at which every training label is fit (training error 0,
    the flipped ones included: overfitting), the last checkpoint where none is
    (docs/science.md §15, "Sakamoto & Sato's own setting")."""
    hits = np.flatnonzero(train_err == 0)
    return int(hits[0]) if hits.size else len(train_err) - 1


def _share(flipped: np.ndarray | None) -> float:
    return 0.0 if flipped is None else float(np.mean(flipped))


def _evaluate_along(W: np.ndarray, ds: Dataset, heads: np.ndarray | None, settings: Any):
    """``(f (C, n), loss (C,))`` of every W, each with its own head ``heads[c]`` where the
    head is trained (Magen et al.'s setting, docs/science.md §15), else with ``ds.v``."""
    from attnsvm.gd.model import evaluate  # torch: only where a cell has a test sample

    if heads is None:
        f, loss, _ = evaluate(ds, W, settings)
        return f, loss
    parts = [evaluate(dataclasses.replace(ds, v=h), W[c : c + 1], settings)
             for c, h in enumerate(heads)]  # fmt: skip
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def measure(
    W: np.ndarray,
    train: Dataset,
    test: Dataset,
    svm: np.ndarray | None,
    interpolator: np.ndarray | None,
    iterations: np.ndarray | None = None,
    settings: Any = None,
    overfit: bool = False,
    heads: np.ndarray | None = None,
) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """Scalars and curves of docs/science.md §15 for the trajectory ``W`` (C, d, d), from the
    cell's model (``settings``: its training settings) at every W.

    ``svm``: the Frobenius Att-SVM of GD's selection, ``interpolator``: that of the optimal
    tokens of the stored labels (None where unsolved: their errors are NaN). Test errors count
    the test sample's own flipped labels, so a perfect selector of the signal token errs on
    exactly ``test_flip_share``; ``test_excess`` is the excess over it. ``overfit``: also
    :data:`OVERFIT_SCALARS` (weakly_relevant cells). ``heads`` (C, d): a trained head's v at
    each checkpoint (Magen et al.'s setting), used with the W of the same checkpoint; the SVM
    directions take the final head, ``test.v``.
    """
    f_test, test_loss = _evaluate_along(W, test, heads, settings)
    f_train = _evaluate_along(W, train, heads, settings)[0]
    curves = {
        "test_loss": test_loss,
        "test_err": errors(f_test, test.Y),
        "train_err": errors(f_train, train.Y),
        "flip_fit": flip_fit(f_train, train),
    }
    sc = {k: float(v[-1]) for k, v in curves.items()}
    sc["test_flip_share"] = _share(test.flipped)
    sc["flip_share"] = _share(train.flipped)
    sc["test_excess"] = sc["test_err"] - sc["test_flip_share"]
    for key, S in (("svm", svm), ("mm", interpolator)):
        sc[f"test_err_{key}"] = (
            float(errors(hard_outputs(S, test, settings), test.Y)) if S is not None else np.nan
        )
    sc["test_excess_mm"] = sc["test_err_mm"] - sc["test_flip_share"]
    sc["gd_mm_gap"] = sc["test_err"] - sc["test_err_mm"]
    its = np.arange(1, len(W) + 1) if iterations is None else np.asarray(iterations)
    k = first_fit(curves["train_err"])
    sc["fit_iteration"] = float(its[k])
    sc["test_err_at_fit"] = float(curves["test_err"][k])
    if overfit:
        k = first_overfit(curves["train_err"])
        sc["overfit_iteration"] = float(its[k])
        sc["test_err_at_overfit"] = float(curves["test_err"][k])
    return sc, curves


# --------------------------------------------------------------------------- baselines
#: per-cell baselines of a cell with a test sample (docs/science.md §15): what is possible
#: (the Bayes-optimal classifier of the token model) and what the interpolator fits
BASELINE_SCALARS = ("bayes_err", "test_err_bayes", "flip_fit_bayes", "train_err_mm")


def bayes_error(snr: float, d: int, label_flip: float) -> float:
    """The Bayes error of the signal-noise token model (docs/science.md §15, eq. (15.3)):
    ``p + (1 - 2p) Phi(-snr sqrt(d / 2))`` for flip rate ``p < 1/2``. The signal token
    ``x_0 = mu_y + xi`` alone carries the label, and the likelihood ratio of ``y`` is a
    function of ``<x_0, mu_+ - mu_->``, whose noise is ``N(0, 2 snr^2 / d)``: the clean
    label is missed with ``q = Phi(-snr sqrt(d / 2))``, the stored one with ``q (1 - p) + (1 -
    q) p``."""
    from scipy.stats import norm  # this function only

    q = float(norm.cdf(-snr * np.sqrt(d / 2.0)))
    return label_flip + (1.0 - 2.0 * label_flip) * q


def bayes_predictions(ds: Dataset, generator: str, rho: float = 0.0) -> np.ndarray:
    """The Bayes-optimal classifier's labels (n,): ``sign(v^T x_i0)`` of the signal token for
    the signal-noise model (``v`` is parallel to ``mu_+ - mu_-``; flip rates are below 1/2);
    for Sakamoto & Sato's model (weakly_relevant) the sign of ``<x_1 + rho x_2 - rho x_3,
    e_1 - e_2>`` (docs/science.md §15, eq. (15.9)); for Magen et al.'s (magen) the clean
    label, which the tokens determine (eq. (15.12)); and +1 where the labels are independent
    of the tokens (the gaussian generator: every classifier is Bayes-optimal there, with error
    1/2)."""
    if generator == "signal_noise":
        return np.where(ds.X[:, 0, :] @ ds.v >= 0, 1.0, -1.0)
    if generator == "weakly_relevant":
        return np.where(weakly_relevant.bayes_statistic(ds.X, rho) >= 0, 1.0, -1.0)
    if generator == "magen":
        return magen.bayes_labels(ds.X)
    return np.ones(ds.n)


def baselines(
    cell: Any, train: Dataset, test: Dataset, interpolator: np.ndarray | None,
) -> dict[str, float]:  # fmt: skip
    """:data:`BASELINE_SCALARS` of one cell (docs/science.md §15): the Bayes error of its token
    model (eq. (15.3); weakly_relevant, whose test labels are clean: eq. (15.9); magen: the
    flip rate), the Bayes-optimal classifier's test error and share of the flipped training
    labels it fits (it fits one only where it misses the clean label), and the share of
    training labels the max-margin interpolator does not fit (0: it interpolates; NaN
    unsolved)."""
    generator = cell.generator
    if generator == "signal_noise":
        bayes = bayes_error(cell.snr, train.d, cell.label_flip)
    elif generator == "weakly_relevant":
        bayes = weakly_relevant.bayes_error(cell.signal_norm, cell.rho)
    elif generator == "magen":
        bayes = magen.bayes_error(cell.label_flip)
    else:
        bayes = 0.5
    rho = cell.rho if generator == "weakly_relevant" else 0.0
    f_train, f_test = (bayes_predictions(ds, generator, rho) for ds in (train, test))
    mm = (
        float(errors(hard_outputs(interpolator, train), train.Y))
        if interpolator is not None else np.nan
    )  # fmt: skip
    return {
        "bayes_err": bayes,
        "test_err_bayes": float(errors(f_test, test.Y)),
        "flip_fit_bayes": float(flip_fit(f_train, train)),
        "train_err_mm": mm,
    }


# --------------------------------------------------------------------------- Magen et al.
#: per-cell scalars of Magen et al.'s setting (generator magen, docs/science.md §15): their
#: min-norm interpolator of (v, p) (:func:`attnsvm.svm.minnorm.min_norm_interpolator`)
MINNORM_SCALARS = ("test_err_minnorm", "train_err_minnorm", "minnorm_benign", "minnorm_vnorm")


def minnorm(train: Dataset, test: Dataset, settings: Any = None) -> dict[str, float]:
    """:data:`MINNORM_SCALARS` of one cell of Magen et al.'s setting (docs/science.md §15, eq.
    (15.13)): the test and training errors of their min-norm interpolator at infinite attention
    norm (p along its Att-SVM, v its min-norm head), whether its selection is the benign one
    (each signal serves its clean examples, the flipped ones attend to their noise) and
    ``||v_mm||``; NaN where no candidate selection is realizable and separable."""
    best = minnorm_svm.min_norm_interpolator(train.X, train.Y, train.Z)
    if best is None:
        return dict.fromkeys(MINNORM_SCALARS, np.nan)
    err = {}
    for name, ds in (("test", test), ("train", train)):
        f = hard_outputs(best["W"], dataclasses.replace(ds, v=best["v"]), settings)
        err[name] = float(errors(f, ds.Y))
    return {
        "test_err_minnorm": err["test"],
        "train_err_minnorm": err["train"],
        "minnorm_benign": float(best["roles"] == ("clean", "clean")),
        "minnorm_vnorm": best["vnorm"],
    }
