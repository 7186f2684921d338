"""Magen et al.'s own setting over the (SNR, n) plane (docs/science.md §15, "Magen et al.'s
own setting"; Magen et al., arXiv 2410.07746).

Grid axes ``snr`` and ``n`` (and ``lr``: one GD panel per value). Per grid point the mean over
the seeds of the excess test error over the Bayes error (per cell, the test error minus the
Bayes-optimal classifier's on the same test sample), for two GD steps at each lr and for the
min-norm interpolator of (v, p) (eq. (15.13)); on each panel the located boundary ``SNR*(n)``
where the excess falls to :data:`LEVEL` (eq. (15.14), with its bootstrap band over the seeds,
:func:`attnsvm.claims.boundary.boundary_fit`) and the line ``C / sqrt(n)`` fitted to it
(slope held at -1/2: ``log C`` is the mean of ``log SNR* + log(n) / 2``).
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from attnsvm.claims import boundary as B
from attnsvm.report import captions, style
from attnsvm.report import sweepdata as sd
from attnsvm.report.figures import Figure

VARIABLES = ("test_err", "test_err_minnorm", "test_err_bayes")
#: the excess test error that locates the boundary (b18_magen's claims state the same level)
LEVEL = 0.15
#: the bootstrap of the drawn band (its seed and confidence)
BAND_SEED, BAND_CONFIDENCE = 18, 0.95


def excess(sweep: xr.Dataset, name: str, **point) -> np.ndarray:
    """``name - test_err_bayes`` per cell at ``point`` (e.g. one lr), as (seed, n, snr)."""
    diff = sd.ok_values(sweep, name) - sd.ok_values(sweep, "test_err_bayes")
    diff = sd.select(diff, **point)
    over = [dim for dim in diff.dims if dim not in ("seed", "n", "snr")]
    diff = diff.mean(dim=over) if over else diff
    return np.asarray(diff.transpose("seed", "n", "snr").values, float)


def log_c(ns: np.ndarray, bounds: np.ndarray) -> float:
    """``log C`` of ``C / sqrt(n)`` fitted to the located boundaries (slope held at -1/2: the
    mean of ``log SNR* + log(n) / 2`` over the n that have one; NaN where none has)."""
    ok = np.isfinite(bounds)
    return float(np.mean(np.log(bounds[ok]) + 0.5 * np.log(ns[ok]))) if ok.any() else np.nan


def located(values: np.ndarray, ns: np.ndarray, snrs: np.ndarray) -> dict:
    """The boundary per n with its band and the fitted ``C / sqrt(n)`` (``log_c``)."""
    fit = B.boundary_fit(ns, snrs, values, LEVEL, True, BAND_CONFIDENCE, BAND_SEED)
    fit["log_c"] = log_c(ns, fit["bounds"])
    return fit


def _panels(sweep: xr.Dataset) -> list[tuple[str, str, dict]]:
    lrs = sd.grid_values(sweep, "lr") if "lr" in sweep.dims else [None]
    out = []
    for lr in lrs:
        point = {} if lr is None else {"lr": lr}
        title = "two GD steps" + ("" if lr is None else f", lr = {lr:g}")
        out.append(("test_err", title, point))
    out.append(("test_err_minnorm", "min-norm interpolator", dict(out[-1][2])))
    return out


def _index(snrs: np.ndarray, x: np.ndarray) -> np.ndarray:
    """SNR values in the heat map's column coordinates (log SNR interpolated)."""
    return np.interp(np.log(x), np.log(snrs), np.arange(len(snrs)), np.nan, np.nan)


def plot(sweep: xr.Dataset, summary: xr.Dataset):
    """Means over seeds from the sweep; boundaries and bands by resampling its seeds."""
    snrs = np.asarray([float(v) for v in sd.grid_values(sweep, "snr")], float)
    ns = np.asarray([float(v) for v in sd.grid_values(sweep, "n")], float)
    panels = _panels(sweep)
    fig, axes = style.new_figure(1, len(panels), height=2.8)
    axes = np.atleast_1d(axes)
    for k, (ax, (name, title, point)) in enumerate(zip(axes, panels, strict=True)):
        values = excess(sweep, name, **point)
        grid = np.nanmean(values, axis=0)
        im = ax.imshow(grid, origin="lower", aspect="auto", cmap=style.SEQUENTIAL, vmin=0,
                       vmax=0.5)  # fmt: skip
        fit = located(values, ns, snrs)
        rows = np.arange(len(ns))
        x = _index(snrs, fit["bounds"])
        lo, hi = _index(snrs, fit["bounds_lo"]), _index(snrs, fit["bounds_hi"])
        label = f"SNR* (excess = {LEVEL:g}), 95% band"
        ax.errorbar(x, rows, xerr=[x - lo, hi - x], fmt="o", color="w", mec="k", ms=3,
                    ecolor="k", capsize=2, label=label)  # fmt: skip
        if np.isfinite(fit["log_c"]):
            c = float(np.exp(fit["log_c"]))
            ax.plot(_index(snrs, c / np.sqrt(ns)), rows, color="k", ls="--", lw=1,
                    label="C/sqrt(n) fitted")  # fmt: skip
            title += f" (C = {c:.2g})"
        ax.set_xticks(range(len(snrs)), [f"{s:.2g}" for s in snrs], rotation=90)
        ax.set_yticks(rows, [f"{n:g}" for n in ns])
        ax.set_xlabel("SNR")
        ax.set_ylabel("n")
        style.panel_label(ax, "abcdefgh"[k], title)
        fig.colorbar(im, ax=ax, label="test error - Bayes error")
    handles, labels = axes[-1].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside upper center", ncol=len(handles))
    notes = style.notes_text(
        None,
        [
            "colour: mean over seeds of the test error minus the Bayes-optimal classifier's "
            "on the same test sample (the Bayes error is the flip rate, eq. (15.12))",
            f"dots: the SNR where the mean falls to {LEVEL:g} (eq. (15.14)), bars: 95% "
            "percentile bootstrap over seeds; dashed: C/sqrt(n) fitted to the dots",
        ],
    )
    style.add_notes(fig, notes)
    return fig


def numbers(summary: xr.Dataset) -> list[str]:
    """What the panels show, from the summary's means over the seeds: per panel the SNR where
    the mean excess falls to :data:`LEVEL` at each n (eq. (15.14)), the fitted C and the
    slope of log SNR* against log n; and the range of the Bayes classifier's test error (the
    test samples' flip share), the level the excess is measured from."""
    snrs = np.asarray([float(v) for v in sd.grid_values(summary, "snr")], float)
    ns = np.asarray([float(v) for v in sd.grid_values(summary, "n")], float)
    if "test_err_bayes_mean" not in summary or len(snrs) < 2 or not len(ns):
        return []
    bayes = summary["test_err_bayes_mean"]
    out = []
    for name, title, point in _panels(summary):
        if f"{name}_mean" not in summary:
            continue
        diff = sd.select(summary[f"{name}_mean"] - bayes, **point)
        over = [dim for dim in diff.dims if dim not in ("n", "snr")]
        diff = diff.mean(dim=over) if over else diff
        bounds = B.boundaries(ns, snrs, diff.transpose("n", "snr").values, LEVEL, True)
        at = "; ".join(f"n = {n:g}: {captions.fmt(b)}" for n, b in zip(ns, bounds, strict=True))
        line = f"{title}: SNR* where the mean excess falls to {LEVEL:g}: {at}"
        c = log_c(ns, bounds)
        if np.isfinite(c):
            line += f"; C = {np.exp(c):.2g}"
        if np.isfinite(bounds).all() and len(ns) > 1:
            line += f"; slope of log SNR* against log n {B.log_slope(ns, bounds):.2f}"
        out.append(line)
    lo, hi = captions.fmt(float(bayes.min())), captions.fmt(float(bayes.max()))
    out.append("the Bayes-optimal classifier's test error (the test samples' flip share): "
               + (lo if lo == hi else f"{lo} to {hi}") + " over the grid")  # fmt: skip
    return out


FIGURE = Figure(
    name="magen_plane",
    label="Magen et al.'s setting: the benign/harmful boundary",
    what=(
        "Beyond the paper, Magen et al.'s own setting (arXiv 2410.07746): two tokens, v and p "
        "trained from zero; the excess test error over the Bayes error of two GD steps and of "
        "the min-norm interpolator over the (SNR, n) plane, with the located boundary and "
        "C/sqrt(n) fitted to it."
    ),
    look=(
        "Left of the boundary the excess is large (harmful overfitting), right of it near 0; "
        "the boundary should follow the dashed C/sqrt(n) line (docs/science.md §15)."
    ),
    plot=plot,
    numbers=numbers,
    variables=VARIABLES,
)


#: the tasks whose cells this figure draws (checked against each experiment at config time)
TASKS = ("train",)
