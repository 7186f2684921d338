"""Benign overfitting of attention on the signal-noise token model (docs/science.md §15;
Magen et al., arXiv 2410.07746; Sakamoto & Sato, arXiv 2409.17625).

Grid axis ``snr`` (optionally ``n``, a line each; other axes such as ``lr`` are pooled).
(a) The final test error of GD and of the max-margin interpolator (attention along the
Att-SVM of the flipped labels' optimal tokens at infinite norm) against the SNR, mean ± std
over seeds; dotted: the label-flip rate (the best test error); dash-dotted: the papers'
threshold ``SNR = 1 / sqrt(n)`` (constant 1, which the papers leave open). (b) Training fit
against test error over the iterations at the smallest and largest SNR, medians over seeds:
the training error, the share of flipped labels fit and the test error (a delay between fit
and generalization is Sakamoto & Sato's delayed generalization).
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from attnsvm.report import captions, style
from attnsvm.report import sweepdata as sd
from attnsvm.report.figures import Figure

VARIABLES = (
    "test_err", "test_err_mm", "curve_test_err", "curve_train_err", "curve_flip_fit",
)  # fmt: skip
CURVES = {
    "curve_test_err": ("test error", style.PALETTE[0]),
    "curve_train_err": ("training error", style.PALETTE[1]),
    "curve_flip_fit": ("flipped labels fit", style.PALETTE[2]),
}


def _snrs(sweep: xr.Dataset) -> np.ndarray:
    return np.asarray([float(s) for s in sd.grid_values(sweep, "snr")], float)


def _errors(ax, sweep, summary, snrs) -> None:
    ns = [int(v) for v in sd.grid_values(sweep, "n")] or [None]
    for j, n in enumerate(ns):
        point = {} if n is None or len(ns) == 1 else {"n": n}
        suffix = "" if len(ns) == 1 else f", n = {n}"
        color = style.PALETTE[j % len(style.PALETTE)]
        for name, ls, label in (("test_err", "-", "GD"), ("test_err_mm", "--", "interpolator")):
            mean, std, _ = sd.pooled(summary, name, keep=("snr",), **point)
            ax.errorbar(snrs, mean, yerr=std, marker="o" if ls == "-" else "s", ms=3, capsize=2,
                        ls=ls, color=color, label=label + suffix)  # fmt: skip
        if n is not None:
            ax.axvline(1 / np.sqrt(n), color=color, lw=0.8, ls="-.", zorder=0)
    flip = sd.grid_values(sweep, "label_flip")
    for eta in flip:
        ax.axhline(float(eta), color="0.4", lw=0.8, ls=":", zorder=0)
    ax.set_xscale("log")
    ax.set_xlabel("SNR")
    ax.set_ylabel("final test error")


def _over_iterations(ax, sweep, summary, snrs) -> None:
    x = sd.iterations_of(sweep)
    picks = [(snrs.min(), "-"), (snrs.max(), "--")] if len(snrs) > 1 else [(snrs[0], "-")]
    for snr, ls in picks:
        for name, (label, color) in CURVES.items():
            if f"{name}_q50" not in summary:
                continue
            mid, lo, hi = sd.quantile_band(summary, name, snr=snr)
            style.draw_band(ax, x, mid, lo, hi, color, f"{label}, SNR = {snr:g}", ls)
    ax.set_xscale("log")
    ax.set_xlabel("iteration $k$")
    ax.set_ylabel("share of examples")


def plot(sweep: xr.Dataset, summary: xr.Dataset):
    """(a) from the summary's means over seeds; (b) from its quantiles."""
    snrs = _snrs(sweep)
    fig, (ax_a, ax_b) = style.new_figure(1, 2, height=2.6, footer_lines=1)
    _errors(ax_a, sweep, summary, snrs)
    _over_iterations(ax_b, sweep, summary, snrs)
    style.panel_label(ax_a, "a", "GD vs interpolator")
    style.panel_label(ax_b, "b", "fit vs test error")
    style.outside_legend(fig, [ax_a, ax_b], loc="outside right upper", fontsize=6)
    footer = style.footer_text(
        sweep,
        band="(a) bars: ± std over seeds; (b) line: median, band: interquartile range",
        extra=[
            "(a) dotted: the label-flip rate, the best test error; dash-dotted: SNR = 1/sqrt(n), "
            "the papers' threshold with constant 1; interpolator: attention along the Att-SVM "
            "of the flipped labels' optimal tokens at infinite norm (docs/science.md §15)",
        ],
    )
    style.add_footer(fig, footer)
    return fig


def numbers(summary: xr.Dataset) -> list[str]:
    """Mean final test errors of GD and of the interpolator per SNR, and the flip fit."""
    over = [a for a in ("snr", "n") if a in summary.dims]
    return [
        "mean final test error of GD: " + captions.per_point(summary, "test_err_mean", over),
        "of the max-margin interpolator: " + captions.per_point(summary, "test_err_mm_mean", over),
        "mean share of flipped training labels fit: "
        + captions.per_point(summary, "flip_fit_mean", over),
    ]


FIGURE = Figure(
    name="benign",
    label="benign overfitting",
    what=(
        "Beyond the paper, generalization with label noise (Magen et al., arXiv 2410.07746; "
        "Sakamoto & Sato, arXiv 2409.17625): the test error of GD and of the max-margin "
        "interpolator on the signal-noise token model against the SNR, and training fit "
        "against test error over the iterations."
    ),
    look=(
        "Above the threshold SNR the model fits the flipped labels and its test error stays "
        "near the flip rate (benign); below it the interpolator's test error rises above it "
        "(harmful). GD's test error should follow the interpolator's (docs/science.md §15; the "
        "claims ledger tests it)."
    ),
    plot=plot,
    numbers=numbers,
    variables=VARIABLES,
)


#: the tasks whose cells this figure draws (checked against each experiment at config time)
TASKS = ("train",)
