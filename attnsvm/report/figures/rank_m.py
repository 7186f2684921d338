"""KQ with m < d: does GD follow the rank-constrained nuclear SVM? Beyond the paper
(docs/science.md §6, "Beyond the paper").

Grid axis ``m`` (KQ runs, W = K Q^T with K, Q in R^{d x m}). (a) final corr of K Q^T with the
rank-m constrained Att-SVM_* (attnsvm.svm.lowrank, best of its restarts) and with the convex
W_mm_*(alpha) (no rank constraint), mean and its confidence interval per m. (b) relative excess
of the rank-m objective over the convex lower bound ||W_mm_*||_* (0: certified optimal) per run,
and the share of runs certified. (c) ranks: convex W_mm_*, rank-m solution, effective rank of
GD.
"""

from __future__ import annotations

import numpy as np
import xarray as xr
from matplotlib.lines import Line2D

from attnsvm.report import captions, style
from attnsvm.report import sweepdata as sd
from attnsvm.report.figures import Figure

#: excesses below this are drawn at it, as triangles (a log axis has no 0)
GAP_FLOOR = 1e-9
VARIABLES = (
    "corr_lowrank_alpha",
    "corr_nuc_alpha",
    "lowrank_gap",
    "lowrank_certified",
    "lowrank_agree",
    "rank_lowrank_alpha",
    "rank_nuc_alpha",
    "erank_gd",
)


def _by_m(sweep: xr.Dataset, name: str, m: list) -> np.ndarray:
    da = sd.ok_values(sweep, name)
    if name.startswith("rank_"):
        da = da.where(da >= 0)
    rows = [np.asarray(sd.select(da, m=v).values, float).ravel() for v in m]
    width = max((r.size for r in rows), default=0)
    return np.array([np.pad(r, (0, width - r.size), constant_values=np.nan) for r in rows])


def plot(sweep: xr.Dataset, summary: xr.Dataset):
    m = [v for v in sd.grid_values(sweep, "m")]
    x = np.asarray(m, dtype=float)
    fixed = sd.fixed_settings(sweep)
    n, d = fixed.get("n", "?"), fixed.get("d", "?")
    gap = _by_m(sweep, "lowrank_gap", m)
    cert = _by_m(sweep, "lowrank_certified", m)
    agree = _by_m(sweep, "lowrank_agree", m)
    n_cert = int(np.nansum(cert))
    n_sol = int(np.isfinite(cert).sum())
    extra = [
        f"rank-m SVM: min ||W||_* s.t. Att-SVM(α) constraints, rank ≤ m, by alternating exact "
        f"QPs over W = A B^T with restarts; certified (reaches the convex bound): {n_cert} of "
        f"{n_sol} solved runs; (b) excesses below {GAP_FLOOR:g} drawn at it as triangles",
        "restarts ending within 1e-4 of the best: median "
        + (f"{np.nanmedian(agree):.0f}" if np.isfinite(agree).any() else "n/a")
        + f" per run; n = {n}, d = {d}; markers: mean over seeds",
        "(b) the count of certified runs per m is written above its points",
    ]
    notes = style.notes_text(style.MEAN_INTERVAL, extra)
    fig, axes = style.new_figure(1, 3, height=2.6, squeeze=False)
    ax = axes[0, 0]
    for name, ls, marker, label, color in (
        ("corr_lowrank_alpha", "-", "o", "rank-$m$ SVM", style.PALETTE[1]),
        ("corr_nuc_alpha", "--", "s", "convex $" + style.W_MM_NUC + "$", style.PALETTE[0]),
    ):
        style.mean_errorbar(ax, x, sd.pooled(summary, name, keep=("m",)), clip=(-1.0, 1.0),
                            color=color, ls=ls, marker=marker, ms=3, label=label)  # fmt: skip
    ax.set_ylabel(r"final corr$(KQ^{\top}, \cdot)$")
    style.panel_label(ax, "a", "GD vs SVMs")
    ax = axes[0, 1]
    rng = np.random.default_rng(0)  # fixed jitter: the same figure from the same run
    for i in range(len(m)):
        g = gap[i][np.isfinite(gap[i])]
        xs = np.full(g.size, x[i]) + rng.uniform(-0.12, 0.12, g.size)
        low = g < GAP_FLOOR
        ax.plot(xs[~low], g[~low], ls="none", marker="o", ms=3, color=style.PALETTE[1],
                alpha=0.8)  # fmt: skip
        ax.plot(xs[low], np.full(low.sum(), GAP_FLOOR), ls="none", marker="v", ms=3.5,
                color=style.PALETTE[1], alpha=0.8)  # fmt: skip
    ax.set_yscale("log")
    ax.set_ylim(
        GAP_FLOOR / 10, max(10.0, float(np.nanmax(gap, initial=0.0)) * 3) * 1e3
    )  # room for text
    ax.set_ylabel(r"$\|W_m\|_\star \,/\, \|" + style.W_MM_NUC + r"\|_\star - 1$")
    style.panel_label(ax, "b", "excess over convex bound")
    ax = axes[0, 2]
    for name, ls, marker, label, color in (
        ("rank_nuc_alpha", "--", "s", "convex $" + style.W_MM_NUC + "$", style.PALETTE[0]),
        ("rank_lowrank_alpha", "-", "o", "rank-$m$ SVM", style.PALETTE[1]),
        ("erank_gd", ":", "^", r"$KQ^{\top}_{\mathrm{GD}}$ (effective rank)", style.PALETTE[2]),
    ):
        style.mean_errorbar(ax, x, sd.pooled(summary, name, keep=("m",)), color=color, ls=ls,
                            marker=marker, ms=3, label=label)  # fmt: skip
    ax.plot(x, [float(v) for v in m], color="0.5", lw=0.7, ls=":", label="$m$")
    ax.set_ylim(bottom=0)
    ax.set_ylabel("rank")
    style.panel_label(ax, "c", "ranks")
    # the same label means the same SVM (colour, line, marker) in (a) and (c): one entry
    extra = [
        Line2D([], [], ls="none", marker="o", ms=3, color=style.PALETTE[1], alpha=0.8,
               label="(b) a run's excess"),
        Line2D([], [], ls="none", marker="v", ms=3.5, color=style.PALETTE[1], alpha=0.8,
               label=rf"(b) below $10^{{{int(np.log10(GAP_FLOOR))}}}$"),
    ]  # fmt: skip
    style.outside_legend(fig, [axes[0, 0], axes[0, 2]], loc="outside upper center", ncol=3,
                         extra=extra)  # fmt: skip
    for ax in axes[0]:
        ax.set_xticks(x)
        ax.set_xticklabels([str(v) for v in m])
        ax.set_xlabel("$m$")
    ax = axes[0, 1]  # certified runs per m, above its column of points
    for i in range(len(m)):
        c = cert[i][np.isfinite(cert[i])]
        text = f"{int(c.sum())}/{c.size}\ncert." if c.size else "n/a"
        ax.text(x[i], 0.97, text, transform=ax.get_xaxis_transform(), ha="center", va="top",
                fontsize=5.5, color="0.3")  # fmt: skip
    style.add_notes(fig, notes)
    return fig


def numbers(summary: xr.Dataset) -> list[str]:
    """Final corr with the rank-m and the convex SVM, the excess, the certified share."""
    pp = captions.per_point
    return [
        "final corr with the rank-*m* SVM: " + pp(summary, "corr_lowrank_alpha_mean", ["m"]),
        f"final corr with the convex {captions.WMM_NUC}: "
        + pp(summary, "corr_nuc_alpha_mean", ["m"]),
        "mean excess of the rank-*m* objective over the convex bound: "
        + pp(summary, "lowrank_gap_mean", ["m"]),
        "rank-*m* solutions certified optimal: "
        + captions.pooled_share(summary, "lowrank_certified"),
    ]


#: the tasks whose cells this figure draws (checked against each experiment at config time)
TASKS = ("train",)

FIGURE = Figure(
    name="rank_m",
    label="KQ with m < n",
    what=(
        "Beyond the paper, *KQ* with *m* < *n*: final corr of "
        f"{captions.KQ} with the rank-*m* constrained nuclear SVM (attnsvm.svm.lowrank, best "
        f"of its restarts) and with the convex {captions.WMM_NUC}; relative excess of the "
        "rank-*m* objective over the convex bound; ranks."
    ),
    look=(
        "Where *m* is at least the convex solution's rank the constraint is inactive and GD "
        "should match the SVM; below it the rank-*m* answer is a local optimum without a "
        "certificate, so a low correlation there is inconclusive."
    ),
    plot=plot,
    numbers=numbers,
    variables=VARIABLES,
)
