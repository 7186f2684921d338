"""Low-rank bias of KQ: rank of the trained W vs d for W runs and KQ runs (m = d), beyond the
paper (docs/science.md §6, "Beyond the paper").

(a) mean rank (relative tolerance) of W_GD for W runs and for KQ runs (= K Q^T), next to the
rank of the Frobenius SVM W_mm(alpha) (of the W runs) and of the nuclear SVM W_mm_*(alpha)
(of the KQ runs), and min(n, d) dotted. (b) the same as effective ranks (exp of the entropy
of the normalized singular values), which ignore the tiny directions that GD never removes
(the initialization's component shrinks relative to W(k) but never vanishes).
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from attnsvm.config.cell import Cell
from attnsvm.report import captions, style
from attnsvm.report import sweepdata as sd
from attnsvm.report.figures import Figure

VARIABLES = (
    "rank_gd",
    "erank_gd",
    "rank_fro_alpha",
    "rank_nuc_alpha",
    "erank_fro_alpha",
    "erank_nuc_alpha",
)
SERIES = (
    ("gd", "W", "-", "o", r"$W_{\mathrm{GD}}$, $W$ runs"),
    ("gd", "KQ", "-", "s", r"$KQ^{\top}_{\mathrm{GD}}$, $KQ^{\top}$ runs"),
    ("fro_alpha", "W", "--", "o", "Frobenius $" + style.W_MM + r"(\alpha)$"),
    ("nuc_alpha", "KQ", "--", "s", "nuclear $" + style.W_MM_NUC + r"(\alpha)$"),
)


def plot(sweep: xr.Dataset, summary: xr.Dataset):
    """Means over the ok runs per d and their intervals, from the summary (SVM ranks: feasible
    ones)."""
    d = [int(v) for v in sd.grid_values(sweep, "d")]
    n = int((sd.grid_values(sweep, "n") or [Cell.n])[0])
    params = sd.params_of(sweep)
    tol = sd.fixed_settings(sweep).get("rank_tol", Cell.rank_tol)
    extra = [
        f"rank: number of σ_i/σ_1 > {tol:g}; effective rank exp(H(σ/Σσ)); "
        "markers: mean over ok runs (SVM ranks over feasible ones); solid: GD, dashed: SVM",
    ]
    notes = style.notes_text(style.MEAN_INTERVAL, extra)
    fig, axes = style.new_figure(1, 2, height=2.7, squeeze=False)
    colors = {"gd": style.PARAM_COLORS, "fro_alpha": style.PARAM_COLORS}
    for k, (ax, prefix) in enumerate(zip(axes[0], ("rank", "erank"), strict=True)):
        for key, p, ls, marker, label in SERIES:
            if p not in params:
                continue
            stats = sd.pooled(summary, f"{prefix}_{key}", keep=("d",), param=p)
            color = colors.get(key, style.PARAM_COLORS)[p]
            style.mean_errorbar(ax, d, stats, color=color, ls=ls, marker=marker, ms=3,
                                markerfacecolor=color if key == "gd" else "white",
                                label=label)  # fmt: skip
        ax.plot(d, np.minimum(d, n), color="0.5", ls=":", lw=0.8, label=rf"$\min(n, d)$, $n={n}$")
        ax.set_xlabel("$d$")
        ax.set_xticks(d)
        ax.set_ylim(bottom=0)
        ax.set_ylabel("mean rank" if prefix == "rank" else "mean effective rank")
        style.panel_label(ax, "ab"[k], "rank" if prefix == "rank" else "effective rank")
    style.outside_legend(fig, axes[0], loc="outside upper center", ncol=5)
    style.add_notes(fig, notes)
    return fig


def numbers(summary: xr.Dataset) -> list[str]:
    """Final corr with the matching SVM; effective ranks of GD and of its SVM per d."""
    out = captions.corr_lines(summary)
    for p, svm in (("W", "fro_alpha"), ("KQ", "nuc_alpha")):
        if p in captions.params(summary):
            out.append(
                f"effective rank per *d*, *{p}* runs: "
                + captions.per_point(summary, "erank_gd_mean", ["d"], param=p)
                + f"; of their {captions.NAMES[svm[:3]]} SVM: "
                + captions.per_point(summary, f"erank_{svm}_mean", ["d"], param=p)
            )
    return out


#: the tasks whose cells this figure draws (checked against each experiment at config time)
TASKS = ("train",)

FIGURE = Figure(
    name="rank_gd",
    label="low-rank bias of KQ",
    what=(
        "Beyond the paper, low-rank bias of *KQ*: rank and effective rank of the trained "
        f"*W* for *W* runs and *KQ* runs (*m* = *d*) against *d* (solid), next to "
        f"{captions.WMM}(α) and {captions.WMM_NUC}(α) (dashed); means over seeds with their "
        f"{style.CI_WORDS}."
    ),
    look=(
        "*KQ* runs should have the low rank of the nuclear SVM, *W* runs the rank of the "
        "Frobenius SVM (the strict rank of *W* runs stays *d*: the initialization never "
        "vanishes, so compare effective ranks)."
    ),
    plot=plot,
    numbers=numbers,
    variables=VARIABLES,
)
