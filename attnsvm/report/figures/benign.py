"""Benign overfitting of attention on the signal-noise token model (docs/science.md §15;
Magen et al., arXiv 2410.07746; Sakamoto & Sato, arXiv 2409.17625).

Grid axis ``snr``; every other swept axis (``n``, ``lr``, ``d``, ``optimizer`` ...) is a
*series*: nothing swept is pooled. (a) The final test error of GD and of the max-margin
interpolator (attention along the Att-SVM of the flipped labels' optimal tokens at infinite
norm) against the SNR, mean over seeds and its confidence interval, a colour per series;
dotted, per series: the Bayes-optimal classifier's test error on the same test samples (the
best possible; above the label-flip rate at low SNR, docs/science.md §15); thin grey: the
label-flip rate; dash-dotted: the papers' threshold ``SNR = 1 / sqrt(n)`` (constant 1, which
the papers leave open). (b, c, ...) One panel per series: training
fit against test error over the iterations at the smallest and largest SNR, medians over seeds:
the training error, the share of flipped labels fit and the test error (a delay between fit and
generalization is Sakamoto & Sato's delayed generalization).
"""

from __future__ import annotations

import itertools

import numpy as np
import xarray as xr

from attnsvm.report import captions, style
from attnsvm.report import sweepdata as sd
from attnsvm.report.figures import Figure

VARIABLES = (
    "test_err", "test_err_mm", "test_err_bayes", "curve_test_err", "curve_train_err",
    "curve_flip_fit",
)  # fmt: skip
CURVES = {
    "curve_test_err": ("test error", style.PALETTE[0]),
    "curve_train_err": ("training error", style.PALETTE[1]),
    "curve_flip_fit": ("flipped labels fit", style.PALETTE[2]),
}

#: palette indices of the series of (a): none shared with a curve of (b...), far apart
SERIES_COLORS = (3, 9, 4, 5, 8, 6, 7)


def _snrs(sweep: xr.Dataset) -> np.ndarray:
    return np.asarray([float(s) for s in sd.grid_values(sweep, "snr")], float)


def series_axes(sweep: xr.Dataset) -> list[str]:
    """The swept axes besides ``snr``: each combination of their values is one series, never
    pooled with another (different step sizes, sizes or optimizers are different runs)."""
    axes = sd.loads_json(sweep.attrs.get("axes"), None)
    axes = [str(a) for a in np.atleast_1d(axes)] if axes is not None else list(sweep.dims)
    return [a for a in axes if a not in ("snr", "seed") and a in sweep.dims]


def series(sweep: xr.Dataset) -> list[dict]:
    """Every combination of the values of :func:`series_axes` (one empty dict when none)."""
    axes = series_axes(sweep)
    values = [sd.grid_values(sweep, a) for a in axes]
    return [dict(zip(axes, combo, strict=True)) for combo in itertools.product(*values)]


def series_label(point: dict) -> str:
    """``"n = 10, lr = 1"`` (empty for the single series of an experiment sweeping snr only)."""
    return ", ".join(f"{k} = {v:g}" if isinstance(v, float) else f"{k} = {v}"
                     for k, v in point.items())  # fmt: skip


def _n_of(sweep: xr.Dataset, point: dict) -> int | None:
    if "n" in point:
        return int(point["n"])
    ns = sd.grid_values(sweep, "n")
    return int(ns[0]) if len(ns) == 1 else None


def _errors(ax, sweep, summary, snrs, points) -> None:
    drawn = set()
    for j, point in enumerate(points):
        label = series_label(point)
        suffix = f", {label}" if label else ""
        color = style.PALETTE[SERIES_COLORS[j % len(SERIES_COLORS)]]
        for name, ls, what in (("test_err", "-", "GD"), ("test_err_mm", "--", "interpolator")):
            stats = sd.pooled(summary, name, keep=("snr",), **point)
            style.mean_errorbar(ax, snrs, stats, marker="o" if ls == "-" else "s", ms=3,
                                capsize=2, ls=ls, color=color, label=what + suffix)  # fmt: skip
        bayes, _, count = sd.pooled(summary, "test_err_bayes", keep=("snr",), **point)
        if np.any(np.asarray(count) > 0):
            ax.plot(snrs, bayes, color=color, ls=":", lw=1.0, label="Bayes error" + suffix)
        n = _n_of(sweep, point)
        if n is not None and n not in drawn:
            drawn.add(n)
            ax.axvline(1 / np.sqrt(n), color=color if "n" in point else "0.3", lw=0.8, ls="-.",
                       zorder=0)  # fmt: skip
    for eta in sd.grid_values(sweep, "label_flip"):
        ax.axhline(float(eta), color="0.6", lw=0.6, ls="-", zorder=0)
    ax.set_xscale("log")
    if len(snrs):  # the grid's SNRs as ticks (matplotlib's minor labels collide on a short span)
        ax.set_xticks(snrs, [f"{v:g}" for v in snrs])
        ax.minorticks_off()
        ax.set_xlim(snrs.min() / 1.5, snrs.max() * 1.5)
    ax.set_xlabel("SNR")
    ax.set_ylabel("final test error")


def _over_iterations(ax, sweep, summary, snrs, point) -> None:
    x = sd.iterations_of(sweep)
    picks = [(snrs.min(), "-"), (snrs.max(), "--")] if len(snrs) > 1 else [(snrs[0], "-")]
    for snr, ls in picks:
        for name, (label, color) in CURVES.items():
            if f"{name}_q50" not in summary:
                continue
            mid, lo, hi = sd.quantile_band(summary, name, snr=snr, **point)
            style.draw_band(ax, x, mid, lo, hi, color, f"{label}, SNR = {snr:g}", ls)
    ax.set_xscale("log")
    ax.set_xlabel("iteration $k$")
    ax.set_ylabel("share of examples")


def plot(sweep: xr.Dataset, summary: xr.Dataset):
    """(a) from the summary's means over seeds; (b, c, ...) from its quantiles, one panel per
    series (:func:`series`)."""
    snrs, points = _snrs(sweep), series(sweep)
    cols = 1 + len(points)
    fig, axes = style.new_figure(1, cols, width=style.WIDTH * max(1.0, cols / 2), height=2.6)
    axes = list(np.atleast_1d(axes))
    _errors(axes[0], sweep, summary, snrs, points)
    style.panel_label(axes[0], "a", "GD vs interpolator")
    for k, (ax, point) in enumerate(zip(axes[1:], points, strict=True)):
        _over_iterations(ax, sweep, summary, snrs, point)
        label = series_label(point)
        title = "fit vs test error" + (f", {label}" if label else "")
        style.panel_label(ax, chr(ord("b") + k), title)
    style.outside_legend(fig, axes, loc="outside right upper", fontsize=6)
    notes = style.notes_text(
        f"(a) {style.MEAN_INTERVAL}; (b...) line: median, band: interquartile range",
        [
            "(a) dotted: the Bayes-optimal classifier's test error, the best possible (above "
            "the flip rate at low SNR); thin grey: the label-flip rate; dash-dotted: SNR = "
            "1/sqrt(n), the papers' threshold with constant 1; interpolator: attention along "
            "the Att-SVM "
            "of the flipped labels' optimal tokens at infinite norm (docs/science.md §15); "
            "series (not pooled): " + (", ".join(series_axes(sweep)) or "none"),
        ],
    )
    style.add_notes(fig, notes)
    return fig


def numbers(summary: xr.Dataset) -> list[str]:
    """Mean final test errors of GD, of the interpolator and of the Bayes classifier per SNR,
    and the flip fit."""
    axes = [str(a) for a in np.atleast_1d(summary.attrs.get("axes", []))]
    over = ["snr", *(a for a in axes if a not in ("snr", "seed"))]
    return [
        "mean final test error of GD: " + captions.per_point(summary, "test_err_mean", over),
        "of the max-margin interpolator: " + captions.per_point(summary, "test_err_mm_mean", over),
        "of the Bayes-optimal classifier: "
        + captions.per_point(summary, "test_err_bayes_mean", over),
        "mean share of flipped training labels fit: "
        + captions.per_point(summary, "flip_fit_mean", over),
    ]


FIGURE = Figure(
    name="benign",
    label="benign overfitting",
    what=(
        "Beyond the paper, generalization with label noise (Magen et al., arXiv 2410.07746; "
        "Sakamoto & Sato, arXiv 2409.17625): the test error of GD and of the max-margin "
        "interpolator on the signal-noise token model against the SNR (means over seeds with "
        f"their {style.CI_WORDS}), and training fit against test error over the iterations "
        "(medians and interquartile ranges)."
    ),
    look=(
        "Above the threshold SNR the model fits the flipped labels and its test error stays "
        "near the Bayes error, the best possible (benign); below it the interpolator's test "
        "error rises above the Bayes error (harmful), docs/science.md §15; the claims ledger "
        "tests both against the Bayes error. The flip rate is the Bayes error only at high "
        "SNR: the signal token carries noise."
    ),
    plot=plot,
    numbers=numbers,
    variables=VARIABLES,
)


#: the tasks whose cells this figure draws (checked against each experiment at config time)
TASKS = ("train",)
