"""E5: lambda head, number of selected tokens and Gen-SVM predictivity vs lambda
(docs/science.md §6, E5).

(a) mean number of relevant (selected) tokens per example vs lambda, with the references 1
and T. (b) corr(W, W_svmeq) and corr(W, W_mm_gen) vs lambda (the single-token SVM dotted for
reference); mean and its confidence interval over the runs where the correlation is defined,
and the number of
runs where it is undefined (every token relevant, so the Gen-SVM has no constraint) written
on a secondary axis at the top of panel (b), one short count per lambda.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from attnsvm.report import captions, style
from attnsvm.report import sweepdata as sd
from attnsvm.report.figures import Figure

VARIABLES = ("n_relevant", "corr_svmeq", "corr_mm_gen", "corr_single", "ambiguous")
SERIES = (
    ("corr_svmeq", rf"$\mathrm{{corr}}(W, {style.W_SVMEQ})$ (Gen-SVM)", "-", "o", 0),
    ("corr_mm_gen", rf"$\mathrm{{corr}}(W, {style.W_MM_GEN})$", "--", "s", 1),
    ("corr_single", rf"$\mathrm{{corr}}(W, {style.W_MM})$ (single token)", ":", "^", 7),
)


def _by_lam(sweep: xr.Dataset, name: str, lams: list) -> np.ndarray:
    da = sd.ok_values(sweep, name)
    if "lam" not in da.dims:
        return np.asarray(da.values, dtype=float).reshape(1, -1)
    rest = [d for d in da.dims if d != "lam"]
    return np.asarray(da.transpose("lam", *rest).values, dtype=float).reshape(len(lams), -1)


def _counts(sweep: xr.Dataset, lams: list, T) -> tuple[dict, np.ndarray, np.ndarray, list]:
    """Per lambda: ok runs with an undefined corr (per series), ok runs, runs with every token
    relevant; and the caption notes."""
    ok = _by_lam(sweep, "status", lams) == 0 if "status" in sweep else None
    undefined = {}
    for name, *_ in SERIES:
        v = _by_lam(sweep, name, lams)
        okm = ok if ok is not None else np.ones_like(v, dtype=bool)
        undefined[name] = (okm & ~np.isfinite(v)).sum(axis=1)
    n_ok = ok.sum(axis=1) if ok is not None else np.full(len(lams), sweep.sizes.get("seed", 1))
    amb = _by_lam(sweep, "ambiguous", lams)
    # undefined because every token is relevant (no Gen-SVM constraint) or because an SVM had
    # no certified answer ("not solved", issue 12): counted apart
    all_rel = np.zeros_like(n_ok, dtype=int)
    if "n_relevant" in sweep and T:
        nrel_ok = _by_lam(sweep, "n_relevant", lams)
        okm = ok if ok is not None else np.ones_like(nrel_ok, dtype=bool)
        all_rel = (okm & (nrel_ok >= T - 1e-9)).sum(axis=1)
    not_solved = np.maximum(undefined["corr_svmeq"] - all_rel, 0)
    extra = [
        "corr undefined, excluded from the mean: "
        + ", ".join(f"{name.removeprefix('corr_')} {int(u.sum())}" for name, u in undefined.items())
        + f" runs (all tokens relevant, no Gen-SVM constraint: {int(all_rel.sum())}; Gen-SVM "
        f"not solved: {int(not_solved.sum())}); counts per λ on the top axis of panel (b)",
        f"ambiguous runs (final softmax has values in (1e-6, 1e-3)): {int(np.nansum(amb))} of "
        f"{int(np.isfinite(amb).sum())} ok runs (kept)",
    ]
    return undefined, n_ok, all_rel, extra


def _draw_relevant(ax, summary: xr.Dataset, lam: np.ndarray, T) -> None:
    """(a) mean relevant tokens per example and its interval (summary), references 1 and T."""
    stats = sd.pooled(summary, "n_relevant", keep=("lam",))
    style.mean_errorbar(ax, lam, stats, color=style.PALETTE[0], marker="o", capsize=2, ms=3.5,
                        label="mean over seeds")  # fmt: skip
    ax.axhline(1, color="0.5", lw=0.7, ls=":", zorder=0, label="single token")
    if T:
        ax.axhline(T, color="0.5", lw=0.7, ls="--", zorder=0, label=f"all $T={T}$ tokens")
        ax.set_ylim(0, T * 1.45 + 0.5)  # room above T for the legend
    style.legend(ax, loc="upper left", ncol=2)
    ax.set_ylabel("mean relevant tokens per example")
    style.panel_label(ax, "a", r"selected tokens vs $\lambda$")


def _draw_corr(ax, summary: xr.Dataset, lam: np.ndarray) -> None:
    """(b) mean correlations with the Gen-SVM parts and their intervals (summary)."""
    for name, label, ls, marker, ci in SERIES:
        stats = sd.pooled(summary, name, keep=("lam",))
        color = style.PALETTE[ci]
        style.mean_errorbar(ax, lam, stats, clip=(-1.0, 1.0), color=color, ls=ls,
                            marker=marker, capsize=2, ms=3.5, label=label,
                            markerfacecolor=color if ls == "-" else "white")  # fmt: skip
    ax.set_ylabel("correlation at the last iteration")
    ax.set_ylim(None, 1.04)
    style.panel_label(ax, "b", r"Gen-SVM predictivity vs $\lambda$")
    style.legend(ax, loc="lower left")


def _undefined_axis(ax, lam: np.ndarray, counts: list[int], n_ok: np.ndarray) -> None:
    """Runs with an undefined Gen-SVM correlation: one short count per lambda on a secondary
    x axis at the top of panel (b) (long "x/50 undef." tick labels overlapped)."""
    top = ax.secondary_xaxis("top")
    top.set_xticks(lam)
    top.set_xticklabels([str(u) for u in counts], fontsize=5.5, color="0.35")
    top.tick_params(length=2, pad=1)
    top.minorticks_off()
    totals = sorted({int(v) for v in n_ok})
    of = f"of {totals[0]} " if len(totals) == 1 else ""
    top.set_xlabel(f"runs ({of}ok) with corr undefined", fontsize=5.5, color="0.35",
                   labelpad=1)  # fmt: skip


def plot(sweep: xr.Dataset, summary: xr.Dataset):
    """E5 (docs/science.md §6): means and their intervals from the summary; counts of undefined
    correlations from the sweep (they split ok runs by their values)."""
    lams = sd.grid_values(sweep, "lam") or [sd.fixed_settings(sweep).get("lam", 0.0)]
    lam = np.asarray(lams, dtype=float)
    T = sd.fixed_settings(sweep).get("T")
    undefined, n_ok, _, extra = _counts(sweep, lams, T)
    notes = style.notes_text(style.MEAN_INTERVAL, extra)
    fig, axes = style.new_figure(1, 2, height=2.6)
    ax_n, ax_c = axes
    pos = lam > 0
    xscale = "log" if pos.all() and len(lam) > 1 else "linear"
    _draw_relevant(ax_n, summary, lam, T)
    _draw_corr(ax_c, summary, lam)
    for ax in axes:
        ax.set_xscale(xscale)
        ax.set_xlabel(r"$\lambda$")
        ax.set_xticks(lam)
        ax.set_xticklabels([f"{v:g}" for v in lam])
        if xscale == "log":  # limits from the grid, also when nothing is drawn
            ax.minorticks_off()
            ax.set_xlim(lam.min() / 1.5, lam.max() * 1.5)
    counts = [int(u) for u in undefined["corr_svmeq"]]
    if any(counts):
        _undefined_axis(ax_c, lam, counts, n_ok)
    style.add_notes(fig, notes)
    return fig


def numbers(summary: xr.Dataset) -> list[str]:
    """Relevant tokens and the corr with the Gen-SVM parts per lambda, ambiguous runs."""
    return [
        "relevant tokens per example: " + captions.per_point(summary, "n_relevant_mean", ["lam"]),
        *captions.gen_svm_lines(summary, ["lam"]),
        "runs with an ambiguous softmax: " + captions.pooled_share(summary, "ambiguous"),
    ]


#: the tasks whose cells this figure draws (checked against each experiment at config time)
TASKS = ("train",)

FIGURE = Figure(
    name="e5",
    label="E5: lambda head",
    what=(
        "λ head on orthonormal tokens: number of selected (relevant) tokens and the "
        "correlation of GD with the Gen-SVM parts against λ: means over seeds with their "
        f"{style.CI_WORDS}."
    ),
    look=(
        "The number of relevant tokens should grow with λ (the quadratic penalty makes mixing "
        "tokens pay); GD should stay predicted by *W*\\ :sub:`svmeq` while the single-token "
        "SVM degrades."
    ),
    plot=plot,
    numbers=numbers,
    variables=VARIABLES,
)
