"""Excess test error over the (SNR, n) or (SNR, d) plane (docs/science.md §15; Magen et al.,
arXiv 2410.07746; Sakamoto & Sato, arXiv 2409.17625).

Grid axes ``snr`` and ``n`` or ``d`` (other axes pooled). (a) GD's and (b) the max-margin
interpolator's mean excess test error over the Bayes error, per grid point: per cell, its test
error minus the Bayes-optimal classifier's on the same test sample (``test_err_bayes``, 0: the
best possible; the flip share is not: the signal token carries noise, so below SNR ~ 2/sqrt(d)
the Bayes classifier itself errs on more than the flipped labels, docs/science.md §15), mean
over the cells where it is defined (the interpolator: where it exists); on the (SNR, n) plane
the papers' threshold ``SNR = 1 / sqrt(n)`` (constant 1, which the papers leave open) is drawn
as a line.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from attnsvm.report import captions, style
from attnsvm.report import sweepdata as sd
from attnsvm.report.figures import Figure

VARIABLES = ("test_err", "test_err_mm", "test_err_bayes")
PANELS = (("test_err", "a", "GD"), ("test_err_mm", "b", "max-margin interpolator"))


def excess_over_bayes(sweep: xr.Dataset, name: str, axis: str) -> xr.DataArray:
    """Mean over the ok cells of ``name - test_err_bayes`` (cells where ``name`` is NaN, an
    interpolator that does not exist, left out) per (``axis``, snr), every other axis pooled."""
    diff = sd.ok_values(sweep, name) - sd.ok_values(sweep, "test_err_bayes")
    over = [dim for dim in diff.dims if dim not in (axis, "snr")]
    mean = diff.mean(dim=over, skipna=True) if over else diff
    keep = [dim for dim in (axis, "snr") if dim in mean.dims]
    return mean.transpose(*keep)


def _other_axis(sweep: xr.Dataset) -> str:
    for axis in ("n", "d"):
        if axis in sweep.dims:
            return axis
    return "n"


def _threshold(ax, snrs: np.ndarray, ys: np.ndarray) -> None:
    """``SNR = 1 / sqrt(n)`` in the heatmap's index coordinates (log SNR interpolated)."""
    if len(snrs) < 2:
        return
    x = np.interp(np.log(1 / np.sqrt(ys)), np.log(snrs), np.arange(len(snrs)), np.nan, np.nan)
    ax.plot(x, np.arange(len(ys)), color="k", lw=1.2, ls="--", label="SNR = 1/sqrt(n)")


def plot(sweep: xr.Dataset, summary: xr.Dataset):
    """Means over seeds (pooled over any other axis) from the summary."""
    axis = _other_axis(sweep)
    snrs = np.asarray([float(v) for v in sd.grid_values(sweep, "snr")], float)
    ys = np.asarray([float(v) for v in sd.grid_values(sweep, axis)], float)
    fig, axes = style.new_figure(1, 2, height=2.6)
    for ax, (name, letter, title) in zip(axes, PANELS, strict=True):
        mean = excess_over_bayes(sweep, name, axis)
        grid = np.asarray(mean.values, float).reshape(len(ys), len(snrs))
        top = float(np.nanmax(grid)) if np.isfinite(grid).any() else 0.5
        vmax = max(0.5, top)
        im = ax.imshow(
            grid, origin="lower", aspect="auto", cmap=style.SEQUENTIAL, vmin=0, vmax=vmax
        )
        for (i, j), v in np.ndenumerate(grid):
            if np.isfinite(v):
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=5,
                        color="white" if v < 0.6 * vmax else "black")  # fmt: skip
        if axis == "n":
            _threshold(ax, snrs, ys)
        ax.set_xticks(range(len(snrs)), [f"{s:g}" for s in snrs])
        ax.set_yticks(range(len(ys)), [f"{y:g}" for y in ys])
        ax.set_xlabel("SNR")
        ax.set_ylabel(axis)
        style.panel_label(ax, letter, title)
        fig.colorbar(im, ax=ax, label="test error - Bayes error")
    notes = style.notes_text(
        None,
        [
            "cells: mean over seeds",
            "per cell: test error minus the Bayes-optimal classifier's on the same test sample "
            "(0: the best possible; the interpolator's where it exists); dashed: SNR = "
            "1/sqrt(n), the papers' threshold with constant 1 (docs/science.md §15)",
        ],
    )
    style.add_notes(fig, notes)
    return fig


def numbers(summary: xr.Dataset) -> list[str]:
    """Mean test errors of GD, of the interpolator and of the Bayes classifier at every grid
    point (the figure's cells are per-cell differences of these)."""
    over = [a for a in ("snr", "n", "d") if a in summary.dims]
    return [
        "mean test error of GD: " + captions.per_point(summary, "test_err_mean", over),
        "of the interpolator (where it exists): "
        + captions.per_point(summary, "test_err_mm_mean", over),
        "of the Bayes-optimal classifier: "
        + captions.per_point(summary, "test_err_bayes_mean", over),
    ]


FIGURE = Figure(
    name="benign_plane",
    label="benign overfitting plane",
    what=(
        "Beyond the paper, the test error of GD and of the max-margin interpolator above the "
        "Bayes error, on the signal-noise token model with flipped labels, over the (SNR, n) "
        "or (SNR, d) plane (Magen et al., arXiv 2410.07746; Sakamoto & Sato, arXiv "
        "2409.17625)."
    ),
    look=(
        "Right of the threshold SNR ~ 1/sqrt(n) the excess over the Bayes error should be "
        "near 0 (benign overfitting); left of it, the interpolator's large (harmful), "
        "docs/science.md §15."
    ),
    plot=plot,
    numbers=numbers,
    variables=VARIABLES,
)


#: the tasks whose cells this figure draws (checked against each experiment at config time)
TASKS = ("train",)
