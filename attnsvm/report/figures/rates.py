"""Convergence rates of plain GD, normalized GD and the Polyak step (docs/science.md §14;
Vasudeva, Deora, Thrampoulidis, arXiv 2402.05738).

Grid axis ``optimizer`` (plain, normalized, polyak; optionally ``param``). (a) 1 - corr(W(k),
SVM(alpha)) against k, log-log, median and interquartile range over seeds, the SVM the
matching one of the run's own final selection (Frobenius for W, nuclear for KQ); (b) the
softmax mass outside the final selection against k, likewise; the dotted line marks the start
of the fit window k >= sqrt(K); (b) is drawn down to ``MASS_FLOOR`` at most (below it the
mass only says "zero"). (c, d) the fitted exponents b of y ~ C k^-b of each seed with their 95%
intervals (the stored ``rate_corr``, ``rate_mass``; docs/science.md §14), the median per
optimizer as a short horizontal line; (d) on a log axis when every exponent is positive.
"""

from __future__ import annotations

import numpy as np
import xarray as xr
from matplotlib.lines import Line2D

from attnsvm.report import captions, style
from attnsvm.report import sweepdata as sd
from attnsvm.report.figures import Figure

MATCH = {"W": "fro", "KQ": "nuc"}
RATE_PARTS = ("", "_lo", "_hi")
VARIABLES = (
    "curve_corr_fro_alpha",
    "curve_corr_nuc_alpha",
    "curve_offmass",
    *(f"rate_{q}{p}" for q in ("corr", "mass") for p in RATE_PARTS),
    "rate_corr_points",
)
#: one colour per optimizer, in this order (others grey)
OPT_COLORS = {"plain": style.PALETTE[1], "normalized": style.PALETTE[0], "polyak": style.PALETTE[2]}
PARAM_STYLE = {"W": "-", "KQ": "--"}
#: lowest softmax mass drawn in (b)
MASS_FLOOR = 1e-30


def _optimizers(sweep: xr.Dataset) -> list[str]:
    return [str(o) for o in sd.grid_values(sweep, "optimizer")] or ["normalized"]


def _label(opt: str, param: str, params: list[str]) -> str:
    name = style.optimizer_label(opt)
    return name if len(params) == 1 else f"{name}, {style.PARAM_LABELS.get(param, param)}"


def _curves(ax, summary, x, opts, params, name_of, transform) -> None:
    for p in params:
        for o in opts:
            name = name_of(p)
            if f"{name}_q50" not in summary:
                continue
            mid, lo, hi = (
                transform(v) for v in sd.quantile_band(summary, name, optimizer=o, param=p)
            )
            lo, hi = np.minimum(lo, hi), np.maximum(lo, hi)
            ok = np.isfinite(mid) & (mid > 0)
            if not ok.any():
                continue
            style.draw_band(
                ax, x[ok], mid[ok], np.where(lo > 0, lo, np.nan)[ok], hi[ok],
                OPT_COLORS.get(o, "0.5"), _label(o, p, params), PARAM_STYLE.get(p, "-"),
            )  # fmt: skip
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("iteration $k$")
    if len(x):
        ax.axvline(np.sqrt(x.max()), color="0.5", lw=0.7, ls=":", zorder=0)


def _per_seed(sweep: xr.Dataset, name: str, o: str, p: str) -> np.ndarray:
    da = sd.select(sd.ok_values(sweep, name), optimizer=o, param=p)
    return np.asarray(da.values, float).ravel()


def _exponents(ax, sweep, quantity: str, opts, params, log: bool) -> list[str]:
    """Per-seed exponents with their intervals, the median as a short line; returns caption
    notes (the seeds without a fit, per optimizer). ``log``: a log y axis when every exponent
    and its interval's lower end are positive (otherwise linear)."""
    notes = []
    width = 0.8 / max(len(params), 1)
    lows = []
    for k, p in enumerate(params):
        for j, o in enumerate(opts):
            rate, lo, hi = (_per_seed(sweep, f"rate_{quantity}{s}", o, p) for s in RATE_PARTS)
            ok_cells = np.isfinite(_per_seed(sweep, "rate_corr_points", o, p))
            fit = np.isfinite(rate)
            if (ok_cells & ~fit).any():
                notes.append(f"{o}{'' if len(params) == 1 else ', ' + p}: "
                             f"{int((ok_cells & ~fit).sum())} run(s) without a fit")  # fmt: skip
            x0 = j + (k - (len(params) - 1) / 2) * width
            color = OPT_COLORS.get(o, "0.5")
            if fit.any():
                ax.hlines(np.median(rate[fit]), x0 - 0.4 * width, x0 + 0.4 * width,
                          color=color, lw=2.0, alpha=0.6)  # fmt: skip
                lows += [*rate[fit], *lo[fit]]
            xs = x0 + np.linspace(-0.3, 0.3, max(len(rate), 1))[: len(rate)] * width
            ax.errorbar(xs[fit], rate[fit], yerr=[rate[fit] - lo[fit], hi[fit] - rate[fit]],
                        ls="none", marker="o", ms=2.2, lw=0.6, color=color)  # fmt: skip
    ax.set_xticks(range(len(opts)))
    ax.set_xticklabels([style.optimizer_label(o, short=True) for o in opts])
    if log and lows and min(lows) > 0:
        ax.set_yscale("log")
    else:
        ax.axhline(0, color="0.6", lw=0.5)
    ax.set_ylabel(r"fitted exponent $b$ ($y \sim C k^{-b}$)")
    return notes


def plot(sweep: xr.Dataset, summary: xr.Dataset):
    """(a, b) from the summary's quantiles over seeds; (c, d) per seed from the sweep."""
    opts, params, x = _optimizers(sweep), sd.params_of(sweep), sd.iterations_of(sweep)
    fig, axes = style.new_figure(1, 4, height=2.8)
    ax_corr, ax_mass, ax_rc, ax_rm = axes
    _curves(ax_corr, summary, x, opts, params, lambda p: f"curve_corr_{MATCH.get(p, 'fro')}_alpha",
            lambda v: 1.0 - v)  # fmt: skip
    _curves(ax_mass, summary, x, opts, params, lambda p: "curve_offmass", lambda v: v)
    ax_corr.set_ylabel(r"$1 - \mathrm{corr}(W(k), \mathrm{SVM}(\alpha))$")
    ax_mass.set_ylabel(r"softmax mass outside $\alpha$")
    low = ax_mass.get_ylim()[0]
    ax_mass.set_ylim(max(low, MASS_FLOOR), 2.0)
    notes = _exponents(ax_rc, sweep, "corr", opts, params, log=False)
    notes += _exponents(ax_rm, sweep, "mass", opts, params, log=True)
    style.panel_label(ax_corr, "a", "direction")
    style.panel_label(ax_mass, "b", "sparsification")
    style.panel_label(ax_rc, "c", r"rate of $1 - \mathrm{corr}$")
    style.panel_label(ax_rm, "d", "rate of the mass")
    extra = [
        Line2D([], [], ls="none", marker="o", ms=2.2, color="0.3",
               label="(c, d) a seed's exponent, 95% interval of its fit"),
        Line2D([], [], lw=2.0, color="0.3", alpha=0.6, label="(c, d) median over seeds"),
    ]  # fmt: skip
    style.outside_legend(fig, [ax_corr, ax_mass], loc="outside upper center", ncol=3,
                         extra=extra)  # fmt: skip
    notes = style.notes_text(
        "(a, b) line: median over seeds, band: interquartile range",
        [
            "dotted line: the fit window k >= sqrt(K) starts; (b) drawn down to "
            f"{MASS_FLOOR:g}; (c, d) dots: each seed's fitted exponent with the 95% interval "
            "of its fit, short lines: the median; SVM(α): Frobenius for W, nuclear for KQ, of "
            "the run's final selection α",
            *notes,
        ],
    )
    style.add_notes(fig, notes)
    return fig


def numbers(summary: xr.Dataset) -> list[str]:
    """Mean fitted exponents per optimizer (and param), and how many seeds have one."""
    over = [a for a in ("optimizer", "param") if a in summary.dims]
    return [
        "mean fitted exponent of 1 - corr with the SVM: "
        + captions.per_point(summary, "rate_corr_mean", over),
        "mean fitted exponent of the softmax mass outside α: "
        + captions.per_point(summary, "rate_mass_mean", over),
        "seeds with a fit (1 - corr; mass): "
        + captions.per_point(summary, "rate_corr_count", over)
        + "; "
        + captions.per_point(summary, "rate_mass_count", over),
    ]


#: the tasks whose cells this figure draws (checked against each experiment at config time)
TASKS = ("train",)

FIGURE = Figure(
    name="rates",
    label="convergence rates",
    what=(
        "Beyond the paper, convergence rates (Vasudeva, Deora, Thrampoulidis, arXiv "
        "2402.05738): 1 - corr(*W*\\ (*k*), SVM(α)) and the softmax mass outside GD's final "
        "selection α against the iteration for plain GD, normalized GD and the Polyak step, "
        "and the exponents of their power-law fits over the tail *k* ≥ √\\ *K* per seed."
    ),
    look=(
        "Normalized GD and the Polyak step should close the gap to the SVM direction and "
        "sparsify the attention faster than plain GD: steeper curves, larger exponents "
        "(docs/science.md §14; the claims ledger tests it)."
    ),
    plot=plot,
    numbers=numbers,
    variables=VARIABLES,
)
